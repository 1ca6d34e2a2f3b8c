"""course_lib.checks.bpe: every known wrong answer is caught and named, a correct independent
implementation passes, and calling the reference is an IntegrityError."""
from __future__ import annotations

import pytest

from course_lib import bpe
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import bpe as checks
from named import assert_named_alone, wrong

# wrong answers whose output equals another's on every input the hidden test tries (none known)
SAME_OUTPUT: dict = {}

# ---------------------------------------------------------------- correct answers written independently


def my_get_stats(ids):
    counts = {}
    for i in range(len(ids) - 1):
        counts[(ids[i], ids[i + 1])] = counts.get((ids[i], ids[i + 1]), 0) + 1
    return counts


def my_merge(ids, pair, idx):
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == tuple(pair):
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def my_word_counts(text):
    from collections import Counter

    return dict(Counter(tuple(w[:-1]) + (w[-1] + "</w>",) for w in text.split()))


def my_train_naive(word_counts, num_merges, first_id=256):
    words = [(list(w), c) for w, c in word_counts.items()]
    merges = {}
    for step in range(num_merges):
        stats = {}
        for ids, c in words:
            for p, n in my_get_stats(ids).items():
                stats[p] = stats.get(p, 0) + n * c
        if not stats:
            break
        best = max(stats.values())
        pair = min(p for p, n in stats.items() if n == best)
        merges[pair] = first_id + step
        words = [(my_merge(ids, pair, first_id + step), c) for ids, c in words]
    return merges


def my_encode_ids(ids, merges):
    ids = list(ids)
    for pair, idx in sorted(merges.items(), key=lambda kv: kv[1]):   # one pass in training order
        ids = my_merge(ids, pair, idx)
    return ids


def my_decode_ids(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="surrogatepass")


def get_stats_counter(ids):
    from collections import Counter

    return dict(Counter(zip(ids, ids[1:])))      # Counter keeps the order of first appearance


def get_stats_setdefault(ids):
    counts = {}
    for left, right in zip(list(ids)[:-1], list(ids)[1:]):
        counts.setdefault((left, right), 0)
        counts[(left, right)] += 1
    return counts


def merge_skip_flag(ids, pair, idx):
    out, skip = [], False
    for i, x in enumerate(ids):
        if skip:
            skip = False
            continue
        if i + 1 < len(ids) and x == pair[0] and ids[i + 1] == pair[1]:
            out.append(idx)
            skip = True
        else:
            out.append(x)
    return out


