"""Lesson 11: each docstring promise of a graded exercise, the wrong answer that breaks it, and the
words of the message that names it (the correct formulations, three per exercise, one float32 where
floats are involved, are in tests/test_checks_consensus.py and pass the visible and hidden checks)."""
import numpy as np
import pytest

from course_lib.checks import consensus as C
from test_checks_consensus import ce_gather, edit_distance_loops, pileup_dict, soft_loss_loops
from named import assert_promise_broken, wrong


def _with_ops(distance):
    """A wrong distance table with the (distance, operations) return the docstring asks for."""
    return lambda a, b: (distance(a, b), "")


def _ed_float_distance(a, b):
    d, ops = edit_distance_loops(a, b)
    return float(d), ops


def _ed_insertions_as_deletions(a, b):
    d, ops = edit_distance_loops(a, b)
    return d, ops.replace("I", "D")


def _pileup_float(reads, alignments, length):
    return pileup_dict(reads, alignments, length).astype(float)


def _pileup_zip_drops_a_read(reads, alignments, length):
    n = min(len(reads), len(alignments))
    return pileup_dict(list(reads)[:n], list(alignments)[:n], length)


def _pileup_unchecked(reads, alignments, length):
    counts = np.zeros((length, 5), dtype=np.int64)
    for read, ops in zip(reads, alignments):
        it, j = iter(read), 0
        for o in ops:
            if j >= length:
                break
            if o == "I":
                next(it, None)
                continue
            base = "-" if o == "D" else next(it, None)
            if base is None:
                break
            counts[j, "-ACGT".index(base)] += 1
            j += 1
    return counts


def _loss_gamma_unchecked(logits, target, gamma, del_cost=1.0):
    return soft_loss_loops(logits, target, max(gamma, 1e-6), del_cost)


def _loss_float64(logits, target, gamma, del_cost=1.0):
    return soft_loss_loops(logits.double(), target, gamma, del_cost)


def _loss_detached(logits, target, gamma, del_cost=1.0):
    return soft_loss_loops(logits, target, gamma, del_cost).detach()


def _loss_rows_silently_dropped(logits, target, gamma, del_cost=1.0):
    return soft_loss_loops(logits[:len(target)], target, gamma, del_cost)


def _ce_truncates_a_long_label(logits, target):
    return ce_gather(logits, target[:, :logits.shape[1]])


def _ce_zeroes_the_target(logits, target):
    out = ce_gather(logits, target)
    target.zero_()
    return out


PROMISES = [
    (C.check_edit_distance, "D[i, 0] = i, D[0, j] = j", _with_ops(wrong(C.WRONG_EDIT_DISTANCE, "<lambda>", 'first row/column initialised to 0').fn), "first row/column"),
    (C.check_edit_distance, "a mismatch costs 1", _with_ops(wrong(C.WRONG_EDIT_DISTANCE, "<lambda>", 'a mismatch costs 2').fn), "a mismatch costs 2"),
    (C.check_edit_distance, "distance as a Python int", _ed_float_distance, "must be an integer"),
    (C.check_edit_distance, "operations: I uses a base of a only", _ed_insertions_as_deletions, "operation"),
    (C.check_pileup, "columns -ACGT, gap first", wrong(C.WRONG_PILEUP, "_pileup_variant", 'columns in the order ACGT-').fn, "columns in the order ACGT-"),
    (C.check_pileup, "inserted bases are not counted", wrong(C.WRONG_PILEUP, "_pileup_variant", 'inserted bases counted in the next column').fn, "inserted bases"),
    (C.check_pileup, "an int64 array", _pileup_float, "integer numpy array"),
    (C.check_pileup, "ValueError when an alignment does not fit", _pileup_unchecked, "every column of the backbone"),
    (C.check_pileup, "ValueError when reads and alignments differ in number", _pileup_zip_drops_a_read,
     "numbers of reads and alignments differ"),
    (C.check_soft_alignment_loss, "a soft MIN", wrong(C.WRONG_SOFT_ALIGNMENT_LOSS, "_loss_variant", 'max instead of min').fn, "max instead of min"),
    (C.check_soft_alignment_loss, "gaps in target are padding, removed first", wrong(C.WRONG_SOFT_ALIGNMENT_LOSS, "_loss_variant", 'padding counted as label').fn,
     "padding counted as label"),
    (C.check_soft_alignment_loss, "of the logits' dtype", _loss_float64, "float32 loss"),
    (C.check_soft_alignment_loss, "differentiable in logits", _loss_detached, "gradients"),
    (C.check_soft_alignment_loss, "ValueError when gamma <= 0", _loss_gamma_unchecked, "gamma <= 0"),
    (C.check_soft_alignment_loss, "ValueError when the shapes do not fit", _loss_rows_silently_dropped,
     "shapes do not fit"),
    (C.check_positionwise_cross_entropy, "summed over positions", wrong(C.WRONG_CROSS_ENTROPY, "_ce_variant", 'mean instead of sum').fn, "mean instead of sum"),
    (C.check_positionwise_cross_entropy, "padding included", wrong(C.WRONG_CROSS_ENTROPY, "_ce_variant", 'padding positions not scored').fn, "padding positions"),
    (C.check_positionwise_cross_entropy, "ValueError when M > N", _ce_truncates_a_long_label, "longer than"),
    (C.check_positionwise_cross_entropy, "inputs unchanged", _ce_zeroes_the_target, "input modified in place"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
