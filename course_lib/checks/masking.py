"""Checks for lesson 02 (masking): causal and padding masks, combining them, additive masks,
and a masked softmax.

Each ``check_*`` compares the student's function with ``course_lib.masking`` on fixed
and seeded inputs, checks properties (boolean dtype, masked weights exactly 0, rows
sum to 1, no NaN) and names these misconceptions when it sees them:

* ``mask inverted``              True used for "blocked" (nn.MultiheadAttention's convention)
                                 instead of this course's True = may attend
* ``diagonal excluded``          a token may not attend to itself (tril with k=-1)
* ``future instead of past``     the upper triangle: each token sees only later tokens
* ``aligned to the start``       with S > T keys, query i sees keys 0..i (SDPA's is_causal)
                                 instead of the last T positions
* ``padding off by one``         ``position <= length`` instead of ``<``
* ``padding at the start``       real tokens assumed at the end of the row (left padding)
* ``max_len ignored``            S taken from max(lengths) even when max_len is given
* ``OR instead of AND``          combined masks allow a key if EITHER mask allows it
* ``padding hides queries``      the padding mask broadcast over keys instead of queries
* ``large negative instead of -inf``  -1e9 fill: a fully masked row becomes uniform, and
                                 -1e9 does not fit in float16 (it becomes -inf anyway)
* ``multiplicative mask``        0/1 floats where the additive mask needs 0/-inf
* ``mask after softmax``         weights zeroed after the softmax: rows no longer sum to 1
* ``NaN on a fully masked row``  softmax of an all -inf row: (-inf) - (-inf) = NaN

``hidden=True`` selects other, larger inputs for the hidden tests: they, the known wrong answers behind these names
and the exercises' declarations are the judge's (``course_lib/judge/masking.py``), which the students' and the
grading kernel's editions leave out.
"""
from __future__ import annotations
import numpy as np
import torch
from course_lib import masking as ref
from course_lib.checks import core
from course_lib.checks.core import (
    forbid,
    Case,
    assert_finite,
    call_student,
    compare_with_reference,
    seeded,
    to_numpy,
    tolerance,
)

__all__ = [
    "check_causal_mask",
    "check_padding_mask",
    "check_combine_masks",
    "check_to_additive",
    "check_masked_softmax",
]


FORBIDDEN = tuple(f"course_lib.masking.{name}" for name in ref.__all__) + (
    "torch.nn.attention.bias.causal_lower_right",
    "torch.nn.attention.bias.causal_upper_left",
)

FORBIDDEN_SOFTMAX = FORBIDDEN + forbid(
    "course_lib.attention.softmax",
    "course_lib.attention.softmax_torch",
    "scipy.special.softmax",
    "torch.softmax",
    "torch.nn.functional.softmax",
)


def _not_bool(x) -> bool:
    return to_numpy(x).dtype != np.bool_


def _require_bool_output(out, exercise: str, label: str) -> None:
    if _not_bool(out):
        raise AssertionError(
            f"{exercise}: on input '{label}' you returned dtype {to_numpy(out).dtype}; return a BOOLEAN "
            "mask (True = may attend), e.g. with a comparison like `j <= i`, not 0/1 integers or floats "
            "(a float mask is read as additive by F.scaled_dot_product_attention)."
        )


# ---------------------------------------------------------------- causal_mask
def causal_cases_of(sizes) -> list[Case]:
    """One case per (T, S) size (S None: the default S = T)."""
    return [Case(f"T={T}" + ("" if S is None else f", S={S}"), (T,) if S is None else (T, S))
            for T, S in sizes]


def _causal_cases() -> list[Case]:
    return causal_cases_of([(3, None), (4, 4), (2, 5)])


@core.graded
def check_causal_mask(student, hidden: bool = False) -> None:
    """Student ``causal_mask(T, S=None)`` -> bool (T, S), True where key j <= i + (S - T)."""
    exercise = "causal_mask"
    cases = core.hidden_part(__name__).causal_cases() if hidden else _causal_cases()
    compare_with_reference(student, ref.causal_mask, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "CAUSAL"), forbidden=FORBIDDEN)
    for case in cases:
        _require_bool_output(call_student(student, case, exercise, FORBIDDEN), exercise, case.label)


# ---------------------------------------------------------------- padding_mask
def _padding_cases() -> list[Case]:
    return [Case("lengths [3, 1, 2]", ([3, 1, 2],)),
            Case("lengths [2, 4], max_len=6", ([2, 4],), {"max_len": 6})]


@core.graded
def check_padding_mask(student, hidden: bool = False) -> None:
    """Student ``padding_mask(lengths, max_len=None)`` -> bool (B, S), True at real tokens."""
    exercise = "padding_mask"
    cases = core.hidden_part(__name__).padding_cases() if hidden else _padding_cases()
    compare_with_reference(student, ref.padding_mask, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "PADDING"), forbidden=FORBIDDEN)
    for case in cases:
        _require_bool_output(call_student(student, case, exercise, FORBIDDEN), exercise, case.label)


# ---------------------------------------------------------------- combine_masks
def _combine_cases() -> list[Case]:
    return [Case("causal_mask(4) and lengths [4, 2, 3]", (np.tri(4, dtype=bool), (np.arange(4) < np.array([4, 2, 3])[:, None]))),
            Case("neither mask (returns None)", (None, None))]