def merge_from_the_right_of_each_match(ids, pair, idx):
    """Scan with an index and a pending output; one match consumes both positions."""
    ids, out, i = list(ids), [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out + ids[i:]


def word_counts_loop(text):
    counts = {}
    for word in text.split():
        key = tuple(word[:-1]) + (word[-1] + "</w>",)
        counts[key] = counts.get(key, 0) + 1
    return counts


def word_counts_from_word_counter(text):
    from collections import Counter

    return {tuple(w[:-1]) + (w[-1] + "</w>",): c for w, c in Counter(text.split()).items()}


def train_sorted_stats(word_counts, num_merges, first_id=256):
    """Counts in a Counter, the best pair as the first of the pairs sorted by (-count, pair)."""
    from collections import Counter

    words = {tuple(w): c for w, c in word_counts.items()}
    merges = {}
    for step in range(num_merges):
        stats = Counter()
        for w, c in words.items():
            for p in zip(w, w[1:]):
                stats[p] += c
        if not stats:
            break
        pair = sorted(stats.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        merges[pair] = first_id + step
        words = {tuple(merge_skip_flag(list(w), pair, first_id + step)): c for w, c in words.items()}
    return merges


def train_in_place(word_counts, num_merges, first_id=256):
    """Word lists changed in place after each merge; the tie broken by an explicit scan."""
    words = [[list(w), c] for w, c in word_counts.items()]
    merges = {}
    for step in range(num_merges):
        stats = {}
        for w, c in words:
            for i in range(len(w) - 1):
                stats[(w[i], w[i + 1])] = stats.get((w[i], w[i + 1]), 0) + c
        best = None
        for p, n in stats.items():
            if best is None or n > stats[best] or (n == stats[best] and p < best):
                best = p
        if best is None:
            break
        merges[best] = first_id + step
        for entry in words:
            entry[0] = merge_from_the_right_of_each_match(entry[0], best, first_id + step)
    return merges


def encode_min_rank(ids, merges):
    """minbpe's loop: merge the present pair with the smallest rank until none is known."""
    ids = list(ids)
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: merges.get(p, float("inf")))
        if pair not in merges:
            break
        ids = merge_skip_flag(ids, pair, merges[pair])
    return ids


def encode_rank_scan(ids, merges):
    """The same rule with an explicit scan for the best position each round."""
    ids = list(ids)
    while True:
        ranks = [(merges[(a, b)], (a, b)) for a, b in zip(ids, ids[1:]) if (a, b) in merges]
        if not ranks:
            return ids
        rank, pair = min(ranks)
        ids = merge_from_the_right_of_each_match(ids, pair, rank)


def decode_bytearray(ids, vocab):
    buf = bytearray()
    for i in ids:
        buf += vocab[i]
    return buf.decode("utf-8", "surrogatepass")


def decode_codecs(ids, vocab):
    import codecs

    return codecs.decode(bytes().join(map(vocab.__getitem__, ids)), "utf-8", "surrogatepass")


CORRECT = [
    (checks.check_get_stats, get_stats_counter), (checks.check_get_stats, get_stats_setdefault),
    (checks.check_merge, merge_skip_flag), (checks.check_merge, merge_from_the_right_of_each_match),
    (checks.check_word_counts, word_counts_loop), (checks.check_word_counts, word_counts_from_word_counter),
    (checks.check_train, train_sorted_stats), (checks.check_train, train_in_place),
    (checks.check_encode, encode_min_rank), (checks.check_encode, encode_rank_scan),
    (checks.check_decode, decode_bytearray), (checks.check_decode, decode_codecs),
    (checks.check_get_stats, my_get_stats),
    (checks.check_merge, my_merge),
    (checks.check_word_counts, my_word_counts),
    (checks.check_train, my_train_naive),
    (checks.check_encode, my_encode_ids),
    (checks.check_decode, my_decode_ids),
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=lambda x: getattr(x, "__name__", ""))
def test_correct_independent_implementation_passes(check, fn, hidden):
    check(fn, hidden=hidden)


# ---------------------------------------------------------------- every wrong answer is named
WRONGS = [(checks.check_get_stats, w) for w in checks.WRONG_GET_STATS] + \
         [(checks.check_merge, w) for w in checks.WRONG_MERGE] + \
         [(checks.check_word_counts, w) for w in checks.WRONG_WORD_COUNTS] + \
         [(checks.check_train, w) for w in checks.WRONG_TRAIN] + \
         [(checks.check_encode, w) for w in checks.WRONG_ENCODE] + \
         [(checks.check_decode, w) for w in checks.WRONG_DECODE]


@pytest.mark.parametrize("check, wrong", WRONGS, ids=[f"{c.__name__}:{w.name}:{w.fn.__name__}" for c, w in WRONGS])
def test_each_wrong_answer_is_named_by_the_hidden_test(check, wrong):
    """Named as the likely misconception, or as one that gives the very same output on that input."""
    assert_named_alone(check, wrong.fn, wrong.name, same_output=SAME_OUTPUT.get(wrong.name, frozenset()), hidden=True)


def _escape(text):
    import re

    return re.escape(text)


@pytest.mark.parametrize("check, wrong", [
    (checks.check_merge, wrong(checks.WRONG_MERGE, "_merge_overlap_twice")),           # 'aaa' -> [X, X]
    (checks.check_word_counts, wrong(checks.WRONG_WORD_COUNTS, "_counts_no_marker")),
    (checks.check_train, wrong(checks.WRONG_TRAIN, "_train_first_appearance")),
    (checks.check_encode, wrong(checks.WRONG_ENCODE, "_encode_leftmost")),
    (checks.check_decode, wrong(checks.WRONG_DECODE, "_decode_each_replace")),
    (checks.check_decode, wrong(checks.WRONG_DECODE, "_decode_each_strict")),         # raises UnicodeDecodeError on 'café'
])
def test_the_four_headline_misconceptions_are_named_by_the_visible_test(check, wrong):
    with pytest.raises(AssertionError, match=_escape(wrong.name)):
        check(wrong.fn)


def test_messages_explain_the_fix():
    with pytest.raises(AssertionError, match=r"merge ONCE, left to right, giving \[X, a\]"):
        checks.check_merge(wrong(checks.WRONG_MERGE, "_merge_overlap_twice").fn)
    with pytest.raises(AssertionError, match="'</w>'"):
        checks.check_word_counts(wrong(checks.WRONG_WORD_COUNTS, "_counts_no_marker").fn)
    with pytest.raises(AssertionError, match="TRAINING order"):
        checks.check_encode(wrong(checks.WRONG_ENCODE, "_encode_leftmost").fn)
    with pytest.raises(AssertionError, match="bytes TOGETHER"):
        checks.check_decode(wrong(checks.WRONG_DECODE, "_decode_each_replace").fn)


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
    def hepato(cases):
        return next(c for c in cases if "hepatosplenomegaly" in c.label).args[1]

    checks._BUILT.clear()
    checks.warm_up()
    assert set(checks._BUILT) == {"toy word counts", "lowest merges", "medical 80 merges", "medical 120 merges",
                                  "sample encoded with 120 merges"}
    merges = hepato(checks._encode_cases(True))
    assert len(merges) == 80
    merges.clear()  # an answer that empties its input (caught as in place) cannot change the next case
    again = hepato(checks._encode_cases(True))
    assert len(again) == 80 and again is not merges
    words = checks._byte_words(checks._medical_sample(6_000))
    assert again == bpe.train_naive(words, 80)  # the judge's inputs are the reference's training
    assert checks._input("sample encoded with 120 merges") == bpe.encode_ids(
        list(checks._DECODE_SAMPLE.encode()), checks._input("medical 120 merges"))
    assert checks._input("toy word counts") == bpe.word_counts(checks._TOY)


def test_an_edition_reads_the_inputs_as_data_and_holds_no_bpe(tmp_path):
    """The students' and the kernel's editions get lesson 06's BPE-built inputs as data (grading.bundle
    write_inputs): the same values, read back; the private BPE that built them is not in the edition."""
    import importlib.util

    from grading import bundle

    src = open(checks.__file__, encoding="utf-8").read()
    (tmp_path / "bpe.py").write_text(bundle.student_edition_of_checks(src, keep_hidden=True))
    bundle.write_inputs("course_lib.checks.bpe", str(tmp_path), hidden=True)
    spec = importlib.util.spec_from_file_location("edition_bpe", tmp_path / "bpe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("toy word counts", "lowest merges", "medical 80 merges", "medical 120 merges",
                 "sample encoded with 120 merges"):
        assert mod._input(name) == checks._input(name), name
    import ast

    bodies = {n.name: n.body for n in ast.parse((tmp_path / "bpe.py").read_text()).body
              if isinstance(n, ast.FunctionDef)}
    for name in ("_judge_inputs", "_judge_train", "_judge_word_counts", "_judge_encode", "_train_with",
                 "_encode_with", "_merge", "_stats"):
        code = [b for b in bodies[name] if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        assert len(code) == 1 and isinstance(code[0], (ast.Raise, ast.Return)), (name, ast.unparse(code[0]))
        assert isinstance(code[0], ast.Raise) or ast.unparse(code[0]) == "return _not_shipped", name
    (tmp_path / "_inputs_bpe.json").unlink()
    mod._BUILT.clear()
    with pytest.raises(NotImplementedError, match="judge's edition"):
        mod._input("lowest merges")
    checks.check_encode(my_encode_ids, hidden=True)
