"""Attention masks: causal (look-ahead), padding, their combination, and conversions.

THE MASK CONVENTION OF THIS COURSE (stated here once, used everywhere):
    a mask is a BOOLEAN array, ``True`` = this query MAY attend to this key.
    Its last two axes are (T queries, S keys) and it broadcasts to the score shape
    (..., T, S); with several heads that is (B, H, T, S), so a per-sequence mask has
    shape (B, 1, T, S) or (B, 1, 1, S), never (B, T, S) (that would line B up with H).
    A query whose keys are all masked gets zero weights and a zero output, not NaN
    (``course_lib.attention.softmax`` / ``softmax_torch`` do this).

Three conventions a student meets, and the converters between them:

* bool, True = may attend (OURS). Also what ``F.scaled_dot_product_attention``
  expects for a boolean ``attn_mask``: no conversion needed.
* additive float, 0 = attend, -inf = masked, added to the scores before the softmax.
  ``F.scaled_dot_product_attention`` with a float mask, many papers.
  :func:`to_additive` / :func:`from_additive`.
* bool, True = MASKED (inverted). ``nn.MultiheadAttention``'s ``attn_mask`` and
  ``key_padding_mask`` (and ``nn.Transformer*``'s ``src_mask`` / ``*_key_padding_mask``).
  :func:`to_mha_attn_mask`, :func:`to_mha_key_padding_mask` / :func:`from_mha_masks`.

Covers
    * :func:`causal_mask` (look-ahead), with S >= T keys aligned to the END: query i is
      the token at position S - T + i, as when the first S - T keys are earlier tokens
      (a cache). ``F.scaled_dot_product_attention(is_causal=True)`` aligns to the START
      instead (query i sees keys 0..i); the two agree only when T == S.
    * :func:`padding_mask` from lengths, :func:`padding_mask_from_ids` from token ids and a pad id,
    * :func:`combine_masks` (logical AND of a causal/attention mask and a key padding mask),
    * :func:`masked_softmax`: softmax over keys with masked keys at exactly zero weight,
    * the converters listed above.

Does NOT cover
    * attention biases that are not masks (ALiBi, relative positions: ``course_lib.positional``),
    * sliding-window / block-sparse patterns, query padding (rows of padded queries are
      computed and simply ignored by the loss).

Constructors return numpy arrays (wrap with ``torch.as_tensor(m, device=...)`` to train);
``padding_mask_from_ids``, ``combine_masks`` and the converters return the kind
(numpy or torch) they are given.
"""
from __future__ import annotations

import numpy as np
import torch


from course_lib import solutions

_solution = solutions.of("course_lib.masking")  # the exercises' bodies: course_lib/solutions/masking.py

__all__ = [
    "causal_mask",
    "padding_mask",
    "padding_mask_from_ids",
    "combine_masks",
    "masked_softmax",
    "to_additive",
    "from_additive",
    "to_mha_key_padding_mask",
    "to_mha_attn_mask",
    "from_mha_masks",
]


def _is_torch(x) -> bool:
    return isinstance(x, torch.Tensor)


def _require_bool(mask, name: str = "mask") -> None:
    dtype = getattr(mask, "dtype", None)
    if dtype not in (np.bool_, torch.bool):
        raise ValueError(
            f"{name} must be boolean (True = may attend), got dtype {dtype}; convert an additive 0/-inf "
            "mask with from_additive, an nn.MultiheadAttention mask (True = masked) with from_mha_masks"
        )


def _positive_int(n, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name} must be a positive integer, got {n!r}")
    return int(n)


def causal_mask(T: int, S: int | None = None) -> np.ndarray:
    """Look-ahead mask (T, S): query i may attend to keys j <= i + (S - T).

    With S = T (default) this is the lower triangle including the diagonal: a token
    sees itself and the past, never the future. With S > T the queries are the LAST
    T of the S positions (keys aligned to the end), e.g. generating 2 new tokens after
    a prompt of 3: T=2, S=5, and the first new token sees keys 0..3.

    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4).astype(int)
    array([[1, 1, 1, 0],
           [1, 1, 1, 1]])
    """
    return _solution.causal_mask(T, S)


