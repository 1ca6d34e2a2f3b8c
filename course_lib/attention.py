"""Scaled dot-product attention, the heart of every lesson that follows.

Covers
    * ``softmax``: a numerically stable softmax in numpy (subtract the row max).
    * ``scaled_dot_product_attention``: numpy version for teaching, any leading dims.
    * ``scaled_dot_product_attention_torch``: the same in torch, batched over any
      leading dims, differentiable, equal to ``torch.nn.functional.scaled_dot_product_attention``.

Does NOT cover
    * dropout on the attention weights (lesson 05 adds it in the blocks),
    * multiple heads (``course_lib.multihead``), mask construction (``course_lib.masking``),
    * memory-efficient kernels (``course_lib.efficient``).

Mask convention (the only one in this course, see ``course_lib.masking``):
a boolean array, ``True`` = this query MAY attend to this key. It must broadcast
to the score shape ``(..., T, S)``. A query row whose keys are all masked gets
all-zero weights and a zero output, never NaN.

Shapes: q (..., T, d_k), k (..., S, d_k), v (..., S, d_v) -> out (..., T, d_v),
weights (..., T, S).
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "softmax_torch",
    "scaled_dot_product_attention_torch",
    "check_attention_shapes",
]


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    Subtracting the maximum first leaves the result unchanged (the factor
    exp(-max) cancels) and keeps ``exp`` from overflowing on scores like 1000.
    Entries equal to ``-inf`` get weight 0; a slice that is entirely ``-inf``
    (a fully masked row) gets all zeros instead of NaN. The answer is a float array in at least
    float32 precision (never float16).

    >>> softmax(np.array([1.0, 2.0, 3.0])).round(4)
    array([0.09  , 0.2447, 0.6652])
    >>> softmax(np.array([1000.0, 1000.0]))
    array([0.5, 0.5])
    """
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # all -inf slice: keep exp(-inf) = 0
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def check_attention_shapes(q_shape, k_shape, v_shape, mask_shape=None) -> None:
    """Raise ValueError naming both shapes when q, k, v (and mask) do not fit together."""
    if len(q_shape) < 2 or len(k_shape) < 2 or len(v_shape) < 2:
        raise ValueError(
            f"q, k and v need at least 2 dims (..., length, features); got q {tuple(q_shape)}, "
            f"k {tuple(k_shape)}, v {tuple(v_shape)}"
        )
    if q_shape[-1] != k_shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k: q {tuple(q_shape)} has d_k={q_shape[-1]}, "
            f"k {tuple(k_shape)} has d_k={k_shape[-1]}"
        )
    if k_shape[-2] != v_shape[-2]:
        raise ValueError(
            f"k and v must have the same length S (one value per key): k {tuple(k_shape)} has "
            f"S={k_shape[-2]}, v {tuple(v_shape)} has S={v_shape[-2]}"
        )
    try:
        score_batch = np.broadcast_shapes(tuple(q_shape[:-2]), tuple(k_shape[:-2]))
    except ValueError:
        raise ValueError(
            f"leading (batch) dims of q {tuple(q_shape)} and k {tuple(k_shape)} do not broadcast"
        ) from None
    score_shape = tuple(score_batch) + (q_shape[-2], k_shape[-2])
    if mask_shape is not None:
        try:
            out = np.broadcast_shapes(tuple(mask_shape), score_shape)
        except ValueError:
            out = None
        if out != score_shape:
            raise ValueError(
                f"mask {tuple(mask_shape)} does not broadcast to the score shape {score_shape} "
                f"(..., T, S) of q {tuple(q_shape)} and k {tuple(k_shape)}"
            )


def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, in numpy.

    Args:
        q: queries, shape (..., T, d_k)
        k: keys, shape (..., S, d_k)
        v: values, shape (..., S, d_v)
        mask: optional boolean array broadcastable to (..., T, S); True = may attend.

    Returns:
        (out, weights): out (..., T, d_v), weights (..., T, S) whose rows sum to 1
        (or are all 0 for a fully masked row).

    Example: one query that matches the second of two keys much better
    >>> q = np.array([[0.0, 10.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[1.0], [2.0]])
    >>> out, w = scaled_dot_product_attention(q, k, v)
    >>> w.round(4), out.round(4)
    (array([[8.e-04, 9.992e-01]]), array([[1.9992]]))
    """
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
    """Softmax over the last dim with an optional boolean mask (True = may attend).

    Fully masked rows give zeros, not NaN (torch.softmax of all -inf is NaN).
    """
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights


def scaled_dot_product_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                       mask: torch.Tensor | None = None):
    """Batched attention in torch over any leading dims; returns (out, weights).

    Shapes as in :func:`scaled_dot_product_attention`; ``mask`` is a bool tensor
    broadcastable to (..., T, S), True = may attend. Differentiable.
    Equals ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` on rows
    with at least one visible key.
    """
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
