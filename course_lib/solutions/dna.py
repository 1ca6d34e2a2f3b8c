"""The reference solutions of ``course_lib.dna`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from course_lib.dna import BASES, _COMPLEMENT


def _check_dna(seq) -> None:
    if not isinstance(seq, str):
        raise TypeError(f"expected a DNA string, got {type(seq).__name__}")
    bad = sorted(set(seq) - set(_COMPLEMENT))
    if bad:
        raise ValueError(f"not a DNA letter (A, C, G, T, N, any case): {bad[:5]}")


def one_hot_dna(seq: str) -> np.ndarray:
    _check_dna(seq)
    codes = np.frombuffer(seq.upper().encode("ascii"), dtype=np.uint8)  # (L,)
    out = np.zeros((len(seq), 4), dtype=np.float32)
    for j, base in enumerate(BASES):
        out[codes == ord(base), j] = 1.0
    return out


def reverse_complement(seq: str) -> str:
    _check_dna(seq)
    return "".join(_COMPLEMENT[b] for b in reversed(seq))


def receptive_field(kernel_sizes: Sequence[int], dilations: Sequence[int] | None = None,
                    pools: Sequence[int] | None = None) -> int:
    n = len(kernel_sizes)
    dilations = [1] * n if dilations is None else list(dilations)
    pools = [1] * n if pools is None else list(pools)
    if len(dilations) != n or len(pools) != n:
        raise ValueError(f"kernel_sizes, dilations and pools must have the same length, got "
                         f"{n}, {len(dilations)}, {len(pools)}")
    for name, values in (("kernel_sizes", kernel_sizes), ("dilations", dilations), ("pools", pools)):
        if any(int(v) != v or v < 1 for v in values):
            raise ValueError(f"{name} must be integers >= 1, got {list(values)}")
    rf, jump = 1, 1
    for k, d, p in zip(kernel_sizes, dilations, pools):
        rf += (int(k) - 1) * int(d) * jump
        rf += (int(p) - 1) * jump
        jump *= int(p)
    return rf


def in_silico_mutagenesis(predict: Callable[[torch.Tensor], torch.Tensor], one_hot) -> np.ndarray:
    x = torch.as_tensor(np.asarray(one_hot, dtype=np.float32) if not isinstance(one_hot, torch.Tensor)
                        else one_hot.detach().float().cpu())
    if x.dim() != 2 or x.shape[1] != 4:
        raise ValueError(f"one_hot must be (L, 4), got {tuple(x.shape)}")
    length = x.shape[0]
    mutants = x.repeat(length * 4 + 1, 1, 1)  # (4L + 1, L, 4); the last one is the reference
    idx = torch.arange(length * 4)
    pos, base = idx // 4, idx % 4
    mutants[idx, pos] = 0.0
    mutants[idx, pos, base] = 1.0
    with torch.no_grad():
        scores = torch.as_tensor(predict(mutants)).detach().double().cpu().reshape(-1)  # (4L + 1,)
    return (scores[:-1] - scores[-1]).reshape(length, 4).numpy()
