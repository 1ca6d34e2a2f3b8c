"""Transformer blocks: LayerNorm, feed-forward, encoder and decoder layers, stacks, a classifier.

Covers
    * ``layer_norm`` / :class:`LayerNorm`: normalise each token's feature vector to
      mean 0 and variance 1, then scale and shift. The variance is the BIASED one
      (divide by d, not d - 1), as ``torch.nn.LayerNorm`` and Ba et al. 2016 use;
      eps is added to the variance inside the square root.
    * ``gelu`` (exact, with erf), ``feed_forward`` / :class:`FeedForward`: the
      position-wise network Linear(d_model, d_ff) -> ReLU or GELU -> Linear(d_ff, d_model)
      (Vaswani et al. 2017, section 3.3).
    * ``encoder_layer_forward`` / :class:`EncoderLayer`: self-attention and
      feed-forward sublayers, each wrapped in dropout + residual + LayerNorm, in both
      orders: post-norm (``norm_first=False``, the 2017 paper: x = norm(x + sublayer(x)))
      and pre-norm (``norm_first=True``: x = x + sublayer(norm(x))).
    * ``decoder_layer_forward`` / :class:`DecoderLayer`: masked self-attention,
      cross-attention to the encoder output ("memory"), feed-forward.
    * :class:`Encoder`, :class:`Decoder`: stacks of layers with an optional final norm.
    * :class:`TransformerClassifier`: token embeddings + sinusoidal or learned positions
      + encoder stack + masked mean pooling + linear head.

    Every layer equals ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` /
    ``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` with the same weights
    (``from_torch``), in eval mode, to 1e-10 in float64 (tests/test_blocks.py).
    Attention comes from ``course_lib.multihead.MultiHeadAttention``.

Does NOT cover
    * the torch fast paths (fused kernels, nested tensors for padding),
    * incremental decoding with a key/value cache, weight tying, label smoothing,
    * training (``course_lib.training``), tokenisation (``course_lib.training.WordTokenizer``,
      ``course_lib.bpe``).

Masks follow ``course_lib.masking``: bool, True = may attend, broadcastable to
(B, H, T, S): a causal mask (T, T), a key padding mask as (B, 1, 1, S). Convert
torch's masks (True = masked) with ``course_lib.masking.from_mha_masks``.

Dropout sits where torch puts it: on the attention weights (inside
MultiHeadAttention), after the activation of the feed-forward network, and on
each sublayer's output before the residual sum. All of it is off in eval mode.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.multihead import MultiHeadAttention
from course_lib.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

from course_lib import solutions

_solution = solutions.of("course_lib.blocks")  # the exercises' bodies: course_lib/solutions/blocks.py

__all__ = [
    "layer_norm",
    "LayerNorm",
    "gelu",
    "feed_forward",
    "FeedForward",
    "encoder_layer_forward",
    "EncoderLayer",
    "decoder_layer_forward",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "masked_mean",
    "TransformerClassifier",
]


# ---------------------------------------------------------------- LayerNorm
def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """Normalise over the LAST axis (each token's features), then scale and shift.

    y = (x - mean) / sqrt(var + eps) * weight + bias, with mean and the biased
    variance var = mean((x - mean)^2) taken over the last axis, as nn.LayerNorm.

    Args:
        x: (..., d); weight, bias: (d,) or None (= 1 and 0).

    Differentiable (torch operations only: gradients reach x, weight and bias); the inputs are
    left unchanged.

    >>> layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), eps=0.0)
    tensor([[-1.2247,  0.0000,  1.2247]])
    """
    return _solution.layer_norm(x, weight, bias, eps)


class LayerNorm(nn.Module):
    """LayerNorm over the last axis with a learned scale (``weight``) and shift (``bias``)."""

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(d_model, device=device, dtype=dtype)) if bias else None

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"

    @classmethod
    def from_torch(cls, m: nn.LayerNorm) -> "LayerNorm":
        """A copy of an ``nn.LayerNorm`` over one axis with elementwise affine parameters."""
        if not isinstance(m, nn.LayerNorm) or len(m.normalized_shape) != 1 or m.weight is None:
            raise ValueError(f"expected nn.LayerNorm(d) with elementwise_affine=True, got {m!r}")
        new = cls(m.normalized_shape[0], m.eps, bias=m.bias is not None, device=m.weight.device,
                  dtype=m.weight.dtype)
        with torch.no_grad():
            new.weight.copy_(m.weight)
            if m.bias is not None:
                new.bias.copy_(m.bias)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torch's fused kernel, which :func:`layer_norm` equals (tests/test_blocks.py): the module
        # keeps working in the students' bundle, where layer_norm's body is withheld
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)


# ---------------------------------------------------------------- feed-forward
def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))) (Hendrycks & Gimpel 2016).

    Equals ``F.gelu(x)`` (approximate="none"), not the tanh approximation.

    >>> gelu(torch.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    """
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


