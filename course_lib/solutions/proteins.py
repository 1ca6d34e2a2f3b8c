"""The reference solutions of ``course_lib.proteins`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

from typing import Sequence

import torch

from course_lib.efficient import favor_features_torch
from course_lib.proteins import AMINO_ACIDS, CLS, EOS, PAD, ProteinNamer, UNK, _AA_ID


def encode_proteins(sequences: Sequence[str], max_len: int | None = None):
    if max_len is not None and max_len < 2:
        raise ValueError(f"max_len must be >= 2 (room for <cls> and <eos>), got {max_len}")
    rows = []
    for s in sequences:
        residues = s.upper() if max_len is None else s.upper()[: max_len - 2]
        rows.append([CLS] + [_AA_ID.get(a, UNK) for a in residues] + [EOS])
    T = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), T), PAD, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, : len(r)] = torch.tensor(r, dtype=torch.long)
    return ids, ids != PAD  # (B, T), (B, T)


def kmer_vectors(sequences: Sequence[str], k: int = 3) -> torch.Tensor:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    index = {a: i for i, a in enumerate(AMINO_ACIDS)}
    counts = torch.zeros(len(sequences), 20**k, dtype=torch.float32)
    weights = torch.tensor([20 ** (k - 1 - i) for i in range(k)], dtype=torch.long)
    for b, s in enumerate(sequences):
        codes = torch.tensor([index.get(a, -1) for a in s.upper()], dtype=torch.long)
        if len(codes) < k:
            continue
        windows = codes.unfold(0, k, 1)  # (n - k + 1, k)
        valid = (windows >= 0).all(dim=1)
        idx = (windows[valid] * weights).sum(dim=1)
        counts[b] = torch.bincount(idx, minlength=20**k).to(torch.float32)
    norms = counts.norm(dim=1, keepdim=True)
    return counts / norms.clamp(min=1e-12)


def favor_padded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor,
                           keep: torch.Tensor) -> torch.Tensor:
    if keep.dtype != torch.bool or keep.shape != (q.shape[0], q.shape[-2]):
        raise ValueError(f"keep must be bool (B, L) = {(q.shape[0], q.shape[-2])}, got {keep.dtype} "
                         f"{tuple(keep.shape)}")
    key_keep = keep[:, None, :, None]  # (B, 1, L, 1)
    phi_q = favor_features_torch(q, w, is_query=True)  # (B, H, L, m)
    phi_k = favor_features_torch(k, w, is_query=False, keep=key_keep)  # (B, H, L, m)
    kv = phi_k.transpose(-2, -1) @ v  # (B, H, m, d)
    z = phi_k.sum(dim=-2)  # (B, H, m)
    out = (phi_q @ kv) / (phi_q @ z.unsqueeze(-1))  # (B, H, L, d)
    return out * key_keep.to(out.dtype)


def greedy_decode(model: "ProteinNamer", src_ids: torch.Tensor, src_keep: torch.Tensor,
                  max_len: int) -> torch.Tensor:
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    with torch.no_grad():  # inference only: no graph is kept
        memory = model.encode(src_ids, src_keep)  # (B, S, d)
        memory_mask = src_keep[:, None, None, :]  # (B, 1, 1, S)
        B, device = src_ids.shape[0], src_ids.device
        out = torch.full((B, 1), model.bos_id, dtype=torch.long, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        for _ in range(max_len):
            T = out.shape[1]
            causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
            h = model.decoder(model.embed_target(out), memory, causal, memory_mask)  # (B, T, d)
            nxt = model.generator(h[:, -1]).argmax(dim=-1)  # (B,)
            nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done = done | (nxt == model.eos_id)
            if bool(done.all()):
                break
    return out[:, 1:]
