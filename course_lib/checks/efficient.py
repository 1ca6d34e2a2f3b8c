"""Checks for lesson 07 (efficient attention): elu+1, linear attention, its causal and
recurrent forms, and the FAVOR+ positive random features.

Each ``check_*`` compares the student's numpy function with ``course_lib.efficient``
on fixed and seeded inputs (always passing the feature map explicitly, so one
exercise never fails because of another), checks properties, and names these
misconceptions when it sees them:

* ``elu without +1``            elu(x) alone: features can be negative, the normaliser can vanish
* ``relu feature map``          max(x, 0) (+1): not elu, zero/constant for negative inputs
* ``x + 1 everywhere``          the exp branch for x <= 0 is missing (negative features)
* ``exp feature map``           exp(x) for every x (positive, but not elu + 1)
* ``forgot the normaliser``     phi(Q)(phi(K)^T V) without dividing by phi(Q)(phi(K)^T 1)
* ``no feature map``            raw q, k used instead of phi(q), phi(k)
* ``ignores feature_map``       elu+1 hard-coded although another feature map was passed
* ``quadratic (phi(Q) phi(K)^T) V``  the (L, L) matrix is built. Where the verdict counts
                                (grading: record and replay modes) no memory figure is taken
                                from the kernel: the function runs on a sequence so long that an
                                (L, L) array of even one byte per entry exceeds the address space
                                the sandbox gives the whole kernel (``RLIMIT_AS``, set by
                                ``grading.sandbox`` before the kernel starts; the kernel can only
                                lower it), and the verifier checks the recorded output against the
                                reference: a quadratic form cannot produce it (MemoryError), a
                                linear one needs a few MB. See :func:`assert_not_quadratic`.
                                In JupyterLab (live) and the students' bundle (stored) the function
                                runs on L = 3000 under tracemalloc instead (the student's own
                                kernel; nothing is graded there), failing when the peak exceeds
                                L^2 / 2 bytes.
* ``causal form sees future keys``  the non-causal sums used for every position
* ``causal form skips the current key``  prefix sums that stop at j < i (row 0 is 0/0)
* ``prefix sum over the wrong axis``  cumulative sum over features instead of positions
* ``read before update``        the recurrent step answers from the old state
* ``state overwritten``         the recurrent step replaces the state instead of adding to it
* ``state modified in place``   the recurrent step changes the arrays it was given
* ``forgot exp(-|x|^2/2)``      phi(x) = exp(w x) / sqrt(m): estimates exp(x.y + |x|^2/2 + |y|^2/2)
* ``|x|^2 not halved``          exp(w x - |x|^2): estimates exp(x.y - |x|^2/2 - |y|^2/2)
* ``forgot 1/sqrt(m)`` / ``divided by m``   the estimate grows (shrinks) with m
* ``x @ w instead of x @ w.T``  the projection multiplied the wrong way round

What this does NOT catch: one that loops over queries or over blocks of keys (O(L^2)
time, O(L) memory: it passes, slowly); in live mode only, a function that converts to
torch inside (tracemalloc does not see torch's allocator; the graded run's address-space
bound sees every allocator); in graded runs, an (L, L) mask packed to one bit per entry
(np.packbits: L^2 / 8 bytes, 0.9 GiB at L = 88,000) fits the bound, a float (L, L) matrix
never does. The graded bound assumes the kernel runs in the sandbox
(``python -m grading preflight``) with no GPU (bubblewrap's ``--dev /dev`` shows none):
GPU memory is outside RLIMIT_AS. ``hidden=True`` selects other, larger inputs for the
hidden tests.
"""
from __future__ import annotations

import math
import os
import tracemalloc

import numpy as np