def _neither(case: Case) -> bool:
    return all(a is None for a in case.args) and all(v is None for v in case.kwargs.values())


@core.graded
def check_combine_masks(student, hidden: bool = False) -> None:
    """Student ``combine_masks(attn_mask=None, key_padding=None)`` -> bool (B, T, S), their AND; None for neither."""
    exercise = "combine_masks"
    cases = core.hidden_part(__name__).combine_cases() if hidden else _combine_cases()
    compare_with_reference(student, ref.combine_masks, [c for c in cases if not _neither(c)], exercise=exercise,
                           wrongs=core.wrongs(__name__, "COMBINE"), forbidden=FORBIDDEN)
    for case in cases:
        out = call_student(student, case, exercise, FORBIDDEN)
        if _neither(case):
            if out is not None:
                raise AssertionError(
                    f"{exercise}: on input '{case.label}' you returned {core._describe(out)}; with no mask given "
                    "there is nothing to hide, and the docstring says: with neither, None (no mask at all, which "
                    "attention reads as 'every key visible'). An array of made-up shape would break the "
                    "broadcast against the scores.")
            continue
        if out is not None:
            _require_bool_output(out, exercise, case.label)


# ---------------------------------------------------------------- to_additive
def _additive_cases() -> list[Case]:
    return [Case("causal_mask(3)", (np.tri(3, dtype=bool),)),
            Case("a padding mask, lengths [2, 4]", ((np.arange(4) < np.array([2, 4])[:, None]),)),
            Case("causal_mask(3) as a torch bool tensor", (torch.from_numpy(np.tri(3, dtype=bool)),))]


@core.graded
def check_to_additive(student, hidden: bool = False) -> None:
    """Student ``to_additive(mask, dtype=None)`` -> float mask, 0 where True, -inf where False."""
    exercise = "to_additive"
    cases = core.hidden_part(__name__).additive_cases() if hidden else _additive_cases()
    compare_with_reference(student, ref.to_additive, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ADDITIVE"), forbidden=FORBIDDEN, atol=0.0, rtol=0.0)
    for case in cases:
        out = call_student(student, case, exercise, FORBIDDEN)
        if isinstance(case.args[0], torch.Tensor):
            want = case.kwargs.get("dtype") or torch.get_default_dtype()
            if not isinstance(out, torch.Tensor) or out.dtype != want:
                got = out.dtype if isinstance(out, torch.Tensor) else type(out).__name__
                raise AssertionError(f"{exercise}: on input '{case.label}' (a torch tensor) the docstring promises a "
                                     f"torch tensor of dtype {want} (the `dtype` argument, default torch's default "
                                     f"dtype), got {got}")
            continue
        want = case.kwargs.get("dtype") or np.float64
        if not isinstance(out, np.ndarray) or out.dtype != want:
            got = out.dtype if isinstance(out, np.ndarray) else type(out).__name__
            raise AssertionError(f"{exercise}: on input '{case.label}' expected a numpy array of dtype "
                                 f"{np.dtype(want)}, got {got}; use the `dtype` argument (default float64).")


# ---------------------------------------------------------------- masked_softmax
def _masked_softmax_cases() -> list[Case]:
    rng = seeded(5)
    s = rng.normal(size=(3, 4)) * 2
    causal = np.tri(3, 4, 1, dtype=bool)
    pad_all = np.array([[True, True, False, False], [True, True, False, False], [False, False, False, False]])
    big = np.array([[1000.0, 1001.0, 1002.0, 999.0], [1000.5, 998.0, 1003.0, 1001.0]])
    big_mask = np.array([[True, True, False, True], [True, False, True, True]])
    return [Case("(3, 4) scores with causal_mask(3, 4)", (s, causal)),
            Case("(3, 4) scores whose last row is fully masked", (s, pad_all)),
            Case("scores near 1000 (exp(1000) overflows)", (big, big_mask))]


@core.graded
def check_masked_softmax(student, hidden: bool = False) -> None:
    """Student ``masked_softmax(scores, mask=None)``: masked keys weight 0, rows sum to 1, no NaN."""
    exercise = "masked_softmax"
    cases = core.hidden_part(__name__).masked_softmax_cases() if hidden else _masked_softmax_cases()
    compare_with_reference(student, ref.masked_softmax, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "MASKED_SOFTMAX"), forbidden=FORBIDDEN_SOFTMAX)
    for case in cases:
        raw = call_student(student, case, exercise, FORBIDDEN_SOFTMAX)
        core.assert_promised_dtype(raw, "float64", exercise, case.label,
                                   "Convert the scores to a float64 numpy array and keep that "
                                   "dtype (the docstring: 'Numpy; float64').")
        w = to_numpy(raw)
        assert_finite(w, f"{exercise} on '{case.label}'", "A fully masked row must give zeros, not NaN.")
        if len(case.args) > 1:
            mask = np.broadcast_to(case.args[1], w.shape)
            if np.any(w[~mask] != 0):
                raise AssertionError(f"{exercise}: on '{case.label}' masked keys must get weight exactly 0")
            sums = w.sum(-1)[mask.any(-1)]
            if not np.allclose(sums, 1.0, rtol=0, atol=tolerance(raw)[0]):
                raise AssertionError(f"{exercise}: on '{case.label}' each row with a visible key must sum to 1")