def padding_mask(lengths, max_len: int | None = None) -> np.ndarray:
    """Key padding mask (B, S) from sequence lengths: True at real tokens, False at padding.

    S = ``max_len`` if given, else ``max(lengths)``. Sequences are padded at the end.

    >>> padding_mask([3, 1], max_len=4).astype(int)
    array([[1, 1, 1, 0],
           [1, 0, 0, 0]])
    """
    return _solution.padding_mask(lengths, max_len)


def padding_mask_from_ids(ids, pad_id: int):
    """Key padding mask (B, S) from token ids: True where ``ids != pad_id``.

    Returns a torch tensor for a torch input, a numpy array otherwise.

    >>> padding_mask_from_ids(np.array([[5, 7, 0], [9, 0, 0]]), pad_id=0).astype(int)
    array([[1, 1, 0],
           [1, 0, 0]])
    """
    if not _is_torch(ids):
        ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"ids must have shape (B, S), got {tuple(ids.shape)}")
    if isinstance(pad_id, bool) or not isinstance(pad_id, (int, np.integer)):
        raise ValueError(f"pad_id must be an integer token id, got {pad_id!r}")
    return ids != pad_id  # (B, S)


def combine_masks(attn_mask=None, key_padding=None):
    """AND of an attention mask (T, S) or (B, T, S) and a key padding mask (B, S) -> (B, T, S).

    Query t of sequence b may attend to key s only if both masks allow it. The
    padding mask hides KEYS (columns): it is broadcast over the query axis as (B, 1, S).
    With only one of the two given, returns that one in a broadcastable shape
    ((T, S) / (B, T, S), or (B, 1, S)); with neither, None. For multi-head attention
    add the head axis: ``combine_masks(c, p)[:, None]`` has shape (B, 1, T, S).

    >>> combine_masks(causal_mask(3), padding_mask([3, 2]))[1].astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 0]])
    """
    return _solution.combine_masks(attn_mask, key_padding)


def masked_softmax(scores, mask=None) -> np.ndarray:
    """Softmax over the last axis (keys) in which masked keys get weight exactly 0.

    Masked scores are replaced by -inf BEFORE the softmax, so the remaining weights
    of a row still sum to 1. A row with every key masked gets all zeros (not NaN,
    and not the uniform 1/S that a -1e9 fill gives). Stable for large scores, as
    lesson 01's softmax: each row's largest visible score is subtracted before exp
    (scores near 1000 give finite weights). Numpy; float64. The inputs are left unchanged.

    Args:
        scores: (..., T, S); mask: bool broadcastable to it, True = may attend.

    >>> masked_softmax(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]),
    ...                np.array([[True, True, False], [False, False, False]])).round(4)
    array([[0.2689, 0.7311, 0.    ],
           [0.    , 0.    , 0.    ]])
    """
    return _solution.masked_softmax(scores, mask)


def to_additive(mask, dtype=None):
    """Boolean mask (True = may attend) -> additive float mask: 0 where allowed, -inf where masked
    (exactly -inf, not a large negative number such as -1e9).

    Adding it to the scores before the softmax masks exactly (exp(-inf) = 0), in any
    float dtype. ``dtype`` defaults to float64 for numpy and torch's default dtype for
    tensors; SDPA wants the query's dtype.

    >>> to_additive(np.array([True, False]))
    array([  0., -inf])
    """
    return _solution.to_additive(mask, dtype)


def from_additive(mask):
    """Additive 0/-inf float mask -> boolean mask (True = may attend, i.e. where the value is 0).

    Raises ValueError for any other value (e.g. a -1e9 fill or a positional bias):
    those are not masks and have no boolean equivalent.

    >>> from_additive(np.array([0.0, -np.inf]))
    array([ True, False])
    """
    is_t = _is_torch(mask)
    if not is_t:
        mask = np.asarray(mask)
    if (mask.dtype == torch.bool) if is_t else (mask.dtype == np.bool_):
        raise ValueError("from_additive expects a float 0/-inf mask, got a boolean mask (already converted?)")
    if is_t:
        keep, blocked = mask == 0, torch.isneginf(mask)
        ok = bool((keep | blocked).all())
    else:
        keep, blocked = mask == 0, np.isneginf(mask)
        ok = bool((keep | blocked).all())
    if not ok:
        raise ValueError("additive mask must contain only 0 and -inf; finite non-zero values (such as a "
                         "-1e9 fill or an attention bias) have no boolean equivalent")
    return keep


