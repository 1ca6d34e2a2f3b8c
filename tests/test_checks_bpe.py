"""course_lib.checks.bpe: every known wrong answer is caught and named, and calling the reference is an
IntegrityError (right alternatives and promise-breaking answers are declared in course_lib/judge/bpe.py:
tests/test_exercises.py)."""
from __future__ import annotations

import pytest

from course_lib import bpe
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import bpe as checks
from course_lib.judge import bpe as judge
from named import wrong

# wrong answers whose output equals another's on every input the hidden test tries (none known)
# the independent right answers are declared with the exercises (course_lib/judge/bpe.py; each keeps full marks:
# tests/test_exercises.py); the tests below build their wrong answers from them
my_get_stats = judge._right_get_stats
my_merge = judge._right_merge
my_encode_ids = judge._right_encode_ids


# ---------------------------------------------------------------- messages (every declared misconception's hidden test:
# tests/test_exercises.py)
def _escape(text):
    import re

    return re.escape(text)


@pytest.mark.parametrize("check, wrong", [
    (checks.check_merge, wrong(judge.WRONG_MERGE, "_merge_overlap_twice")),           # 'aaa' -> [X, X]
    (checks.check_word_counts, wrong(judge.WRONG_WORD_COUNTS, "_counts_no_marker")),
    (checks.check_train, wrong(judge.WRONG_TRAIN, "_train_first_appearance")),
    (checks.check_encode, wrong(judge.WRONG_ENCODE, "_encode_leftmost")),
    (checks.check_decode, wrong(judge.WRONG_DECODE, "_decode_each_replace")),
    (checks.check_decode, wrong(judge.WRONG_DECODE, "_decode_each_strict")),         # raises UnicodeDecodeError on 'café'
])
def test_the_four_headline_misconceptions_are_named_by_the_visible_test(check, wrong):
    with pytest.raises(AssertionError, match=_escape(wrong.name)):
        check(wrong.fn)


def test_messages_explain_the_fix():
    with pytest.raises(AssertionError, match=r"merge ONCE, left to right, giving \[X, a\]"):
        checks.check_merge(wrong(judge.WRONG_MERGE, "_merge_overlap_twice").fn)
    with pytest.raises(AssertionError, match="'</w>'"):
        checks.check_word_counts(wrong(judge.WRONG_WORD_COUNTS, "_counts_no_marker").fn)
    with pytest.raises(AssertionError, match="TRAINING order"):
        checks.check_encode(wrong(judge.WRONG_ENCODE, "_encode_leftmost").fn)
    with pytest.raises(AssertionError, match="bytes TOGETHER"):
        checks.check_decode(wrong(judge.WRONG_DECODE, "_decode_each_replace").fn)


def test_an_unnamed_wrong_answer_still_fails_with_expected_and_got():
    with pytest.raises(AssertionError, match="expected .* got"):
        checks.check_get_stats(lambda ids: {(0, 0): 42})
    with pytest.raises(AssertionError, match=r"expected a list of int ids, got str"):
        checks.check_merge(lambda ids, pair, idx: "oops")
    with pytest.raises(AssertionError, match=r"expected a dict"):
        checks.check_train(lambda wc, n, first_id=256: [])
    with pytest.raises(AssertionError, match=r"keys must be tuples of strings"):
        checks.check_word_counts(lambda text: {"low": 1})


