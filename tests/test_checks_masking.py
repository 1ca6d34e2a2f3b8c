"""course_lib.checks.masking: every known-wrong answer is caught and NAMED, a correct independent
answer passes (visible and hidden), calling the reference is an IntegrityError."""
from __future__ import annotations


import math

import numpy as np
import pytest
import torch

from course_lib import masking
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import masking as C
from named import assert_named_alone


# ---------------------------------------------------------------- independent correct answers
def causal_mask(T, S=None):
    S = T if S is None else S
    out = np.zeros((T, S), dtype=bool)
    for i in range(T):
        out[i, : i + S - T + 1] = True
    return out


def padding_mask(lengths, max_len=None):
    lengths = list(np.asarray(lengths))
    S = max(lengths) if max_len is None else max_len
    return np.array([[j < n for j in range(S)] for n in lengths], dtype=bool)


def combine_masks(attn_mask=None, key_padding=None):
    if key_padding is None:
        return attn_mask
    pad = np.expand_dims(key_padding, 1)
    return pad if attn_mask is None else np.logical_and(attn_mask, pad)


def to_additive(mask, dtype=None):
    if isinstance(mask, torch.Tensor):
        return torch.zeros(mask.shape, dtype=dtype or torch.get_default_dtype()).masked_fill(~mask, -math.inf)
    out = np.full(np.shape(mask), -np.inf, dtype=dtype or np.float64)
    out[np.asarray(mask)] = 0.0
    return out


def to_additive_log(mask, dtype=None):
    """log(1) = 0, log(0) = -inf."""
    if isinstance(mask, torch.Tensor):
        return torch.log(mask.to(dtype or torch.get_default_dtype()))
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(mask, dtype=dtype or np.float64))


def to_additive_where(mask, dtype=None):
    if isinstance(mask, torch.Tensor):
        dt = dtype or torch.get_default_dtype()
        return torch.where(mask, torch.tensor(0.0, dtype=dt), torch.tensor(-math.inf, dtype=dt))
    return np.where(mask, 0.0, float("-inf")).astype(dtype or float)


def causal_mask_tril(T, S=None):
    S = T if S is None else S
    return np.tril(np.ones((T, S), dtype=bool), k=S - T)


def causal_mask_torch_inside(T, S=None):
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool).tril(S - T).numpy()


def padding_mask_vectorised(lengths, max_len=None):
    lengths = np.asarray(lengths)
    S = int(lengths.max()) if max_len is None else max_len
    return np.arange(S) < lengths[:, None]


def padding_mask_loop(lengths, max_len=None):
    lengths = [int(n) for n in lengths]
    S = max(lengths) if max_len is None else max_len
    out = np.zeros((len(lengths), S), dtype=bool)
    for b, n in enumerate(lengths):
        out[b, :n] = True
    return out


def combine_masks_broadcast(attn_mask=None, key_padding=None):
    if attn_mask is None and key_padding is None:
        return None
    if key_padding is None:
        return attn_mask
    pad = key_padding[:, None, :]
    return pad if attn_mask is None else (attn_mask & pad)


def combine_masks_einsum_free(attn_mask=None, key_padding=None):
    if key_padding is None:
        return None if attn_mask is None else np.array(attn_mask, dtype=bool)
    pad = np.asarray(key_padding, dtype=bool).reshape(key_padding.shape[0], 1, key_padding.shape[1])
    if attn_mask is None:
        return pad
    return np.minimum(np.asarray(attn_mask, dtype=bool), pad)


def masked_softmax_vectorised(scores, mask=None):
    scores = np.asarray(scores, dtype=float)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def masked_softmax_logsumexp(scores, mask=None):
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


def masked_softmax_float32(scores, mask=None):
    return masked_softmax_vectorised(np.asarray(scores, dtype=np.float32), mask).astype(np.float32)


def masked_softmax(scores, mask=None):
    scores = np.asarray(scores, dtype=float)
    mask = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    out = np.zeros_like(scores)
    for idx in np.ndindex(scores.shape[:-1]):
        keep = mask[idx]
        if keep.any():
            e = np.exp(scores[idx][keep] - scores[idx][keep].max())
            out[idx][keep] = e / e.sum()
    return out


