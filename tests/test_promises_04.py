"""Lesson 04 (sinusoidal_encoding, shift_matrix, exponential_basis): docstring promises, the wrong answer that
breaks each, and the words of its message."""
import numpy as np
import torch
import pytest

from course_lib.checks import positional as C
from named import assert_promise_broken, wrong
from test_checks_positional import sinusoidal_float32


def _pe(n, d, base=10000.0):
    pos = np.arange(n)[:, None]
    ang = pos / base ** (np.arange(0, d, 2) / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)
    return pe


def _exp_never_raises(distances, num_basis, seq_len, min_half_life=3.0):
    r = np.abs(np.asarray(distances, dtype=np.float64))[..., None]
    return np.exp(-np.log(2.0) * r / 2.0 ** np.linspace(min_half_life, np.log2(seq_len), num_basis))


PROMISES = [
    (C.check_sinusoidal_encoding, "sines in even columns, cosines in odd ones (interleaved)", wrong(C.WRONG_SINUSOIDAL, "<lambda>", 'sines and cosines in two halves').fn,
     "sines and cosines in two halves"),
    (C.check_sinusoidal_encoding, "positions 0, 1, ...", wrong(C.WRONG_SINUSOIDAL, "<lambda>", 'positions counted from 1').fn, "positions counted from 1"),
    (C.check_sinusoidal_encoding, "float answer in at least float32",
     lambda n, d, base=10000.0: _pe(n, d, base).astype(np.float16), "half precision"),
    (C.check_sinusoidal_encoding, "an odd d_model raises ValueError",
     lambda n, d, base=10000.0: _pe(n, d + d % 2, base)[:, :d], "odd d_model"),
    (C.check_sinusoidal_encoding, "A numpy array (float64)", sinusoidal_float32, "promises a numpy array of dtype float64"),
    (C.check_sinusoidal_encoding, "a numpy array (-> np.ndarray)",
     lambda n, d, base=10000.0: torch.from_numpy(_pe(n, d, base)), "return a numpy array"),
    (C.check_shift_matrix, "PE(pos + k) = M_k @ PE(pos)", wrong(C.WRONG_SHIFT, "<lambda>", 'rotation in the wrong direction').fn, "rotation in the wrong direction"),
    (C.check_exponential_basis, "f_i halves every h_i positions: f_i(h_i) = 0.5",
     wrong(C.WRONG_EXPONENTIAL, "<lambda>", "missing ln 2").fn, "missing ln 2"),
    (C.check_exponential_basis, "a decay in |r|", wrong(C.WRONG_EXPONENTIAL, "<lambda>", "signed distance instead of |r|").fn,
     "signed distance instead of |r|"),
    (C.check_exponential_basis, "shape distances.shape + (num_basis,)",
     wrong(C.WRONG_EXPONENTIAL, "<lambda>", "basis axis first").fn, "basis axis first"),
    (C.check_exponential_basis, "h_i = 2^x_i, x_i = np.linspace(min_half_life, log2(seq_len), num_basis)",
     wrong(C.WRONG_EXPONENTIAL, "<lambda>", "half-lives spaced linearly").fn, "half-lives spaced linearly"),
    (C.check_exponential_basis, "min_half_life is in log2 units",
     wrong(C.WRONG_EXPONENTIAL, "<lambda>", "half-lives start at min_half_life, not 2^min_half_life").fn,
     "half-lives start at min_half_life"),
    (C.check_exponential_basis, "Raises ValueError unless 2^min_half_life <= seq_len", _exp_never_raises,
     "ValueError"),
    (C.check_shift_matrix, "angle k * omega_i", wrong(C.WRONG_SHIFT, "<lambda>", 'angle k instead of k * omega').fn, "angle k instead of k * omega"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