def test_outputs_with_a_rigged_eq_do_not_pass():
    class Always(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    class AlwaysInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    with pytest.raises(AssertionError):
        checks.check_decode(lambda ids, vocab: Always("x"))
    with pytest.raises(AssertionError):
        checks.check_merge(lambda ids, pair, idx: [AlwaysInt(0)] * len(ids))
    with pytest.raises(AssertionError):
        checks.check_word_counts(lambda text: {(Always("x"),): AlwaysInt(1)})


def test_numpy_and_float_outputs_are_accepted():
    import numpy as np

    checks.check_merge(lambda ids, pair, idx: np.array(my_merge(ids, pair, idx), dtype=np.int64))
    checks.check_get_stats(lambda ids: {p: float(n) for p, n in my_get_stats(ids).items()})


def test_changing_the_input_in_place_is_reported():
    def merge_in_place(ids, pair, idx):
        out = my_merge(ids, pair, idx)
        ids[:] = out
        return out

    with pytest.raises(AssertionError, match="input modified in place"):
        checks.check_merge(merge_in_place)


def test_crash_is_reported_with_the_input():
    def crashes(ids):
        raise KeyError("boom")

    with pytest.raises(AssertionError, match="raised KeyError"):
        checks.check_get_stats(crashes)


# ---------------------------------------------------------------- integrity
@pytest.mark.parametrize("check, reference", [
    (checks.check_get_stats, bpe.get_stats), (checks.check_merge, bpe.merge),
    (checks.check_word_counts, bpe.word_counts), (checks.check_train, bpe.train_naive),
    (checks.check_encode, bpe.encode_ids), (checks.check_decode, bpe.decode_ids)])
def test_passing_the_reference_is_an_integrity_error(check, reference):
    with pytest.raises(IntegrityError):
        check(reference)


def test_calling_the_reference_inside_is_an_integrity_error():
    with pytest.raises(IntegrityError, match="course's reference implementation"):
        checks.check_train(lambda wc, n, first_id=256: bpe.train_fast(wc, n, first_id))
    with pytest.raises(IntegrityError):
        checks.check_encode(lambda ids, merges: bpe.apply_merges(ids, merges))
    with pytest.raises(IntegrityError):
        checks.check_decode(lambda ids, vocab: bpe.ByteBPE().decode(ids))
    from course_lib.bpe import merge as aliased

    with pytest.raises(IntegrityError):
        checks.check_merge(lambda ids, pair, idx: aliased(ids, pair, idx))
    # the reference still works afterwards
    assert bpe.merge([1, 2], (1, 2), 3) == [3]


def test_stub_is_not_implemented_yet():
    def stub(ids):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="not implemented yet"):
        checks.check_get_stats(stub)


def test_the_cases_merges_are_trained_once_and_never_shared_between_cases():
    """The judge's hidden merges are learned once per process (warm_up), and each case gets a copy of its own."""
    def hepato(cases):
        return next(c for c in cases if "hepatosplenomegaly" in c.label).args[1]

    judge._built.cache_clear()
    checks.warm_up()  # the checks module's warm_up builds the judge's inputs where the judge module is there
    assert judge._built.cache_info().currsize == 3
    merges = hepato(judge.encode_cases())
    assert len(merges) == 80
    merges.clear()  # an answer that empties its input (caught as in place) cannot change the next case
    again = hepato(judge.encode_cases())
    assert len(again) == 80 and again is not merges
    words = judge._byte_words(judge._medical_sample(6_000))
    assert again == bpe.train_naive(words, 80)  # the judge's inputs are the reference's training
    assert judge._input("sample encoded with 120 merges") == bpe.encode_ids(
        list(judge._DECODE_SAMPLE.encode()), judge._input("medical 120 merges"))
    checks.check_encode(my_encode_ids, hidden=True)


def test_the_visible_cases_data_is_what_the_bpe_learns():
    """The visible cases' word counts and merges are written in the shipped checks as data (no BPE ships with
    them); they are what the reference's word_counts and train_naive, and the judge's private BPE, build."""
    import ast

    toy = bpe.word_counts(checks._TOY)
    assert dict(checks._TOY_WORD_COUNTS) == toy
    assert list(dict(checks._TOY_WORD_COUNTS)) == list(toy)  # the same order of first appearance
    words = bpe.chunk_counts("low lower newest widest lowest " * 3)
    assert checks._lowest_merges() == bpe.train_naive(words, 12) == judge._train_with(words, 12, 256)
    assert list(checks._lowest_merges().items()) == list(bpe.train_naive(words, 12).items())
    # the shipped checks hold no BPE of their own: no loop that learns or applies merges
    tree = ast.parse(open(checks.__file__, encoding="utf-8").read())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not defined & {"_stats", "_merge", "_train_with", "_encode_with", "_input", "_built"}, defined
