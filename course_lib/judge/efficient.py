"""The judge's material of ``course_lib.checks.efficient`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import math

import numpy as np

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.efficient import (
    QUADRATIC_NAME,
    _LINEAR_SHAPES,
    _softplus,
    check_causal_linear_attention,
    check_elu_feature_map,
    check_linear_attention,
    check_linear_attention_step,
    check_positive_random_features,
    elu_cases_from,
    features_cases_from,
    linear_cases_from,
    stack_case,
    state_case,
    step_cases_from,
)


def _elu1(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


# written independently of course_lib.efficient; the students' and the kernel's editions replace each by a stub
def _right_elu_feature_map(x):
    x = np.asarray(x, dtype=float)
    out = x + 1.0
    neg = x <= 0
    out[neg] = np.exp(x[neg])
    return out


def linear_cases(causal: bool) -> list[Case]:
    """The hidden cases of ``check_linear_attention`` (``causal``: of ``check_causal_linear_attention``): the visible
    builder's, with the judge's seeds, two more shapes with leading dims and a longer query."""
    more = [(9, 9, 6, 4, (2,)), (7, 7, 8, 5, (2, 3))] if causal else [(8, 11, 6, 4, (2,)), (5, 7, 8, 3, (2, 3))]
    return linear_cases_from(seeded(707), _LINEAR_SHAPES[causal] + more, 8, 77)


# ---------------------------------------------------------------- elu_feature_map
def _elu_no_plus_one(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def _relu(x):
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0)


def _relu_plus_one(x):
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0) + 1.0


def _x_plus_one(x):
    return np.asarray(x, dtype=np.float64) + 1.0


def _exp_only(x):
    return np.exp(np.asarray(x, dtype=np.float64))


WRONG_ELU = [
    Wrong("elu without +1", _elu_no_plus_one,
          "you returned elu(x), which is negative for x < 0. Linear attention needs positive features "
          "(so every similarity phi(q).phi(k) > 0 and the normaliser cannot vanish): add 1."),
    Wrong("relu feature map", _relu,
          "you used max(x, 0): zero for every negative input, so a query can have zero similarity to all "
          "keys (0/0). elu(x) + 1 is x + 1 for x > 0 and exp(x) for x <= 0."),
    Wrong("relu feature map", _relu_plus_one,
          "you used max(x, 0) + 1: positive, but flat (= 1) for every negative input. elu(x) + 1 is "
          "exp(x) for x <= 0."),
    Wrong("x + 1 everywhere", _x_plus_one,
          "you returned x + 1 for every x, which is negative for x < -1: the branch for x <= 0 is exp(x)."),
    Wrong("exp feature map", _exp_only,
          "you returned exp(x) for every x: elu(x) + 1 is exp(x) only for x <= 0 and x + 1 for x > 0."),
]


def _right_elu_where(x):
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def _right_elu_float32(x):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x > 0, x + np.float32(1), np.exp(np.minimum(x, np.float32(0)))).astype(np.float32)


def _breaks_elu_negative(x):
    return _right_elu_feature_map(x) - 1.0


def elu_cases() -> list[Case]:
    """The hidden cases of ``check_elu_feature_map``."""
    rng = seeded(717)
    return elu_cases_from(rng) + [Case("a (2, 5, 3) array", (rng.normal(size=(2, 5, 3)) * 3,)),
                                  Case("very negative values [-50, -20]", (np.array([[-50.0, -20.0]]),)),
                                  Case("values in [-1.5, -0.5] (below -1 too)", (np.linspace(-1.5, -0.5, 7),))]


ELU_FEATURE_MAP = declare("07_efficient", "elu_feature_map", check_elu_feature_map, equivalents=("elu_feature_map_torch",),
            misconceptions=WRONG_ELU,
            promises=(
                Breaks("always > 0", _breaks_elu_negative, "elu without +1"),
            ),
            right=(Right(_right_elu_feature_map), Right(_right_elu_where), Right(_right_elu_float32)))


# ---------------------------------------------------------------- linear_attention
def _linear(q, k, v, feature_map=_elu1, *, normalise=True, use_map=True):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    phi_q, phi_k = (feature_map(q), feature_map(k)) if use_map else (q, k)
    num = phi_q @ (np.swapaxes(phi_k, -1, -2) @ v)
    if not normalise:
        return num
    return num / (phi_q @ phi_k.sum(axis=-2)[..., None])


def _linear_quadratic(q, k, v, feature_map=_softplus):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    sims = feature_map(q) @ np.swapaxes(feature_map(k), -1, -2)  # (..., T, S): what we must avoid
    return (sims @ v) / sims.sum(axis=-1, keepdims=True)


WRONG_LINEAR = [
    Wrong("forgot the normaliser", lambda q, k, v, feature_map=_elu1: _linear(q, k, v, feature_map, normalise=False),
          "you returned phi(Q) (phi(K)^T V) without dividing by phi(Q) (phi(K)^T 1) = phi(q_i) . sum_j phi(k_j). "
          "Without it the output is a weighted SUM of the values whose scale grows with the sequence length, "
          "not a weighted average."),
    Wrong("no feature map", lambda q, k, v, feature_map=_elu1: _linear(q, k, v, feature_map, use_map=False),
          "you used q and k directly instead of phi(q) = feature_map(q) and phi(k) = feature_map(k); raw dot "
          "products can be negative or zero, so the normaliser can vanish."),
    Wrong("ignores feature_map", lambda q, k, v, feature_map=_elu1: _linear(q, k, v, _elu1),
          "your function ignores its feature_map argument (elu+1 is hard-coded); call feature_map(q) and "
          "feature_map(k), so the same code also runs FAVOR+ features."),
]


def _right_linear_attention(q, k, v, feature_map=_right_elu_feature_map):
    fq, fk = feature_map(np.asarray(q, float)), feature_map(np.asarray(k, float))
    kv = np.einsum("...sr,...sv->...rv", fk, v)
    norm = np.einsum("...tr,...r->...t", fq, fk.sum(-2))
    return np.einsum("...tr,...rv->...tv", fq, kv) / norm[..., None]


def _right_linear_attention_matmul(q, k, v, feature_map=_right_elu_feature_map):
    fq, fk = feature_map(np.asarray(q, float)), feature_map(np.asarray(k, float))
    num = fq @ (np.swapaxes(fk, -1, -2) @ v)
    den = fq @ fk.sum(-2)[..., None]
    return num / den


def _right_linear_attention_float32(q, k, v, feature_map=_right_elu_feature_map):
    f = lambda a: np.asarray(a, np.float32)  # noqa: E731
    fq, fk = feature_map(f(q)).astype(np.float32), feature_map(f(k)).astype(np.float32)
    return ((fq @ (np.swapaxes(fk, -1, -2) @ f(v))) / (fq @ fk.sum(-2)[..., None])).astype(np.float32)


def _breaks_linear_3d_only(q, k, v, feature_map=_right_elu_feature_map):
    if np.ndim(q) > 2:
        raise ValueError("expected (T, d)")
    return _right_linear_attention(q, k, v, feature_map)


LINEAR_PROPERTIES = (727, (3500, 37))  # the hidden tests' seed of the permutation test, and L and seed of the memory test


LINEAR_ATTENTION = declare("07_efficient", "linear_attention", check_linear_attention,
            equivalents=("linear_attention_torch", "attention_from_features_torch", "quadratic_linear_attention"),
            misconceptions=WRONG_LINEAR,
            promises=(
                Breaks("any leading dims (..., T, d)", _breaks_linear_3d_only, "ValueError"),
                Breaks("never builds the (T, S) matrix", _linear_quadratic, QUADRATIC_NAME),
            ),
            right=(Right(_right_linear_attention), Right(_right_linear_attention_matmul),
                   Right(_right_linear_attention_float32)))


# ---------------------------------------------------------------- causal_linear_attention
def _causal(q, k, v, feature_map=_elu1, *, mode="right"):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    phi_q, phi_k = feature_map(q), feature_map(k)
    outer = phi_k[..., :, :, None] * v[..., :, None, :]  # (..., T, r, d_v)
    if mode == "future":
        s = np.broadcast_to(outer.sum(axis=-3, keepdims=True), outer.shape)
        z = np.broadcast_to(phi_k.sum(axis=-2, keepdims=True), phi_k.shape)
    elif mode == "exclusive":
        s = np.cumsum(outer, axis=-3) - outer
        z = np.cumsum(phi_k, axis=-2) - phi_k
    elif mode == "feature axis":
        s = np.cumsum(outer, axis=-2)
        z = np.cumsum(phi_k, axis=-1)
    else:
        s, z = np.cumsum(outer, axis=-3), np.cumsum(phi_k, axis=-2)
    num = np.einsum("...tr,...trv->...tv", phi_q, s)
    if mode == "no normaliser":
        return num
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / np.einsum("...tr,...tr->...t", phi_q, z)[..., None]


def _causal_quadratic(q, k, v, feature_map=_softplus):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    T = q.shape[-2]
    sims = feature_map(q) @ np.swapaxes(feature_map(k), -1, -2)  # (..., T, T)
    sims = np.where(np.tril(np.ones((T, T), dtype=bool)), sims, 0.0)
    return (sims @ v) / sims.sum(axis=-1, keepdims=True)


def _causal_wrong(mode):
    return lambda q, k, v, feature_map=_elu1: _causal(q, k, v, feature_map, mode=mode)


WRONG_CAUSAL = [
    Wrong("causal form sees future keys", _causal_wrong("future"),
          "every position uses the sums over ALL keys, including later (future) ones. Causal attention "
          "at position i may only use keys 0..i: take cumulative sums over the position axis "
          "(np.cumsum(..., axis=-3) for phi(k) v^T, axis=-2 for phi(k))."),
    Wrong("causal form skips the current key", _causal_wrong("exclusive"),
          "your prefix sums stop at j < i, so position i does not see its own key (and position 0 sees "
          "nothing: 0/0). The causal mask keeps the diagonal: sum over j <= i."),
    Wrong("prefix sum over the wrong axis", _causal_wrong("feature axis"),
          "your cumulative sum runs over the feature axis r, not over the positions: the prefix is over "
          "keys j <= i, i.e. the sequence axis (-3 for the (T, r, d_v) outer products, -2 for phi(k))."),
    Wrong("forgot the normaliser", _causal_wrong("no normaliser"),
          "you returned phi(q_i)^T s_i without dividing by phi(q_i)^T z_i with z_i = sum_{j<=i} phi(k_j): "
          "the output must be a weighted average of v_0..v_i, not a growing sum."),
]


def _right_causal_linear_attention(q, k, v, feature_map=_right_elu_feature_map):
    fq, fk = feature_map(np.asarray(q, float)), feature_map(np.asarray(k, float))
    v = np.asarray(v, float)
    s = np.cumsum(np.einsum("...tr,...tv->...trv", fk, v), axis=-3)
    z = np.cumsum(fk, axis=-2)
    return np.einsum("...tr,...trv->...tv", fq, s) / np.einsum("...tr,...tr->...t", fq, z)[..., None]


def _right_causal_linear_attention_loop(q, k, v, feature_map=_right_elu_feature_map):
    """A loop over positions is also linear in memory and must pass."""
    fq, fk = feature_map(np.asarray(q, float)), feature_map(np.asarray(k, float))
    v = np.asarray(v, float)
    s = np.zeros(fk.shape[:-2] + (fk.shape[-1], v.shape[-1]))
    z = np.zeros(fk.shape[:-2] + (fk.shape[-1],))
    out = np.empty(fq.shape[:-1] + (v.shape[-1],))
    for t in range(fq.shape[-2]):
        s = s + fk[..., t, :, None] * v[..., t, None, :]
        z = z + fk[..., t, :]
        out[..., t, :] = np.einsum("...r,...rv->...v", fq[..., t, :], s) / (fq[..., t, :] * z).sum(-1)[..., None]
    return out


def _right_causal_linear_attention_float32(q, k, v, feature_map=_right_elu_feature_map):
    f = lambda a: np.asarray(a, np.float32)  # noqa: E731
    return _right_causal_linear_attention(f(q), f(k), f(v),
                                          lambda x: feature_map(x).astype(np.float32)).astype(np.float32)


CAUSAL_PROPERTIES = (737, (3500, 57))  # the hidden tests' seed of the causality test, and L and seed of the memory test


CAUSAL_LINEAR_ATTENTION = declare("07_efficient", "causal_linear_attention", check_causal_linear_attention,
            equivalents=("recurrent_linear_attention", "prefix_sum_causal_attention_torch",
                         "chunked_causal_attention_torch", "_causal_chunks"),
            misconceptions=WRONG_CAUSAL,
            promises=(
                Breaks("position i sees keys 0..i", wrong_answer(WRONG_CAUSAL, "causal form sees future keys"),
                       "sees future keys"),
                Breaks("O(T r d_v) memory", _causal_quadratic, QUADRATIC_NAME),
            ),
            right=(Right(_right_causal_linear_attention), Right(_right_causal_linear_attention_loop),
                   Right(_right_causal_linear_attention_float32)))


# ---------------------------------------------------------------- linear_attention_step
def _step(state, q_t, k_t, v_t, feature_map=_elu1, *, mode="right"):
    q_t, k_t, v_t = (np.asarray(a, dtype=np.float64) for a in (q_t, k_t, v_t))
    phi_q, phi_k = feature_map(q_t), feature_map(k_t)
    if state is None:
        s, z = np.zeros(phi_k.shape + (v_t.shape[-1],)), np.zeros(phi_k.shape)
    else:
        s, z = (np.asarray(a, dtype=np.float64) for a in state)
    new_s = phi_k[..., :, None] * v_t[..., None, :]
    if mode == "overwrite":
        s_next, z_next = new_s, phi_k
    else:
        s_next, z_next = s + new_s, z + phi_k
    s_read, z_read = (s, z) if mode == "read before update" else (s_next, z_next)
    num = np.einsum("...r,...rv->...v", phi_q, s_read)
    if mode == "no normaliser":
        return num, (s_next, z_next)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / np.einsum("...r,...r->...", phi_q, z_read)[..., None], (s_next, z_next)


def _step_wrong(mode):
    return lambda state, q_t, k_t, v_t, feature_map=_elu1: _step(state, q_t, k_t, v_t, feature_map, mode=mode)


WRONG_STEP = [
    Wrong("read before update", _step_wrong("read before update"),
          "the output was read from the state BEFORE adding token t, so token t does not see its own key "
          "(and the first token reads an empty state: 0/0). Update s and z first, then read."),
    Wrong("state overwritten", _step_wrong("overwrite"),
          "the new state replaces the old one (s = phi(k_t) v_t^T) instead of adding to it "
          "(s' = s + phi(k_t) v_t^T, z' = z + phi(k_t)): the state must remember every earlier token."),
    Wrong("forgot the normaliser", _step_wrong("no normaliser"),
          "the output is phi(q_t)^T s' without dividing by phi(q_t)^T z': divide to get a weighted average."),
]


def _right_linear_attention_step(state, q_t, k_t, v_t, feature_map=_right_elu_feature_map):
    fq, fk, v_t = feature_map(np.asarray(q_t, float)), feature_map(np.asarray(k_t, float)), np.asarray(v_t, float)
    if state is None:
        s, z = 0.0, 0.0
    else:
        s, z = state
    s = s + np.einsum("...r,...v->...rv", fk, v_t)
    z = z + fk
    return np.einsum("...r,...rv->...v", fq, s) / (fq * z).sum(-1)[..., None], (s, z)


def _right_linear_attention_step_float32(state, q_t, k_t, v_t, feature_map=_right_elu_feature_map):
    out, (s, z) = _right_linear_attention_step(state, q_t, k_t, v_t, feature_map)
    return out.astype(np.float32), (s, z)


def _right_linear_attention_step_explicit(state, q_t, k_t, v_t, feature_map=_right_elu_feature_map):
    fq, fk, v_t = feature_map(np.asarray(q_t, float)), feature_map(np.asarray(k_t, float)), np.asarray(v_t, float)
    if state is None:
        s = np.zeros(fk.shape + v_t.shape[-1:])
        z = np.zeros(fk.shape)
    else:
        s, z = (np.array(a, dtype=float, copy=True) for a in state)
    s += fk[..., :, None] * v_t[..., None, :]   # in place on OUR copies: allowed
    z += fk
    return (fq[..., :, None] * s).sum(-2) / (fq * z).sum(-1, keepdims=True), (s, z)


def _breaks_step_in_place(state, q_t, k_t, v_t, feature_map=_right_elu_feature_map):
    out, (s, z) = _right_linear_attention_step(state, q_t, k_t, v_t, feature_map)
    if state is not None:
        state[0][...] = s
        state[1][...] = z
        return out, state
    return out, (s, z)


def step_cases() -> tuple[list[Case], object, int]:
    """The hidden cases of ``check_linear_attention_step``, the generator the sequence test draws from next, and that
    sequence's length."""
    cases, rng = step_cases_from(seeded(747), 5, 3)
    cases.append(state_case(rng, "a batch of 2 states", 5, 3, (2,)))
    return cases, rng, 7


