"""The lesson 12 checks: every named wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/dna.py: tests/test_exercises.py)."""
from __future__ import annotations

import pytest

from course_lib import dna as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import dna as chk
from named import assert_named_alone


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


WRONGS = [(chk.check_one_hot_dna, chk.WRONG_ONE_HOT), (chk.check_reverse_complement, chk.WRONG_RC),
          (chk.check_receptive_field, chk.WRONG_RF), (chk.check_in_silico_mutagenesis, chk.WRONG_ISM)]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", [(c, w) for c, ws in WRONGS for w in ws],
                         ids=[w.name for _, ws in WRONGS for w in ws])
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


def test_stub_is_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check, _ in WRONGS:
        with pytest.raises(NotImplementedYet):
            check(stub)
