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

``hidden=True`` uses other, larger inputs: they, the known wrong answers behind these names and the exercises'
declarations are the judge's (``course_lib/judge/positional.py``), which the students' and the grading kernel's
editions leave out.
"""
from __future__ import annotations

import numpy as np

from course_lib import positional as ref
from course_lib.checks import core
from course_lib.checks.core import (
    Case,
    assert_close,
    assert_raises,
    assert_shape,
    call_student,
    compare_with_reference,
    seeded,
    to_numpy,
    tolerance,
)

__all__ = [
    "check_sinusoidal_encoding",
    "check_shift_matrix",
    "check_exponential_basis",
]


FORBIDDEN_SINUSOIDAL = ("course_lib.positional.sinusoidal_encoding", "course_lib.positional.sinusoidal_frequencies",
                        "course_lib.positional.shift_matrix")

FORBIDDEN_SHIFT = FORBIDDEN_SINUSOIDAL

FORBIDDEN_EXPONENTIAL = ("course_lib.positional.exponential_basis",
                         "course_lib.positional.enformer_relative_features")


def _native(x):
    """The student's array in its own dtype (tolerances follow it): numpy as is, torch via .numpy()."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


# ---------------------------------------------------------------- sinusoidal_encoding
def sinusoidal_cases_from(sizes) -> list[Case]:
    """One case per (num_positions, d_model), then one with another base."""
    return [Case(f"num_positions={n}, d_model={d}", (n, d)) for n, d in sizes] + [
        Case("base=100 instead of 10000", (20, 8), {"base": 100.0})]


def _sinusoidal_cases() -> list[Case]:
    return sinusoidal_cases_from([(6, 4), (50, 16), (3, 2)])


@core.graded
def check_sinusoidal_encoding(student, hidden: bool = False) -> None:
    """Student ``sinusoidal_encoding(num_positions, d_model, base=10000.0)`` equals the paper's formula."""
    exercise = "sinusoidal_encoding"
    judge = core.hidden_part(__name__) if hidden else None
    cases = judge.sinusoidal_cases() if hidden else _sinusoidal_cases()
    compare_with_reference(student, ref.sinusoidal_encoding, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "SINUSOIDAL"), forbidden=FORBIDDEN_SINUSOIDAL)
    n, d = judge.SINUSOIDAL_PROPERTY if hidden else (60, 8)
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
    odd = judge.sinusoidal_odd_case() if hidden else \
        Case("d_model=5 (odd: the columns come in (sin, cos) pairs)", (4, 5))
    assert_raises(student, odd, exercise, ValueError, "for an odd d_model (the columns come in (sin, cos) pairs)",
                  FORBIDDEN_SINUSOIDAL)


# ---------------------------------------------------------------- shift_matrix
def shift_cases_from(specs) -> list[Case]:
    """One case per (k, d_model), then one with another base."""
    return [Case(f"k={k}, d_model={d}", (k, d)) for k, d in specs] + [Case("k=4, d_model=6, base=50", (4, 6),
                                                                           {"base": 50.0})]


def _shift_cases() -> list[Case]:
    return shift_cases_from([(1, 4), (3, 8), (-2, 6)])


@core.graded
def check_shift_matrix(student, hidden: bool = False) -> None:
    """Student ``shift_matrix(k, d_model, base=10000.0)``: PE(pos + k) = M_k @ PE(pos) for all pos."""
    exercise = "shift_matrix"
    cases = core.hidden_part(__name__).shift_cases() if hidden else _shift_cases()
    compare_with_reference(student, ref.shift_matrix, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "SHIFT"), forbidden=FORBIDDEN_SHIFT)
    seed, d = core.hidden_part(__name__).SHIFT_PROPERTY if hidden else (4, 6)
    rng = seeded(seed)
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


# ---------------------------------------------------------------- exponential_basis
def _exponential_cases() -> list[Case]:
    return [
        Case("distances -4..4, 3 basis functions, seq_len=64", (np.arange(-4, 5), 3, 64.0)),
        Case("a (T, S) distance matrix for T=S=5, 2 basis functions, seq_len=10",
             (np.arange(5)[None, :] - np.arange(5)[:, None], 2, 10.0)),
        Case("distances [0, 4, 30] with min_half_life=2", (np.array([0.0, 4.0, 30.0]), 4, 30.0), {"min_half_life": 2.0}),
    ]


def _exponential_raise_cases() -> list[Case]:
    return [Case("min_half_life=5 with seq_len=16 (2^5 = 32 > 16)", (np.arange(4), 3, 16.0), {"min_half_life": 5.0})]


@core.graded
def check_exponential_basis(student, hidden: bool = False) -> None:
    """Student ``exponential_basis(distances, num_basis, seq_len, min_half_life=3.0)``, Enformer's convention."""
    exercise = "exponential_basis"
    cases = core.hidden_part(__name__).exponential_cases() if hidden else _exponential_cases()
    compare_with_reference(student, ref.exponential_basis, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "EXPONENTIAL"), forbidden=FORBIDDEN_EXPONENTIAL)
    r = np.arange(-20, 21)
    f = to_numpy(call_student(student, Case("distances -20..20, 4 basis, seq_len=40", (r, 4, 40.0)), exercise,
                              FORBIDDEN_EXPONENTIAL))
    assert_shape(f, (41, 4), f"{exercise}: output shape is distances.shape + (num_basis,)")
    assert_close(f, f[::-1], f"{exercise}: f(r) must equal f(-r) (symmetric in the distance)", atol=1e-6)
    assert_close(f[20], np.ones(4), f"{exercise}: every basis function is 1 at distance 0", atol=1e-6)
    assert_close(f[28, 0], 0.5, f"{exercise}: with the default min_half_life=3.0 the first basis function must "
                                "halve at distance 2^3 = 8 (f_1(8) = 0.5)", atol=1e-6)
    for case in core.hidden_part(__name__).exponential_raise_cases() if hidden else _exponential_raise_cases():
        assert_raises(student, case, exercise, ValueError, "when 2^min_half_life > seq_len (the shortest "
                      "half-life would exceed the longest)", FORBIDDEN_EXPONENTIAL)

