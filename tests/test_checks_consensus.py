"""The lesson 11 checks: every known wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/consensus.py: tests/test_exercises.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib import consensus as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import consensus as chk
from course_lib.judge import consensus as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/consensus.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
edit_distance_loops = J._right_edit_distance_loops
soft_loss_loops = J._right_soft_loss_loops


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = declared_wrong_answers("11_read_consensus")


def _as_student(check, wrong):
    """A wrong answer written as a student would: for edit_distance, with some traceback."""
    if check is chk.check_edit_distance:
        return J._with_no_operations(wrong.fn)  # as its declaration hands it in
    if check is chk.check_soft_alignment_loss:
        def fn(logits, target, gamma, del_cost=1.0):
            if not gamma > 0 or len(logits) != len(target):
                raise ValueError("gamma or shapes")
            return wrong.fn(logits, target, gamma, del_cost)
        return fn
    if check is chk.check_pileup:
        def fn(reads, alignments, length):
            if len(reads) != len(alignments):
                raise ValueError("one alignment per read")
            for r, ops in zip(reads, alignments):
                if sum(o in "=XD" for o in ops) != length:
                    raise ValueError("bad")
            return wrong.fn(reads, alignments, length)
        return fn
    return wrong.fn


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, _as_student(check, wrong), wrong.name)


# ---------------------------------------------------------------- integrity and other failures
def test_reference_and_builtins_are_refused():
    with pytest.raises(IntegrityError):
        chk.check_edit_distance(ref.edit_distance)
    with pytest.raises(IntegrityError):
        chk.check_pileup(lambda r, a, n: ref.pileup(r, a, n))
    with pytest.raises(IntegrityError):
        chk.check_soft_alignment_loss(lambda x, t, g, del_cost=1.0: ref.soft_alignment_loss(x, t, g, del_cost))


def test_pileup_through_read_rows_is_refused():
    """read_rows, the notebook's building block, does pileup's parsing: counting its columns is the exercise."""
    def via_rows(reads, alignments, length):
        rows = ref.read_rows(reads, alignments, length)
        return np.stack([np.bincount(rows[:, j], minlength=5) for j in range(length)]).astype(np.int64) \
            if length else np.zeros((0, 5), np.int64)

    reads, alignments = ["AC", "AGC"], ["=D=", "=X="]
    np.testing.assert_array_equal(via_rows(reads, alignments, 3), ref.pileup(reads, alignments, 3))
    with pytest.raises(IntegrityError, match="read_rows"):
        chk.check_pileup(via_rows)
    with pytest.raises(IntegrityError, match="cross_entropy"):
        chk.check_positionwise_cross_entropy(
            lambda x, t: torch.nn.functional.cross_entropy(
                x.transpose(1, 2), torch.nn.functional.pad(t, (0, x.shape[1] - t.shape[1])), reduction="none").sum(1))

    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (chk.check_edit_distance, chk.check_pileup, chk.check_soft_alignment_loss,
                  chk.check_positionwise_cross_entropy):
        with pytest.raises(NotImplementedYet):
            check(stub)


def test_invalid_alignment_is_explained():
    with pytest.raises(AssertionError, match="'=' is for equal bases"):
        chk.check_edit_distance(lambda a, b: (edit_distance_loops(a, b)[0],
                                              edit_distance_loops(a, b)[1].replace("X", "=")))
    with pytest.raises(AssertionError, match="did the traceback stop|Did the traceback stop"):
        chk.check_edit_distance(lambda a, b: (edit_distance_loops(a, b)[0], edit_distance_loops(a, b)[1][:-1]))


def test_detached_loss_is_caught():
    with pytest.raises(AssertionError, match="gradients can flow"):
        chk.check_soft_alignment_loss(lambda x, t, g, del_cost=1.0: soft_loss_loops(x.detach(), t, g, del_cost))
