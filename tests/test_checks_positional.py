"""The lesson 04 checks: every known wrong answer is named, correct answers pass, the reference is refused."""
from __future__ import annotations

import math

import numpy as np
import torch
import pytest

from course_lib import positional as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import positional as chk
from named import assert_named_alone, wrong_answer_params


# ---------------------------------------------------------------- independent correct answers
def sinusoidal_loops(num_positions, d_model, base=10000.0):
    if d_model % 2:  # the prose: raise ValueError for an odd d_model
        raise ValueError("d_model must be even")
    pe = np.zeros((num_positions, d_model))
    for pos in range(num_positions):
        for i in range(d_model // 2):
            angle = pos / base ** (2 * i / d_model)
            pe[pos, 2 * i] = math.sin(angle)
            pe[pos, 2 * i + 1] = math.cos(angle)
    return pe


def shift_loops(k, d_model, base=10000.0):
    m = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        w = k / base ** (2 * i / d_model)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[math.cos(w), math.sin(w)], [-math.sin(w), math.cos(w)]]
    return m


def exponential_loops(distances, num_basis, seq_len, min_half_life=3.0):
    """Enformer's convention with loops: h_k = 2^(m + k (log2 L - m) / (n - 1))."""
    top = math.log(seq_len, 2)
    if min_half_life > top:
        raise ValueError("min_half_life too large")
    step = (top - min_half_life) / (num_basis - 1) if num_basis > 1 else 0.0
    halves = [2.0 ** (min_half_life + k * step) for k in range(num_basis)]
    r = np.abs(np.asarray(distances, dtype=float))
    return np.stack([0.5 ** (r / h) for h in halves], axis=-1)


def exponential_float32(distances, num_basis, seq_len, min_half_life=3.0):
    """The same in float32 throughout."""
    if 2.0 ** min_half_life > seq_len:
        raise ValueError("2^min_half_life > seq_len")
    h = np.exp2(np.linspace(min_half_life, np.log2(seq_len), num_basis)).astype(np.float32)
    r = np.abs(np.asarray(distances)).astype(np.float32)
    return np.exp(-np.float32(np.log(2)) * r[..., None] / h)


def exponential_geomspace(distances, num_basis, seq_len, min_half_life=3.0):
    """Another formulation: geometric half-lives from 2^min_half_life to seq_len, einsum for the rates."""
    if 2.0 ** min_half_life > seq_len:
        raise ValueError("2^min_half_life > seq_len")
    h = np.geomspace(2.0 ** min_half_life, seq_len, num_basis)
    return np.exp(-np.einsum("...,k->...k", np.abs(np.asarray(distances, dtype=float)), np.log(2) / h))


def sinusoidal_float32(num_positions, d_model, base=10000.0):
    """Vectorised in float32: sin and cos stacked on a last axis, then flattened to interleave."""
    omega = (1.0 / np.float32(base) ** (np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model)))
    angles = np.arange(num_positions, dtype=np.float32)[:, None] * omega[None, :]
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(num_positions, d_model)


