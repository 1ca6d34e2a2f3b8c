"""The reference solutions of ``course_lib.efficient`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.attention import check_attention_shapes
from course_lib.efficient import DEFAULT_CHUNK_SIZE, _as_projection, _check_qkv, _check_torch_qkv


def elu_feature_map(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, feature_map=elu_feature_map) -> np.ndarray:
    q, k, v = _check_qkv(q, k, v)
    phi_q = feature_map(q)  # (..., T, r)
    phi_k = feature_map(k)  # (..., S, r)
    kv = np.swapaxes(phi_k, -1, -2) @ v  # (..., r, d_v): sum_j phi(k_j) v_j^T
    z = phi_k.sum(axis=-2)  # (..., r): sum_j phi(k_j)
    numerator = phi_q @ kv  # (..., T, d_v)
    denominator = (phi_q @ z[..., None])  # (..., T, 1)
    return numerator / denominator


def causal_linear_attention(q, k, v, feature_map=elu_feature_map) -> np.ndarray:
    q, k, v = _check_qkv(q, k, v, causal=True)
    phi_q = feature_map(q)  # (..., T, r)
    phi_k = feature_map(k)  # (..., T, r)
    s = np.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], axis=-3)  # (..., T, r, d_v)
    z = np.cumsum(phi_k, axis=-2)  # (..., T, r)
    numerator = np.einsum("...tr,...trv->...tv", phi_q, s)  # (..., T, d_v)
    denominator = np.einsum("...tr,...tr->...t", phi_q, z)[..., None]  # (..., T, 1)
    return numerator / denominator


def linear_attention_step(state, q_t, k_t, v_t, feature_map=elu_feature_map):
    q_t, k_t, v_t = (np.asarray(a, dtype=np.float64) for a in (q_t, k_t, v_t))
    if q_t.shape[-1] != k_t.shape[-1]:
        raise ValueError(f"q_t and k_t need the same feature size d: q_t {q_t.shape}, k_t {k_t.shape}")
    phi_q = feature_map(q_t)  # (..., r)
    phi_k = feature_map(k_t)  # (..., r)
    if state is None:
        s = np.zeros(phi_k.shape + (v_t.shape[-1],))  # (..., r, d_v)
        z = np.zeros(phi_k.shape)  # (..., r)
    else:
        s, z = (np.asarray(a, dtype=np.float64) for a in state)
        if s.shape[-2:] != (phi_k.shape[-1], v_t.shape[-1]) or z.shape[-1] != phi_k.shape[-1]:
            raise ValueError(
                f"state (s {s.shape}, z {z.shape}) does not fit r={phi_k.shape[-1]} features and "
                f"d_v={v_t.shape[-1]}: expected s (..., r, d_v) and z (..., r)"
            )
    s = s + phi_k[..., :, None] * v_t[..., None, :]  # (..., r, d_v), a new array
    z = z + phi_k  # (..., r)
    out = np.einsum("...r,...rv->...v", phi_q, s) / np.einsum("...r,...r->...", phi_q, z)[..., None]
    return out, (s, z)


def recurrent_linear_attention(q, k, v, feature_map=elu_feature_map) -> np.ndarray:
    q, k, v = _check_qkv(q, k, v, causal=True)
    state, outs = None, []
    for t in range(q.shape[-2]):
        out_t, state = linear_attention_step(state, q[..., t, :], k[..., t, :], v[..., t, :], feature_map)
        outs.append(out_t)
    return np.stack(outs, axis=-2)  # (..., T, d_v)


def quadratic_linear_attention(q, k, v, mask=None, feature_map=elu_feature_map):
    q, k, v = _check_qkv(q, k, v)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        check_attention_shapes(q.shape, k.shape, v.shape, mask.shape)
    sims = feature_map(q) @ np.swapaxes(feature_map(k), -1, -2)  # (..., T, S)
    if mask is not None:
        sims = np.where(mask, sims, 0.0)
    total = sims.sum(axis=-1, keepdims=True)  # (..., T, 1)
    weights = np.divide(sims, total, out=np.zeros_like(sims), where=total > 0)
    return weights @ v, weights


def positive_random_features(x, w) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    w = _as_projection(w)
    if x.shape[-1] != w.shape[-1]:
        raise ValueError(f"x (..., L, d) and w (..., m, d) need the same d: x {x.shape}, w {w.shape}")
    m = w.shape[-2]
    projections = x @ np.swapaxes(w, -1, -2)  # (..., L, m)
    half_sq_norm = 0.5 * np.sum(x * x, axis=-1, keepdims=True)  # (..., L, 1)
    return np.exp(projections - half_sq_norm) / math.sqrt(m)


def elu_feature_map_torch(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


def _check_chunk_size(chunk_size) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int (tokens per chunk), got {chunk_size!r}")
    return chunk_size


def prefix_sum_causal_attention_torch(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    _check_torch_qkv(phi_q, phi_k, v, causal=True)
    s = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (..., T, r, d_v)
    z = torch.cumsum(phi_k, dim=-2)  # (..., T, r)
    numerator = (phi_q.unsqueeze(-2) @ s).squeeze(-2)  # (..., T, d_v)
    denominator = (phi_q * z).sum(dim=-1, keepdim=True)  # (..., T, 1)
    return numerator / denominator


def chunked_causal_attention_torch(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor,
                                   chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    _check_torch_qkv(phi_q, phi_k, v, causal=True)
    C = _check_chunk_size(chunk_size)
    T, r, d_v = phi_q.shape[-2], phi_q.shape[-1], v.shape[-1]
    lead = torch.broadcast_shapes(phi_q.shape[:-2], phi_k.shape[:-2], v.shape[:-2])
    if T == 0:
        return v.new_zeros(*lead, 0, d_v)
    c_max = min(C, T)
    per_chunk = c_max * c_max + r * d_v  # one chunk's block and state, per leading index
    group = max(1, max(c_max * c_max, T * d_v) // per_chunk)  # chunks per step
    s = z = None  # state of the chunks so far: (..., r, d_v) and (..., r, 1); None before the first
    outs = []
    a = 0
    while a < T:
        full = (T - a) // C
        c, g = (C, min(group, full)) if full else (T - a, 1)  # the last, shorter chunk on its own
        out, s, z = _causal_chunks(phi_q[..., a:a + g * c, :], phi_k[..., a:a + g * c, :],
                                   v[..., a:a + g * c, :], c, s, z)
        outs.append(out)
        a += g * c
    return torch.cat(outs, dim=-2)  # (..., T, d_v)


def _causal_chunks(q, k, v, c: int, s, z):
    g = q.shape[-2] // c
    q_c, k_c, v_c = (t.unflatten(-2, (g, c)) for t in (q, k, v))  # (..., g, c, r / d_v)
    scores = (q_c @ k_c.transpose(-2, -1)).tril()  # (..., g, c, c): key j <= query i inside each chunk
    numerator = scores @ v_c  # (..., g, c, d_v)
    denominator = scores.sum(dim=-1, keepdim=True)  # (..., g, c, 1)
    kv = k_c.transpose(-2, -1) @ v_c  # (..., g, r, d_v): each chunk's own sums
    k_sum = k_c.sum(dim=-2).unsqueeze(-1)  # (..., g, r, 1)
    # the state at each chunk's start: the earlier chunks of this group (an exclusive cumulative sum over
    # chunks) plus the state carried in from the groups before
    kv_before = torch.cat([torch.zeros_like(kv[..., :1, :, :]), kv[..., :-1, :, :].cumsum(dim=-3)], dim=-3)
    k_before = torch.cat([torch.zeros_like(k_sum[..., :1, :, :]), k_sum[..., :-1, :, :].cumsum(dim=-3)], dim=-3)
    if s is not None:
        kv_before, k_before = kv_before + s.unsqueeze(-3), k_before + z.unsqueeze(-3)
    numerator = numerator + q_c @ kv_before  # the earlier chunks' keys
    denominator = denominator + q_c @ k_before
    kv_all, k_all = kv.sum(dim=-3), k_sum.sum(dim=-3)
    s, z = (kv_all, k_all) if s is None else (s + kv_all, z + k_all)
    return (numerator / denominator).flatten(-3, -2), s, z


def attention_from_features_torch(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor,
                                  causal: bool = False, chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    _check_torch_qkv(phi_q, phi_k, v, causal)
    if not causal:
        kv = phi_k.transpose(-2, -1) @ v  # (..., r, d_v)
        z = phi_k.sum(dim=-2)  # (..., r)
        return (phi_q @ kv) / (phi_q @ z.unsqueeze(-1))  # (..., T, d_v)
    return chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size)


def linear_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                           feature_map=elu_feature_map_torch, chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    _check_torch_qkv(q, k, v, causal)
    return attention_from_features_torch(feature_map(q), feature_map(k), v, causal, chunk_size)