ACTIVATIONS = {"relu": torch.relu, "gelu": gelu}


def _activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


def feed_forward(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor,
                 b2: torch.Tensor | None, activation: str = "relu") -> torch.Tensor:
    """Position-wise feed-forward network FFN(x) = act(x W1^T + b1) W2^T + b2.

    Weights are in ``nn.Linear``'s (out, in) layout: w1 (d_ff, d_model), w2 (d_model, d_ff);
    biases b1 (d_ff,), b2 (d_model,) or None. ``activation`` is "relu" or "gelu" (exact).
    The same network is applied to every position: x (..., d_model) -> (..., d_model).

    >>> x = torch.tensor([[1.0, -1.0]]); w1 = torch.eye(2); w2 = torch.ones(1, 2)
    >>> feed_forward(x, w1, None, w2, torch.tensor([0.5]))   # relu([1, -1]) . [1, 1] + 0.5
    tensor([[1.5000]])
    """
    return _solution.feed_forward(x, w1, b1, w2, b2, activation)


class FeedForward(nn.Module):
    """Linear(d_model, d_ff) -> activation -> dropout -> Linear(d_ff, d_model).

    In eval mode (dropout off) its output equals :func:`feed_forward` with its weights.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.activation = activation
        self.act = _activation(activation)
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.act(self.linear1(x))))  # (..., d_model)


# ---------------------------------------------------------------- encoder layer
def encoder_layer_forward(layer: "EncoderLayer", x: torch.Tensor, mask: torch.Tensor | None = None):
    """One encoder layer: self-attention then feed-forward, each with dropout + residual + norm.

    post-norm (``layer.norm_first`` False, Vaswani et al. 2017):
        x = norm1(x + dropout1(SelfAttention(x)));  x = norm2(x + dropout2(FFN(x)))
    pre-norm (``layer.norm_first`` True):
        x = x + dropout1(SelfAttention(norm1(x)));  x = x + dropout2(FFN(norm2(x)))

    Args:
        layer: an :class:`EncoderLayer` (uses its self_attn, ff, norm1, norm2, dropout1, dropout2).
        x: (B, T, d_model).
        mask: bool, True = may attend, broadcastable to (B, H, T, T).

    Returns:
        (out, weights): out (B, T, d_model); attention weights averaged over heads (B, T, T).
        A float answer in at least float32 (x's dtype: float32 or float64, never float16).
    """
    return _solution.encoder_layer_forward(layer, x, mask)


def _torch_activation_name(act) -> str:
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(f"only relu and exact gelu activations are supported, got {act!r}")


def _copy_linear(dst: nn.Linear, src: nn.Linear) -> None:
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        if dst.bias is not None:
            dst.bias.copy_(src.bias)


def _check_batch_first(m) -> None:
    if not m.self_attn.batch_first:
        raise ValueError("from_torch needs a layer built with batch_first=True (this course uses (B, T, D))")


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward with residuals and LayerNorm; see :func:`encoder_layer_forward`.

    Args mirror ``nn.TransformerEncoderLayer`` (batch_first=True): d_model, num_heads,
    d_ff (dim_feedforward), dropout, activation ("relu" or "gelu"), norm_first, eps.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int = 2048, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, eps: float = 1e-5, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias, **kw)
        self.ff = FeedForward(d_model, d_ff, dropout, activation, bias=bias, **kw)
        self.norm1 = LayerNorm(d_model, eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps, bias=bias, **kw)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoderLayer) -> "EncoderLayer":
        """A copy of an ``nn.TransformerEncoderLayer(batch_first=True)``: weights, dropout, norm order, mode."""
        _check_batch_first(m)
        d_model, d_ff = m.linear1.in_features, m.linear1.out_features
        w = m.linear1.weight
        new = cls(d_model, m.self_attn.num_heads, d_ff, m.dropout.p, _torch_activation_name(m.activation),
                  m.norm_first, m.norm1.eps, bias=m.linear1.bias is not None, device=w.device, dtype=w.dtype)
        new.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        _copy_linear(new.ff.linear1, m.linear1)
        _copy_linear(new.ff.linear2, m.linear2)
        new.norm1, new.norm2 = LayerNorm.from_torch(m.norm1), LayerNorm.from_torch(m.norm2)
        return new.train(m.training)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False):
        """x (B, T, d_model), mask True = may attend -> (B, T, d_model), or (out, weights averaged over
        heads (B, T, T)) with ``need_weights=True``.

        The same sublayers in the same order as :func:`encoder_layer_forward` (lesson 05's exercise),
        so the module works in the students' bundle before that solution is released
        (tests/test_blocks.py shows the two agree bit for bit when the weights are asked for or dropout
        runs; without weights, attention is torch's fused kernel: the same to rounding). Written as two
        residual sublayers, not as that exercise's lines (issue 65: no solution's text in a shipped building
        block).
        """
        found = {}

        def attend(h):  # (B, T, d) -> (B, T, d); keeps the weights (B, T, T) when they are asked for
            out, found["weights"] = self.self_attn(h, h, h, mask=mask, need_weights=need_weights)
            return self.dropout1(out)

        def feed(h):
            return self.dropout2(self.ff(h))

        for sublayer, norm in ((attend, self.norm1), (feed, self.norm2)):
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return (x, found["weights"]) if need_weights else x


# ---------------------------------------------------------------- decoder layer
def decoder_layer_forward(layer: "DecoderLayer", x: torch.Tensor, memory: torch.Tensor,
                          tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                          need_weights: bool = True):
    """One decoder layer: masked self-attention, cross-attention to ``memory``, feed-forward.

    post-norm:  x = norm1(x + SA(x));  x = norm2(x + CA(x, memory));  x = norm3(x + FFN(x))
    pre-norm:   x = x + SA(norm1(x));  x = x + CA(norm2(x), memory);  x = x + FFN(norm3(x))
    (each sublayer output passes its dropout before the sum). In cross-attention the
    queries come from the decoder, keys and values from the encoder output; the memory
    itself is not normalised here (a pre-norm encoder stack ends with its own norm).

    Args:
        x: decoder input (B, T, d_model); memory: encoder output (B, S, d_model).
        tgt_mask: bool, True = may attend, broadcastable to (B, H, T, T), usually causal
            combined with target padding. memory_mask: broadcastable to (B, H, T, S),
            usually the source padding as (B, 1, 1, S).

        need_weights: False: both weights are None (and attention is torch's fused kernel when dropout is
            off, as in :class:`course_lib.multihead.MultiHeadAttention`).

    Returns:
        (out, self_weights, cross_weights): (B, T, d_model), (B, T, T), (B, T, S), weights
        averaged over heads.
    """
    if layer.norm_first:
        h = layer.norm1(x)
        a, self_w = layer.self_attn(h, h, h, mask=tgt_mask, need_weights=need_weights)
        x = x + layer.dropout1(a)
        c, cross_w = layer.cross_attn(layer.norm2(x), memory, memory, mask=memory_mask, need_weights=need_weights)
        x = x + layer.dropout2(c)
        x = x + layer.dropout3(layer.ff(layer.norm3(x)))
    else:
        a, self_w = layer.self_attn(x, x, x, mask=tgt_mask, need_weights=need_weights)
        x = layer.norm1(x + layer.dropout1(a))
        c, cross_w = layer.cross_attn(x, memory, memory, mask=memory_mask, need_weights=need_weights)
        x = layer.norm2(x + layer.dropout2(c))
        x = layer.norm3(x + layer.dropout3(layer.ff(x)))
    return x, self_w, cross_w


class DecoderLayer(nn.Module):
    """Masked self-attention + cross-attention + feed-forward; see :func:`decoder_layer_forward`."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int = 2048, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, eps: float = 1e-5, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias, **kw)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias, **kw)
        self.ff = FeedForward(d_model, d_ff, dropout, activation, bias=bias, **kw)
        self.norm1 = LayerNorm(d_model, eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps, bias=bias, **kw)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    @classmethod
    def from_torch(cls, m: nn.TransformerDecoderLayer) -> "DecoderLayer":
        """A copy of an ``nn.TransformerDecoderLayer(batch_first=True)``; its ``multihead_attn`` is our ``cross_attn``."""
        _check_batch_first(m)
        d_model, d_ff = m.linear1.in_features, m.linear1.out_features
        w = m.linear1.weight
        new = cls(d_model, m.self_attn.num_heads, d_ff, m.dropout.p, _torch_activation_name(m.activation),
                  m.norm_first, m.norm1.eps, bias=m.linear1.bias is not None, device=w.device, dtype=w.dtype)
        new.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        new.cross_attn = MultiHeadAttention.from_torch(m.multihead_attn)
        _copy_linear(new.ff.linear1, m.linear1)
        _copy_linear(new.ff.linear2, m.linear2)
        new.norm1, new.norm2, new.norm3 = (LayerNorm.from_torch(n) for n in (m.norm1, m.norm2, m.norm3))
        return new.train(m.training)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        return decoder_layer_forward(self, x, memory, tgt_mask, memory_mask, need_weights=False)[0]


# ---------------------------------------------------------------- stacks
def _stack_from_torch(cls, layers: list, m: nn.Module):
    """Build ``cls`` (Encoder or Decoder) around copied layers and a copy of ``m.norm``."""
    first = layers[0]
    new = cls(1, first.norm1.d_model, first.self_attn.num_heads, first.ff.linear1.out_features,
              final_norm=m.norm is not None, device=first.norm1.weight.device, dtype=first.norm1.weight.dtype)
    new.layers = nn.ModuleList(layers)
    new.norm = None if m.norm is None else LayerNorm.from_torch(m.norm)
    return new.train(m.training)


class Encoder(nn.Module):
    """``num_layers`` encoder layers, then an optional final LayerNorm (needed with pre-norm).

    Layers are independent copies (own weights). ``final_norm`` defaults to
    ``norm_first``: a pre-norm stack's output is otherwise never normalised.

    ``layer_forward``: a function ``f(layer, x, mask) -> (out, weights)`` with the signature of
    :func:`encoder_layer_forward` that runs each layer instead of the layer's own forward,
    e.g. the one a student wrote in lesson 05 (None: ``EncoderLayer.forward``).
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int = 2048, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, eps: float = 1e-5,
                 final_norm: bool | None = None, device=None, dtype=None, layer_forward=None):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if layer_forward is not None and not callable(layer_forward):
            raise ValueError(f"layer_forward must be a function f(layer, x, mask) -> (out, weights), "
                             f"got {type(layer_forward).__name__}")
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first, eps, device=device, dtype=dtype)
            for _ in range(num_layers))
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(d_model, eps, device=device, dtype=dtype) if final_norm else None
        self.layer_forward = layer_forward

    def _run_layer(self, layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None):
        """-> (out, weights) of one layer, by ``layer_forward`` when one was given."""
        if self.layer_forward is None:
            return layer(x, mask, need_weights=True)
        return self.layer_forward(layer, x, mask)

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoder) -> "Encoder":
        """A copy of an ``nn.TransformerEncoder`` (its layers and its optional final ``norm``)."""
        return _stack_from_torch(cls, [EncoderLayer.from_torch(layer) for layer in m.layers], m)

    def forward_with_weights(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """-> (out (B, T, d_model), list of per-layer attention weights (B, T, T), averaged over heads)."""
        maps = []
        for layer in self.layers:
            x, w = self._run_layer(layer, x, mask)
            maps.append(w)
        return (x if self.norm is None else self.norm(x)), maps

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask) if self.layer_forward is None else self.layer_forward(layer, x, mask)[0]
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """``num_layers`` decoder layers, then an optional final LayerNorm (default: with pre-norm)."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int = 2048, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, eps: float = 1e-5,
                 final_norm: bool | None = None, device=None, dtype=None):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first, eps, device=device, dtype=dtype)
            for _ in range(num_layers))
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(d_model, eps, device=device, dtype=dtype) if final_norm else None

    @classmethod
    def from_torch(cls, m: nn.TransformerDecoder) -> "Decoder":
        """A copy of an ``nn.TransformerDecoder`` (its layers and its optional final ``norm``)."""
        return _stack_from_torch(cls, [DecoderLayer.from_torch(layer) for layer in m.layers], m)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x if self.norm is None else self.norm(x)


