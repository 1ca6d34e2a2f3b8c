"""The judge's material of ``course_lib.checks.positional`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import math

import numpy as np

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.positional import (
    _exponential_cases,
    check_exponential_basis,
    check_shift_matrix,
    check_sinusoidal_encoding,
    shift_cases_from,
    sinusoidal_cases_from,
)


# ---------------------------------------------------------------- sinusoidal_encoding
def _pe(num_positions, d_model, base=10000.0, *, swap=False, exponent="2i/d", layout="interleaved", start=0):
    pos = np.arange(start, start + num_positions, dtype=np.float64)[:, None]  # (T, 1)
    i = np.arange(d_model // 2, dtype=np.float64)  # (d/2,)
    if exponent == "2i/d":
        inv = base ** (-2 * i / d_model)
    elif exponent == "i/d":
        inv = base ** (-i / d_model)
    elif exponent == "inverted":
        inv = base ** (2 * i / d_model)
    else:  # "column": each column j uses 10000^(j/d), so odd columns are off by one step
        inv = None
    pe = np.empty((num_positions, d_model))
    if inv is None:
        j = np.arange(d_model, dtype=np.float64)
        ang = pos / base ** (j / d_model)
        pe[:, 0::2], pe[:, 1::2] = np.sin(ang[:, 0::2]), np.cos(ang[:, 1::2])
        return pe
    ang = pos * inv  # (T, d/2)
    first, second = (np.cos(ang), np.sin(ang)) if swap else (np.sin(ang), np.cos(ang))
    if layout == "halves":
        return np.concatenate([first, second], axis=1)
    pe[:, 0::2], pe[:, 1::2] = first, second
    return pe


WRONG_SINUSOIDAL = [
    Wrong("sin and cos swapped", lambda n, d, base=10000.0: _pe(n, d, base, swap=True),
          "the even columns hold cosines and the odd columns sines; the formula is PE(pos, 2i) = sin(...) and "
          "PE(pos, 2i+1) = cos(...). Check position 0: it must be [0, 1, 0, 1, ...]."),
    Wrong("exponent i/d instead of 2i/d", lambda n, d, base=10000.0: _pe(n, d, base, exponent="i/d"),
          "the frequencies use base^(i/d) where i counts (sin, cos) pairs; the exponent is 2i/d (the even "
          "column index over d), so the wavelengths must reach up to about 2*pi*base at the last pair."),
    Wrong("exponent from the column index", lambda n, d, base=10000.0: _pe(n, d, base, exponent="column"),
          "each column j used its own exponent j/d, so a cosine column has a different frequency than the "
          "sine before it; both columns of pair i share omega_i = 1 / base^(2i/d)."),
    Wrong("sines and cosines in two halves", lambda n, d, base=10000.0: _pe(n, d, base, layout="halves"),
          "you put all sines in the first half and all cosines in the second half (another common layout); "
          "this course follows the paper: sines in the even columns 0, 2, 4, ..., cosines in the odd columns."),
    Wrong("positions counted from 1", lambda n, d, base=10000.0: _pe(n, d, base, start=1),
          "the first row is position 0 (sin 0 = 0, cos 0 = 1); use np.arange(num_positions)."),
    Wrong("frequencies inverted", lambda n, d, base=10000.0: _pe(n, d, base, exponent="inverted"),
          "you multiplied the position by base^(2i/d) instead of dividing by it: the angle is pos / base^(2i/d)."),
]


# written independently of course_lib.positional; the students' and the kernel's editions replace each by a stub
def _right_sinusoidal_loops(num_positions, d_model, base=10000.0):
    if d_model % 2:  # the prose: raise ValueError for an odd d_model
        raise ValueError("d_model must be even")
    pe = np.zeros((num_positions, d_model))
    for pos in range(num_positions):
        for i in range(d_model // 2):
            angle = pos / base ** (2 * i / d_model)
            pe[pos, 2 * i] = math.sin(angle)
            pe[pos, 2 * i + 1] = math.cos(angle)
    return pe


def _right_sinusoidal_exp_log(num_positions, d_model, base=10000.0):
    """omega_i = exp(-2i ln(base) / d_model); sines and cosines written into the even and odd columns (float64)."""
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    omega = np.exp(-np.arange(0, d_model, 2) * np.log(base) / d_model)
    angles = np.outer(np.arange(num_positions), omega)
    pe = np.zeros((num_positions, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


def _right_sinusoidal_torch_outer(num_positions, d_model, base=10000.0):
    """torch inside, an outer product and strided assignment; a numpy array out."""
    import torch

    if d_model % 2 or d_model < 2:
        raise ValueError(f"d_model must be a positive even integer, got {d_model}")
    omega = torch.exp(-math.log(base) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.outer(torch.arange(num_positions, dtype=torch.float64), omega)
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe.numpy()


def _breaks_pe(n, d, base=10000.0):
    pos = np.arange(n)[:, None]
    ang = pos / base ** (np.arange(0, d, 2) / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)
    return pe


def _breaks_pe_float16(n, d, base=10000.0):
    return _breaks_pe(n, d, base).astype(np.float16)


def _breaks_pe_odd_d_model(n, d, base=10000.0):
    return _breaks_pe(n, d + d % 2, base)[:, :d]


def _breaks_sinusoidal_float32(num_positions, d_model, base=10000.0):
    """Vectorised in float32: sin and cos stacked on a last axis, then flattened to interleave."""
    omega = (1.0 / np.float32(base) ** (np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model)))
    angles = np.arange(num_positions, dtype=np.float32)[:, None] * omega[None, :]
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(num_positions, d_model)


def _breaks_pe_torch(n, d, base=10000.0):
    import torch

    return torch.from_numpy(_breaks_pe(n, d, base))


def sinusoidal_cases() -> list[Case]:
    """The hidden cases of ``check_sinusoidal_encoding``."""
    return sinusoidal_cases_from([(128, 64), (7, 10), (1, 6), (300, 32)])


SINUSOIDAL_PROPERTY = (200, 32)  # the hidden property test's (num_positions, d_model)


def sinusoidal_odd_case() -> Case:
    return Case("three positions, d_model=9 (odd)", (3, 9))


SINUSOIDAL_ENCODING = declare("04_positional", "sinusoidal_encoding", check_sinusoidal_encoding,
            misconceptions=WRONG_SINUSOIDAL,
            promises=(
                Breaks("sines in even columns, cosines in odd ones (interleaved)",
                       wrong_answer(WRONG_SINUSOIDAL, "sines and cosines in two halves"),
                       "sines and cosines in two halves"),
                Breaks("positions 0, 1, ...", wrong_answer(WRONG_SINUSOIDAL, "positions counted from 1"),
                       "positions counted from 1"),
                Breaks("float answer in at least float32", _breaks_pe_float16, "half precision"),
                Breaks("an odd d_model raises ValueError", _breaks_pe_odd_d_model, "odd d_model"),
                Breaks("A numpy array (float64)", _breaks_sinusoidal_float32,
                       "promises a numpy array of dtype float64"),
                Breaks("a numpy array (-> np.ndarray)", _breaks_pe_torch, "return a numpy array"),
            ),
            right=(Right(_right_sinusoidal_loops), Right(_right_sinusoidal_exp_log),
                   Right(_right_sinusoidal_torch_outer)))


# ---------------------------------------------------------------- shift_matrix
def _shift(k, d_model, base=10000.0, *, direction=1, use_omega=True):
    i = np.arange(d_model // 2, dtype=np.float64)
    omega = base ** (-2 * i / d_model) if use_omega else np.ones_like(i)
    c, s = np.cos(k * omega), direction * np.sin(k * omega)
    m = np.zeros((d_model, d_model))
    e, o = np.arange(0, d_model, 2), np.arange(1, d_model, 2)
    m[e, e], m[e, o], m[o, e], m[o, o] = c, s, -s, c
    return m


WRONG_SHIFT = [
    Wrong("rotation in the wrong direction", lambda k, d, base=10000.0: _shift(k, d, base, direction=-1),
          "your matrix moves PE(pos) to PE(pos - k): the signs of the sines are swapped (you returned M_k "
          "transposed). From sin(a + b) = sin a cos b + cos a sin b: the sine row is [cos(k w), sin(k w)]."),
    Wrong("angle k instead of k * omega", lambda k, d, base=10000.0: _shift(k, d, base, use_omega=False),
          "every block rotates by the same angle k; pair i turns by k * omega_i with omega_i = 1 / base^(2i/d)."),
]


def _right_shift_loops(k, d_model, base=10000.0):
    m = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        w = k / base ** (2 * i / d_model)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[math.cos(w), math.sin(w)], [-math.sin(w), math.cos(w)]]
    return m


def _right_shift_float32(k, d_model, base=10000.0):
    """Vectorised fancy indexing of the four entries of every block, in float32."""
    i = np.arange(d_model // 2)
    w = (np.float32(k) / np.float32(base) ** (2 * i / np.float32(d_model))).astype(np.float32)
    m = np.zeros((d_model, d_model), dtype=np.float32)
    m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = np.cos(w), np.sin(w)
    m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -np.sin(w), np.cos(w)
    return m


def _right_shift_kron(k, d_model, base=10000.0):
    """Another formulation: cos(w) on the diagonal plus sin(w) times the 2x2 rotation generator, block by block."""
    w = k / base ** (np.arange(0, d_model, 2) / d_model)
    generator = np.array([[0.0, 1.0], [-1.0, 0.0]])
    return np.kron(np.diag(np.cos(w)), np.eye(2)) + np.kron(np.diag(np.sin(w)), generator)


def shift_cases() -> list[Case]:
    """The hidden cases of ``check_shift_matrix``."""
    return shift_cases_from([(7, 16), (0, 4), (-11, 10), (2.5, 8), (40, 32)])


SHIFT_PROPERTY = (404, 12)  # the hidden property test's seed (of k) and d_model


SHIFT_MATRIX = declare("04_positional", "shift_matrix", check_shift_matrix,
            misconceptions=WRONG_SHIFT,
            promises=(
                Breaks("PE(pos + k) = M_k @ PE(pos)", wrong_answer(WRONG_SHIFT, "rotation in the wrong direction"),
                       "rotation in the wrong direction"),
                Breaks("angle k * omega_i", wrong_answer(WRONG_SHIFT, "angle k instead of k * omega"),
                       "angle k instead of k * omega"),
            ),
            right=(Right(_right_shift_loops), Right(_right_shift_float32), Right(_right_shift_kron)))


# ---------------------------------------------------------------- exponential_basis
def _exp_basis(distances, num_basis, seq_len, min_half_life=3.0, *, signed=False, ln2=True, spacing="enformer",
               axis_last=True):
    r = np.asarray(distances, dtype=np.float64)
    r = r if signed else np.abs(r)
    if spacing == "enformer":  # 2^linspace(min_half_life, log2(seq_len), n)
        h = 2.0 ** np.linspace(min_half_life, math.log2(seq_len), num_basis)
    elif spacing == "from min_half_life":  # geometric, but starting at min_half_life positions
        h = np.geomspace(min_half_life, seq_len, num_basis)
    else:  # linear between 2^min_half_life and seq_len
        h = np.linspace(2.0 ** min_half_life, seq_len, num_basis)
    rate = (math.log(2.0) if ln2 else 1.0) / h
    out = np.exp(-rate * r[..., None])
    return out if axis_last else np.moveaxis(out, -1, 0)


WRONG_EXPONENTIAL = [
    Wrong("signed distance instead of |r|",
          lambda r, n, s, m=3.0: _exp_basis(r, n, s, m, signed=True),
          "negative distances give values above 1: the basis depends on how FAR a key is, |r|, so that "
          "f(r) = f(-r) (the sign(r) copy adds the direction later)."),
    Wrong("missing ln 2", lambda r, n, s, m=3.0: _exp_basis(r, n, s, m, ln2=False),
          "exp(-|r| / h) is e-folding, not halving: at |r| = h it gives 0.37, not 0.5. A half-life h means the "
          "value halves every h positions: choose the rate so that f(h) = 1/2."),
    Wrong("half-lives start at min_half_life, not 2^min_half_life",
          lambda r, n, s, m=3.0: _exp_basis(r, n, s, m, spacing="from min_half_life"),
          "your shortest half-life is min_half_life positions; as in Enformer, min_half_life is in log2 units "
          "(an exponent of 2), like the longest half-life's exponent log2(seq_len), so the default 3.0 means "
          "2^3 = 8 positions."),
    Wrong("half-lives spaced linearly", lambda r, n, s, m=3.0: _exp_basis(r, n, s, m, spacing="lin"),
          "the half-lives must be spaced evenly in LOG space (evenly spaced EXPONENTS of 2, from min_half_life to "
          "log2(seq_len)), so short and long ranges get as many basis functions; evenly spaced half-lives crowd "
          "them at long range."),
    Wrong("basis axis first", lambda r, n, s, m=3.0: _exp_basis(r, n, s, m, axis_last=False),
          "the basis index must be the LAST axis: shape distances.shape + (num_basis,), features last like tokens."),
]


def _right_exponential_loops(distances, num_basis, seq_len, min_half_life=3.0):
    """Enformer's convention with loops: h_k = 2^(m + k (log2 L - m) / (n - 1))."""
    top = math.log(seq_len, 2)
    if min_half_life > top:
        raise ValueError("min_half_life too large")
    step = (top - min_half_life) / (num_basis - 1) if num_basis > 1 else 0.0
    halves = [2.0 ** (min_half_life + k * step) for k in range(num_basis)]
    r = np.abs(np.asarray(distances, dtype=float))
    return np.stack([0.5 ** (r / h) for h in halves], axis=-1)


