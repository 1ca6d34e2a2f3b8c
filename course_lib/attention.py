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

import numpy as np
import torch

from course_lib import solutions

_solution = solutions.of("course_lib.attention")  # the exercises' bodies: course_lib/solutions/attention.py

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
    return _solution.softmax(x, axis)


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
    return _solution.scaled_dot_product_attention(q, k, v, mask)


def softmax_torch(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dim with an optional boolean mask (True = may attend).

    Fully masked rows give zeros, not NaN (torch.softmax of all -inf is NaN).
    """
    return _solution.softmax_torch(scores, mask)


def scaled_dot_product_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                       mask: torch.Tensor | None = None):
    """Batched attention in torch over any leading dims; returns (out, weights).

    Shapes as in :func:`scaled_dot_product_attention`; ``mask`` is a bool tensor
    broadcastable to (..., T, S), True = may attend. Differentiable.
    Equals ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` on rows
    with at least one visible key.
    """
    return _solution.scaled_dot_product_attention_torch(q, k, v, mask)
