"""The reference solutions of ``course_lib.clinical`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (..., T, 1)
    total = (hidden * m).sum(dim=-2)  # (..., d)
    count = m.sum(dim=-2).clamp(min=1.0)  # (..., 1); a row without tokens divides 0 by 1
    return total / count


def cosine_top_k(queries: np.ndarray, keys: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    queries, keys = np.asarray(queries), np.asarray(keys)
    if not 1 <= k <= keys.shape[0]:
        raise ValueError(f"k must be between 1 and the number of keys ({keys.shape[0]}), got {k}")
    qn = queries / np.maximum(np.linalg.norm(queries, axis=-1, keepdims=True), 1e-12)  # (Q, d)
    kn = keys / np.maximum(np.linalg.norm(keys, axis=-1, keepdims=True), 1e-12)  # (N, d)
    sims = qn @ kn.T  # (Q, N)
    idx = np.argsort(-sims, axis=-1, kind="stable")[:, :k]  # stable: ties keep the smaller index first
    return np.take_along_axis(sims, idx, axis=-1), idx


def freeze_for_probe(model: nn.Module, head: str = "classifier") -> int:
    modules = dict(model.named_modules())
    if head not in modules or head == "":
        raise ValueError(f"the model has no submodule called {head!r}")
    head_params = {id(p) for p in modules[head].parameters()}
    total = 0
    for p in model.parameters():
        p.requires_grad_(id(p) in head_params)
        if id(p) in head_params:
            total += p.numel()
    return total


def attention_rollout(attentions: torch.Tensor, residual: bool = True) -> torch.Tensor:
    mixed = attentions.mean(dim=1)  # (L, T, T)
    if residual:
        eye = torch.eye(mixed.shape[-1], dtype=mixed.dtype, device=mixed.device)
        mixed = 0.5 * mixed + 0.5 * eye
    rollout = mixed[0]
    for layer in mixed[1:]:
        rollout = layer @ rollout  # later layers act on what earlier layers produced
    return rollout
