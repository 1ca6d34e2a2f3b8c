"""The judge's material of ``course_lib.checks.masking`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.masking import (
    causal_cases_of,
    check_causal_mask,
    check_combine_masks,
    check_masked_softmax,
    check_padding_mask,
    check_to_additive,
)

_INVERTED = ("the mask is inverted: in this course True means 'MAY attend' (as in "
             "F.scaled_dot_product_attention's boolean mask), not 'blocked' as in nn.MultiheadAttention.")


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
          "first S - T keys are earlier tokens), so query i sees S - T more keys than its own index. Yours aligns them to "
          "the start, like F.scaled_dot_product_attention(is_causal=True)."),
]


# written independently of course_lib.masking; the students' and the kernel's editions replace each by a stub
def _right_causal_mask(T, S=None):
    S = T if S is None else S
    out = np.zeros((T, S), dtype=bool)
    for i in range(T):
        out[i, : i + S - T + 1] = True
    return out


def _right_causal_mask_tril(T, S=None):
    S = T if S is None else S
    return np.tril(np.ones((T, S), dtype=bool), k=S - T)


def _right_causal_mask_torch_inside(T, S=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool).tril(S - T).numpy()


def _breaks_causal_mask_int(T, S=None):
    return _right_causal_mask(T, S).astype(int)


def causal_cases() -> list[Case]:
    """The hidden cases of ``check_causal_mask``."""
    return causal_cases_of([(6, None), (3, 8), (5, 7), (4, 4), (1, None)])


CAUSAL_MASK = declare("02_masking", "causal_mask", check_causal_mask,
            misconceptions=WRONG_CAUSAL,
            promises=(
                Breaks("boolean (T, S), True = may attend", _breaks_causal_mask_int, "BOOLEAN"),
                Breaks("S > T: queries are the last T positions", wrong_answer(WRONG_CAUSAL, "aligned to the start"),
                       "aligned to the start"),
            ),
            right=(Right(_right_causal_mask), Right(_right_causal_mask_tril), Right(_right_causal_mask_torch_inside)))


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


def _right_padding_mask(lengths, max_len=None):
    lengths = list(np.asarray(lengths))
    S = max(lengths) if max_len is None else max_len
    return np.array([[j < n for j in range(S)] for n in lengths], dtype=bool)


def _right_padding_mask_vectorised(lengths, max_len=None):
    lengths = np.asarray(lengths)
    S = int(lengths.max()) if max_len is None else max_len
    return np.arange(S) < lengths[:, None]


def _right_padding_mask_loop(lengths, max_len=None):
    lengths = [int(n) for n in lengths]
    S = max(lengths) if max_len is None else max_len
    out = np.zeros((len(lengths), S), dtype=bool)
    for b, n in enumerate(lengths):
        out[b, :n] = True
    return out


def padding_cases() -> list[Case]:
    """The hidden cases of ``_padding_cases`` in the checks."""
    return [Case("lengths [1]", ([1],)),
            Case("lengths [5, 5, 2, 1], max_len=5", ([5, 5, 2, 1],), {"max_len": 5}),
            Case("lengths [3, 1] as a numpy array, max_len=6", (np.array([3, 1]),), {"max_len": 6}),
            Case("lengths [7, 2, 4]", ([7, 2, 4],))]


PADDING_MASK = declare("02_masking", "padding_mask", check_padding_mask,
            misconceptions=WRONG_PADDING,
            promises=(
                Breaks("S = max_len when given", wrong_answer(WRONG_PADDING, "max_len ignored"), "max_len ignored"),
            ),
            right=(Right(_right_padding_mask), Right(_right_padding_mask_vectorised),
                   Right(_right_padding_mask_loop)))


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
          "the padding mask must hide KEYS (the last axis, columns): broadcast it with a new axis for the queries, "
          "(B, 1, S), not a new last axis (B, S, 1), which hides query rows instead."),
    Wrong("mask inverted", lambda attn_mask=None, key_padding=None: _combine(attn_mask, key_padding, "inverted"),
          _INVERTED),
]


def _right_combine_masks(attn_mask=None, key_padding=None):
    if key_padding is None:
        return attn_mask
    pad = np.expand_dims(key_padding, 1)
    return pad if attn_mask is None else np.logical_and(attn_mask, pad)


def _right_combine_masks_broadcast(attn_mask=None, key_padding=None):
    if attn_mask is None and key_padding is None:
        return None
    if key_padding is None:
        return attn_mask
    pad = key_padding[:, None, :]
    return pad if attn_mask is None else (attn_mask & pad)


def _right_combine_masks_einsum_free(attn_mask=None, key_padding=None):
    if key_padding is None:
        return None if attn_mask is None else np.array(attn_mask, dtype=bool)
    pad = np.asarray(key_padding, dtype=bool).reshape(key_padding.shape[0], 1, key_padding.shape[1])
    if attn_mask is None:
        return pad
    return np.minimum(np.asarray(attn_mask, dtype=bool), pad)


def _breaks_combine_masks_never_none(attn_mask=None, key_padding=None):
    if attn_mask is not None or key_padding is not None:
        return _right_combine_masks(attn_mask, key_padding)
    return np.ones((1, 1, 1), bool)


def combine_cases() -> list[Case]:
    """The hidden cases of ``_combine_cases`` in the checks."""
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


COMBINE_MASKS = declare("02_masking", "combine_masks", check_combine_masks,
            misconceptions=WRONG_COMBINE,
            promises=(
                Breaks("with neither mask, None", _breaks_combine_masks_never_none, "combine_masks"),
            ),
            right=(Right(_right_combine_masks), Right(_right_combine_masks_broadcast),
                   Right(_right_combine_masks_einsum_free)))


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


def _right_to_additive(mask, dtype=None):
    if isinstance(mask, torch.Tensor):
        return torch.zeros(mask.shape, dtype=dtype or torch.get_default_dtype()).masked_fill(~mask, -math.inf)
    out = np.full(np.shape(mask), -np.inf, dtype=dtype or np.float64)
    out[np.asarray(mask)] = 0.0
    return out


def _right_to_additive_log(mask, dtype=None):
    """log(1) = 0, log(0) = -inf."""
    if isinstance(mask, torch.Tensor):
        return torch.log(mask.to(dtype or torch.get_default_dtype()))
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(mask, dtype=dtype or np.float64))


def _right_to_additive_where(mask, dtype=None):
    if isinstance(mask, torch.Tensor):
        dt = dtype or torch.get_default_dtype()
        return torch.where(mask, torch.tensor(0.0, dtype=dt), torch.tensor(-math.inf, dtype=dt))
    return np.where(mask, 0.0, float("-inf")).astype(dtype or float)


def _breaks_to_additive_numpy_out(mask, dtype=None):
    return _right_to_additive(np.asarray(mask), dtype if not isinstance(dtype, torch.dtype) else None)


def additive_cases() -> list[Case]:
    """The hidden cases of ``_additive_cases`` in the checks."""
    rng = seeded(2004)
    return [Case("a random (2, 3, 4) mask", (rng.random((2, 3, 4)) > 0.5,)),
            Case("causal_mask(5) with dtype=float32", (np.tri(5, dtype=bool),), {"dtype": np.float32}),
            Case("a padding mask, lengths [1, 3]", ((np.arange(3) < np.array([1, 3])[:, None]),)),
            Case("a torch bool mask (2, 3)", (torch.from_numpy(np.tri(2, 3, 1, dtype=bool)),)),
            Case("a torch bool mask (3, 3) with dtype=torch.float16", (torch.from_numpy(np.tri(3, dtype=bool)),),
                 {"dtype": torch.float16})]


TO_ADDITIVE = declare("02_masking", "to_additive", check_to_additive,
            misconceptions=WRONG_ADDITIVE,
            promises=(
                Breaks("tensors in, torch's default dtype out", _breaks_to_additive_numpy_out, "torch"),
                Breaks("-inf, not a large negative", wrong_answer(WRONG_ADDITIVE, "large negative instead of -inf"),
                       "large negative instead of -inf"),
            ),
            right=(Right(_right_to_additive), Right(_right_to_additive_log), Right(_right_to_additive_where)))


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


def _right_masked_softmax_vectorised(scores, mask=None):
    scores = np.asarray(scores, dtype=float)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _right_masked_softmax_logsumexp(scores, mask=None):
    """exp(s - logsumexp(s)) over the visible keys (max-shifted); a row with no visible key gets zeros."""
    s = np.asarray(scores, dtype=np.float64)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = safe + np.log(np.exp(s - safe).sum(-1, keepdims=True))
        out = np.exp(s - lse)
    return np.where(np.isfinite(lse), out, 0.0)


def _right_masked_softmax(scores, mask=None):
    scores = np.asarray(scores, dtype=float)
    mask = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    out = np.zeros_like(scores)
    for idx in np.ndindex(scores.shape[:-1]):
        keep = mask[idx]
        if keep.any():
            e = np.exp(scores[idx][keep] - scores[idx][keep].max())
            out[idx][keep] = e / e.sum()
    return out


def _breaks_masked_softmax_in_place(scores, mask=None):
    scores[...] = np.where(True if mask is None else mask, scores, -np.inf)
    return _right_masked_softmax(scores, mask)


def _breaks_masked_softmax_float32(scores, mask=None):
    return _right_masked_softmax_vectorised(np.asarray(scores, dtype=np.float32), mask).astype(np.float32)


def masked_softmax_cases() -> list[Case]:
    """The hidden cases of ``check_masked_softmax``."""
    rng = seeded(2005)
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


MASKED_SOFTMAX = declare("02_masking", "masked_softmax", check_masked_softmax,
            misconceptions=WRONG_MASKED_SOFTMAX,
            promises=(
                Breaks("a fully masked row gives zeros, not NaN",
                       wrong_answer(WRONG_MASKED_SOFTMAX, "NaN on a fully masked row"), "NaN on a fully masked row"),
                Breaks("stable for large scores", wrong_answer(WRONG_MASKED_SOFTMAX, "no max shift (overflow)"),
                       "no max shift"),
                Breaks("inputs unchanged", _breaks_masked_softmax_in_place, "input modified in place"),
                Breaks("Numpy; float64", _breaks_masked_softmax_float32, "promises a numpy array of dtype float64"),
            ),
            right=(Right(_right_masked_softmax), Right(_right_masked_softmax_vectorised),
                   Right(_right_masked_softmax_logsumexp)))


# ---------------------------------------------------------------- the exercises, in the lesson's order (course_lib/checks/exercise.py)
EXERCISES = (CAUSAL_MASK, PADDING_MASK, COMBINE_MASKS, TO_ADDITIVE, MASKED_SOFTMAX)
