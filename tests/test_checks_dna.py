"""The lesson 12 checks: every named wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/dna.py: tests/test_exercises.py)."""
from __future__ import annotations

import pytest

from course_lib import dna as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import dna as chk
from course_lib.judge import dna as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/dna.py; each keeps full marks:
# tests/test_exercises.py)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, ref_fn", [(chk.check_one_hot_dna, ref.one_hot_dna),
                                           (chk.check_reverse_complement, ref.reverse_complement),
                                           (chk.check_receptive_field, ref.receptive_field),
                                           (chk.check_in_silico_mutagenesis, ref.in_silico_mutagenesis)])
def test_reference_passes_through_a_copy_but_is_refused_when_called(check, ref_fn, hidden):
    with pytest.raises(IntegrityError):
        check(ref_fn, hidden=hidden)
    with pytest.raises(AssertionError):
        check(lambda *a, **k: ref_fn(*a, **k), hidden=hidden)


WRONGS = declared_wrong_answers("12_long_range_dna")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONGS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


def test_stub_is_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in dict.fromkeys(p.values[0] for p in WRONGS):
        with pytest.raises(NotImplementedYet):
            check(stub)