def _right_exponential_float32(distances, num_basis, seq_len, min_half_life=3.0):
    """The same in float32 throughout."""
    if 2.0 ** min_half_life > seq_len:
        raise ValueError("2^min_half_life > seq_len")
    h = np.exp2(np.linspace(min_half_life, np.log2(seq_len), num_basis)).astype(np.float32)
    r = np.abs(np.asarray(distances)).astype(np.float32)
    return np.exp(-np.float32(np.log(2)) * r[..., None] / h)


def _right_exponential_geomspace(distances, num_basis, seq_len, min_half_life=3.0):
    """Another formulation: geometric half-lives from 2^min_half_life to seq_len, einsum for the rates."""
    if 2.0 ** min_half_life > seq_len:
        raise ValueError("2^min_half_life > seq_len")
    h = np.geomspace(2.0 ** min_half_life, seq_len, num_basis)
    return np.exp(-np.einsum("...,k->...k", np.abs(np.asarray(distances, dtype=float)), np.log(2) / h))


def _breaks_exp_never_raises(distances, num_basis, seq_len, min_half_life=3.0):
    r = np.abs(np.asarray(distances, dtype=np.float64))[..., None]
    return np.exp(-np.log(2.0) * r / 2.0 ** np.linspace(min_half_life, np.log2(seq_len), num_basis))


