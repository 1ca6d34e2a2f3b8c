"""Checks for lesson 01 (attention): softmax, attention in numpy, batched attention in torch.

Each ``check_*`` compares the student's function with ``course_lib.attention`` on
fixed and seeded random inputs, checks properties (weights rows sum to 1, output
shape, permutation equivariance) and names these misconceptions when it sees them:

* ``unstable softmax``        exp(x) / sum(exp(x)) without subtracting the max (overflow)
* ``softmax wrong axis``      normalising over axis 0 / the query axis instead of the last
* ``missing scaling``         scores not divided by sqrt(d_k)
* ``scaled by d_k``           divided by d_k instead of sqrt(d_k)
* ``transposed K``            Q @ K instead of Q @ K^T
* ``mask inverted``           True treated as "blocked" instead of "may attend"
* ``mask after softmax``      weights zeroed after the softmax, rows no longer sum to 1
* ``k.T on a batched array``  every axis of k reversed instead of the last two (fails on batched inputs)

``hidden=True`` selects a different, larger set of inputs for the hidden tests.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from course_lib import attention as ref
from course_lib.checks.core import (
    forbid,
    Case,
    Wrong,
    assert_close,
    assert_finite,
    assert_shape,
    call_student,
    compare_with_reference,
    reference,
    seeded,
    to_numpy,
    tolerance,
)
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer  # noqa: F401
from course_lib.checks import gradients as _gradients
from course_lib.checks import transcript as _transcript

__all__ = [
    "check_softmax",
    "check_attention_numpy",
    "check_attention_torch",
    "WRONG_SOFTMAX",
    "WRONG_ATTENTION",
]

FORBIDDEN_SOFTMAX = forbid("course_lib.attention.softmax", "course_lib.attention.softmax_torch",
                            "course_lib.masking.masked_softmax", "scipy.special.softmax", "torch.softmax")
FORBIDDEN_ATTENTION = forbid(
    "course_lib.attention.scaled_dot_product_attention",
    "course_lib.attention.scaled_dot_product_attention_torch",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
)


# ---------------------------------------------------------------- known wrong answers
def _softmax_unstable(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _stable_softmax(x, axis=-1):
    # a private copy, so wrong answers never call the reference (which checks forbid)
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _softmax_axis0(x, axis=-1):
    return _stable_softmax(x, axis=0)


def _softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    s = e.sum(axis=axis)
    return e / (s if e.ndim == 1 else s[None, ...] if axis in (-1, e.ndim - 1) else s)


def _softmax_no_denominator(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(x - np.max(x, axis=axis, keepdims=True))


def _softmax_exp_only(x, axis=-1):
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(x, dtype=np.float64))


def _softmax_nan_rows(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


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


def _torchify(fn):
    def wrapped(q, k, v, mask=None):
        m = None if mask is None else mask.numpy()
        out, w = fn(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), m)
        return torch.from_numpy(out), torch.from_numpy(w)
    return wrapped


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

# the torch exercise's docstring and section 5's text promise nothing for a fully masked row: not its misconception
_NOT_TORCH = ("NaN on a fully masked row",)
WRONG_ATTENTION_TORCH_SHARED = [w for w in WRONG_ATTENTION if w.name not in _NOT_TORCH]


def _np_attention_k_T(q, k, v, mask=None):
    k = np.asarray(k, dtype=np.float64)
    return _np_attention(q, k.T, v, mask, transpose_k=False)  # .T reverses every axis: a crash on a batch


WRONG_ATTENTION.append(Wrong(
    "k.T on a batched array", _np_attention_k_T,
    "k.T reverses EVERY axis of an array, so on a batched k (B, S, d_k) it gives (d_k, S, B) and the "
    "product with q no longer pairs each query with the keys of its own batch element; the docstring's "
    "shapes (..., S, d_k) allow leading dims, so transpose only the last two axes of k (section 3 names the numpy "
    "function)."))


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


# ---------------------------------------------------------------- inputs
def _softmax_cases(hidden: bool) -> list[Case]:
    rng = seeded(101 if hidden else 1)
    cases = [
        Case("a vector [1, 2, 3]", (np.array([1.0, 2.0, 3.0]),)),
        Case("a 3x4 matrix of random scores", (rng.normal(size=(3, 4)),)),
        Case("large scores [1000, 1001, 1002]", (np.array([[1000.0, 1001.0, 1002.0]]),)),
        Case("a fully -inf row (every key masked)", (np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]]),)),
    ]
    if hidden:
        cases += [
            Case("a (2, 3, 5) array, axis=-1", (rng.normal(size=(2, 3, 5)) * 10,)),
            Case("a 4x3 matrix with axis=0", (rng.normal(size=(4, 3)),), {"axis": 0}),
            Case("a (2, 3, 4) array with axis=1", (rng.normal(size=(2, 3, 4)),), {"axis": 1}),
            Case("very negative scores [-1000, -1001]", (np.array([[-1000.0, -1001.0]]),)),
            Case("equal scores", (np.zeros((2, 6)),)),
            Case("scores with -inf entries", (np.array([[0.5, -np.inf, 2.0], [-np.inf, 1.0, -np.inf]]),)),
            Case("a (2, 2, 2, 3) array of scores up to 800", (rng.normal(size=(2, 2, 2, 3)) * 800,)),
        ]
    return cases


def _attention_cases(hidden: bool, torch_tensors: bool = False) -> list[Case]:
    """``torch_tensors``: the torch exercise's inputs, without a fully masked row (its docstring and section 5
    promise nothing there: torch.softmax's NaN is allowed)."""
    rng = seeded(202 if hidden else 2)
    shapes = [((3, 4), (5, 4), (5, 2)), ((4, 4), (4, 4), (4, 3)),  # second one square: catches Q @ K
              ((2, 3, 4), (2, 5, 4), (2, 5, 2))]  # batched, as the docstring promises: catches k.T
    if hidden:
        shapes += [((6, 8), (6, 8), (6, 8)), ((2, 3, 4), (2, 7, 4), (2, 7, 5)),
                   ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3))]
    cases = []
    for qs, ks, vs in shapes:
        q, k, v = rng.normal(size=qs) * 2, rng.normal(size=ks) * 2, rng.normal(size=vs)
        cases.append(Case(f"random q{qs}, k{ks}, v{vs}", (q, k, v)))
    # a mask: query i may attend to keys 0..i (causal), on the square shape
    q, k, v = rng.normal(size=(4, 4)) * 2, rng.normal(size=(4, 4)) * 2, rng.normal(size=(4, 3))
    causal = np.tril(np.ones((4, 4), dtype=bool))
    cases.append(Case("causal mask (True = may attend) on q(4, 4)", (q, k, v), {"mask": causal}))
    if not torch_tensors:  # the numpy docstring's promise, shown before grading
        full = causal.copy()
        full[2] = False
        cases.append(Case("a query whose keys are all masked (row 2)", (q, k, v), {"mask": full}))
    if hidden:
        pad = np.ones((3, 5), dtype=bool)
        pad[:, 3:] = False
        q, k, v = rng.normal(size=(3, 6)), rng.normal(size=(5, 6)), rng.normal(size=(5, 2))
        cases.append(Case("padding mask hiding the last 2 keys", (q, k, v), {"mask": pad}))
        if not torch_tensors:
            full = np.ones((3, 5), dtype=bool)
            full[1] = False
            cases.append(Case("a query whose keys are all masked (row 1)", (q, k, v), {"mask": full}))
        q, k, v = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 2))
        cases.append(Case("a (4, 4) causal mask broadcast over a batch of 2", (q, k, v),
                          {"mask": np.tril(np.ones((4, 4), dtype=bool))}))
    if torch_tensors:
        cases = [Case(c.label, tuple(torch.from_numpy(a) for a in c.args),
                      {kk: torch.from_numpy(vv) for kk, vv in c.kwargs.items()}) for c in cases]
    return cases