CORRECT = [
    (C.check_causal_mask, causal_mask),
    (C.check_padding_mask, padding_mask),
    (C.check_combine_masks, combine_masks),
    (C.check_to_additive, to_additive),
    (C.check_masked_softmax, masked_softmax),
    (C.check_causal_mask, causal_mask_tril), (C.check_causal_mask, causal_mask_torch_inside),
    (C.check_padding_mask, padding_mask_vectorised), (C.check_padding_mask, padding_mask_loop),
    (C.check_combine_masks, combine_masks_broadcast), (C.check_combine_masks, combine_masks_einsum_free),
    (C.check_to_additive, to_additive_log), (C.check_to_additive, to_additive_where),
    (C.check_masked_softmax, masked_softmax_vectorised), (C.check_masked_softmax, masked_softmax_logsumexp),
    # masked_softmax_float32 breaks the docstring's float64 (test_promises_02)
]
WRONGS = [(C.check_causal_mask, w) for w in C.WRONG_CAUSAL] + \
         [(C.check_padding_mask, w) for w in C.WRONG_PADDING] + \
         [(C.check_combine_masks, w) for w in C.WRONG_COMBINE] + \
         [(C.check_to_additive, w) for w in C.WRONG_ADDITIVE] + \
         [(C.check_masked_softmax, w) for w in C.WRONG_MASKED_SOFTMAX]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,fn", CORRECT, ids=[f.__name__ for _, f in CORRECT])
def test_correct_independent_answer_passes(check, fn, hidden):
    check(fn, hidden=hidden)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,wrong", WRONGS, ids=[f"{c.__name__}-{w.name}" for c, w in WRONGS])
def test_each_misconception_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


def test_required_misconceptions_exist():
    names = {w.name for _, w in WRONGS}
    assert {"mask inverted", "mask after softmax", "NaN on a fully masked row",
            "large negative instead of -inf"} <= names


@pytest.mark.parametrize("check,name", [(c, fn.__name__) for c, fn in CORRECT[:5]])
def test_calling_the_reference_is_an_integrity_error(check, name):
    ref = getattr(masking, name)

    def cheat(*args, **kwargs):
        return ref(*args, **kwargs)

    with pytest.raises(IntegrityError, match="reference"):
        check(cheat)
    with pytest.raises(IntegrityError):
        check(ref)


def test_masked_softmax_may_not_call_the_lesson01_softmax():
    from course_lib.attention import softmax as lesson01_softmax

    def uses_reference_softmax(scores, mask=None):
        scores = np.asarray(scores, dtype=float)
        return lesson01_softmax(scores if mask is None else np.where(mask, scores, -np.inf))

    with pytest.raises(IntegrityError):
        C.check_masked_softmax(uses_reference_softmax)


@pytest.mark.parametrize("check", [c for c, _ in CORRECT])
def test_stub_is_not_implemented(check):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet):
        check(stub)


def test_integer_or_float_masks_are_refused_with_a_reason():
    with pytest.raises(AssertionError, match="BOOLEAN"):
        C.check_causal_mask(lambda T, S=None: np.tril(np.ones((T, T if S is None else S)), (S or T) - T))
    with pytest.raises(AssertionError, match="BOOLEAN"):
        C.check_padding_mask(lambda lengths, max_len=None: padding_mask(lengths, max_len).astype(int))


def test_to_additive_wrong_dtype_is_reported():
    with pytest.raises(AssertionError, match="dtype"):
        C.check_to_additive(lambda mask, dtype=None: to_additive(mask).astype(np.float32), hidden=False)


def test_masked_softmax_unnamed_error_reports_the_difference():
    def off(scores, mask=None):
        return masked_softmax(scores, mask) * 0.9

    with pytest.raises(AssertionError, match="differ from the reference"):
        C.check_masked_softmax(off)


def test_crashing_student_reports_the_exception():
    def crash(T, S=None):
        raise IndexError("boom")

    with pytest.raises(AssertionError, match="IndexError: boom"):
        C.check_causal_mask(crash)