def exponential_cases() -> list[Case]:
    """The hidden cases of ``check_exponential_basis``."""
    rng = seeded(505)
    return _exponential_cases() + [
        Case("random distances in [-500, 500], 8 basis functions, seq_len=1536",
             (rng.integers(-500, 501, size=(4, 6)), 8, 1536.0)),
        Case("one basis function", (np.arange(-3, 4), 1, 12.0)),
        Case("a (2, 3, 4) batch of distances, 3 basis functions, seq_len=256",
             (rng.integers(-300, 301, size=(2, 3, 4)), 3, 256.0)),
        Case("float distances, min_half_life=0.5", (np.array([-2.5, 0.25, 9.75]), 3, 20.0), {"min_half_life": 0.5}),
    ]


def exponential_raise_cases() -> list[Case]:
    """The hidden test's input that must raise ValueError."""
    return [Case("min_half_life=6 with seq_len=32 (2^6 = 64 > 32)", (np.arange(3), 2, 32.0), {"min_half_life": 6.0})]


EXPONENTIAL_BASIS = declare("04_positional", "exponential_basis", check_exponential_basis,
            misconceptions=WRONG_EXPONENTIAL,
            promises=(
                Breaks("f_i halves every h_i positions: f_i(h_i) = 0.5",
                       wrong_answer(WRONG_EXPONENTIAL, "missing ln 2"), "missing ln 2"),
                Breaks("a decay in |r|", wrong_answer(WRONG_EXPONENTIAL, "signed distance instead of |r|"),
                       "signed distance instead of |r|"),
                Breaks("shape distances.shape + (num_basis,)", wrong_answer(WRONG_EXPONENTIAL, "basis axis first"),
                       "basis axis first"),
                Breaks("h_i = 2^x_i, x_i = np.linspace(min_half_life, log2(seq_len), num_basis)",
                       wrong_answer(WRONG_EXPONENTIAL, "half-lives spaced linearly"), "half-lives spaced linearly"),
                Breaks("min_half_life is in log2 units",
                       wrong_answer(WRONG_EXPONENTIAL, "half-lives start at min_half_life, not 2^min_half_life"),
                       "half-lives start at min_half_life"),
                Breaks("Raises ValueError unless 2^min_half_life <= seq_len", _breaks_exp_never_raises, "ValueError"),
            ),
            right=(Right(_right_exponential_loops), Right(_right_exponential_float32),
                   Right(_right_exponential_geomspace)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (SINUSOIDAL_ENCODING, SHIFT_MATRIX, EXPONENTIAL_BASIS)