LINEAR_ATTENTION_STEP = declare("07_efficient", "linear_attention_step", check_linear_attention_step,
            misconceptions=WRONG_STEP,
            promises=(
                Breaks("the input state is not modified", _breaks_step_in_place, "input modified in place"),
            ),
            right=(Right(_right_linear_attention_step), Right(_right_linear_attention_step_explicit),
                   Right(_right_linear_attention_step_float32)))


# ---------------------------------------------------------------- positive_random_features
def _features(x, w, *, mode="right"):
    x, w = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    m = w.shape[-2]
    proj = x @ (w if mode == "no transpose" else np.swapaxes(w, -1, -2))
    sq = np.sum(x * x, axis=-1, keepdims=True)
    exponent = {"no norm term": proj, "not halved": proj - sq,
                "norm not squared": proj - 0.5 * np.sqrt(sq)}.get(mode, proj - 0.5 * sq)
    scale = {"no scale": 1.0, "divided by m": 1.0 / m}.get(mode, 1.0 / math.sqrt(m))
    with np.errstate(over="ignore"):
        return np.exp(exponent) * scale


def _features_wrong(mode):
    return lambda x, w: _features(x, w, mode=mode)


WRONG_FEATURES = [
    Wrong("forgot exp(-|x|^2/2)", _features_wrong("no norm term"),
          "your features are exp(w x) / sqrt(m): E[exp(w.x) exp(w.y)] = exp(|x + y|^2 / 2), which is "
          "exp(x.y) times exp(|x|^2/2 + |y|^2/2). Multiply by exp(-|x|^2 / 2) (subtract |x|^2/2 in the "
          "exponent) so the estimate is exp(x.y)."),
    Wrong("|x|^2 not halved", _features_wrong("not halved"),
          "you subtracted |x|^2 instead of |x|^2 / 2 in the exponent; then phi(x).phi(y) estimates "
          "exp(x.y - |x|^2/2 - |y|^2/2), not exp(x.y)."),
    Wrong("norm not squared", _features_wrong("norm not squared"),
          "you subtracted |x| / 2 (the norm) instead of |x|^2 / 2 (the squared norm) in the exponent."),
    Wrong("forgot 1/sqrt(m)", _features_wrong("no scale"),
          "the features are not divided by sqrt(m): phi(x).phi(y) then sums m terms and grows with m "
          "instead of averaging them. Each of the two feature vectors carries 1/sqrt(m), so their dot "
          "product carries 1/m."),
    Wrong("divided by m", _features_wrong("divided by m"),
          "the features are divided by m instead of sqrt(m): their dot product then carries 1/m^2, not 1/m."),
    Wrong("x @ w instead of x @ w.T", _features_wrong("no transpose"),
          "w has one random direction per ROW, shape (m, d): the projections are x @ w.T, shape (L, m)."),
]


def _right_positive_random_features(x, w):
    x, w = np.asarray(x, float), np.asarray(w, float)
    log_phi = x @ np.swapaxes(w, -1, -2) - 0.5 * (x ** 2).sum(-1)[..., None]
    return np.exp(log_phi) / np.sqrt(w.shape[-2])


def _right_positive_random_features_float32(x, w):
    return _right_positive_random_features(np.asarray(x, np.float32), np.asarray(w, np.float32)).astype(np.float32)


def _right_positive_random_features_einsum(x, w):
    x, w = np.asarray(x, float), np.asarray(w, float)
    proj = np.einsum("...ld,...md->...lm", x, w)
    return np.exp(proj - np.einsum("...ld,...ld->...l", x, x)[..., None] / 2) * w.shape[-2] ** -0.5


def _breaks_features_2d_w_only(x, w):
    x, w = np.asarray(x, float), np.asarray(w, float)
    if w.ndim != 2:
        raise ValueError("w must be (m, d)")
    return np.exp(x @ w.T - 0.5 * (x ** 2).sum(-1)[..., None]) / np.sqrt(w.shape[0])


def features_cases() -> tuple[list[Case], object, int]:
    """The hidden cases of ``check_positive_random_features``, the generator its unbiasedness test draws from next,
    and the seed of that test's iid projections."""
    rng = seeded(757)
    cases = features_cases_from(rng, [(3, 4, 8), (5, 3, 5), (6, 6, 12), (2, 8, 20)], 7577)
    # the docstring: w (..., m, d), leading dims broadcast with x's (e.g. many draws)
    cases.append(stack_case(rng, 2))
    cases.append(Case("x(2, 3, 4) with w(2, 5, 4), one draw per batch item", (rng.normal(size=(2, 3, 4)),
                                                                               rng.normal(size=(2, 5, 4)))))
    return cases, rng, 99


POSITIVE_RANDOM_FEATURES = declare("07_efficient", "positive_random_features", check_positive_random_features,
            misconceptions=WRONG_FEATURES,
            promises=(
                Breaks("w (..., m, d) with leading dims", _breaks_features_2d_w_only, "ValueError"),
                Breaks("exp(w x - |x|^2 / 2)", wrong_answer(WRONG_FEATURES, "forgot exp(-|x|^2/2)"),
                       "forgot exp(-|x|^2/2)"),
            ),
            right=(Right(_right_positive_random_features), Right(_right_positive_random_features_float32),
                   Right(_right_positive_random_features_einsum)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (ELU_FEATURE_MAP, LINEAR_ATTENTION, CAUSAL_LINEAR_ATTENTION, LINEAR_ATTENTION_STEP, POSITIVE_RANDOM_FEATURES)
