"""The reference solutions of ``course_lib.positional`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import math

import numpy as np

from course_lib.positional import _check_basis_args, sinusoidal_frequencies


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    if not isinstance(num_positions, (int, np.integer)) or num_positions < 1:
        raise ValueError(f"num_positions must be a positive integer, got {num_positions!r}")
    omega = sinusoidal_frequencies(d_model, base)  # (d/2,)
    angles = np.arange(num_positions, dtype=np.float64)[:, None] * omega[None, :]  # (T, d/2)
    pe = np.empty((num_positions, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def shift_matrix(k: float, d_model: int, base: float = 10000.0) -> np.ndarray:
    omega = sinusoidal_frequencies(d_model, base)  # (d/2,)
    c, s = np.cos(k * omega), np.sin(k * omega)
    m = np.zeros((d_model, d_model), dtype=np.float64)
    even, odd = np.arange(0, d_model, 2), np.arange(1, d_model, 2)
    m[even, even] = c
    m[even, odd] = s
    m[odd, even] = -s
    m[odd, odd] = c
    return m


def exponential_basis(distances, num_basis: int, seq_len: float, min_half_life: float = 3.0) -> np.ndarray:
    _check_basis_args(num_basis, seq_len)
    if not min_half_life <= math.log2(seq_len):
        raise ValueError(f"min_half_life is log2 of the shortest half-life and must be <= log2(seq_len) = "
                         f"{math.log2(seq_len):.3g}, got {min_half_life}")
    r = np.abs(np.asarray(distances, dtype=np.float64))[..., None]  # (..., 1)
    half_lives = 2.0 ** np.linspace(min_half_life, math.log2(seq_len), num_basis)  # (n,)
    return np.exp(-math.log(2.0) * r / half_lives)  # (..., n)
