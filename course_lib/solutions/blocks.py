"""The reference solutions of ``course_lib.blocks`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import torch

from course_lib.blocks import EncoderLayer, _activation


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"layer_norm expects a torch tensor, got {type(x).__name__}")
    d = x.shape[-1]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (d,):
            raise ValueError(f"{name} must have shape ({d},) to match the last axis of x {tuple(x.shape)}, "
                             f"got {tuple(p.shape)}")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by d
    y = (x - mean) / torch.sqrt(var + eps)  # (..., d)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def feed_forward(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor,
                 b2: torch.Tensor | None, activation: str = "relu") -> torch.Tensor:
    act = _activation(activation)
    if x.shape[-1] != w1.shape[-1] or w2.shape[-1] != w1.shape[0]:
        raise ValueError(f"shapes do not chain: x {tuple(x.shape)}, w1 {tuple(w1.shape)} (d_ff, d_model), "
                         f"w2 {tuple(w2.shape)} (d_model, d_ff)")
    h = x @ w1.transpose(0, 1)  # (..., d_ff)
    if b1 is not None:
        h = h + b1
    h = act(h)
    out = h @ w2.transpose(0, 1)  # (..., d_model)
    return out if b2 is None else out + b2


def encoder_layer_forward(layer: "EncoderLayer", x: torch.Tensor, mask: torch.Tensor | None = None):
    if layer.norm_first:
        h = layer.norm1(x)
        a, weights = layer.self_attn(h, h, h, mask=mask)  # (B, T, d), (B, T, T)
        x = x + layer.dropout1(a)
        x = x + layer.dropout2(layer.ff(layer.norm2(x)))
    else:
        a, weights = layer.self_attn(x, x, x, mask=mask)
        x = layer.norm1(x + layer.dropout1(a))
        x = layer.norm2(x + layer.dropout2(layer.ff(x)))
    return x, weights
