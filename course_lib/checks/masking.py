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

``hidden=True`` selects other, larger inputs for the hidden tests.
"""
from __future__ import annotations

import numpy as np
import torch

from course_lib import masking as ref
from course_lib.checks import core
from course_lib.checks.core import (
    forbid,
    Case,
    Wrong,
    assert_finite,
    call_student,
    compare_with_reference,
    seeded,
    to_numpy,
    tolerance,
)
from course_lib.checks.exercise import Breaks, Right, declare  # noqa: F401

__all__ = [
    "check_causal_mask",
    "check_padding_mask",
    "check_combine_masks",
    "check_to_additive",
    "check_masked_softmax",
    "WRONG_CAUSAL",
    "WRONG_PADDING",
    "WRONG_COMBINE",
    "WRONG_ADDITIVE",
    "WRONG_MASKED_SOFTMAX",
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

_INVERTED = ("the mask is inverted: in this course True means 'MAY attend' (as in "
             "F.scaled_dot_product_attention's boolean mask), not 'blocked' as in nn.MultiheadAttention.")


def _not_bool(x) -> bool:
    return to_numpy(x).dtype != np.bool_


def _require_bool_output(out, exercise: str, label: str) -> None:
    if _not_bool(out):
        raise AssertionError(
            f"{exercise}: on input '{label}' you returned dtype {to_numpy(out).dtype}; return a BOOLEAN "
            "mask (True = may attend), e.g. with a comparison like `j <= i`, not 0/1 integers or floats "
            "(a float mask is read as additive by F.scaled_dot_product_attention)."
        )


# input masks are written inline (np.tri, a comparison with lengths): no function here computes a mask


# ---------------------------------------------------------------- causal_mask
def _causal_offset(T, S, offset):
    S = T if S is None else S
    return np.arange(S)[None, :] <= np.arange(T)[:, None] + offset(T, S)


WRONG_CAUSAL = [
    Wrong("mask inverted", lambda T, S=None: ~_causal_offset(T, S, lambda t, s: s - t), _INVERTED
          + " Return True on and below the diagonal."),
    Wrong("diagonal excluded", lambda T, S=None: _causal_offset(T, S, lambda t, s: s - t - 1),
          "each token must be allowed to attend to ITSELF: include the diagonal (j <= i, np.tril with k=0), "
          "otherwise the first token has no key at all."),
    Wrong("future instead of past",
          lambda T, S=None: np.arange(T if S is None else S)[None, :] >= np.arange(T)[:, None],
          "you allowed each token to see the tokens AFTER it (upper triangle); a look-ahead mask keeps the "
          "past and the token itself: key j is visible to query i when j <= i."),
    Wrong("aligned to the start", lambda T, S=None: _causal_offset(T, S, lambda t, s: 0),
          "with more keys than queries (S > T) the queries are the LAST T positions of the sequence (the "
          "first S - T keys are earlier tokens), so query i sees keys j <= i + (S - T). Yours aligns them to "
          "the start, like F.scaled_dot_product_attention(is_causal=True)."),
]


def _causal_cases(hidden: bool) -> list[Case]:
    if hidden:
        sizes = [(6, None), (3, 8), (5, 7), (4, 4), (1, None)]
    else:
        sizes = [(3, None), (4, 4), (2, 5)]
    return [Case(f"T={T}" + ("" if S is None else f", S={S}"), (T,) if S is None else (T, S))
            for T, S in sizes]


def check_causal_mask(student, hidden: bool = False) -> None:
    """Student ``causal_mask(T, S=None)`` -> bool (T, S), True where key j <= i + (S - T)."""
    exercise = "causal_mask"
    cases = _causal_cases(hidden)
    compare_with_reference(student, ref.causal_mask, cases, exercise=exercise, wrongs=WRONG_CAUSAL,
                           forbidden=FORBIDDEN)
    for case in cases:
        _require_bool_output(call_student(student, case, exercise, FORBIDDEN), exercise, case.label)


# ---------------------------------------------------------------- padding_mask
def _pad(lengths, max_len, kind):
    lengths = np.asarray(lengths)
    S = int(lengths.max()) if (max_len is None or kind == "ignore") else max_len
    pos = np.arange(S)[None, :]
    if kind == "off by one":
        return pos <= lengths[:, None]
    if kind == "left":
        return pos >= S - lengths[:, None]
    out = pos < lengths[:, None]
    return ~out if kind == "inverted" else out


WRONG_PADDING = [
    Wrong("mask inverted", lambda lengths, max_len=None: _pad(lengths, max_len, "inverted"),
          _INVERTED + " Real tokens get True, padding gets False (nn.MultiheadAttention's key_padding_mask "
          "is the opposite)."),
    Wrong("padding off by one", lambda lengths, max_len=None: _pad(lengths, max_len, "off by one"),
          "a sequence of length L has real tokens at positions 0 .. L-1, so the mask is `position < L`, "
          "not `position <= L`."),
    Wrong("padding at the start", lambda lengths, max_len=None: _pad(lengths, max_len, "left"),
          "the sequences are padded at the END: the first L positions of each row are the real tokens."),
    Wrong("max_len ignored", lambda lengths, max_len=None: _pad(lengths, max_len, "ignore"),
          "when max_len is given, the mask must have max_len columns (the padded batch width), even if "
          "every sequence is shorter."),
]


def _padding_cases(hidden: bool) -> list[Case]:
    if hidden:
        return [Case("lengths [1]", ([1],)),
                Case("lengths [5, 5, 2, 1], max_len=5", ([5, 5, 2, 1],), {"max_len": 5}),
                Case("lengths [3, 1] as a numpy array, max_len=6", (np.array([3, 1]),), {"max_len": 6}),
                Case("lengths [7, 2, 4]", ([7, 2, 4],))]
    return [Case("lengths [3, 1, 2]", ([3, 1, 2],)),
            Case("lengths [2, 4], max_len=6", ([2, 4],), {"max_len": 6})]


def check_padding_mask(student, hidden: bool = False) -> None:
    """Student ``padding_mask(lengths, max_len=None)`` -> bool (B, S), True at real tokens."""
    exercise = "padding_mask"
    cases = _padding_cases(hidden)
    compare_with_reference(student, ref.padding_mask, cases, exercise=exercise, wrongs=WRONG_PADDING,
                           forbidden=FORBIDDEN)
    for case in cases:
        _require_bool_output(call_student(student, case, exercise, FORBIDDEN), exercise, case.label)


# ---------------------------------------------------------------- combine_masks
def _combine(attn_mask, key_padding, kind):
    if key_padding is None:
        return attn_mask
    pad = key_padding[:, :, None] if kind == "queries" else key_padding[:, None, :]
    if attn_mask is None:
        return pad
    if kind == "or":
        return attn_mask | pad
    out = attn_mask & pad
    return ~out if kind == "inverted" else out


WRONG_COMBINE = [
    Wrong("OR instead of AND", lambda attn_mask=None, key_padding=None: _combine(attn_mask, key_padding, "or"),
          "a key is visible only if BOTH masks allow it (causal AND not padding): combine with `&`, not `|`."),
    Wrong("padding hides queries",
          lambda attn_mask=None, key_padding=None: _combine(attn_mask, key_padding, "queries"),
          "the padding mask must hide KEYS (the last axis, columns): broadcast it as key_padding[:, None, :] "
          "(B, 1, S), not key_padding[:, :, None] (B, S, 1), which hides query rows instead."),
    Wrong("mask inverted", lambda attn_mask=None, key_padding=None: _combine(attn_mask, key_padding, "inverted"),
          _INVERTED),
]


def _combine_cases(hidden: bool) -> list[Case]:
    if hidden:
        rng = seeded(2002)
        per_seq = rng.random((2, 5, 5)) > 0.4
        return [
            Case("causal_mask(3, 5) and lengths [5, 4]", (np.tri(3, 5, 2, dtype=bool), (np.arange(5) < np.array([5, 4])[:, None]))),
            Case("a random (B, T, S) mask and lengths [5, 2]", (per_seq, (np.arange(5) < np.array([5, 2])[:, None]))),
            Case("causal_mask(6) and lengths [6, 1, 3, 4]", (np.tri(6, dtype=bool), (np.arange(6) < np.array([6, 1, 3, 4])[:, None]))),
            Case("only a padding mask, lengths [2, 3]", (None, (np.arange(3) < np.array([2, 3])[:, None]))),
            Case("only a causal mask", (np.tri(4, dtype=bool), None)),
            Case("neither mask (returns None)", (None, None)),
        ]
    return [Case("causal_mask(4) and lengths [4, 2, 3]", (np.tri(4, dtype=bool), (np.arange(4) < np.array([4, 2, 3])[:, None])))]


def check_combine_masks(student, hidden: bool = False) -> None:
    """Student ``combine_masks(attn_mask=None, key_padding=None)`` -> bool (B, T, S), their AND."""
    exercise = "combine_masks"
    cases = _combine_cases(hidden)
    compare_with_reference(student, ref.combine_masks, cases, exercise=exercise, wrongs=WRONG_COMBINE,
                           forbidden=FORBIDDEN)
    for case in cases:
        out = call_student(student, case, exercise, FORBIDDEN)
        if out is not None:
            _require_bool_output(out, exercise, case.label)


# ---------------------------------------------------------------- to_additive
def _additive(mask, dtype=None, *, fill=-np.inf, invert=False, multiplicative=False):
    mask = np.asarray(mask)
    if multiplicative:
        return mask.astype(dtype or np.float64)
    m = ~mask if invert else mask
    with np.errstate(over="ignore"):
        return np.where(m, 0.0, fill).astype(dtype or np.float64)


WRONG_ADDITIVE = [
    Wrong("large negative instead of -inf", lambda mask, dtype=None: _additive(mask, dtype, fill=-1e9),
          "use -inf (float('-inf') / -np.inf), not a large negative number like -1e9: with -1e9 a row whose "
          "keys are all masked gets uniform weights instead of zeros, and -1e9 does not fit in float16 "
          "(max 65504)."),
    Wrong("mask inverted", lambda mask, dtype=None: _additive(mask, dtype, invert=True),
          "the additive mask must be 0 where the boolean mask is True (may attend) and -inf where it is False."),
    Wrong("multiplicative mask", lambda mask, dtype=None: _additive(mask, dtype, multiplicative=True),
          "an additive mask is ADDED to the scores, so allowed positions get 0 and masked ones -inf; "
          "a 0/1 float mask (mask.astype(float)) would add 1 to allowed scores and mask nothing."),
]


def _additive_cases(hidden: bool) -> list[Case]:
    if hidden:
        rng = seeded(2004)
        return [Case("a random (2, 3, 4) mask", (rng.random((2, 3, 4)) > 0.5,)),
                Case("causal_mask(5) with dtype=float32", (np.tri(5, dtype=bool),), {"dtype": np.float32}),
                Case("a padding mask, lengths [1, 3]", ((np.arange(3) < np.array([1, 3])[:, None]),)),
                Case("a torch bool mask (2, 3)", (torch.from_numpy(np.tri(2, 3, 1, dtype=bool)),)),
                Case("a torch bool mask (3, 3) with dtype=torch.float16", (torch.from_numpy(np.tri(3, dtype=bool)),),
                     {"dtype": torch.float16})]
    return [Case("causal_mask(3)", (np.tri(3, dtype=bool),)),
            Case("a padding mask, lengths [2, 4]", ((np.arange(4) < np.array([2, 4])[:, None]),))]


def check_to_additive(student, hidden: bool = False) -> None:
    """Student ``to_additive(mask, dtype=None)`` -> float mask, 0 where True, -inf where False."""
    exercise = "to_additive"
    cases = _additive_cases(hidden)
    compare_with_reference(student, ref.to_additive, cases, exercise=exercise, wrongs=WRONG_ADDITIVE,
                           forbidden=FORBIDDEN, atol=0.0, rtol=0.0)
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
def _softmax_rows(x):
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _ms(scores, mask=None, kind="right"):
    scores = np.asarray(scores, dtype=np.float64)
    if mask is None:
        return _softmax_rows(scores)
    mask = np.asarray(mask)
    if kind == "after":
        return np.where(mask, _softmax_rows(scores), 0.0)
    if kind == "inverted":
        return _softmax_rows(np.where(~mask, scores, -np.inf))
    if kind == "large":
        return _softmax_rows(np.where(mask, scores, -1e9))
    if kind == "no shift":  # exp of the raw scores: overflows to inf for scores above ~709, and inf / inf = NaN
        x = np.where(mask, scores, -np.inf)
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            total = e.sum(-1, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    if kind == "nan":
        x = np.where(mask, scores, -np.inf)
        with np.errstate(invalid="ignore"):
            e = np.exp(x - x.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
    return _softmax_rows(np.where(mask, scores, -np.inf))


WRONG_MASKED_SOFTMAX = [
    Wrong("mask inverted", lambda scores, mask=None: _ms(scores, mask, "inverted"),
          _INVERTED + " Put -inf where the mask is False."),
    Wrong("mask after softmax", lambda scores, mask=None: _ms(scores, mask, "after"),
          "the mask was applied after the softmax, so the remaining weights of a row no longer sum to 1; "
          "put -inf into the masked SCORES before the softmax instead."),
    Wrong("NaN on a fully masked row", lambda scores, mask=None: _ms(scores, mask, "nan"),
          "a row whose keys are ALL masked gives NaN: its max is -inf and (-inf) - (-inf) = NaN. Replace a "
          "non-finite row max by 0 (np.where(np.isfinite(m), m, 0)) and divide only where the sum is > 0, "
          "so the row gets all-zero weights."),
    Wrong("large negative instead of -inf", lambda scores, mask=None: _ms(scores, mask, "large"),
          "masking with -1e9 instead of -inf gives a fully masked row UNIFORM weights (1/S on padding) "
          "instead of zeros; use -inf and handle the all -inf row."),
    Wrong("no max shift (overflow)", lambda scores, mask=None: _ms(scores, mask, "no shift"),
          "exp of the raw scores overflows to inf once a score passes about 709, and inf / inf is NaN: "
          "subtract each row's largest visible score before exp (lesson 01's stable softmax); the weights "
          "do not change, since the shift cancels in the division."),
]


def _masked_softmax_cases(hidden: bool) -> list[Case]:
    rng = seeded(2005 if hidden else 5)
    if hidden:
        s1, m1 = rng.normal(size=(2, 4, 6)) * 4, rng.random((2, 4, 6)) > 0.5
        m1[:, :, 0] = True
        s2 = rng.normal(size=(5, 5)) * 3
        m2 = np.tri(5, dtype=bool) & (np.arange(5) < np.array([3])[:, None])  # query i sees keys <= min(i, 2)
        s3, m3 = rng.normal(size=(3, 4)) * 100, np.ones((3, 4), dtype=bool)
        m3[1] = False
        m3[2, 2:] = False
        s4 = rng.normal(size=(4, 5)) * 3 + 2000.0
        m4 = rng.random((4, 5)) > 0.3
        m4[:, 1] = True
        return [Case("random (2, 4, 6) scores and mask", (s1, m1)),
                Case("causal AND padding (lengths [3]) on (5, 5) scores", (s2, m2)),
                Case("scores of size 100 with a fully masked row", (s3, m3)),
                Case("a (4,) mask broadcast over (3, 4) scores", (s3, np.array([True, False, True, False]))),
                Case("no mask", (s2,)),
                Case("scores near 2000 and a random mask (exp(2000) overflows)", (s4, m4))]
    s = rng.normal(size=(3, 4)) * 2
    causal = np.tri(3, 4, 1, dtype=bool)
    pad_all = np.array([[True, True, False, False], [True, True, False, False], [False, False, False, False]])
    big = np.array([[1000.0, 1001.0, 1002.0, 999.0], [1000.5, 998.0, 1003.0, 1001.0]])
    big_mask = np.array([[True, True, False, True], [True, False, True, True]])
    return [Case("(3, 4) scores with causal_mask(3, 4)", (s, causal)),
            Case("(3, 4) scores whose last row is fully masked", (s, pad_all)),
            Case("scores near 1000 (exp(1000) overflows)", (big, big_mask))]


def check_masked_softmax(student, hidden: bool = False) -> None:
    """Student ``masked_softmax(scores, mask=None)``: masked keys weight 0, rows sum to 1, no NaN."""
    exercise = "masked_softmax"
    cases = _masked_softmax_cases(hidden)
    compare_with_reference(student, ref.masked_softmax, cases, exercise=exercise, wrongs=WRONG_MASKED_SOFTMAX,
                           forbidden=FORBIDDEN_SOFTMAX)
    for case in cases:
        raw = call_student(student, case, exercise, FORBIDDEN_SOFTMAX)
        core.assert_promised_dtype(raw, "float64", exercise, case.label,
                                   "Convert the scores with np.asarray(scores, dtype=np.float64) and keep that "
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


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare('02_masking', 'causal_mask', check_causal_mask,
            promises=(
                'boolean (T, S), True = may attend',
                'S > T: queries are the last T positions',
            )),
    declare('02_masking', 'padding_mask', check_padding_mask,
            promises=(
                'S = max_len when given',
            )),
    declare('02_masking', 'combine_masks', check_combine_masks,
            promises=(
                'with neither mask, None',
            )),
    declare('02_masking', 'to_additive', check_to_additive,
            promises=(
                "tensors in, torch's default dtype out",
                '-inf, not a large negative',
            )),
    declare('02_masking', 'masked_softmax', check_masked_softmax,
            promises=(
                'a fully masked row gives zeros, not NaN',
                'stable for large scores',
                'inputs unchanged',
                'Numpy; float64',
            )),
)
