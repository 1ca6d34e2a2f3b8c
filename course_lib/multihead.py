"""Multi-head attention: split the features into heads, attend per head, merge back.

Covers
    * ``split_heads`` / ``merge_heads``: (B, T, D) <-> (B, H, T, D/H), numpy or torch.
      Heads are cut along the FEATURE axis: head h owns features h*d_head .. (h+1)*d_head - 1
      of every token, exactly as ``torch.nn.MultiheadAttention`` does.
    * ``head_weights``: the per-head slices of one big (D, D) projection matrix, to show
      that "one big linear map, then split" equals "H small per-head maps".
    * ``multi_head_attention``: the teaching version in numpy, a function of explicit
      weight matrices, in the paper's orientation ``Q = X @ W_q + b_q`` with W of shape
      (D_in, D_out) (the transpose of what ``nn.Linear`` stores).
    * ``numpy_params_from_torch``: an ``nn.MultiheadAttention``'s weights in that orientation.
    * ``MultiHeadAttention``: the torch ``nn.Module`` used to train (lesson 05 builds its
      encoder and decoder layers from it). ``MultiHeadAttention.from_torch(m)`` copies the
      weights of an ``nn.MultiheadAttention``; with the same weights the two agree to 1e-10
      in float64 (see tests/test_multihead.py).

Does NOT cover
    * different key/value feature sizes (``kdim``/``vdim`` of nn.MultiheadAttention),
      ``add_bias_kv`` and ``add_zero_attn``: ``from_torch`` refuses such modules,
    * grouped-query / multi-query attention, KV caches,
    * fused kernels for the output: ``MultiHeadAttention`` needs the weights (it returns
      them, and dropout acts on them), so it takes them from torch's
      ``F.scaled_dot_product_attention`` and multiplies them with the values itself.

Masks follow the course convention (``course_lib.masking``): boolean, True = may attend,
broadcastable to the per-head score shape (B, H, T, S), e.g. (T, S) for a causal mask or
(B, 1, 1, S) for key padding. Convert nn.MultiheadAttention's masks with
``course_lib.masking.from_mha_masks``. A query whose keys are all masked gets zero
attention weights (its output is the output projection's bias), where
``nn.MultiheadAttention`` returns NaN.
"""
from __future__ import annotations


import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import check_attention_shapes

from course_lib import solutions

_solution = solutions.of("course_lib.multihead")  # the exercises' bodies: course_lib/solutions/multihead.py

__all__ = [
    "split_heads",
    "merge_heads",
    "head_weights",
    "multi_head_attention",
    "numpy_params_from_torch",
    "MultiHeadAttention",
]


def _check_heads(d_model: int, num_heads: int) -> int:
    if not isinstance(num_heads, (int, np.integer)) or isinstance(num_heads, bool) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    if d_model % num_heads:
        raise ValueError(
            f"the feature size d_model={d_model} must be divisible by num_heads={num_heads} "
            f"(each head gets d_model / num_heads features)"
        )
    return d_model // num_heads


def split_heads(x, num_heads: int):
    """(..., T, D) -> (..., H, T, D/H): cut each token's features into H heads.

    Works on numpy arrays and torch tensors (returns the same kind). Head h gets
    features ``h * d_head : (h + 1) * d_head`` of every token: reshape the feature
    axis into (H, d_head), then move H in front of T.

    >>> x = np.arange(8).reshape(1, 2, 4)      # B=1, T=2 tokens, D=4
    >>> split_heads(x, 2)[0]                    # (H=2, T=2, d_head=2)
    array([[[0, 1],
            [4, 5]],
    <BLANKLINE>
           [[2, 3],
            [6, 7]]])
    """
    return _solution.split_heads(x, num_heads)


def merge_heads(x):
    """(..., H, T, d_head) -> (..., T, H * d_head): the inverse of :func:`split_heads`.

    Move the head axis back next to the features, then flatten (H, d_head).
    Works on numpy arrays and torch tensors.

    >>> x = np.arange(8).reshape(1, 2, 4)
    >>> bool((merge_heads(split_heads(x, 2)) == x).all())
    True
    """
    return _solution.merge_heads(x)


def head_weights(w, num_heads: int):
    """Slice a projection matrix W of shape (D_in, D) into per-head matrices (H, D_in, D/H).

    ``split_heads(x @ w, H)[..., h, :, :] == x @ head_weights(w, H)[h]``: projecting
    once with the big matrix and splitting equals projecting with H small matrices.

    >>> w = np.arange(8).reshape(2, 4)          # D_in=2, D=4, two heads of size 2
    >>> head_weights(w, 2)[1]
    array([[2, 3],
           [6, 7]])
    """
    if w.ndim != 2:
        raise ValueError(f"head_weights expects a (D_in, D) matrix, got shape {tuple(w.shape)}")
    D_in, D = w.shape
    d_head = _check_heads(D, num_heads)
    return w.reshape(D_in, num_heads, d_head).swapaxes(0, 1)  # (H, D_in, d_head)


def multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads: int,
                         b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    """Multi-head attention in numpy, from explicit weight matrices.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W_o + b_o, with
    head_h = Attention(Q W_q^h, K W_k^h, V W_v^h) (Vaswani et al. 2017, section 3.2.2).

    Args:
        query: (..., T, D); key and value: (..., S, D).
        w_q, w_k, w_v, w_o: (D, D) matrices, applied as ``x @ w`` (paper orientation).
        num_heads: H; D must be divisible by H, d_head = D / H.
        b_q, b_k, b_v, b_o: optional (D,) biases.
        mask: optional boolean mask broadcastable to (..., H, T, S); True = may attend.

    Returns:
        (out, weights): out (..., T, D), weights per head (..., H, T, S). The inputs are left unchanged.

    Example: with identity weights and one head this is plain attention
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]]); eye = np.eye(2)
    >>> out, w = multi_head_attention(x, x, x, eye, eye, eye, eye, num_heads=1)
    >>> w.round(3)
    array([[[0.67, 0.33],
            [0.33, 0.67]]])
    """
    return _solution.multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads, b_q, b_k, b_v, b_o, mask)


def numpy_params_from_torch(m: "nn.MultiheadAttention") -> dict:
    """Weights of ``nn.MultiheadAttention`` as numpy arrays for :func:`multi_head_attention`.

    ``m.in_proj_weight`` stacks [W_q; W_k; W_v] in nn.Linear's (out, in) orientation,
    shape (3D, D); the numpy function uses x @ w, so each block is transposed.
    Returns a dict with w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o (biases None when
    ``bias=False``) and num_heads, ready for ``multi_head_attention(q, k, v, **params)``.
    """
    return _solution.numpy_params_from_torch(m)


def _check_torch_mha(m) -> None:
    if not isinstance(m, nn.MultiheadAttention):
        raise ValueError(f"expected a torch.nn.MultiheadAttention, got {type(m).__name__}")
    if not m._qkv_same_embed_dim:
        raise ValueError("nn.MultiheadAttention with kdim/vdim different from embed_dim is not supported "
                         "(this course's MultiHeadAttention uses one feature size D for q, k and v)")
    if m.bias_k is not None or m.add_zero_attn:
        raise ValueError("nn.MultiheadAttention with add_bias_kv=True or add_zero_attn=True is not supported")