def sinusoidal_torch_outer(num_positions, d_model, base=10000.0):
    """torch inside, an outer product and strided assignment; a numpy array out."""
    if d_model % 2 or d_model < 2:
        raise ValueError(f"d_model must be a positive even integer, got {d_model}")
    omega = torch.exp(-math.log(base) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.outer(torch.arange(num_positions, dtype=torch.float64), omega)
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe.numpy()


def shift_float32(k, d_model, base=10000.0):
    """Vectorised fancy indexing of the four entries of every block, in float32."""
    i = np.arange(d_model // 2)
    w = (np.float32(k) / np.float32(base) ** (2 * i / np.float32(d_model))).astype(np.float32)
    m = np.zeros((d_model, d_model), dtype=np.float32)
    m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = np.cos(w), np.sin(w)
    m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -np.sin(w), np.cos(w)
    return m


def shift_kron(k, d_model, base=10000.0):
    """Another formulation: cos(w) on the diagonal plus sin(w) times the 2x2 rotation generator, block by block."""
    w = k / base ** (np.arange(0, d_model, 2) / d_model)
    generator = np.array([[0.0, 1.0], [-1.0, 0.0]])
    return np.kron(np.diag(np.cos(w)), np.eye(2)) + np.kron(np.diag(np.sin(w)), generator)


def sinusoidal_exp_log(num_positions, d_model, base=10000.0):
    """omega_i = exp(-2i ln(base) / d_model); sines and cosines written into the even and odd columns (float64)."""
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    omega = np.exp(-np.arange(0, d_model, 2) * np.log(base) / d_model)
    angles = np.outer(np.arange(num_positions), omega)
    pe = np.zeros((num_positions, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


CORRECT = [
    (chk.check_sinusoidal_encoding, sinusoidal_loops),
    (chk.check_sinusoidal_encoding, sinusoidal_exp_log),
    (chk.check_sinusoidal_encoding, sinusoidal_torch_outer),
    (chk.check_shift_matrix, shift_loops),
    (chk.check_shift_matrix, shift_float32),
    (chk.check_shift_matrix, shift_kron),
    (chk.check_exponential_basis, exponential_loops),
    (chk.check_exponential_basis, exponential_float32),
    (chk.check_exponential_basis, exponential_geomspace),
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=[fn.__name__ for _, fn in CORRECT])
def test_correct_independent_answers_pass(check, fn, hidden):
    check(fn, hidden=hidden)


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = wrong_answer_params((chk.check_sinusoidal_encoding, chk.WRONG_SINUSOIDAL),
                                   (chk.check_shift_matrix, chk.WRONG_SHIFT),
                                   (chk.check_exponential_basis, chk.WRONG_EXPONENTIAL))


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


def test_required_misconceptions_are_named():
    names = {w.name for w in chk.WRONG_SINUSOIDAL}
    assert "sin and cos swapped" in names and "exponent i/d instead of 2i/d" in names


# ---------------------------------------------------------------- other failures
def test_reference_and_stub_are_refused():
    with pytest.raises(IntegrityError):
        chk.check_sinusoidal_encoding(ref.sinusoidal_encoding)
    with pytest.raises(IntegrityError, match="reference implementation"):
        chk.check_shift_matrix(lambda k, d, base=10000.0: ref.shift_matrix(k, d, base))
    with pytest.raises(IntegrityError):
        chk.check_exponential_basis(lambda r, n, s, m=3.0: ref.enformer_relative_features(r, 6 * n, s)[..., :n])

    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="not implemented yet"):
        chk.check_sinusoidal_encoding(stub)


def test_other_mistakes_fail_with_a_message():
    with pytest.raises(AssertionError, match="expected shape"):
        chk.check_sinusoidal_encoding(lambda n, d, base=10000.0: sinusoidal_loops(n, d, base).T)
    with pytest.raises(AssertionError, match="sinusoidal_encoding"):
        chk.check_sinusoidal_encoding(lambda n, d, base=10000.0: sinusoidal_loops(n, d, base) * 1.01)
    with pytest.raises(AssertionError, match="shift_matrix"):  # identity is a rotation, but by 0
        chk.check_shift_matrix(lambda k, d, base=10000.0: np.eye(d))
    with pytest.raises(AssertionError, match="expected shape \\(9, 3\\), got \\(9,\\)"):
        chk.check_exponential_basis(lambda r, n, s, m=3.0: np.exp(-np.abs(r)))
    with pytest.raises(AssertionError, match="promises a ValueError when 2\\^min_half_life > seq_len"):
        chk.check_exponential_basis(lambda r, n, s, min_half_life=3.0: exponential_loops(r, n, s, min(min_half_life, math.log2(s))),
                                    hidden=True)
    with pytest.raises(AssertionError, match="exponential_basis: your function raised ZeroDivisionError"):
        chk.check_exponential_basis(lambda r, n, s, m=3.0: 1 / 0)
