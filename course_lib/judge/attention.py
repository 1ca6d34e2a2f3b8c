"""The judge's material of ``course_lib.checks.attention`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.attention import (
    attention_cases_from,
    batched_torch_cases_from,
    check_attention_numpy,
    check_attention_torch,
    check_softmax,
    softmax_cases_from,
)


def _stable_softmax(x, axis=-1):
    # a private copy, so wrong answers never call the reference (which checks forbid)
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _softmax_no_denominator(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(x - np.max(x, axis=axis, keepdims=True))


def _softmax_nan_rows(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _np_attention(q, k, v, mask=None, *, scale="sqrt", transpose_k=True, softmax_axis=-1,
                  invert_mask=False, mask_after=False, softmax="stable"):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    kt = np.swapaxes(k, -1, -2) if transpose_k else k
    scores = q @ kt
    d_k = q.shape[-1]
    if scale == "sqrt":
        scores = scores / math.sqrt(d_k)
    elif scale == "d":
        scores = scores / d_k
    if mask is not None and not mask_after:
        m = ~np.asarray(mask) if invert_mask else np.asarray(mask)
        scores = np.where(m, scores, -np.inf)
    if softmax == "naive":  # NaN where a row is fully masked
        w = _softmax_nan_rows(scores, axis=softmax_axis)
    elif softmax == "unnormalised":
        w = _softmax_no_denominator(scores, axis=softmax_axis)
    else:
        w = _stable_softmax(scores, axis=softmax_axis)
    if mask is not None and mask_after:
        w = np.where(np.asarray(mask), w, 0.0)
    return w @ v, w


def _wrong_attention(kind):
    options = {
        "missing scaling": dict(scale=None),
        "scaled by d_k": dict(scale="d"),
        "transposed K": dict(transpose_k=False),
        "softmax wrong axis": dict(softmax_axis=-2),
        "mask inverted": dict(invert_mask=True),
        "mask inverted (NaN rows)": dict(invert_mask=True, softmax="naive"),
        "mask after softmax": dict(mask_after=True),
        "softmax without normalisation": dict(softmax="unnormalised"),
        "NaN on a fully masked row": dict(softmax="naive"),
    }[kind]
    return lambda q, k, v, mask=None: _np_attention(q, k, v, mask, **options)


_ATTENTION_MESSAGES = {
    "missing scaling": "the scores are not divided by sqrt(d_k). Without it, dot products grow with "
                       "d_k and the softmax saturates (near one-hot weights, vanishing gradients).",
    "scaled by d_k": "the scores are divided by d_k, not sqrt(d_k). The dot product of two random "
                     "unit-variance vectors has variance d_k, so its standard deviation is sqrt(d_k).",
    "transposed K": "the scores use Q @ K instead of Q @ K^T: each query must be dotted with each key "
                    "row, so transpose the last two axes of K (not every axis: the leading ones are batch axes).",
    "softmax wrong axis": "the weights are normalised over the query axis (-2) instead of the key axis (-1): "
                          "each query's weights over the keys must sum to 1.",
    "mask inverted": "the mask is inverted: in this course True means 'may attend', so positions where "
                     "the mask is False must get -inf before the softmax.",
    "mask after softmax": "the mask was applied after the softmax, so the remaining weights no longer sum to 1; "
                          "put -inf in the scores before the softmax instead.",
}


_ATTENTION_MESSAGES["softmax without normalisation"] = (
    "the weights are exp(scores) without dividing by their sum over the keys, so a row does not sum to 1 "
    "(the output is not a weighted average of the values).")


_ATTENTION_MESSAGES["NaN on a fully masked row"] = (
    "a query whose keys are ALL masked gets NaN weights ((-inf) - (-inf) = NaN in the softmax); the docstring "
    "promises weights all 0 for a fully masked row: a row whose keys are all -inf needs its own care in the "
    "softmax (its max is not a number to subtract, and its sum is 0).")


_VARIANT = {"mask inverted (NaN rows)": "mask inverted"}  # the same misconception, with a plain softmax


WRONG_ATTENTION = [Wrong(_VARIANT.get(name, name), _wrong_attention(name),
                         _ATTENTION_MESSAGES[_VARIANT.get(name, name)]
                         + (" (Here a query row whose mask is all True became fully masked: NaN.)"
                            if name in _VARIANT else ""))
                   for name in list(_ATTENTION_MESSAGES) + list(_VARIANT)]


def _np_attention_k_T(q, k, v, mask=None):
    k = np.asarray(k, dtype=np.float64)
    return _np_attention(q, k.T, v, mask, transpose_k=False)  # .T reverses every axis: a crash on a batch


WRONG_ATTENTION.append(Wrong(
    "k.T on a batched array", _np_attention_k_T,
    "k.T reverses EVERY axis of an array, so on a batched k (B, S, d_k) it gives (d_k, S, B) and the "
    "product with q no longer pairs each query with the keys of its own batch element; the docstring's "
    "shapes (..., S, d_k) allow leading dims, so transpose only the last two axes of k (section 3 names the numpy "
    "function)."))


# written independently of course_lib.attention; the students' and the kernel's editions replace each by a stub
def _right_softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, np.where(s > 0, s, 1.0))


# ---------------------------------------------------------------- softmax
def _softmax_unstable(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _softmax_axis0(x, axis=-1):
    return _stable_softmax(x, axis=0)


def _softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    s = e.sum(axis=axis)
    return e / (s if e.ndim == 1 else s[None, ...] if axis in (-1, e.ndim - 1) else s)


def _softmax_exp_only(x, axis=-1):
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(x, dtype=np.float64))


_NO_DENOMINATOR = ("your values are exp(x) (or exp(x - max)) without dividing by their sum, so they do not "
                   "sum to 1: divide each slice by its own sum along `axis` (keeping that axis, so it broadcasts).")


_NAN_ROW = ("a slice whose entries are all -inf (a fully masked row) gives NaN: its max is -inf and "
            "(-inf) - (-inf) = NaN. Replace a non-finite max by 0 and divide only where the sum is > 0, "
            "so the slice gets all zeros, as the docstring promises.")


WRONG_SOFTMAX = [
    Wrong("softmax without normalisation", _softmax_no_denominator, _NO_DENOMINATOR, variant="exp(x - max)"),
    Wrong("softmax without normalisation", _softmax_exp_only, _NO_DENOMINATOR, variant="exp(x)"),
    Wrong("NaN on a fully masked row", _softmax_nan_rows, _NAN_ROW),
    Wrong("unstable softmax", _softmax_unstable,
          "your softmax overflows on large scores (exp(1000) = inf, inf/inf = NaN). Subtract the "
          "maximum of each slice before exp: softmax(x) = softmax(x - max(x)) mathematically."),
    Wrong("softmax wrong axis", _softmax_axis0,
          "your values are normalised along axis 0 instead of the requested axis (default -1): "
          "use the `axis` argument in both the max and the sum, with keepdims=True."),
    Wrong("sum without keepdims", _softmax_no_keepdims,
          "the sum was taken without keepdims=True, so it broadcast against the wrong axis; "
          "keep the reduced axis so each row is divided by its own sum."),
]


def _right_softmax_float32(x, axis=-1):
    return _right_softmax(np.asarray(x, dtype=np.float32), axis).astype(np.float32)


def _right_softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    out = np.exp(x - lse)
    return np.where(np.isnan(out), 0.0, out)


def _right_softmax_torch_inside(x, axis=-1):
    t = torch.as_tensor(np.asarray(x, dtype=float))
    m = t.amax(dim=axis, keepdim=True)
    e = torch.exp(t - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    s = e.sum(dim=axis, keepdim=True)
    return (e / s.clamp_min(1e-300)).numpy()


def _breaks_softmax_nan_row(x, axis=-1):
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _breaks_softmax_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    return _right_softmax(x, axis)


def _breaks_softmax_float16(x, axis=-1):
    return _right_softmax(x, axis).astype(np.float16)


def softmax_cases() -> list[Case]:
    """The hidden cases of ``check_softmax``."""
    rng = seeded(101)
    return softmax_cases_from(rng) + [
        Case("a (2, 3, 5) array, axis=-1", (rng.normal(size=(2, 3, 5)) * 10,)),
        Case("a 4x3 matrix with axis=0", (rng.normal(size=(4, 3)),), {"axis": 0}),
        Case("a (2, 3, 4) array with axis=1", (rng.normal(size=(2, 3, 4)),), {"axis": 1}),
        Case("very negative scores [-1000, -1001]", (np.array([[-1000.0, -1001.0]]),)),
        Case("equal scores", (np.zeros((2, 6)),)),
        Case("scores with -inf entries", (np.array([[0.5, -np.inf, 2.0], [-np.inf, 1.0, -np.inf]]),)),
        Case("a (2, 2, 2, 3) array of scores up to 800", (rng.normal(size=(2, 2, 2, 3)) * 800,)),
    ]


SOFTMAX = declare("01_attention", "softmax", check_softmax, equivalents=("softmax_torch",),
            misconceptions=WRONG_SOFTMAX,
            promises=(
                Breaks("stable for large scores (exp does not overflow)",
                       wrong_answer(WRONG_SOFTMAX, "unstable softmax"), "unstable softmax"),
                Breaks("a fully -inf slice gets zeros, not NaN", _breaks_softmax_nan_row, "NaN on a fully masked row"),
                Breaks("normalised along `axis`", wrong_answer(WRONG_SOFTMAX, "softmax wrong axis"),
                       "softmax wrong axis"),
                Breaks("inputs unchanged", _breaks_softmax_in_place, "input modified in place"),
                Breaks("float answer in at least float32", _breaks_softmax_float16, "half precision"),
            ),
            right=(Right(_right_softmax), Right(_right_softmax_float32), Right(_right_softmax_logsumexp),
                   Right(_right_softmax_torch_inside)))


# ---------------------------------------------------------------- scaled_dot_product_attention
def _right_attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _right_softmax(s)
    return w @ v, w


def _right_attention_float32(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    out, w = _right_attention(q, k, v, mask)
    return out.astype(np.float32), w.astype(np.float32)


def _right_attention_einsum(q, k, v, mask=None):
    s = np.einsum("...td,...sd->...ts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _right_softmax(s, axis=-1)
    return np.einsum("...ts,...sv->...tv", w, v), w


def _right_attention_loop(q, k, v, mask=None):
    """One query at a time, on 2-D inputs; leading dims by recursion."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.ndim > 2:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        m = None if mask is None else np.broadcast_to(mask, lead + (q.shape[-2], k.shape[-2]))
        q, k, v = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
        outs = [_right_attention_loop(q[i], k[i], v[i], None if m is None else m[i]) for i in range(lead[0])]
        return np.stack([o for o, _ in outs]), np.stack([w for _, w in outs])
    T, S = q.shape[0], k.shape[0]
    m = np.ones((T, S), dtype=bool) if mask is None else np.broadcast_to(mask, (T, S))
    out, w = np.zeros((T, v.shape[-1])), np.zeros((T, S))
    for t in range(T):
        scores = np.array([q[t] @ k[s] for s in range(S)]) / math.sqrt(q.shape[-1])
        w[t] = _right_softmax(np.where(m[t], scores, -np.inf))
        out[t] = w[t] @ v
    return out, w


