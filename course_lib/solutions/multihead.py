"""The reference solutions of ``course_lib.multihead`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from course_lib.attention import scaled_dot_product_attention
from course_lib.multihead import _check_heads, _check_torch_mha


def split_heads(x, num_heads: int):
    if x.ndim < 2:
        raise ValueError(f"split_heads expects (..., T, D), got shape {tuple(x.shape)}")
    *lead, T, D = x.shape
    d_head = _check_heads(D, num_heads)
    x = x.reshape(*lead, T, num_heads, d_head)  # (..., T, H, d_head)
    return x.swapaxes(-3, -2)  # (..., H, T, d_head)


def merge_heads(x):
    if x.ndim < 3:
        raise ValueError(f"merge_heads expects (..., H, T, d_head), got shape {tuple(x.shape)}")
    *lead, H, T, d_head = x.shape
    x = x.swapaxes(-3, -2)  # (..., T, H, d_head)
    return x.reshape(*lead, T, H * d_head)  # (..., T, D)


def multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads: int,
                         b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    D = query.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        if np.shape(w) != (D, D):
            raise ValueError(f"{name} must have shape (D, D) = ({D}, {D}) for inputs with D={D} features, "
                             f"got {np.shape(w)}")
    for name, t in (("key", key), ("value", value)):
        if t.shape[-1] != D:
            raise ValueError(f"{name} must have D={D} features like query {query.shape}, got {t.shape}")

    def project(x, w, b):
        y = x @ np.asarray(w, dtype=np.float64)
        return y if b is None else y + np.asarray(b, dtype=np.float64)

    q = split_heads(project(query, w_q, b_q), num_heads)  # (..., H, T, d_head)
    k = split_heads(project(key, w_k, b_k), num_heads)  # (..., H, S, d_head)
    v = split_heads(project(value, w_v, b_v), num_heads)  # (..., H, S, d_head)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (..., H, T, d_head), (..., H, T, S)
    return project(merge_heads(heads), w_o, b_o), weights  # (..., T, D), (..., H, T, S)


def numpy_params_from_torch(m: "nn.MultiheadAttention") -> dict:
    _check_torch_mha(m)
    D = m.embed_dim

    def arr(t):
        return None if t is None else t.detach().cpu().to(torch.float64).numpy().copy()

    w = arr(m.in_proj_weight)  # (3D, D), rows = output features
    b = arr(m.in_proj_bias)  # (3D,) or None
    params = {f"w_{n}": w[i * D:(i + 1) * D].T for i, n in enumerate("qkv")}
    params.update({f"b_{n}": None if b is None else b[i * D:(i + 1) * D] for i, n in enumerate("qkv")})
    params["w_o"] = arr(m.out_proj.weight).T
    params["b_o"] = arr(m.out_proj.bias)
    params["num_heads"] = m.num_heads
    return params
