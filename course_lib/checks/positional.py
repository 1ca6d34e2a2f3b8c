"""Checks for lesson 04 (positional encoding), with the misconceptions they name.

    check_sinusoidal_encoding(sinusoidal_encoding)   # PE matrix (num_positions, d_model)
    check_shift_matrix(shift_matrix)                 # M_k with PE(pos + k) = M_k PE(pos)
    check_exponential_basis(exponential_basis)       # Enformer's exponential basis functions

Named misconceptions
    sinusoidal_encoding: sin and cos swapped; exponent i/d instead of 2i/d; exponent from
    the column index (odd columns get 10000^((2i+1)/d)); sines and cosines in two halves
    instead of interleaved; positions counted from 1; frequencies 10000^(+2i/d) (inverted).
    shift_matrix: rotation in the wrong direction (gives PE(pos - k)); angle k instead
    of k * omega_i; any other matrix fails the property PE[k:] == PE[:-k] @ M_k.T.
    exponential_basis: signed distance instead of |r|; missing ln 2 (h_i is then not a
    half-life); half-lives starting at min_half_life instead of 2^min_half_life (the
    course's convention before it followed Enformer); half-lives spaced linearly instead
    of geometrically; basis axis first; no ValueError when 2^min_half_life > seq_len.

``hidden=True`` uses other, larger inputs.
"""
from __future__ import annotations

import math

import numpy as np

from course_lib import positional as ref
from course_lib.checks import core
from course_lib.checks.core import (
    Case,
    Wrong,
    assert_close,
    assert_raises,
    assert_shape,
    call_student,
    compare_with_reference,
    seeded,
    to_numpy,
    tolerance,
)
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer  # noqa: F401

__all__ = [
    "check_sinusoidal_encoding",
    "check_shift_matrix",
    "check_exponential_basis",
    "WRONG_SINUSOIDAL",
    "WRONG_SHIFT",
    "WRONG_EXPONENTIAL",
]

FORBIDDEN_SINUSOIDAL = ("course_lib.positional.sinusoidal_encoding", "course_lib.positional.sinusoidal_frequencies",
                        "course_lib.positional.shift_matrix")
FORBIDDEN_SHIFT = FORBIDDEN_SINUSOIDAL
FORBIDDEN_EXPONENTIAL = ("course_lib.positional.exponential_basis",
                         "course_lib.positional.enformer_relative_features")


# ---------------------------------------------------------------- private sinusoid (wrongs never call the reference)
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


