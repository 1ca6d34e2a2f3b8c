"""The reference solutions of ``course_lib.consensus`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.consensus import GAP, VOCAB, _BIG, _INDEX, encode


def edit_distance(a: str, b: str) -> tuple[int, str]:
    n, m = len(a), len(b)
    x = np.frombuffer(a.encode(), dtype=np.uint8)
    y = np.frombuffer(b.encode(), dtype=np.uint8)
    table = np.empty((n + 1, m + 1), dtype=np.int64)  # (n + 1, m + 1)
    table[0] = np.arange(m + 1)
    steps = np.arange(m + 1)
    for i in range(1, n + 1):
        # candidates from the row above: diagonal (match/mismatch) and "I" (down)
        row = np.empty(m + 1, dtype=np.int64)
        row[0] = i
        row[1:] = np.minimum(table[i - 1, :-1] + (x[i - 1] != y), table[i - 1, 1:] + 1)
        # "D" (left) moves inside the row: row[j] = min_k (row[k] + j - k), a running minimum
        table[i] = np.minimum.accumulate(row - steps) + steps
    ops = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and table[i, j] == table[i - 1, j - 1] + (a[i - 1] != b[j - 1]):
            ops.append("=" if a[i - 1] == b[j - 1] else "X")
            i, j = i - 1, j - 1
        elif i > 0 and table[i, j] == table[i - 1, j] + 1:
            ops.append("I")
            i -= 1
        else:
            ops.append("D")
            j -= 1
    return int(table[n, m]), "".join(reversed(ops))


def pileup(reads: Sequence[str], alignments: Sequence[str], length: int) -> np.ndarray:
    if len(reads) != len(alignments):
        raise ValueError(f"got {len(reads)} reads but {len(alignments)} alignments")
    counts = np.zeros((length, len(VOCAB)), dtype=np.int64)  # (L, 5)
    for r, (read, ops) in enumerate(zip(reads, alignments)):
        n_read = sum(op in "=XI" for op in ops)
        n_cols = sum(op in "=XD" for op in ops)
        if n_read != len(read) or n_cols != length:
            raise ValueError(f"alignment {r} uses {n_read} bases of its read ({len(read)} long) and "
                             f"{n_cols} backbone columns (expected {length})")
        i = j = 0
        for op in ops:
            if op in "=X":
                counts[j, _INDEX[read[i]]] += 1
                i, j = i + 1, j + 1
            elif op == "I":
                i += 1
            else:  # "D"
                counts[j, GAP] += 1
                j += 1
    return counts


def _skew(values: torch.Tensor, i_of: torch.Tensor, j_of: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """values[b, i_of, j_of] where valid, _BIG elsewhere (index tensors shaped (D, M + 1))."""
    picked = values[:, i_of.clamp(min=0, max=values.shape[1] - 1), j_of.clamp(min=0, max=values.shape[2] - 1)]
    return torch.where(valid, picked, torch.full_like(picked, _BIG))


def _soft_dp(sub: torch.Tensor, ins: torch.Tensor, dele: torch.Tensor, lengths: torch.Tensor,
             gamma: float | None) -> torch.Tensor:
    B, M, N = sub.shape
    dev, dt = sub.device, sub.dtype
    lengths = lengths.to(dev).long()
    if M == 0 or N == 0:  # one path only: all insertions, or all deletions of the label
        kept = torch.arange(M, device=dev)[None, :] < lengths[:, None]
        return ins.sum(-1) + (dele * kept).sum(-1)
    D = M + N + 1
    i = torch.arange(M + 1, device=dev).expand(D, M + 1)               # (D, M + 1)
    j = torch.arange(D, device=dev)[:, None] - i                       # (D, M + 1)
    inside = (j >= 0) & (j <= N)
    # costs laid out along the anti-diagonals: (B, D, M + 1), _BIG where a move is impossible
    s_match = _skew(sub, i - 1, j - 1, (i >= 1) & (j >= 1) & inside)
    s_ins = _skew(ins[:, None, :], torch.zeros_like(i), j - 1, (j >= 1) & inside)
    s_del = _skew(dele[:, :, None], i - 1, torch.zeros_like(j), (i >= 1) & inside)
    big = torch.full((B, 1), _BIG, device=dev, dtype=dt)
    v_prev2 = torch.full((B, M + 1), _BIG, device=dev, dtype=dt)       # diagonal d - 2
    v_prev1 = torch.cat([torch.zeros(B, 1, device=dev, dtype=dt), v_prev2[:, 1:]], dim=1)  # d = 0: V[0, 0] = 0
    diagonals = [v_prev1]
    for d in range(1, D):
        match = torch.cat([big, v_prev2[:, :-1]], dim=1) + s_match[:, d]     # V[i-1, j-1] + sub
        insert = v_prev1 + s_ins[:, d]                                       # V[i, j-1] + ins
        delete = torch.cat([big, v_prev1[:, :-1]], dim=1) + s_del[:, d]     # V[i-1, j] + del
        stack = torch.stack([match, insert, delete])                         # (3, B, M + 1)
        cur = stack.min(0).values if gamma is None else -gamma * torch.logsumexp(-stack / gamma, dim=0)
        cur = torch.where(inside[d], cur.clamp(max=_BIG), torch.full_like(cur, _BIG))
        diagonals.append(cur)
        v_prev2, v_prev1 = v_prev1, cur
    table = torch.stack(diagonals, dim=1)                              # (B, D, M + 1)
    return table[torch.arange(B, device=dev), lengths + N, lengths]


def _loss_costs(logits: torch.Tensor, target: torch.Tensor, del_cost: float):
    if logits.dim() != 3 or logits.shape[-1] != len(VOCAB):
        raise ValueError(f"logits must be (B, N, {len(VOCAB)}), got {tuple(logits.shape)}")
    if target.dim() != 2 or target.shape[0] != logits.shape[0]:
        raise ValueError(f"target must be (B, M) with B = {logits.shape[0]}, got {tuple(target.shape)}")
    logp = torch.log_softmax(logits, dim=-1)                           # (B, N, 5)
    target = target.to(logits.device).long()
    lengths = (target != GAP).sum(-1)                                  # (B,)
    # left-pack each row (gaps to the end) so that label i is the i-th base
    order = torch.argsort((target == GAP).to(torch.int8), dim=-1, stable=True)
    packed = torch.gather(target, 1, order)                           # (B, M)
    sub = -torch.gather(logp, 2, packed.unsqueeze(1).expand(-1, logp.shape[1], -1)).transpose(1, 2)  # (B, M, N)
    ins = -logp[..., GAP]                                              # (B, N)
    dele = torch.full(packed.shape, float(del_cost), dtype=logits.dtype, device=logits.device)  # (B, M)
    return sub, ins, dele, lengths


def soft_alignment_loss(logits: torch.Tensor, target: torch.Tensor, gamma: float,
                        del_cost: float = 1.0) -> torch.Tensor:
    if not gamma > 0:
        raise ValueError(f"gamma must be > 0, got {gamma!r}")
    sub, ins, dele, lengths = _loss_costs(logits, target, del_cost)
    return _soft_dp(sub, ins, dele, lengths, float(gamma))


def hard_alignment_loss(logits: torch.Tensor, target: torch.Tensor, del_cost: float = 1.0) -> torch.Tensor:
    sub, ins, dele, lengths = _loss_costs(logits, target, del_cost)
    return _soft_dp(sub, ins, dele, lengths, None)


def soft_edit_distance(a: str, b: str, gamma: float) -> float:
    x = torch.as_tensor(encode(a)) if a else torch.zeros(0, dtype=torch.long)
    y = torch.as_tensor(encode(b)) if b else torch.zeros(0, dtype=torch.long)
    sub = (x[:, None] != y[None, :]).double()[None]                    # (1, |a|, |b|)
    ins = torch.ones(1, len(b), dtype=torch.float64)
    dele = torch.ones(1, len(a), dtype=torch.float64)
    return float(_soft_dp(sub, ins, dele, torch.tensor([len(a)]), float(gamma) if gamma else None)[0])


def positionwise_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    B, N, _ = logits.shape
    if target.shape[-1] > N:
        raise ValueError(f"the label has {target.shape[-1]} positions, more than the {N} predicted")
    padded = F.pad(target.to(logits.device).long(), (0, N - target.shape[-1]), value=GAP)   # (B, N)
    logp = torch.log_softmax(logits, dim=-1)
    return -torch.gather(logp, 2, padded.unsqueeze(-1)).squeeze(-1).sum(-1)