def _breaks_attention_2d_only(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _right_softmax(s)
    return w @ v, w


def _breaks_attention_returns_torch(q, k, v, mask=None):
    out, w = _right_attention(q, k, v, mask)
    return torch.from_numpy(out), torch.from_numpy(w)


def _more_attention_cases(rng, torch_tensors: bool) -> list[Case]:
    pad = np.ones((3, 5), dtype=bool)
    pad[:, 3:] = False
    q, k, v = rng.normal(size=(3, 6)), rng.normal(size=(5, 6)), rng.normal(size=(5, 2))
    cases = [Case("padding mask hiding the last 2 keys", (q, k, v), {"mask": pad})]
    if not torch_tensors:
        full = np.ones((3, 5), dtype=bool)
        full[1] = False
        cases.append(Case("a query whose keys are all masked (row 1)", (q, k, v), {"mask": full}))
    q, k, v = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 2))
    cases.append(Case("a (4, 4) causal mask broadcast over a batch of 2", (q, k, v),
                      {"mask": np.tril(np.ones((4, 4), dtype=bool))}))
    return cases


def attention_cases(torch_tensors: bool = False) -> list[Case]:
    """The hidden cases of ``check_attention_numpy`` (``torch_tensors``: of ``check_attention_torch``)."""
    return attention_cases_from(seeded(202), [((6, 8), (6, 8), (6, 8)), ((2, 3, 4), (2, 7, 4), (2, 7, 5)),
                                              ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3))],
                                _more_attention_cases, torch_tensors)