def to_mha_key_padding_mask(key_padding):
    """Our (B, S) key padding mask -> ``nn.MultiheadAttention``'s ``key_padding_mask`` (True = PADDING)."""
    _require_bool(key_padding, "key_padding")
    if key_padding.ndim != 2:
        raise ValueError(f"key_padding must have shape (B, S), got {tuple(key_padding.shape)}")
    return ~key_padding  # (B, S), True = ignore this key


def to_mha_attn_mask(mask, num_heads: int | None = None):
    """Our mask -> ``nn.MultiheadAttention``'s boolean ``attn_mask`` (True = NOT allowed).

    (T, S) -> (T, S). A 4-D mask broadcastable to (B, H, T, S) (e.g. (B, 1, T, S)) ->
    (B * H, T, S), the layout nn.MultiheadAttention wants for per-sequence masks
    (row b * H + h is sequence b, head h); this needs ``num_heads``. 3-D masks are
    refused: (B, T, S) would line B up with the head axis; add it with ``mask[:, None]``.
    """
    _require_bool(mask)
    if mask.ndim == 2:
        return ~mask  # (T, S)
    if mask.ndim != 4:
        raise ValueError(f"mask must have shape (T, S) or 4 dims broadcastable to (B, H, T, S), got "
                         f"{tuple(mask.shape)}; a (B, T, S) mask needs its head axis: mask[:, None]")
    H = _positive_int(num_heads, "num_heads (needed for a 4-D mask)")
    B, _, T, S = mask.shape
    if mask.shape[1] not in (1, H):
        raise ValueError(f"mask {tuple(mask.shape)}: axis 1 is the head axis and must be 1 or num_heads={H}")
    if _is_torch(mask):
        full = mask.expand(B, H, T, S)
    else:
        full = np.broadcast_to(mask, (B, H, T, S))
    return ~full.reshape(B * H, T, S)  # (B*H, T, S)


def _mha_to_ours(m):
    """One nn.MultiheadAttention mask (bool True = masked, or additive float) -> ours."""
    if m.dtype in (torch.bool, np.bool_):
        return ~m
    return from_additive(m)


def from_mha_masks(attn_mask=None, key_padding_mask=None, num_heads: int | None = None):
    """``nn.MultiheadAttention``'s (attn_mask, key_padding_mask) -> one mask in our convention.

    Each may be boolean (True = masked) or an additive 0/-inf float mask, as
    nn.MultiheadAttention accepts. attn_mask (T, S) stays (T, S) (or becomes (1, 1, T, S)
    next to a padding mask); attn_mask (B * H, T, S) becomes (B, H, T, S) and needs
    ``num_heads``; key_padding_mask (B, S) becomes (B, 1, 1, S). The result broadcasts
    to (B, H, T, S) and can be passed to ``MultiHeadAttention(..., mask=...)``.
    Returns None when both are None.
    """
    ours = None
    if attn_mask is not None:
        ours = _mha_to_ours(attn_mask)
        if ours.ndim == 3:
            H = _positive_int(num_heads, "num_heads (needed for a 3-D (B * H, T, S) attn_mask)")
            BH, T, S = ours.shape
            if BH % H:
                raise ValueError(f"attn_mask {tuple(ours.shape)}: first axis must be B * num_heads "
                                 f"(num_heads={H})")
            ours = ours.reshape(BH // H, H, T, S)  # (B, H, T, S)
        elif ours.ndim != 2:
            raise ValueError(f"attn_mask must have shape (T, S) or (B * H, T, S), got {tuple(ours.shape)}")
    if key_padding_mask is None:
        return ours
    pad = _mha_to_ours(key_padding_mask)
    if pad.ndim != 2:
        raise ValueError(f"key_padding_mask must have shape (B, S), got {tuple(pad.shape)}")
    pad = pad[:, None, None, :]  # (B, 1, 1, S)
    return pad if ours is None else ours & pad  # broadcastable to (B, H, T, S)
