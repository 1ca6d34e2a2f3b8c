"""The lesson 04 checks: every known wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/positional.py: tests/test_exercises.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from course_lib import positional as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import positional as chk
from course_lib.judge import positional as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/positional.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
sinusoidal_loops = J._right_sinusoidal_loops
exponential_loops = J._right_exponential_loops


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = declared_wrong_answers("04_positional")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


def test_required_misconceptions_are_named():
    names = {w.name for w in J.WRONG_SINUSOIDAL}
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
