"""Checks for lesson 03 (multi-head attention): split and merge heads, multi-head attention in
numpy, and loading the weights of ``torch.nn.MultiheadAttention``.

Each ``check_*`` compares the student's function with ``course_lib.multihead`` on fixed
and seeded inputs and names these misconceptions when it sees them:

* ``heads split along the sequence axis``  ``x.reshape(B, H, T, d_head)`` straight from
                                           (B, T, D): each "head" gets a block of TOKENS
* ``heads not moved before the sequence axis``  ``x.reshape(B, T, H, d_head)`` without the transpose
* ``heads interleaved``                    head h gets features h, h+H, h+2H, ... instead of a
                                           contiguous block of d_head features
* ``heads merged without transposing back``  ``x.reshape(B, T, D)`` straight from (B, H, T, d_head)
* ``heads averaged instead of concatenated``  mean over the head axis: (B, T, d_head)
* ``scaled by sqrt(d_model)``              scores divided by sqrt(D) instead of sqrt(d_head)
* ``output projection missing``            heads concatenated but W_o not applied
* ``weights in nn.Linear orientation``     ``x @ w.T``: the matrices are given as (D_in, D_out)
* ``biases ignored``                       b_q, b_k, b_v, b_o not added
* ``mask inverted`` / ``mask after softmax``  as in lessons 01 and 02
* ``weights not transposed``               nn.Linear stores (out, in); x @ W needs W.T
* ``output projection not transposed``     the q, k, v blocks transposed but out_proj.weight not

``hidden=True`` selects other, larger inputs for the hidden tests: they, the known wrong answers behind these names
and the exercises' declarations are the judge's (``course_lib/judge/multihead.py``), which the students' and the
grading kernel's editions leave out.
"""
from __future__ import annotations

import math
import numpy as np
import torch

from course_lib import multihead as ref
from course_lib.checks import core
from course_lib.checks.core import forbid, Case, call_student, compare_with_reference, seeded

__all__ = [
    "check_split_heads",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_numpy_params_from_torch",
]


FORBIDDEN = tuple(f"course_lib.multihead.{n}" for n in
                  ("split_heads", "merge_heads", "head_weights", "multi_head_attention",
                   "numpy_params_from_torch")) + forbid("torch.nn.functional.multi_head_attention_forward")

PARAM_KEYS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o", "num_heads")


def split_cases_from(rng, shapes, more=None, torch_shapes=()) -> list[Case]:
    """One case per (shape, num_heads) of ``shapes``, then ``more(rng)``'s, then one torch tensor case per (shape,
    num_heads) of ``torch_shapes``; x drawn from ``rng``."""
    cases = [Case(f"x of shape {s}, num_heads={h}", (rng.normal(size=s), h)) for s, h in shapes]
    if more is not None:
        cases += more(rng)
    return cases + [Case(f"a torch tensor of shape {s}, num_heads={h}", (torch.from_numpy(rng.normal(size=s)), h))
                    for s, h in torch_shapes]


def _split_cases() -> list[Case]:
    def any_leading_dims(rng) -> list[Case]:
        return [Case(f"x of shape {s}, num_heads={h} ({note}: the docstring's (..., T, D) allows any)",
                     (rng.normal(size=s), h)) for s, h, note in [((4, 6), 3, "no leading dim"),
                                                               ((2, 2, 3, 4), 2, "two leading dims")]]

    return split_cases_from(seeded(31), [((2, 3, 8), 2)], any_leading_dims, [((2, 3, 8), 4)])


def merge_cases_from(rng, shapes, torch_shapes=()) -> list[Case]:
    """One case per shape (..., H, T, d_head) of ``shapes``, then one torch tensor case per shape of
    ``torch_shapes``; x drawn from ``rng``."""
    return [Case(f"x of shape {s} (..., H, T, d_head)", (rng.normal(size=s),)) for s in shapes] + \
        [Case(f"a torch tensor of shape {s}", (torch.from_numpy(rng.normal(size=s)),)) for s in torch_shapes]


def _merge_cases() -> list[Case]:
    return merge_cases_from(seeded(32), [(2, 2, 3, 4)], [(2, 3, 4, 2)])


def _same_kind(student, cases, exercise) -> None:
    """The docstring promises numpy in, numpy out; torch in, torch out."""
    for case in cases:
        out = call_student(student, case, exercise, FORBIDDEN)
        kind = torch.Tensor if isinstance(case.args[0], torch.Tensor) else np.ndarray
        if not isinstance(out, kind):
            raise AssertionError(f"{exercise}: on input '{case.label}' the docstring promises the same kind as the "
                                 f"input ({kind.__module__.split('.')[0]} {kind.__name__}), got {type(out).__name__}")


@core.graded
def check_split_heads(student, hidden: bool = False) -> None:
    """Student ``split_heads(x, num_heads)``: (..., T, D) -> (..., H, T, D/H), heads along features."""
    cases = core.hidden_part(__name__).split_cases() if hidden else _split_cases()
    compare_with_reference(student, ref.split_heads, cases, exercise="split_heads",
                           wrongs=core.wrongs(__name__, "SPLIT"), forbidden=FORBIDDEN)
    _same_kind(student, cases, "split_heads")