PROPERTIES = (303, (5, 7, 6, 3))  # the hidden property test's seed and (T, S, d_k, d_v), both exercises


SCALED_DOT_PRODUCT_ATTENTION = declare("01_attention", "scaled_dot_product_attention", check_attention_numpy,
            misconceptions=WRONG_ATTENTION,
            promises=(
                Breaks("any leading dims (..., T, d_k)", _breaks_attention_2d_only, "k.T on a batched array"),
                Breaks("numpy in, numpy out", _breaks_attention_returns_torch, "numpy array"),
                Breaks("a fully masked row gets zero weights",
                       wrong_answer(WRONG_ATTENTION, "NaN on a fully masked row"), "NaN on a fully masked row"),
            ),
            right=(Right(_right_attention), Right(_right_attention_float32), Right(_right_attention_einsum),
                   Right(_right_attention_loop)))


# ---------------------------------------------------------------- scaled_dot_product_attention_torch
def _torchify(fn):
    def wrapped(q, k, v, mask=None):
        m = None if mask is None else mask.numpy()
        out, w = fn(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), m)
        return torch.from_numpy(out), torch.from_numpy(w)
    return wrapped


# the torch exercise's docstring and section 5's text promise nothing for a fully masked row: not its misconception
_NOT_TORCH = ("NaN on a fully masked row",)