def _batched_torch_cases(hidden: bool) -> list[Case]:
    g = torch.Generator().manual_seed(404 if hidden else 4)
    B, H, T, S, d = (3, 2, 5, 6, 8) if hidden else (2, 2, 3, 4, 4)
    q = torch.randn(B, H, T, d, generator=g, dtype=torch.float64)
    k = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    cases = [Case(f"batched q{tuple(q.shape)}, k{tuple(k.shape)}", (q, k, v))]
    if hidden:
        mask = torch.tril(torch.ones(T, S, dtype=torch.bool), diagonal=S - T)
        cases.append(Case(f"batched q{tuple(q.shape)} with a ({T}, {S}) bool mask", (q, k, v), {"mask": mask}))
        q3 = torch.randn(2, 1, 2, 3, 4, generator=g, dtype=torch.float64)
        k3 = torch.randn(2, 1, 2, 5, 4, generator=g, dtype=torch.float64)
        v3 = torch.randn(2, 1, 2, 5, 2, generator=g, dtype=torch.float64)
        cases.append(Case("three leading dims q(2, 1, 2, 3, 4)", (q3, k3, v3)))
    return cases


# ---------------------------------------------------------------- checks
def check_softmax(student, hidden: bool = False) -> None:
    """Student ``softmax(x, axis=-1)`` equals the stable reference, rows sum to 1, no overflow,
    a fully -inf slice gives zeros."""
    exercise = "softmax"
    cases = _softmax_cases(hidden)
    compare_with_reference(student, ref.softmax, cases, exercise=exercise, wrongs=WRONG_SOFTMAX,
                           forbidden=FORBIDDEN_SOFTMAX)
    for case in cases:
        raw = call_student(student, case, exercise, FORBIDDEN_SOFTMAX)
        out = raw.detach().cpu().numpy() if isinstance(raw, torch.Tensor) else np.asarray(raw)  # its own dtype
        assert_finite(out, f"{exercise} on '{case.label}'",
                      "Subtract the maximum before exponentiating; a fully -inf slice gets zeros.")
        axis = case.kwargs.get("axis", -1)
        sums = out.sum(axis=axis)
        x = np.asarray(case.args[0])
        alive = np.isfinite(x).any(axis=axis)
        assert_close(np.where(alive, sums, 1.0), np.ones(sums.shape),
                     f"{exercise}: the values along axis {axis} must sum to 1 ('{case.label}')")