@core.graded
def check_merge_heads(student, hidden: bool = False) -> None:
    """Student ``merge_heads(x)``: (..., H, T, d_head) -> (..., T, H * d_head), inverse of split_heads."""
    cases = core.hidden_part(__name__).merge_cases() if hidden else _merge_cases()
    compare_with_reference(student, ref.merge_heads, cases, exercise="merge_heads",
                           wrongs=core.wrongs(__name__, "MERGE"), forbidden=FORBIDDEN)
    _same_kind(student, cases, "merge_heads")


def _mha_case(rng, label, B, T, S, D, H, bias=True, mask=None, cross=True):
    x = rng.normal(size=(B, T, D))
    kv = rng.normal(size=(B, S, D)) if cross else x
    ws = {f"w_{n}": rng.normal(size=(D, D)) / math.sqrt(D) * 1.5 for n in "qkvo"}
    kwargs = {f"b_{n}": rng.normal(size=D) * 0.5 for n in "qkvo"} if bias else {}
    if mask is not None:
        kwargs["mask"] = mask
    args = (x, kv, kv, ws["w_q"], ws["w_k"], ws["w_v"], ws["w_o"], H)
    return Case(label, args, kwargs)


def _mha_cases() -> list[Case]:
    rng = seeded(33)
    return [
        _mha_case(rng, "self-attention, B=2, T=5, D=8, H=2", 2, 5, 5, 8, 2, cross=False),
        _mha_case(rng, "cross-attention T=3, S=6, D=8, H=4, causal_mask(3, 6)", 2, 3, 6, 8, 4,
                  mask=np.tri(3, 6, 3, dtype=bool)),
    ]


def _unbatched(case: Case) -> Case:
    args = (case.args[0][0], case.args[1][0], case.args[2][0]) + case.args[3:]
    return Case(case.label, args, case.kwargs)


@core.graded
def check_multi_head_attention(student, hidden: bool = False) -> None:
    """Student numpy ``multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads,
    b_q=None, b_k=None, b_v=None, b_o=None, mask=None)`` -> (out (B, T, D), weights (B, H, T, S))."""
    cases = core.hidden_part(__name__).mha_cases() if hidden else _mha_cases()
    compare_with_reference(student, ref.multi_head_attention, cases, exercise="multi_head_attention",
                           wrongs=core.wrongs(__name__, "MHA"), forbidden=FORBIDDEN,
                           output_names=("output", "weights"))


def _torch_mha(seed: int, D: int, H: int, bias: bool, batch_first: bool):
    g = torch.Generator().manual_seed(seed)
    m = torch.nn.MultiheadAttention(D, H, bias=bias, batch_first=batch_first, dtype=torch.float64)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) / math.sqrt(D))
    return m.eval()


def params_cases_from(specs) -> list[Case]:
    """One case per (seed, D, H, bias, batch_first): an nn.MultiheadAttention with random weights."""
    return [Case(f"nn.MultiheadAttention({D}, {H}, bias={b}, batch_first={bf})", (_torch_mha(s, D, H, b, bf),))
            for s, D, H, b, bf in specs]


def _params_cases() -> list[Case]:
    return params_cases_from([(41, 8, 2, True, True)])


@core.graded
def check_numpy_params_from_torch(student, hidden: bool = False) -> None:
    """Student ``numpy_params_from_torch(m)`` -> dict of numpy weights for multi_head_attention."""
    exercise = "numpy_params_from_torch"
    cases = core.hidden_part(__name__).params_cases() if hidden else _params_cases()
    for case in cases:
        got = call_student(student, case, exercise, FORBIDDEN, observe=_plain_params)
        if not isinstance(got, dict):
            raise AssertionError(f"{exercise}: return a dict with keys {', '.join(PARAM_KEYS)}; "
                                 f"got {got[1] if isinstance(got, tuple) else type(got).__name__}")
        missing = [k for k in PARAM_KEYS if k not in got]
        if missing:
            raise AssertionError(f"{exercise}: the dict lacks the keys {missing} (needed to call "
                                 "multi_head_attention(q, k, v, **params))")
        for k in PARAM_KEYS[:-1]:
            if got[k] is not None and not isinstance(got[k], np.ndarray):
                raise AssertionError(f"{exercise}: params[{k!r}] must be a numpy array (or None for a missing "
                                     f"bias), got {type(got[k]).__name__}; use .detach().numpy()")
    compare_with_reference(student, ref.numpy_params_from_torch, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "PARAMS"), forbidden=FORBIDDEN, output_names=PARAM_KEYS, observe=_params_tuple)


def _plain_params(p):
    """The student's dict as plain data (a dict of arrays/None/int), or a marker for another type."""
    if not isinstance(p, dict):
        return ("not a dict", type(p).__name__)
    return {str(k): v for k, v in p.items() if k in PARAM_KEYS}


def _params_tuple(p):
    p = _plain_params(p)
    if isinstance(p, tuple):
        return p
    return tuple(p.get(k) for k in PARAM_KEYS)