def _native(x):
    """The student's array in its own dtype (tolerances follow it): numpy as is, torch via .numpy()."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


# ---------------------------------------------------------------- checks
def check_sinusoidal_encoding(student, hidden: bool = False) -> None:
    """Student ``sinusoidal_encoding(num_positions, d_model, base=10000.0)`` equals the paper's formula."""
    exercise = "sinusoidal_encoding"
    sizes = [(6, 4), (50, 16), (3, 2)] if not hidden else [(128, 64), (7, 10), (1, 6), (300, 32)]
    cases = [Case(f"num_positions={n}, d_model={d}", (n, d)) for n, d in sizes]
    cases.append(Case("base=100 instead of 10000", (20, 8), {"base": 100.0}))
    compare_with_reference(student, ref.sinusoidal_encoding, cases, exercise=exercise, wrongs=WRONG_SINUSOIDAL,
                           forbidden=FORBIDDEN_SINUSOIDAL)
    n, d = (200, 32) if hidden else (60, 8)
    raw = call_student(student, Case(f"({n}, {d})", (n, d)), exercise, FORBIDDEN_SINUSOIDAL)
    if not isinstance(raw, np.ndarray):  # the signature (-> np.ndarray) and the prose: this lesson works in numpy
        raise AssertionError(f"{exercise}: return a numpy array, as the signature says (-> np.ndarray); got "
                             f"{type(raw).__module__}.{type(raw).__name__}. Build it with numpy (np.sin, np.cos on "
                             "an outer product of positions and frequencies).")
    core.assert_promised_dtype(raw, "float64", exercise, f"({n}, {d})",
                               "Compute the angles in float64 (ask np.arange for a float64 dtype) and do not cast "
                               "the result: float32 keeps about 7 digits of sin(pos * omega) at large positions.")
    pe = _native(raw)
    assert_shape(pe, (n, d), f"{exercise}: one row per position, one column per feature")
    if pe.min() < -1 - tolerance(pe)[1] or pe.max() > 1 + tolerance(pe)[1]:
        raise AssertionError(f"{exercise}: values must lie in [-1, 1] (they are sines and cosines), "
                             f"got min {pe.min():.3g}, max {pe.max():.3g}")
    # the shift property, from the student's output alone: from every pos to pos + k, each (sin, cos) pair
    # turns by one angle (it depends on the pair, never on pos); no shift matrix is computed here
    k = 5
    turn = np.arctan2(pe[:, 0::2], pe[:, 1::2])
    turn = turn[k:] - turn[:-k]
    message = (f"{exercise}: PE(pos + {k}) must be the same rotation of PE(pos) for every pos; it is not, so "
               "the (sin, cos) pairs do not share a frequency")
    for part in (np.cos(turn), np.sin(turn)):
        assert_close(part, np.broadcast_to(part[:1], part.shape), message)
    odd = Case("d_model=5 (odd: the columns come in (sin, cos) pairs)", (4, 5)) if not hidden else \
        Case("three positions, d_model=9 (odd)", (3, 9))
    assert_raises(student, odd, exercise, ValueError, "for an odd d_model (the columns come in (sin, cos) pairs)",
                  FORBIDDEN_SINUSOIDAL)