from course_lib import efficient as ref
from course_lib.checks.core import (
    forbid,
    Case,
    IntegrityError,
    Wrong,
    assert_close,
    assert_finite,
    assert_shape,
    call_student,
    compare_with_reference,
    reference,
    seeded,
    to_numpy,
)
from course_lib.checks import core as _core
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer  # noqa: F401
from course_lib.checks import transcript as _transcript
from course_lib.checks.transcript import is_pending

__all__ = [
    "check_elu_feature_map",
    "check_linear_attention",
    "check_causal_linear_attention",
    "check_linear_attention_step",
    "check_positive_random_features",
    "assert_not_quadratic",
    "sandbox_memory_bytes",
    "bound_length",
    "WRONG_ELU",
    "WRONG_LINEAR",
    "WRONG_CAUSAL",
    "WRONG_STEP",
    "WRONG_FEATURES",
]

_REFERENCES = ("elu_feature_map", "elu_feature_map_torch", "linear_attention", "causal_linear_attention",
               "linear_attention_step", "recurrent_linear_attention", "quadratic_linear_attention",
               "attention_from_features_torch", "prefix_sum_causal_attention_torch",
               "chunked_causal_attention_torch", "linear_attention_torch", "positive_random_features",
               "trig_random_features", "softmax_kernel_estimate", "favor_features_torch", "favor_attention_torch",
               "_causal_chunks")
FORBIDDEN = tuple(f"course_lib.efficient.{name}" for name in _REFERENCES) + forbid(
    # the library's linear-attention layer computes phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1) itself: with identity
    # projections (and torch's elu replaced by phi - 1) it is lesson 07's exercise under another name
    "course_lib.efficient.EfficientMultiHeadAttention.forward",
    "torch.nn.functional.elu",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
)

QUADRATIC_NAME = "quadratic (phi(Q) phi(K)^T) V"


