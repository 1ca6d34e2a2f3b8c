"""Lesson 06: docstring promises, the wrong answer that breaks each, and the words of its message."""
import pytest

from course_lib.checks import bpe as C
from test_checks_bpe import my_get_stats, my_merge, my_word_counts
from named import assert_promise_broken


def _merge_in_place(ids, pair, idx):
    out = my_merge(ids, pair, idx)
    ids[:] = out
    return out


def _decode_hiding_bad_bytes(ids, vocab):
    """surrogatepass as promised, but bytes that are not UTF-8 come back as U+FFFD instead of raising."""
    data = b"".join(vocab[i] for i in ids)
    try:
        return data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace")


def _wrong(table, fn_name):
    """The known wrong answer of ``table`` implemented by ``fn_name`` (by name, never by its place in the list)."""
    [fn] = [w.fn for w in table if w.fn.__name__ == fn_name]
    return fn


PROMISES = [
    (C.check_get_stats, "counts of every adjacent pair", _wrong(C.WRONG_GET_STATS, "_stats_set"), "pairs counted once"),
    (C.check_get_stats, "a dict {(left, right): count}", lambda ids: list(my_get_stats(ids).items()), "expected a dict"),
    (C.check_merge, "the input list unchanged", _merge_in_place, "input modified in place"),
    (C.check_merge, "left to right, no overlap", _wrong(C.WRONG_MERGE, "_merge_overlap_twice"),
     "overlapping occurrences merged twice"),
    (C.check_word_counts, "'</w>' on the last character", _wrong(C.WRONG_WORD_COUNTS, "_counts_no_marker"),
     "end-of-word marker"),
    (C.check_word_counts, "split on any whitespace", _wrong(C.WRONG_WORD_COUNTS, "_counts_split_space"),
     "split on single spaces"),
    (C.check_get_stats, "pairs in order of first appearance", lambda ids: dict(sorted(my_get_stats(ids).items())),
     "order of first appearance"),
    (C.check_word_counts, "words in order of first appearance",
     lambda text: dict(sorted(my_word_counts(text).items())), "order of first appearance"),
    (C.check_decode, "invalid UTF-8 raises ValueError", _decode_hiding_bad_bytes, "not valid UTF-8"),
    (C.check_train, "ties: smallest pair", _wrong(C.WRONG_TRAIN, "_train_first_appearance"),
     "ties broken by first appearance"),
    (C.check_train, "new ids start at first_id", _wrong(C.WRONG_TRAIN, "_train_ignore_first_id"), "first_id ignored"),
    (C.check_encode, "merges in training order", _wrong(C.WRONG_ENCODE, "_encode_leftmost"), "training order"),
    (C.check_decode, "UTF-8 decoded once, surrogatepass", _wrong(C.WRONG_DECODE, "_decode_strict"), "lone surrogates"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)


def test_correct_word_counts_still_pass():
    C.check_word_counts(my_word_counts, hidden=True)


@pytest.mark.parametrize("check, answer", [
    ("check_get_stats", lambda ids: dict(sorted(my_get_stats(ids).items()))),
    ("check_word_counts", lambda text: dict(sorted(my_word_counts(text).items()))),
])
def test_the_order_of_first_appearance_survives_the_record(check, answer):
    """Graded outside the kernel (record, then replay in the verifier), a dict in another order still fails:
    the record keeps the keys' order."""
    import json

    from course_lib.checks import transcript
    from grading import verify

    for hidden in (False, True):
        with transcript.using("record") as state:
            getattr(C, check)(answer, hidden=hidden)
            calls = json.loads(json.dumps(state.calls, ensure_ascii=False))
        source = f"checks.bpe.{check}(f{', hidden=True' if hidden else ''})\n"
        verdict = verify.verify_cell(source, calls)
        assert verdict is not None and "order of first appearance" in verdict, verdict