class MultiHeadAttention(nn.Module):
    """Multi-head attention as a torch module, same maths as ``nn.MultiheadAttention``.

    Args:
        d_model: feature size D of queries, keys, values and the output.
        num_heads: H; d_model must be divisible by H (d_head = D / H).
        dropout: probability of zeroing an attention weight, applied only in training mode
            (after the softmax, as nn.MultiheadAttention does; rows are rescaled by 1/(1-p)).
        bias: whether the four projections have biases.
        batch_first: True: inputs (B, T, D); False: (T, B, D) as nn.MultiheadAttention's default.

    Parameters: ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` (``nn.Linear(D, D)`` each).
    nn.MultiheadAttention packs the first three into one ``in_proj_weight`` (3D, D);
    :meth:`from_torch` unpacks it.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = True, device=None, dtype=None):
        super().__init__()
        if not isinstance(d_model, (int, np.integer)) or d_model < 1:
            raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
        self.d_head = _check_heads(d_model, num_heads)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout is a probability in [0, 1), got {dropout!r}")
        self.d_model, self.num_heads = int(d_model), int(num_heads)
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.q_proj = nn.Linear(d_model, d_model, **kw)
        self.k_proj = nn.Linear(d_model, d_model, **kw)
        self.v_proj = nn.Linear(d_model, d_model, **kw)
        self.out_proj = nn.Linear(d_model, d_model, **kw)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections and zero biases, like nn.MultiheadAttention
        (which draws the packed (3D, D) matrix at once, so its bound is sqrt(6 / 4D), ours sqrt(6 / 2D))."""
        for lin in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(lin.weight)
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "MultiHeadAttention":
        """A MultiHeadAttention with a copy of ``m``'s weights, dropout, batch_first, dtype and device.

        ``m.in_proj_weight`` (3D, D) holds [W_q; W_k; W_v] stacked in nn.Linear's (out, in)
        orientation, ``m.in_proj_bias`` (3D,) the three biases; ``m.out_proj`` is an nn.Linear.
        The copy is independent (changing one does not change the other) and is put in
        the same train/eval mode as ``m``.
        """
        _check_torch_mha(m)
        D = m.embed_dim
        w = m.in_proj_weight
        new = cls(D, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None,
                  batch_first=m.batch_first, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for i, lin in enumerate((new.q_proj, new.k_proj, new.v_proj)):
                lin.weight.copy_(w[i * D:(i + 1) * D])
                if lin.bias is not None:
                    lin.bias.copy_(m.in_proj_bias[i * D:(i + 1) * D])
            new.out_proj.weight.copy_(m.out_proj.weight)
            if new.out_proj.bias is not None:
                if m.out_proj.bias is None:  # pragma: no cover - torch ties both biases to `bias`
                    new.out_proj.bias.zero_()
                else:
                    new.out_proj.bias.copy_(m.out_proj.bias)
        return new.train(m.training)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None, need_weights: bool = True,
                average_attn_weights: bool = True):
        """Attend from ``query`` to ``key``/``value``; returns (out, weights).

        Args:
            query: (B, T, D) ((T, B, D) when batch_first=False).
            key, value: (B, S, D) ((S, B, D) when batch_first=False).
            mask: optional bool tensor, True = may attend, broadcastable to (B, H, T, S),
                e.g. (T, S), (B, 1, T, S) or (B, 1, 1, S). A 3-D (B, T, S) mask is refused
                (it would line B up with H); use mask[:, None].
            need_weights: return the attention weights (else None, and unless dropout runs in training
                mode the output comes from torch's fused kernel, which never stores the (B, H, T, S)
                weights: 64 MiB per layer for 64 sequences of 256 tokens and 4 heads in float32).
            average_attn_weights: weights averaged over heads (B, T, S), else per head (B, H, T, S).

        Returns:
            out in the input layout ((B, T, D) or (T, B, D)), and weights or None.
            In training mode with dropout > 0 the returned weights are the dropped-out ones
            that multiplied the values (as in nn.MultiheadAttention).
        """
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
                shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                layout = "(B, L, D)" if self.batch_first else "(L, B, D)"
                raise ValueError(f"{name} must be a 3-D tensor {layout} with D={self.d_model}, got {shape}")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must have the same "
                             "batch size and length")
        if mask is not None and (not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool):
            raise ValueError(
                f"mask must be a bool tensor with True = may attend, got "
                f"{getattr(mask, 'dtype', type(mask).__name__)}; convert nn.MultiheadAttention-style or "
                "additive masks with course_lib.masking (from_mha_masks, from_additive)"
            )
        if mask is not None and mask.dim() == 3 and mask.shape[0] != 1:
            raise ValueError(
                f"mask {tuple(mask.shape)} is 3-D: it would broadcast its first axis against the HEAD axis "
                "of (B, H, T, S). Give a per-sequence mask as (B, 1, T, S), e.g. mask[:, None]"
            )
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))  # (B, L, D)
        if query.shape[0] != key.shape[0]:
            raise ValueError(f"query and key have different batch sizes: {query.shape[0]} vs {key.shape[0]}")
        # Built on torch's own pieces only (no graded exercise of lessons 01 and 03 is called, so the
        # module works in the students' bundle before those solutions are out); tests/test_multihead.py
        # shows it equals the former version on split_heads / scaled_dot_product_attention_torch.
        H, d_head = self.num_heads, self.d_head
        q = self.q_proj(query).unflatten(-1, (H, d_head)).transpose(1, 2)  # (B, H, T, d_head)
        k = self.k_proj(key).unflatten(-1, (H, d_head)).transpose(1, 2)  # (B, H, S, d_head)
        v = self.v_proj(value).unflatten(-1, (H, d_head)).transpose(1, 2)  # (B, H, S, d_head)
        if mask is not None:
            check_attention_shapes(q.shape, k.shape, v.shape, mask.shape)
        dropping = self.training and self.dropout > 0.0
        dead = None if mask is None else ~mask.any(dim=-1, keepdim=True)  # queries that may attend to nothing
        # such a query attends to every key here (no softmax of -inf only, no NaN in any gradient on any
        # backend), then gets zero weights and zero heads below (its output is out_proj's bias)
        allowed = None if mask is None else mask | dead
        if not need_weights and not dropping:
            # nobody reads the weights: torch's fused kernel, which never stores the (B, H, T, S) weights
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, H, T, d_head)
            if dead is not None:
                heads = heads.masked_fill(dead, 0.0)
        else:
            scores = (q @ k.transpose(-2, -1)) * (d_head ** -0.5)  # (B, H, T, S)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if dead is not None:
                weights = weights.masked_fill(dead, 0.0)
            if dropping:
                weights = F.dropout(weights, p=self.dropout, training=True)
            heads = weights @ v  # (B, H, T, d_head)
        out = self.out_proj(heads.transpose(1, 2).flatten(-2))  # (B, T, D)
        if not self.batch_first:
            out = out.transpose(0, 1)  # (T, B, D)
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights
