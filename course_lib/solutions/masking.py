"""The reference solutions of ``course_lib.masking`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import numpy as np
import torch

from course_lib.attention import softmax
from course_lib.masking import _is_torch, _positive_int, _require_bool


def causal_mask(T: int, S: int | None = None) -> np.ndarray:
    T = _positive_int(T, "T (number of queries)")
    S = T if S is None else _positive_int(S, "S (number of keys)")
    if S < T:
        raise ValueError(f"causal_mask needs at least as many keys as queries (S >= T), got T={T}, S={S}: "
                         "queries are aligned to the end of the key sequence")
    i = np.arange(T)[:, None]  # (T, 1) query positions
    j = np.arange(S)[None, :]  # (1, S) key positions
    return j <= i + (S - T)  # (T, S)


def padding_mask(lengths, max_len: int | None = None) -> np.ndarray:
    lengths = lengths.detach().cpu().numpy() if _is_torch(lengths) else np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0 or lengths.dtype.kind not in "iu":
        raise ValueError(f"lengths must be a non-empty 1-D sequence of integers (one per sequence), "
                         f"got {lengths!r}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    S = int(lengths.max()) if max_len is None else _positive_int(max_len, "max_len")
    if lengths.max() > S:
        raise ValueError(f"max_len={S} is shorter than the longest sequence ({int(lengths.max())})")
    return np.arange(S)[None, :] < lengths[:, None]  # (B, S)


def combine_masks(attn_mask=None, key_padding=None):
    if attn_mask is not None:
        _require_bool(attn_mask, "attn_mask")
        if attn_mask.ndim not in (2, 3):
            raise ValueError(f"attn_mask must have shape (T, S) or (B, T, S), got {tuple(attn_mask.shape)}")
    if key_padding is None:
        return attn_mask
    _require_bool(key_padding, "key_padding")
    if key_padding.ndim != 2:
        raise ValueError(f"key_padding must have shape (B, S), got {tuple(key_padding.shape)}")
    pad = key_padding[:, None, :]  # (B, 1, S): hide keys, for every query
    if attn_mask is None:
        return pad
    if attn_mask.shape[-1] != key_padding.shape[-1]:
        raise ValueError(f"attn_mask {tuple(attn_mask.shape)} and key_padding {tuple(key_padding.shape)} "
                         "disagree on the number of keys S (last axis)")
    if attn_mask.ndim == 3 and attn_mask.shape[0] not in (1, key_padding.shape[0]):
        raise ValueError(f"attn_mask {tuple(attn_mask.shape)} and key_padding {tuple(key_padding.shape)} "
                         "disagree on the batch size B")
    if _is_torch(attn_mask) != _is_torch(key_padding):
        raise ValueError("attn_mask and key_padding must both be numpy arrays or both torch tensors")
    return attn_mask & pad  # (B, T, S)


def masked_softmax(scores, mask=None) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if mask is None:
        return softmax(scores, axis=-1)
    mask = np.asarray(mask)
    _require_bool(mask)
    try:
        np.broadcast_shapes(mask.shape, scores.shape)
    except ValueError:
        raise ValueError(f"mask {mask.shape} does not broadcast to the scores {scores.shape}") from None
    return softmax(np.where(mask, scores, -np.inf), axis=-1)  # (..., T, S)


def to_additive(mask, dtype=None):
    _require_bool(mask)
    if _is_torch(mask):
        out = torch.zeros(mask.shape, dtype=dtype or torch.get_default_dtype(), device=mask.device)
        return out.masked_fill(~mask, float("-inf"))
    return np.where(mask, 0.0, -np.inf).astype(dtype or np.float64)