# ---------------------------------------------------------------- private feature maps (never the reference)
def _elu1(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def _softplus(x):
    """Another positive feature map, so a function that ignores `feature_map` is seen."""
    x = np.asarray(x, dtype=np.float64)
    return np.logaddexp(0.0, x)


def _feature_map_16(w):
    """A positive feature map with as many outputs as ``w`` has rows (16 here, more than d): softplus of a
    projection. It stands for FAVOR+'s features in the linear-attention checks (what matters there is a map
    that changes the width) without being lesson 07's positive_random_features under another name."""
    w = np.asarray(w, dtype=np.float64)

    def feature_map(x):
        return np.logaddexp(0.0, np.asarray(x, dtype=np.float64) @ w.T)

    feature_map.__name__ = "softplus_projection_map"
    return feature_map


# ---------------------------------------------------------------- known wrong answers: elu + 1
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


# ---------------------------------------------------------------- known wrong answers: linear attention
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


# ---------------------------------------------------------------- known wrong answers: recurrent step
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


# ---------------------------------------------------------------- known wrong answers: FAVOR+ features
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


# ---------------------------------------------------------------- inputs
def _qkv(rng, T, S, d, dv, lead=(), scale=1.0):
    return (rng.normal(size=lead + (T, d)) * scale, rng.normal(size=lead + (S, d)) * scale,
            rng.normal(size=lead + (S, dv)))


def _linear_cases(hidden: bool, causal: bool) -> list[Case]:
    rng = seeded(707 if hidden else 7)
    shapes = [(4, 4, 3, 2, ()), (6, 6, 5, 3, ())] if causal else [(3, 5, 4, 2, ()), (4, 4, 3, 3, ())]
    if hidden:
        shapes += [(9, 9, 6, 4, (2,)), (7, 7, 8, 5, (2, 3))] if causal else [(8, 11, 6, 4, (2,)),
                                                                           (5, 7, 8, 3, (2, 3))]
    cases = []
    for T, S, d, dv, lead in shapes:
        q, k, v = _qkv(rng, T, S, d, dv, lead, scale=1.5)
        cases.append(Case(f"random q{q.shape}, k{k.shape}, v{v.shape}, softplus features", (q, k, v),
                          {"feature_map": _softplus}))
    T = 5 if not hidden else 8
    q, k, v = _qkv(rng, T, T, 3, 2)
    cases.append(Case(f"q{q.shape} with feature_map=softplus", (q, k, v), {"feature_map": _softplus}))
    w = np.asarray(ref.draw_projection(16, 3, seed=77 if hidden else 7), dtype=np.float64)
    cases.append(Case(f"q{q.shape} with 16 features per token (softplus of a projection, m=16 > d)", (q, k, v),
                      {"feature_map": _feature_map_16(w)}))
    return cases


def _native(x):
    """An array in the student's own dtype (so tolerances follow it): numpy as is, torch via .numpy()."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _with_peak_memory(student):
    """``student`` wrapped so that its result is (output, peak bytes traced during the call): the
    measurement is made in the kernel, around the student's call, and recorded with its output."""
    def measured(*args, **kwargs):
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            out = student(*args, **kwargs)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            if not was_tracing:
                tracemalloc.stop()
        return out, int(peak - before)
    return measured


_DEFAULT_SANDBOX_MB = 6144  # grading.sandbox's default for COURSE_SANDBOX_MEMORY_MB


def sandbox_memory_bytes() -> int:
    """The address space the grading sandbox gives one kernel, as the grader configures it.

    ``grading.sandbox`` sets ``RLIMIT_AS`` (soft and hard) to ``COURSE_SANDBOX_MEMORY_MB``
    MiB before it starts the kernel; the verifier reads the same setting from its own
    environment, never from the kernel.
    """
    try:
        mb = int(os.environ.get("COURSE_SANDBOX_MEMORY_MB", _DEFAULT_SANDBOX_MB))
    except ValueError:
        mb = _DEFAULT_SANDBOX_MB
    return max(mb, 1) * 2 ** 20


def _kernel_memory_bytes() -> int:
    """Record mode: this kernel's hard address-space limit (what the sandbox set; a process can lower
    its hard limit, never raise it), or the configured bound where the kernel has none (not sandboxed)."""
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    except (ImportError, OSError, ValueError):  # pragma: no cover - no RLIMIT_AS on this platform
        return sandbox_memory_bytes()
    return sandbox_memory_bytes() if hard == resource.RLIM_INFINITY or hard <= 0 else int(hard)


def bound_length(limit_bytes: int) -> int:
    """The sequence length whose (L, L) array of ONE byte per entry (a boolean mask; float64 is 8x)
    is at least 1.2x ``limit_bytes``, rounded up to a multiple of 1000.

    >>> bound_length(6144 * 2 ** 20)   # the sandbox's default 6 GiB: L^2 = 7.7e9 bytes
    88000
    """
    return 1000 * math.ceil(math.sqrt(1.2 * limit_bytes) / 1000)


_OUT_OF_MEMORY = ("MemoryError", "Unable to allocate", "can't allocate memory", "not enough memory",
                  "out of memory")


def _ran_out_of_memory(failure: AssertionError) -> bool:
    cause = failure.__cause__
    if isinstance(cause, MemoryError):
        return True
    return any(word in str(failure) for word in _OUT_OF_MEMORY)


def _quadratic_message(exercise: str, causal: bool, what: str) -> str:
    return (f"{exercise}: likely misconception '{QUADRATIC_NAME}': {what} Linear attention never forms the (L, L) "
            "matrix phi(Q) phi(K)^T: multiply "
            + ("phi(K)^T V first (an r x d_v matrix) and then phi(Q) by it." if not causal else
               "use cumulative sums over positions of phi(k_j) v_j^T (an (L, r, d_v) array) and of phi(k_j), "
               "with no (L, L) mask."))


def assert_not_quadratic(student, exercise: str, *, causal: bool, L: int = 3000, d: int = 4, dv: int = 3,
                         seed: int = 17) -> None:
    """Fail, naming the quadratic misconception, when ``student`` builds an (L, L) array.

    Graded (record and replay modes): nothing the kernel says about its memory is used.
    The function runs on a sequence of ``bound_length(limit)`` tokens, where ``limit`` is the
    address space of the whole grading kernel (the sandbox's ``RLIMIT_AS``): an (L, L) array
    of one byte per entry or more does not fit there, so a quadratic form raises MemoryError, while the linear
    forms need O(L r d_v) bytes (a few MB at the default 6 GiB, L = 88,000; d_v = 1 keeps the
    recorded output at 0.7 MB). The verifier regenerates the same inputs from the grader's
    own setting (:func:`sandbox_memory_bytes`; a kernel that ran under another bound
    recorded other inputs and fails) and compares the recorded output with the reference.
    The kernel cannot raise its hard limit, so a right output on L tokens in the record was
    computed by code that never held an (L, L) array.

    Live (JupyterLab, pytest) and stored (the students' bundle): the function runs on
    ``L`` tokens under tracemalloc (numpy reports every array it allocates there) and the
    peak traced during the call is compared with L^2 / 2 bytes: an (L, L) float64 matrix
    needs 8 L^2, a boolean (L, L) mask L^2, the linear forms O(L r d_v) (about 0.3 MB).
    Also checks the long output against the reference.
    """
    if _transcript.mode() in ("record", "replay"):
        _assert_fits_the_sandbox(student, exercise, causal=causal, d=d, seed=seed)
        return
    rng = seeded(seed)
    q, k, v = _qkv(rng, L, L, d, dv)
    case = Case(f"a long sequence, L={L}", (q, k, v), {"feature_map": _softplus})
    result = call_student(_with_peak_memory(student), case, exercise, FORBIDDEN)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise AssertionError(f"{exercise}: could not observe the output on '{case.label}'")
    out, used = result
    limit = L * L // 2
    if used > limit:
        raise AssertionError(_quadratic_message(
            exercise, causal, f"on a sequence of L={L} tokens your function allocated {used / 1e6:.0f} MB at its "
            f"peak, more than an L x L array needs ({L * L * 8 / 1e6:.0f} MB in float64)."))
    expected = reference(ref.causal_linear_attention if causal else ref.linear_attention, q, k, v, feature_map=_softplus)
    assert_close(out, expected, f"{exercise} on '{case.label}'")


def _assert_fits_the_sandbox(student, exercise: str, *, causal: bool, d: int, seed: int, dv: int = 1) -> None:
    # the kernel's own bound; the grader's setting in the verifier and when the grader writes the hidden inputs
    limit = _kernel_memory_bytes() if _transcript.mode() == "record" and _core._FEED.capturing is None \
        else sandbox_memory_bytes()
    L = bound_length(limit)
    rng = seeded(seed)
    q, k, v = _qkv(rng, L, L, d, dv)
    case = Case(f"a long sequence, L={L:,} (an L x L array does not fit in the grading kernel's "
                f"{limit / 2 ** 30:.1f} GiB)", (q, k, v), {"feature_map": _softplus})
    try:
        out = call_student(student, case, exercise, FORBIDDEN)
    except AssertionError as failure:
        if _ran_out_of_memory(failure):
            raise AssertionError(_quadratic_message(
                exercise, causal, f"on a sequence of L={L:,} tokens your function ran out of memory (the grading "
                f"kernel has {limit / 2 ** 30:.1f} GiB in all; an L x L array needs {L * L / 2 ** 30:.1f} GiB even at "
                f"one byte per entry, {8 * L * L / 2 ** 30:.0f} GiB in float64).")) from None
        raise
    expected = reference(ref.causal_linear_attention if causal else ref.linear_attention, q, k, v, feature_map=_softplus)
    assert_close(_native(out), expected, f"{exercise} on '{case.label}'")


# ---------------------------------------------------------------- checks
def check_elu_feature_map(student, hidden: bool = False) -> None:
    """Student ``elu_feature_map(x)`` is elu(x) + 1: x + 1 for x > 0, exp(x) otherwise, always > 0."""
    exercise = "elu_feature_map"
    rng = seeded(717 if hidden else 17)
    cases = [Case("[-2, -0.5, 0, 0.5, 2]", (np.array([-2.0, -0.5, 0.0, 0.5, 2.0]),)),
             Case("a (3, 4) array of random values", (rng.normal(size=(3, 4)) * 2,))]
    if hidden:
        cases += [Case("a (2, 5, 3) array", (rng.normal(size=(2, 5, 3)) * 3,)),
                  Case("very negative values [-50, -20]", (np.array([[-50.0, -20.0]]),)),
                  Case("values in [-1.5, -0.5] (below -1 too)", (np.linspace(-1.5, -0.5, 7),))]
    compare_with_reference(student, ref.elu_feature_map, cases, exercise=exercise, wrongs=WRONG_ELU,
                           forbidden=FORBIDDEN)
    x = np.linspace(-30.0, 3.0, 67)
    out = _native(call_student(student, Case("linspace(-30, 3)", (x,)), exercise, FORBIDDEN))
    assert_shape(out, x.shape, f"{exercise}: the feature map is elementwise, the output shape")
    if not (out > 0).all():
        raise AssertionError(f"{exercise}: some features are <= 0 (at x = {x[out <= 0][:3]}); elu(x) + 1 "
                             "is strictly positive, which keeps every similarity phi(q).phi(k) > 0")


def check_linear_attention(student, hidden: bool = False) -> None:
    """Student ``linear_attention(q, k, v, feature_map)`` equals phi(Q)(phi(K)^T V) / normaliser,
    takes any feature map, and never builds the (T, S) matrix."""
    exercise = "linear_attention"
    cases = _linear_cases(hidden, causal=False)
    compare_with_reference(student, ref.linear_attention, cases, exercise=exercise, wrongs=WRONG_LINEAR,
                           forbidden=FORBIDDEN)
    # keys and values permuted together: the output must not change
    rng = seeded(727 if hidden else 27)
    q, k, v = _qkv(rng, 4, 6, 3, 2)
    perm = rng.permutation(6)
    a = _native(call_student(student, Case("q, k, v", (q, k, v), {"feature_map": _softplus}), exercise, FORBIDDEN))
    b = _native(call_student(student, Case("keys and values permuted", (q, k[perm], v[perm]),
                                            {"feature_map": _softplus}), exercise, FORBIDDEN))
    assert_close(b, a, f"{exercise}: permuting keys together with their values must not change the output "
                       "(non-causal attention averages over a set of keys)")
    assert_not_quadratic(student, exercise, causal=False, L=3000 if not hidden else 3500, seed=37 if hidden else 27)


def check_causal_linear_attention(student, hidden: bool = False) -> None:
    """Student ``causal_linear_attention(q, k, v, feature_map)`` equals masked linear attention
    (position i sees keys 0..i), by prefix sums, without an (L, L) matrix."""
    exercise = "causal_linear_attention"
    cases = _linear_cases(hidden, causal=True)
    compare_with_reference(student, ref.causal_linear_attention, cases, exercise=exercise, wrongs=WRONG_CAUSAL,
                           forbidden=FORBIDDEN)
    # changing future keys and values must not change earlier outputs
    rng = seeded(737 if hidden else 47)
    T = 8
    q, k, v = _qkv(rng, T, T, 3, 2)
    k2, v2 = k.copy(), v.copy()
    k2[5:] = rng.normal(size=(T - 5, 3)) * 3
    v2[5:] += 5.0
    a = _native(call_student(student, Case("q, k, v", (q, k, v), {"feature_map": _softplus}), exercise, FORBIDDEN))
    b = _native(call_student(student, Case("later keys changed", (q, k2, v2), {"feature_map": _softplus}),
                              exercise, FORBIDDEN))
    assert_close(b[:5], a[:5], f"{exercise}: outputs 0..4 changed when only keys/values 5..7 changed; likely "
                               "misconception 'causal form sees future keys'")
    assert_not_quadratic(student, exercise, causal=True, L=3000 if not hidden else 3500, seed=57 if hidden else 47)


def _flat_step(fn, exercise):
    """(out_t, (s, z)) -> (out_t, s, z), so each part is compared and reported on its own."""
    def flat(*args, **kwargs):
        result = fn(*args, **kwargs)
        try:
            out_t, (s, z) = result
        except (TypeError, ValueError):
            raise AssertionError(f"{exercise}: must return (out_t, (s, z)): the output and the new state as a "
                                 f"pair, got {type(result).__name__}") from None
        return out_t, s, z
    return flat


def check_linear_attention_step(student, hidden: bool = False) -> None:
    """Student ``linear_attention_step(state, q_t, k_t, v_t, feature_map)`` -> (out_t, (s, z)):
    adds token t to the state, then reads; leaves its input state unchanged; run over a
    sequence it equals causal linear attention."""
    exercise = "linear_attention_step"
    rng = seeded(747 if hidden else 67)
    d, dv = (5, 3) if hidden else (3, 2)
    cases = [Case("the first token (state=None)", (None, rng.normal(size=d), rng.normal(size=d),
                                                   rng.normal(size=dv)), {"feature_map": _softplus})]
    r = d
    s0 = np.abs(rng.normal(size=(r, dv))) + 0.5
    z0 = np.abs(rng.normal(size=r)) + 1.0
    cases.append(Case("a state (s, z) after some tokens", ((s0, z0), rng.normal(size=d), rng.normal(size=d),
                                                           rng.normal(size=dv)), {"feature_map": _softplus}))
    if hidden:
        lead = (2,)
        s1 = np.abs(rng.normal(size=lead + (r, dv))) + 0.5
        z1 = np.abs(rng.normal(size=lead + (r,))) + 1.0
        cases.append(Case("a batch of 2 states", ((s1, z1), rng.normal(size=lead + (d,)),
                                                  rng.normal(size=lead + (d,)), rng.normal(size=lead + (dv,))),
                          {"feature_map": _softplus}))
    s_pristine, z_pristine = s0.copy(), z0.copy()
    if student is ref.linear_attention_step:
        raise IntegrityError(f"{exercise}: your function is the course's reference implementation; write your own")
    compare_with_reference(_flat_step(student, exercise), _flat_step(ref.linear_attention_step, exercise), cases,
                           exercise=exercise, wrongs=[Wrong(w.name, _flat_step(w.fn, exercise), w.message)
                                                      for w in WRONG_STEP],
                           forbidden=FORBIDDEN, output_names=("out_t", "s", "z"))
    s0, z0 = s_pristine, z_pristine
    # the input state must not change (core's guard compares the arrays after the call)
    call_student(student, Case("a state to keep", ((s0.copy(), z0.copy()), cases[1].args[1], cases[1].args[2],
                                                   cases[1].args[3]), {"feature_map": _softplus}), exercise, FORBIDDEN)
    # run over a whole sequence: equals causal linear attention
    T = 7 if hidden else 5
    q, k, v = _qkv(rng, T, T, d, dv)
    state, outs = None, []
    for t in range(T):
        result = call_student(student, Case(f"token {t} of a sequence", (state, q[t], k[t], v[t]),
                                            {"feature_map": _softplus}), exercise, FORBIDDEN)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise AssertionError(f"{exercise}: must return (out_t, (s, z)), got {type(result).__name__}")
        out_t, state = result
        outs.append(_native(out_t))
    expected = reference(ref.causal_linear_attention, q, k, v, feature_map=_softplus)
    assert_close(np.stack(outs), expected, f"{exercise}: running the step over a sequence of {T} tokens must "
                                           "give causal linear attention")


def check_positive_random_features(student, hidden: bool = False) -> None:
    """Student ``positive_random_features(x, w)`` is exp(w x - |x|^2/2) / sqrt(m): positive,
    shape (..., L, m), and phi(x).phi(y) estimates exp(x.y) without bias."""
    exercise = "positive_random_features"
    rng = seeded(757 if hidden else 77)
    cases = []
    for L, d, m in ([(3, 4, 8), (5, 3, 5)] + ([(6, 6, 12), (2, 8, 20)] if hidden else [])):
        x = rng.normal(size=(L, d)) * 0.7
        w = np.asarray(ref.draw_projection(m, d, seed=int(rng.integers(1 << 30))), dtype=np.float64)
        cases.append(Case(f"x({L}, {d}), w({m}, {d})", (x, w)))
    x = rng.normal(size=(2, 3, 4))
    w = rng.normal(size=(6, 4))
    cases.append(Case("a batch x(2, 3, 4), iid w(6, 4)", (x, w)))
    # m = d: w and w.T have one shape, so x @ w gives (wrong) numbers where the other inputs crash it
    square = seeded(7577 if hidden else 777)
    cases.append(Case("x(3, 4), w(4, 4) (as many features as dimensions)",
                      (square.normal(size=(3, 4)) * 0.7, square.normal(size=(4, 4)))))
    if hidden:  # the docstring: w (..., m, d), leading dims broadcast with x's (e.g. many draws)
        cases.append(Case("x(3, 4) with a stack of 2 draws w(2, 5, 4)", (rng.normal(size=(3, 4)),
                                                                          rng.normal(size=(2, 5, 4)))))
        cases.append(Case("x(2, 3, 4) with w(2, 5, 4), one draw per batch item", (rng.normal(size=(2, 3, 4)),
                                                                                   rng.normal(size=(2, 5, 4)))))
    compare_with_reference(student, ref.positive_random_features, cases, exercise=exercise, wrongs=WRONG_FEATURES,
                           forbidden=FORBIDDEN)
    out = _native(call_student(student, cases[0], exercise, FORBIDDEN))
    assert_finite(out, exercise)
    if not (out > 0).all():
        raise AssertionError(f"{exercise}: positive random features must all be > 0 (they are exponentials)")
    # unbiased: with many iid projections phi(x).phi(y) -> exp(x.y); the error's sd is sqrt(closed-form MSE)
    d, m = 4, 20_000
    x, y = rng.normal(size=d) * 0.3, rng.normal(size=d) * 0.3
    w_many = np.asarray(ref.draw_projection(m, d, orthogonal=False, seed=99 if hidden else 9), dtype=np.float64)
    f = _native(call_student(student, Case(f"x and y with m={m} iid projections", (np.stack([x, y]), w_many)),
                              exercise, FORBIDDEN))
    estimate = float(f[0] @ f[1])
    target = math.exp(float(x @ y))
    mse = reference(ref.positive_features_mse, x, y, m)
    if is_pending(mse):
        return  # record mode: the verifier compares, outside the kernel
    sd = math.sqrt(mse)
    if abs(estimate - target) > 6 * sd:
        raise AssertionError(f"{exercise}: with m={m} random projections phi(x).phi(y) = {estimate:.4f}, but it "
                             f"should estimate exp(x.y) = {target:.4f} without bias (allowed: 6 sd = {6 * sd:.4f})")


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
# written independently of course_lib.efficient; the students' and the kernel's editions replace each by a stub
def _right_elu_feature_map(x):
    x = np.asarray(x, dtype=float)
    out = x + 1.0
    neg = x <= 0
    out[neg] = np.exp(x[neg])
    return out


def _right_elu_where(x):
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def _right_elu_float32(x):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x > 0, x + np.float32(1), np.exp(np.minimum(x, np.float32(0)))).astype(np.float32)


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


