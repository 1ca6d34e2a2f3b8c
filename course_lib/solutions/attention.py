"""The reference solutions of ``course_lib.attention`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import math

import numpy as np
import torch

from course_lib.attention import check_attention_shapes


def softmax(x, axis: int = -1) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # all -inf slice: keep exp(-inf) = 0
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def scaled_dot_product_attention(q, k, v, mask=None):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    mask = None if mask is None else np.asarray(mask)
    if mask is not None and mask.dtype != np.bool_:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "convert an additive 0/-inf mask with course_lib.masking.to_bool"
        )
    check_attention_shapes(q.shape, k.shape, v.shape, None if mask is None else mask.shape)
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)  # (..., T, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (..., T, S)
    return weights @ v, weights  # (..., T, d_v), (..., T, S)


def softmax_torch(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights


def scaled_dot_product_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                       mask: torch.Tensor | None = None):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if mask is not None and (not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool):
        raise ValueError(
            f"mask must be a bool tensor (True = may attend), got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    check_attention_shapes(q.shape, k.shape, v.shape, None if mask is None else mask.shape)
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T, S)
    if mask is not None:
        mask = mask.expand_as(scores) if mask.shape != scores.shape else mask
    weights = softmax_torch(scores, mask)  # (..., T, S)
    return weights @ v, weights  # (..., T, d_v), (..., T, S)