# ---------------------------------------------------------------- classifier
def masked_mean(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean over the positions where ``keep`` is True: x (B, T, d), keep (B, T) -> (B, d).

    Padding does not dilute the average. A row with no kept position gives zeros.

    >>> masked_mean(torch.tensor([[[1.0], [3.0], [100.0]]]), torch.tensor([[True, True, False]]))
    tensor([[2.]])
    """
    if keep.shape != x.shape[:2] or keep.dtype != torch.bool:
        raise ValueError(f"keep must be a bool (B, T) mask matching x {tuple(x.shape)}, got "
                         f"{keep.dtype} {tuple(keep.shape)}")
    k = keep.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * k).sum(dim=1) / k.sum(dim=1).clamp(min=1.0)  # (B, d)


class TransformerClassifier(nn.Module):
    """Sequence classifier: embed tokens, add positions, encode, average real tokens, classify.

    ids (B, T) -> Embedding (B, T, d) -> + positions -> dropout -> Encoder (pre- or post-norm)
    -> masked mean over real tokens (B, d) -> dropout -> Linear -> logits (B, num_classes).

    Args:
        vocab_size, num_classes: sizes of the input vocabulary and the label set.
        d_model, num_heads, num_layers, d_ff, dropout, activation, norm_first: the encoder's.
        positions: "sinusoidal" (fixed), "learned" or "none" (a bag of tokens: order ignored).
        max_len: longest sequence the position table covers.
        pad_id: id of the padding token (its embedding stays zero and gets no gradient).
        layer_forward: runs each encoder layer instead of its own forward (see :class:`Encoder`),
            e.g. a student's ``encoder_layer_forward``.

    Token embeddings start as N(0, 1) (nn.Embedding's default) and are not rescaled.
    """

    def __init__(self, vocab_size: int, num_classes: int, d_model: int = 64, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int = 128, dropout: float = 0.1, activation: str = "gelu",
                 norm_first: bool = True, positions: str = "sinusoidal", max_len: int = 512, pad_id: int = 0,
                 layer_forward=None):
        super().__init__()
        if positions not in ("sinusoidal", "learned", "none"):
            raise ValueError(f"positions must be 'sinusoidal', 'learned' or 'none', got {positions!r}")
        self.pad_id, self.positions = pad_id, positions
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        if positions == "sinusoidal":
            self.pos = SinusoidalPositionalEncoding(d_model, max_len)
        elif positions == "learned":
            self.pos = LearnedPositionalEmbedding(max_len, d_model)
        else:
            self.pos = nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, activation, norm_first,
                               layer_forward=layer_forward)
        self.head = nn.Linear(d_model, num_classes)

    def _encode(self, ids: torch.Tensor, keep: torch.Tensor | None, with_weights: bool):
        if ids.dim() != 2:
            raise ValueError(f"ids must be (B, T) token ids, got shape {tuple(ids.shape)}")
        keep = ids != self.pad_id if keep is None else keep  # (B, T) True at real tokens
        x = self.dropout(self.pos(self.embed(ids)))  # (B, T, d)
        mask = keep[:, None, None, :]  # (B, 1, 1, T): every query may attend to every real token
        if with_weights:
            return (*self.encoder.forward_with_weights(x, mask), keep)
        return self.encoder(x, mask), None, keep

    def forward(self, ids: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, T), keep (B, T) True at real tokens (default: ids != pad_id) -> logits (B, num_classes)."""
        h, _, keep = self._encode(ids, keep, with_weights=False)
        return self.head(self.dropout(masked_mean(h, keep)))  # (B, C)

    @torch.no_grad()
    def attention_maps(self, ids: torch.Tensor, keep: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Per-layer self-attention weights (B, T, T), averaged over heads, in eval mode."""
        was_training = self.training
        self.eval()
        try:
            return self._encode(ids, keep, with_weights=True)[1]
        finally:
            self.train(was_training)