# ---------------------------------------------------------------- answers that break one promise each
def _breaks_elu_negative(x):
    return _right_elu_feature_map(x) - 1.0


def _breaks_step_in_place(state, q_t, k_t, v_t, feature_map=_right_elu_feature_map):
    out, (s, z) = _right_linear_attention_step(state, q_t, k_t, v_t, feature_map)
    if state is not None:
        state[0][...] = s
        state[1][...] = z
        return out, state
    return out, (s, z)


def _breaks_features_2d_w_only(x, w):
    x, w = np.asarray(x, float), np.asarray(w, float)
    if w.ndim != 2:
        raise ValueError("w must be (m, d)")
    return np.exp(x @ w.T - 0.5 * (x ** 2).sum(-1)[..., None]) / np.sqrt(w.shape[0])


def _breaks_linear_3d_only(q, k, v, feature_map=_right_elu_feature_map):
    if np.ndim(q) > 2:
        raise ValueError("expected (T, d)")
    return _right_linear_attention(q, k, v, feature_map)


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("07_efficient", "elu_feature_map", check_elu_feature_map, equivalents=("elu_feature_map_torch",),
            misconceptions=WRONG_ELU,
            promises=(
                Breaks("always > 0", _breaks_elu_negative, "elu without +1"),
            ),
            right=(Right(_right_elu_feature_map), Right(_right_elu_where), Right(_right_elu_float32))),
    # the torch forms and the O(T S) form compute the same attention (tests/test_efficient.py)
    declare("07_efficient", "linear_attention", check_linear_attention,
            equivalents=("linear_attention_torch", "attention_from_features_torch", "quadratic_linear_attention"),
            misconceptions=WRONG_LINEAR,
            promises=(
                Breaks("any leading dims (..., T, d)", _breaks_linear_3d_only, "ValueError"),
                Breaks("never builds the (T, S) matrix", _linear_quadratic, QUADRATIC_NAME),
            ),
            right=(Right(_right_linear_attention), Right(_right_linear_attention_matmul),
                   Right(_right_linear_attention_float32))),
    declare("07_efficient", "causal_linear_attention", check_causal_linear_attention,
            equivalents=("recurrent_linear_attention", "prefix_sum_causal_attention_torch",
                         "chunked_causal_attention_torch", "_causal_chunks"),
            misconceptions=WRONG_CAUSAL,
            promises=(
                Breaks("position i sees keys 0..i", wrong_answer(WRONG_CAUSAL, "causal form sees future keys"),
                       "sees future keys"),
                Breaks("O(T r d_v) memory", _causal_quadratic, QUADRATIC_NAME),
            ),
            right=(Right(_right_causal_linear_attention), Right(_right_causal_linear_attention_loop),
                   Right(_right_causal_linear_attention_float32))),
    declare("07_efficient", "linear_attention_step", check_linear_attention_step,
            misconceptions=WRONG_STEP,
            promises=(
                Breaks("the input state is not modified", _breaks_step_in_place, "input modified in place"),
            ),
            right=(Right(_right_linear_attention_step), Right(_right_linear_attention_step_explicit),
                   Right(_right_linear_attention_step_float32))),
    declare("07_efficient", "positive_random_features", check_positive_random_features,
            misconceptions=WRONG_FEATURES,
            promises=(
                Breaks("w (..., m, d) with leading dims", _breaks_features_2d_w_only, "ValueError"),
                Breaks("exp(w x - |x|^2 / 2)", wrong_answer(WRONG_FEATURES, "forgot exp(-|x|^2/2)"),
                       "forgot exp(-|x|^2/2)"),
            ),
            right=(Right(_right_positive_random_features), Right(_right_positive_random_features_float32),
                   Right(_right_positive_random_features_einsum))),
)