def check_shift_matrix(student, hidden: bool = False) -> None:
    """Student ``shift_matrix(k, d_model, base=10000.0)``: PE(pos + k) = M_k @ PE(pos) for all pos."""
    exercise = "shift_matrix"
    specs = [(1, 4), (3, 8), (-2, 6)] if not hidden else [(7, 16), (0, 4), (-11, 10), (2.5, 8), (40, 32)]
    cases = [Case(f"k={k}, d_model={d}", (k, d)) for k, d in specs]
    cases.append(Case("k=4, d_model=6, base=50", (4, 6), {"base": 50.0}))
    compare_with_reference(student, ref.shift_matrix, cases, exercise=exercise, wrongs=WRONG_SHIFT,
                           forbidden=FORBIDDEN_SHIFT)
    rng = seeded(404 if hidden else 4)
    d = 12 if hidden else 6
    k = int(rng.integers(1, 20))
    raw = call_student(student, Case(f"k={k}, d_model={d}", (k, d)), exercise, FORBIDDEN_SHIFT)
    atol, rtol = tolerance(raw)  # the properties hold to the precision the student computed in
    m = _native(raw)
    assert_shape(m, (d, d), f"{exercise}: M_k maps a d_model vector to a d_model vector")
    # PE(pos) for 80 positions, written out (no function here computes the lesson's encoding)
    pos, omega = np.arange(80.0)[:, None], 10000.0 ** (-np.arange(0, d, 2) / d)
    pe = np.empty((80, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * omega), np.cos(pos * omega)
    assert_close(pe[:-k] @ m.T, pe[k:], f"{exercise}: PE(pos + {k}) must equal M_k @ PE(pos) for EVERY pos "
                                        "(rows: PE[k:] == PE[:-k] @ M_k.T)", atol=atol, rtol=rtol)
    assert_close(m @ m.T, np.eye(d), f"{exercise}: M_k must be orthogonal (a rotation), M_k @ M_k.T = I",
                 atol=atol, rtol=rtol)


def check_exponential_basis(student, hidden: bool = False) -> None:
    """Student ``exponential_basis(distances, num_basis, seq_len, min_half_life=3.0)``, Enformer's convention."""
    exercise = "exponential_basis"
    rng = seeded(505 if hidden else 5)
    cases = [
        Case("distances -4..4, 3 basis functions, seq_len=64", (np.arange(-4, 5), 3, 64.0)),
        Case("a (T, S) distance matrix for T=S=5, 2 basis functions, seq_len=10",
             (np.arange(5)[None, :] - np.arange(5)[:, None], 2, 10.0)),
        Case("distances [0, 4, 30] with min_half_life=2", (np.array([0.0, 4.0, 30.0]), 4, 30.0), {"min_half_life": 2.0}),
    ]
    if hidden:
        cases += [
            Case("random distances in [-500, 500], 8 basis functions, seq_len=1536",
                 (rng.integers(-500, 501, size=(4, 6)), 8, 1536.0)),
            Case("one basis function", (np.arange(-3, 4), 1, 12.0)),
            Case("a (2, 3, 4) batch of distances, 3 basis functions, seq_len=256",
                 (rng.integers(-300, 301, size=(2, 3, 4)), 3, 256.0)),
            Case("float distances, min_half_life=0.5", (np.array([-2.5, 0.25, 9.75]), 3, 20.0), {"min_half_life": 0.5}),
        ]
    compare_with_reference(student, ref.exponential_basis, cases, exercise=exercise, wrongs=WRONG_EXPONENTIAL,
                           forbidden=FORBIDDEN_EXPONENTIAL)
    r = np.arange(-20, 21)
    f = to_numpy(call_student(student, Case("distances -20..20, 4 basis, seq_len=40", (r, 4, 40.0)), exercise,
                              FORBIDDEN_EXPONENTIAL))
    assert_shape(f, (41, 4), f"{exercise}: output shape is distances.shape + (num_basis,)")
    assert_close(f, f[::-1], f"{exercise}: f(r) must equal f(-r) (symmetric in the distance)", atol=1e-6)
    assert_close(f[20], np.ones(4), f"{exercise}: every basis function is 1 at distance 0", atol=1e-6)
    assert_close(f[28, 0], 0.5, f"{exercise}: with the default min_half_life=3.0 the first basis function must "
                                "halve at distance 2^3 = 8 (f_1(8) = 0.5)", atol=1e-6)
    if hidden:
        case = Case("min_half_life=6 with seq_len=32 (2^6 = 64 > 32)", (np.arange(3), 2, 32.0), {"min_half_life": 6.0})
        assert_raises(student, case, exercise, ValueError, "when 2^min_half_life > seq_len (the shortest "
                      "half-life would exceed the longest)", FORBIDDEN_EXPONENTIAL)


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
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


# ---------------------------------------------------------------- answers that break one promise each
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


def _breaks_exp_never_raises(distances, num_basis, seq_len, min_half_life=3.0):
    r = np.abs(np.asarray(distances, dtype=np.float64))[..., None]
    return np.exp(-np.log(2.0) * r / 2.0 ** np.linspace(min_half_life, np.log2(seq_len), num_basis))


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("04_positional", "sinusoidal_encoding", check_sinusoidal_encoding,
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
                   Right(_right_sinusoidal_torch_outer))),
    declare("04_positional", "shift_matrix", check_shift_matrix,
            misconceptions=WRONG_SHIFT,
            promises=(
                Breaks("PE(pos + k) = M_k @ PE(pos)", wrong_answer(WRONG_SHIFT, "rotation in the wrong direction"),
                       "rotation in the wrong direction"),
                Breaks("angle k * omega_i", wrong_answer(WRONG_SHIFT, "angle k instead of k * omega"),
                       "angle k instead of k * omega"),
            ),
            right=(Right(_right_shift_loops), Right(_right_shift_float32), Right(_right_shift_kron))),
    declare("04_positional", "exponential_basis", check_exponential_basis,
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
                   Right(_right_exponential_geomspace))),
)