def _check_attention_properties(student, exercise: str, to_backend, hidden: bool) -> None:
    rng = seeded(303 if hidden else 3)
    T, S, d_k, d_v = (5, 7, 6, 3) if hidden else (3, 4, 4, 2)
    q, k, v = rng.normal(size=(T, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    case = Case(f"q({T}, {d_k}), k({S}, {d_k}), v({S}, {d_v})", to_backend(q, k, v))
    result = call_student(student, case, exercise, FORBIDDEN_ATTENTION)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{exercise}: must return a tuple (output, weights), got {type(result).__name__}")
    out, w = result
    assert_shape(out, (T, d_v), f"{exercise}: output shape for q({T}, {d_k}) and v({S}, {d_v}) "
                                "should be (T, d_v)")
    assert_shape(w, (T, S), f"{exercise}: weights shape should be (T, S) = (queries, keys)")
    w_np = to_numpy(w)
    sums = w_np.sum(-1)
    if not np.allclose(sums, 1.0, rtol=0, atol=tolerance(w)[0]):
        raise AssertionError(f"{exercise}: each row of the weights (one query) must sum to 1 over the keys; "
                             f"yours sum to {np.round(sums, 4).tolist()}")
    # permuting keys and values together must not change the output
    perm = rng.permutation(S)
    case_p = Case("keys and values permuted together", to_backend(q, k[perm], v[perm]))
    out_p, _ = call_student(student, case_p, exercise, FORBIDDEN_ATTENTION)
    assert_close(out_p, to_numpy(out), f"{exercise}: permuting the keys together with their values must "
                                       "not change the output (attention is a weighted average over a set)")
    # permuting the queries permutes the output rows
    perm_q = rng.permutation(T)
    case_q = Case("queries permuted", to_backend(q[perm_q], k, v))
    out_q, _ = call_student(student, case_q, exercise, FORBIDDEN_ATTENTION)
    assert_close(out_q, to_numpy(out)[perm_q], f"{exercise}: permuting the queries must permute the output "
                                               "rows the same way (each query is handled independently)")


def _require_kind(result, kind, exercise: str, what: str) -> None:
    if isinstance(result, (tuple, list)) and len(result) == 2:
        for name, x in zip(("output", "weights"), result):
            if not isinstance(x, kind):
                raise AssertionError(f"{exercise}: the {name} must be a {what} (the docstring promises "
                                     f"{what}s), got {type(x).__name__}")


def check_attention_numpy(student, hidden: bool = False) -> None:
    """Student numpy ``scaled_dot_product_attention(q, k, v, mask=None)`` -> (out, weights)."""
    exercise = "scaled_dot_product_attention"
    cases = _attention_cases(hidden)
    compare_with_reference(student, ref.scaled_dot_product_attention, cases,
                           exercise=exercise, wrongs=WRONG_ATTENTION, forbidden=FORBIDDEN_ATTENTION,
                           output_names=("output", "weights"))
    _require_kind(call_student(student, cases[0], exercise, FORBIDDEN_ATTENTION), np.ndarray, exercise,
                  "numpy array")
    _check_attention_properties(student, exercise, lambda *a: a, hidden)


def check_attention_torch(student, hidden: bool = False) -> None:
    """Student torch ``scaled_dot_product_attention_torch``: any leading dims, equals the reference,
    returns tensors, differentiable."""
    exercise = "scaled_dot_product_attention_torch"
    cases = _attention_cases(hidden, torch_tensors=True) + _batched_torch_cases(hidden)
    compare_with_reference(student, ref.scaled_dot_product_attention_torch, cases, exercise=exercise,
                           wrongs=WRONG_ATTENTION_TORCH, forbidden=FORBIDDEN_ATTENTION,
                           output_names=("output", "weights"))
    _require_kind(call_student(student, cases[0], exercise, FORBIDDEN_ATTENTION), torch.Tensor, exercise,
                  "torch tensor")
    _check_attention_properties(student, exercise, lambda *a: tuple(torch.from_numpy(x) for x in a), hidden)
    # gradients must flow back to q
    g = torch.Generator().manual_seed(414 if hidden else 14)
    q = torch.randn(2, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    case = Case("q(2, 3, 4) that requires grad", (q, k, v))
    # measured, not reported (issue 57): the gradient autograd gives q through the student's output, recorded
    # as plain data and compared with the reference's; requires_grad=True on a tensor made in numpy gives none
    got = call_student(student, case, exercise, FORBIDDEN_ATTENTION,
                       observe=_gradients.observe_gradient((q,), ("q",), 4140 if hidden else 140, first_of_pair=True))
    expected = reference(_gradients.reference_gradient, ref.scaled_dot_product_attention_torch, (q, k, v), (0,), ("q",),
                         4140 if hidden else 140, True)
    if _transcript.is_pending(expected):
        return  # record mode: the verifier compares the recorded gradient, outside the kernel
    _gradients.compare_gradients(got, expected, exercise, case.label, assert_close)


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
# written independently of course_lib.attention; the students' and the kernel's editions replace each by a stub
def _right_softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, np.where(s > 0, s, 1.0))


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


# ---------------------------------------------------------------- answers that break one promise each
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


def _breaks_attention_2d_only(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _right_softmax(s)
    return w @ v, w


def _breaks_attention_returns_torch(q, k, v, mask=None):
    out, w = _right_attention(q, k, v, mask)
    return torch.from_numpy(out), torch.from_numpy(w)


def _breaks_torch_detached(q, k, v, mask=None):
    out, w = _right_attention_torch(q.detach(), k, v, mask)
    return out, w


def _breaks_torch_kT(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return w @ v, w


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("01_attention", "softmax", check_softmax, equivalents=("softmax_torch",),
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
                   Right(_right_softmax_torch_inside))),
    declare("01_attention", "scaled_dot_product_attention", check_attention_numpy,
            misconceptions=WRONG_ATTENTION,
            promises=(
                Breaks("any leading dims (..., T, d_k)", _breaks_attention_2d_only, "k.T on a batched array"),
                Breaks("numpy in, numpy out", _breaks_attention_returns_torch, "numpy array"),
                Breaks("a fully masked row gets zero weights",
                       wrong_answer(WRONG_ATTENTION, "NaN on a fully masked row"), "NaN on a fully masked row"),
            ),
            right=(Right(_right_attention), Right(_right_attention_float32), Right(_right_attention_einsum),
                   Right(_right_attention_loop))),
    declare("01_attention", "scaled_dot_product_attention_torch", check_attention_torch,
            misconceptions=WRONG_ATTENTION_TORCH,
            promises=(
                Breaks("differentiable", _breaks_torch_detached, "gradients"),
                Breaks("any leading dims (k.transpose(-2, -1))", _breaks_torch_kT, "k.T on a batched tensor"),
            ),
            right=(Right(_right_attention_torch), Right(_right_attention_torch_as_section_5),
                   Right(_right_attention_torch_float32),
                   Right(_right_attention_torch_einsum))),
)
