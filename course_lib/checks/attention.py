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

``hidden=True`` selects a different, larger set of inputs for the hidden tests: they, the known wrong answers
behind these names and the exercises' declarations are the judge's (``course_lib/judge/attention.py``), which the
students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import numpy as np
import torch

from course_lib import attention as ref
from course_lib.checks import core
from course_lib.checks.core import (
    forbid,
    Case,
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
from course_lib.checks import gradients as _gradients
from course_lib.checks import transcript as _transcript

__all__ = [
    "check_softmax",
    "check_attention_numpy",
    "check_attention_torch",
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


# ---------------------------------------------------------------- inputs
def softmax_cases_from(rng) -> list[Case]:
    """The softmax cases every test has (the random one drawn from ``rng``)."""
    return [
        Case("a vector [1, 2, 3]", (np.array([1.0, 2.0, 3.0]),)),
        Case("a 3x4 matrix of random scores", (rng.normal(size=(3, 4)),)),
        Case("large scores [1000, 1001, 1002]", (np.array([[1000.0, 1001.0, 1002.0]]),)),
        Case("a fully -inf row (every key masked)", (np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]]),)),
    ]


def _softmax_cases() -> list[Case]:
    return softmax_cases_from(seeded(1))


def attention_cases_from(rng, more_shapes=(), more=None, torch_tensors: bool = False) -> list[Case]:
    """The attention cases drawn from ``rng``: one per (q, k, v) shape (these and ``more_shapes``), a causal mask,
    a fully masked row (numpy only), then ``more(rng, torch_tensors)``'s cases. ``torch_tensors``: the torch
    exercise's inputs, without a fully masked row (its docstring and section 5 promise nothing there:
    torch.softmax's NaN is allowed)."""
    shapes = [((3, 4), (5, 4), (5, 2)), ((4, 4), (4, 4), (4, 3)),  # second one square: catches Q @ K
              ((2, 3, 4), (2, 5, 4), (2, 5, 2))]  # batched, as the docstring promises: catches k.T
    shapes += list(more_shapes)
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
    if more is not None:
        cases += more(rng, torch_tensors)
    if torch_tensors:
        cases = [Case(c.label, tuple(torch.from_numpy(a) for a in c.args),
                      {kk: torch.from_numpy(vv) for kk, vv in c.kwargs.items()}) for c in cases]
    return cases


def _attention_cases(torch_tensors: bool = False) -> list[Case]:
    return attention_cases_from(seeded(2), torch_tensors=torch_tensors)


def batched_torch_cases_from(seed: int, sizes: tuple, more=None) -> list[Case]:
    """A batched (B, H, T, d) case of ``sizes`` = (B, H, T, S, d), drawn with ``seed``; then ``more(g, q, k, v)``'s."""
    g = torch.Generator().manual_seed(seed)
    B, H, T, S, d = sizes
    q = torch.randn(B, H, T, d, generator=g, dtype=torch.float64)
    k = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    cases = [Case(f"batched q{tuple(q.shape)}, k{tuple(k.shape)}", (q, k, v))]
    if more is not None:
        cases += more(g, q, k, v)
    return cases


def _batched_torch_cases() -> list[Case]:
    return batched_torch_cases_from(4, (2, 2, 3, 4, 4))


# ---------------------------------------------------------------- checks
@core.graded
def check_softmax(student, hidden: bool = False) -> None:
    """Student ``softmax(x, axis=-1)`` equals the stable reference, rows sum to 1, no overflow,
    a fully -inf slice gives zeros."""
    exercise = "softmax"
    cases = core.hidden_part(__name__).softmax_cases() if hidden else _softmax_cases()
    compare_with_reference(student, ref.softmax, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "SOFTMAX"), forbidden=FORBIDDEN_SOFTMAX)
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
    seed, (T, S, d_k, d_v) = core.hidden_part(__name__).PROPERTIES if hidden else (3, (3, 4, 4, 2))
    rng = seeded(seed)
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


@core.graded
def check_attention_numpy(student, hidden: bool = False) -> None:
    """Student numpy ``scaled_dot_product_attention(q, k, v, mask=None)`` -> (out, weights)."""
    exercise = "scaled_dot_product_attention"
    cases = core.hidden_part(__name__).attention_cases() if hidden else _attention_cases()
    compare_with_reference(student, ref.scaled_dot_product_attention, cases,
                           exercise=exercise, wrongs=core.wrongs(__name__, "ATTENTION"),
                           forbidden=FORBIDDEN_ATTENTION,
                           output_names=("output", "weights"))
    _require_kind(call_student(student, cases[0], exercise, FORBIDDEN_ATTENTION), np.ndarray, exercise,
                  "numpy array")
    _check_attention_properties(student, exercise, lambda *a: a, hidden)


@core.graded
def check_attention_torch(student, hidden: bool = False) -> None:
    """Student torch ``scaled_dot_product_attention_torch``: any leading dims, equals the reference,
    returns tensors, differentiable."""
    exercise = "scaled_dot_product_attention_torch"
    if hidden:
        cases = core.hidden_part(__name__).attention_cases(torch_tensors=True) + \
            core.hidden_part(__name__).batched_torch_cases()
    else:
        cases = _attention_cases(torch_tensors=True) + _batched_torch_cases()
    compare_with_reference(student, ref.scaled_dot_product_attention_torch, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ATTENTION_TORCH"), forbidden=FORBIDDEN_ATTENTION,
                           output_names=("output", "weights"))
    _require_kind(call_student(student, cases[0], exercise, FORBIDDEN_ATTENTION), torch.Tensor, exercise,
                  "torch tensor")
    _check_attention_properties(student, exercise, lambda *a: tuple(torch.from_numpy(x) for x in a), hidden)
    # gradients must flow back to q
    seed, gradient_seed = core.hidden_part(__name__).GRADIENT_SEEDS if hidden else (14, 140)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    case = Case("q(2, 3, 4) that requires grad", (q, k, v))
    # measured, not reported (issue 57): the gradient autograd gives q through the student's output, recorded
    # as plain data and compared with the reference's; requires_grad=True on a tensor made in numpy gives none
    got = call_student(student, case, exercise, FORBIDDEN_ATTENTION,
                       observe=_gradients.observe_gradient((q,), ("q",), gradient_seed, first_of_pair=True))
    expected = reference(_gradients.reference_gradient, ref.scaled_dot_product_attention_torch, (q, k, v), (0,), ("q",),
                         gradient_seed, True)
    if _transcript.is_pending(expected):
        return  # record mode: the verifier compares the recorded gradient, outside the kernel
    _gradients.compare_gradients(got, expected, exercise, case.label, assert_close)

