"""Lesson 06: docstring promises, the wrong answer that breaks each, and the words of its message."""
import pytest

from course_lib.checks import bpe as C
from test_checks_bpe import my_get_stats, my_merge, my_word_counts
from named import assert_promise_broken


def _merge_in_place(ids, pair, idx):
    out = my_merge(ids, pair, idx)
    ids[:] = out
    return out


PROMISES = [
    (C.check_get_stats, "counts of every adjacent pair", C.WRONG_GET_STATS[0].fn, "pairs counted once"),
    (C.check_get_stats, "a dict {(left, right): count}", lambda ids: list(my_get_stats(ids).items()), "expected a dict"),
    (C.check_merge, "the input list unchanged", _merge_in_place, "input modified in place"),
    (C.check_merge, "left to right, no overlap", C.WRONG_MERGE[0].fn, "overlapping occurrences merged twice"),
    (C.check_word_counts, "'</w>' on the last character", C.WRONG_WORD_COUNTS[0].fn, "end-of-word marker"),
    (C.check_word_counts, "split on any whitespace", C.WRONG_WORD_COUNTS[2].fn, "split on single spaces"),
    (C.check_train, "ties: smallest pair", C.WRONG_TRAIN[0].fn, "ties broken by first appearance"),
    (C.check_train, "new ids start at first_id", C.WRONG_TRAIN[6].fn, "first_id ignored"),
    (C.check_encode, "merges in training order", C.WRONG_ENCODE[0].fn, "training order"),
    (C.check_decode, "UTF-8 decoded once, surrogatepass", C.WRONG_DECODE[3].fn, "lone surrogates"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)


def test_correct_word_counts_still_pass():
    C.check_word_counts(my_word_counts, hidden=True)
