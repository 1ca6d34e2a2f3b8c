"""course_lib.checks.masking: every known-wrong answer is caught and NAMED, calling the reference is an
IntegrityError (the right alternatives are declared with the exercises: tests/test_exercises.py)."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib import masking
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import masking as C
from course_lib.judge import masking as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/judge/masking.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
padding_mask = J._right_padding_mask
to_additive = J._right_to_additive
masked_softmax = J._right_masked_softmax
CHECKS = [(C.check_causal_mask, "causal_mask"), (C.check_padding_mask, "padding_mask"),
          (C.check_combine_masks, "combine_masks"), (C.check_to_additive, "to_additive"),
          (C.check_masked_softmax, "masked_softmax")]

WRONGS = declared_wrong_answers("02_masking")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check,wrong", WRONGS)
def test_each_misconception_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


def test_required_misconceptions_exist():
    names = {p.values[1].name for p in WRONGS}
    assert {"mask inverted", "mask after softmax", "NaN on a fully masked row",
            "large negative instead of -inf"} <= names


@pytest.mark.parametrize("check,name", CHECKS)
def test_calling_the_reference_is_an_integrity_error(check, name):
    ref = getattr(masking, name)

    def cheat(*args, **kwargs):
        return ref(*args, **kwargs)

    with pytest.raises(IntegrityError, match="reference"):
        check(cheat)
    with pytest.raises(IntegrityError):
        check(ref)


def test_masked_softmax_may_not_call_the_lesson01_softmax():
    from course_lib.attention import softmax as lesson01_softmax

    def uses_reference_softmax(scores, mask=None):
        scores = np.asarray(scores, dtype=float)
        return lesson01_softmax(scores if mask is None else np.where(mask, scores, -np.inf))

    with pytest.raises(IntegrityError):
        C.check_masked_softmax(uses_reference_softmax)


@pytest.mark.parametrize("check", [c for c, _ in CHECKS])
def test_stub_is_not_implemented(check):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet):
        check(stub)


def test_integer_or_float_masks_are_refused_with_a_reason():
    with pytest.raises(AssertionError, match="BOOLEAN"):
        C.check_causal_mask(lambda T, S=None: np.tril(np.ones((T, T if S is None else S)), (S or T) - T))
    with pytest.raises(AssertionError, match="BOOLEAN"):
        C.check_padding_mask(lambda lengths, max_len=None: padding_mask(lengths, max_len).astype(int))


def test_to_additive_wrong_dtype_is_reported():
    with pytest.raises(AssertionError, match="dtype"):
        C.check_to_additive(lambda mask, dtype=None: to_additive(mask).astype(np.float32)
                            if isinstance(mask, np.ndarray) else to_additive(mask, dtype), hidden=False)


def test_masked_softmax_unnamed_error_reports_the_difference():
    def off(scores, mask=None):
        return masked_softmax(scores, mask) * 0.9

    with pytest.raises(AssertionError, match="differ from the reference"):
        C.check_masked_softmax(off)


def test_crashing_student_reports_the_exception():
    def crash(T, S=None):
        raise IndexError("boom")

    with pytest.raises(AssertionError, match="IndexError: boom"):
        C.check_causal_mask(crash)