WRONG_ATTENTION_TORCH_SHARED = [w for w in WRONG_ATTENTION if w.name not in _NOT_TORCH]


def _torch_softmax_dim(dim):
    def wrong(q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, -math.inf)
        w = torch.softmax(s, dim=dim)
        return w @ v, w
    return wrong


def _torch_k_T(q, k, v, mask=None):
    s = q @ k.permute(*reversed(range(k.dim())))  # what k.T does
    w = torch.softmax(s / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


WRONG_ATTENTION_TORCH = [Wrong(w.name, _torchify(w.fn), w.message) for w in WRONG_ATTENTION_TORCH_SHARED] + [
    Wrong("softmax over the head axis", _torch_softmax_dim(1),
          "on a (B, H, T, S) batch the softmax was taken over dim=1 (the heads); each query's weights over the "
          "KEYS must sum to 1: softmax over dim=-1."),
    Wrong("softmax over the batch axis", _torch_softmax_dim(0),
          "the softmax was taken over dim=0 (the batch): each query's weights over the KEYS must sum to 1, "
          "softmax over dim=-1, whatever the number of leading dims."),
    Wrong("k.T on a batched tensor", _torch_k_T,
          "k.T reverses ALL axes of a batched tensor ((B, H, S, d) -> (d, S, H, B)); transpose only the last "
          "two (section 5 names the method)."),
]


def _right_attention_torch(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = torch.softmax(s, -1)
    w = torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def _right_attention_torch_as_section_5(q, k, v, mask=None):
    """Section 5's recipe as it reads: masked_fill, then torch.softmax over dim=-1 (NaN on a fully masked row)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _right_attention_torch_float32(q, k, v, mask=None):
    out, w = _right_attention_torch(q.float(), k.float(), v.float(), mask)
    return out, w


def _right_attention_torch_einsum(q, k, v, mask=None):
    s = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        s = torch.where(mask, s, torch.tensor(-math.inf, dtype=s.dtype))
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    w = e / e.sum(-1, keepdim=True).clamp_min(1e-300)
    return torch.einsum("...ts,...sv->...tv", w, v), w


def _breaks_torch_detached(q, k, v, mask=None):
    out, w = _right_attention_torch(q.detach(), k, v, mask)
    return out, w


def _breaks_torch_kT(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return w @ v, w


def _more_batched_cases(g, q, k, v) -> list[Case]:
    T, S = q.shape[-2], k.shape[-2]
    mask = torch.tril(torch.ones(T, S, dtype=torch.bool), diagonal=S - T)
    q3 = torch.randn(2, 1, 2, 3, 4, generator=g, dtype=torch.float64)
    k3 = torch.randn(2, 1, 2, 5, 4, generator=g, dtype=torch.float64)
    v3 = torch.randn(2, 1, 2, 5, 2, generator=g, dtype=torch.float64)
    return [Case(f"batched q{tuple(q.shape)} with a ({T}, {S}) bool mask", (q, k, v), {"mask": mask}),
            Case("three leading dims q(2, 1, 2, 3, 4)", (q3, k3, v3))]


def batched_torch_cases() -> list[Case]:
    """The hidden batched cases of ``check_attention_torch``."""
    return batched_torch_cases_from(404, (3, 2, 5, 6, 8), _more_batched_cases)


GRADIENT_SEEDS = (414, 4140)  # the hidden gradient test's inputs and upstream gradient


SCALED_DOT_PRODUCT_ATTENTION_TORCH = declare("01_attention", "scaled_dot_product_attention_torch", check_attention_torch,
            misconceptions=WRONG_ATTENTION_TORCH,
            promises=(
                Breaks("differentiable", _breaks_torch_detached, "gradients"),
                Breaks("any leading dims (k.transpose(-2, -1))", _breaks_torch_kT, "k.T on a batched tensor"),
            ),
            right=(Right(_right_attention_torch), Right(_right_attention_torch_as_section_5),
                   Right(_right_attention_torch_float32),
                   Right(_right_attention_torch_einsum)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (SOFTMAX, SCALED_DOT_PRODUCT_ATTENTION, SCALED_DOT_PRODUCT_ATTENTION_TORCH)
