"""The judge's material of ``course_lib.checks.bpe`` (see :mod:`course_lib.judge`): per exercise, its hidden cases,
known wrong answers, right alternatives, answers that break a promise, and its declaration.

The known wrong answers are written on private copies of the BPE steps (``_stats``, ``_merge``, ``_train_with``,
``_encode_with``: they never call ``course_lib.bpe``); the hidden encode and decode cases use merges that this BPE
learns on real medical text, built once per process (:func:`warm_up`).
"""
from __future__ import annotations

import copy
import functools

from course_lib import bpe as ref
from course_lib.checks.core import Case, Wrong
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.bpe import (
    _decode_cases,
    _encode_cases,
    _ids,
    _len,  # builtins.len, bound when the checks are imported (before any student cell runs)
    _lowest_merges,
    _merge_cases,
    _private_vocab,
    _stats_cases,
    _train_cases,
    _word_count_cases,
    check_decode,
    check_encode,
    check_get_stats,
    check_merge,
    check_train,
    check_word_counts,
)

_EOW = "</w>"


# ---------------------------------------------------------------- private copies (wrong answers never call ref)
def _stats(ids):
    out = {}
    for pair in zip(ids, ids[1:]):
        out[pair] = out.get(pair, 0) + 1
    return out


def _merge(ids, pair, idx):
    out, i = [], 0
    while i < _len(ids):
        if i + 1 < _len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _train_with(word_counts, num_merges, first_id, *, choose=None, merge_fn=_merge, weight=True):
    choose = choose or (lambda s: min(s, key=lambda p: (-s[p], p)))
    words = [(list(w), c if weight else 1) for w, c in word_counts.items()]
    merges = {}
    for step in range(num_merges):
        stats = {}
        for ids, c in words:
            for p, n in _stats(ids).items():
                stats[p] = stats.get(p, 0) + n * c
        if not stats:
            break
        pair = choose(stats)
        idx = first_id + step
        words = [(merge_fn(ids, pair, idx), c) for ids, c in words]
        merges[pair] = idx
    return merges


def _encode_with(ids, merges, *, choose, merge_fn=_merge):
    ids = list(ids)
    while _len(ids) >= 2:
        present = [p for p in _stats(ids) if p in merges]
        if not present:
            break
        pair = choose(ids, present, merges)
        ids = merge_fn(ids, pair, merges[pair])
    return ids


# ---------------------------------------------------------------- hidden inputs: real medical text
_DECODE_SAMPLE = "Naïve patient, β-blocker; café 🩺💊 Sjögren"
_CLINICAL = ("Hepatosplenomegaly with fever.\nPneumothorax, left-sided; pneumonia ruled out.\t"
             "Acetaminophen 500 mg q6h; naïve to β-blockers. aaa aaaa ")


def _medical_sample(n_bytes: int) -> str:
    from course_lib.bio.corpus import medical_corpus

    text = medical_corpus(50_000)
    return text[:n_bytes]


def _byte_words(text: str) -> dict:
    return ref.chunk_counts(text)  # the pre-split helper (not an exercise of this lesson)


@functools.lru_cache(maxsize=None)
def _built(name: str):
    """An input that takes a BPE to build (merges learned on medical text, ids encoded with them), built once per
    process (the hidden merges take 0.15 s each)."""
    if name == "medical 80 merges":
        return _train_with(_byte_words(_medical_sample(6_000)), 80, 256)
    if name == "medical 120 merges":
        return _train_with(_byte_words(_medical_sample(5000) + " naïve café 🩺💊 β-blocker"), 120, 256)
    if name == "sample encoded with 120 merges":
        return _encode_with(_ids(_DECODE_SAMPLE), _built("medical 120 merges"),
                            choose=lambda i, present, m: min(present, key=lambda p: m[p]))
    raise KeyError(f"no input named {name!r}")


def _input(name: str):
    """A hidden case's input built by the BPE above (see :func:`_built`); a fresh copy per call, so a case's
    inputs are never shared with another's."""
    return copy.deepcopy(_built(name))


def warm_up() -> None:
    """Build the hidden inputs that take time, so that a process forked after this call has them
    (``course_lib.checks.bpe.warm_up`` calls this where the judge module is there: the verifier's workers)."""
    for name in ("medical 80 merges", "medical 120 merges", "sample encoded with 120 merges"):
        _built(name)


# ---------------------------------------------------------------- get_stats
def _stats_set(ids):
    return {p: 1 for p in zip(ids, ids[1:])}


def _stats_wrap(ids):
    out = _stats(ids)
    if _len(ids) >= 2:
        pair = (ids[-1], ids[0])
        out[pair] = out.get(pair, 0) + 1
    return out


def _stats_step_two(ids):
    out = {}
    for i in range(0, _len(ids) - 1, 2):
        pair = (ids[i], ids[i + 1])
        out[pair] = out.get(pair, 0) + 1
    return out


def _stats_no_overlap(ids):
    out, i = {}, 0
    while i < _len(ids) - 1:
        pair = (ids[i], ids[i + 1])
        out[pair] = out.get(pair, 0) + 1
        i += 2 if ids[i] == ids[i + 1] else 1
    return out


def _stats_last_missing(ids):
    return _stats(ids[:-1])


WRONG_GET_STATS = [
    Wrong("pairs counted once", _stats_set,
          "every pair has count 1: count how OFTEN each adjacent pair occurs (add one each time you meet it), "
          "not just which pairs occur."),
    Wrong("wrap-around pair", _stats_wrap,
          "the pair (last, first) was counted, as if the sequence were circular; the last element starts no "
          "pair."),
    Wrong("every other position", _stats_step_two,
          "only pairs starting at even positions were counted (a step of 2); every position i with a "
          "neighbour i+1 starts a pair."),
    Wrong("overlapping pairs skipped", _stats_no_overlap,
          "in 'a a a' the pair (a, a) occurs at positions 0 and 1: get_stats counts both (overlapping "
          "positions all count; only merge() must avoid using the middle 'a' twice)."),
    Wrong("last pair missing", _stats_last_missing,
          "the last pair (ids[-2], ids[-1]) is missing: an off-by-one at the end of the loop."),
]


def _right_get_stats(ids):
    counts = {}
    for i in range(len(ids) - 1):
        counts[(ids[i], ids[i + 1])] = counts.get((ids[i], ids[i + 1]), 0) + 1
    return counts


def _right_get_stats_counter(ids):
    from collections import Counter

    return dict(Counter(zip(ids, ids[1:])))      # Counter keeps the order of first appearance


def _right_get_stats_setdefault(ids):
    counts = {}
    for left, right in zip(list(ids)[:-1], list(ids)[1:]):
        counts.setdefault((left, right), 0)
        counts[(left, right)] += 1
    return counts


def _breaks_stats_as_list(ids):
    return list(_right_get_stats(ids).items())


def _breaks_stats_sorted(ids):
    return dict(sorted(_right_get_stats(ids).items()))


def stats_cases() -> list[Case]:
    """The hidden cases of ``check_get_stats``: the visible ones and these."""
    return _stats_cases() + [
        Case("an empty list", ([],)),
        Case("'aaaaa' plus 'ab'", (_ids("aaaaaab"),)),
        Case("the bytes of a clinical sentence", (_ids(_CLINICAL),)),
        Case("ids above 255 [300, 301, 300, 301, 300]", ([300, 301, 300, 301, 300],)),
    ]


GET_STATS = declare("06_bpe", "get_stats", check_get_stats,
            misconceptions=WRONG_GET_STATS,
            promises=(
                Breaks("counts of every adjacent pair", wrong_answer(WRONG_GET_STATS, "pairs counted once"),
                       "pairs counted once"),
                Breaks("a dict {(left, right): count}", _breaks_stats_as_list, "expected a dict"),
                Breaks("pairs in order of first appearance", _breaks_stats_sorted, "order of first appearance"),
            ),
            right=(Right(_right_get_stats), Right(_right_get_stats_counter), Right(_right_get_stats_setdefault)))


# ---------------------------------------------------------------- merge
def _merge_overlap_twice(ids, pair, idx):
    out, i = [], 0
    while i < _len(ids):
        if i + 1 < _len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(idx)
            i += 1 if i + 2 < _len(ids) and (ids[i + 1], ids[i + 2]) == pair else 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _merge_no_skip(ids, pair, idx):
    out = []
    for i in range(_len(ids)):
        if i + 1 < _len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(idx)
        else:
            out.append(ids[i])
    return out


def _merge_right_to_left(ids, pair, idx):
    out, i = [], _len(ids) - 1
    while i >= 0:
        if i >= 1 and (ids[i - 1], ids[i]) == pair:
            out.append(idx)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


def _merge_first_only(ids, pair, idx):
    ids = list(ids)
    for i in range(_len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [idx] + ids[i + 2:]
    return ids


_OVERLAP_MESSAGE = ("in 'a a a' the pair (a, a) must merge ONCE, left to right, giving [X, a]: the middle "
                    "'a' cannot belong to two merged tokens. After replacing a pair, jump past both of its "
                    "elements (i += 2).")


WRONG_MERGE = [
    Wrong("overlapping occurrences merged twice", _merge_overlap_twice, _OVERLAP_MESSAGE),
    Wrong("second element not skipped", _merge_no_skip,
          "after writing the new id, the loop moved on by 1, so the pair's second element was processed "
          "(and kept, or merged) again; move on by 2 after a merge."),
    Wrong("merging right to left", _merge_right_to_left,
          "occurrences were replaced from the right: in 'a a a' that gives [a, X]; BPE scans left to right "
          "and gives [X, a]."),
    Wrong("only the first occurrence", _merge_first_only,
          "only the first occurrence was replaced: merge must replace EVERY (non-overlapping) occurrence."),
]


def _right_merge(ids, pair, idx):
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == tuple(pair):
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _right_merge_skip_flag(ids, pair, idx):
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


def _right_merge_from_the_right_of_each_match(ids, pair, idx):
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


def _breaks_merge_in_place(ids, pair, idx):
    out = _right_merge(ids, pair, idx)
    ids[:] = out
    return out


def merge_cases() -> list[Case]:
    """The hidden cases of ``check_merge``: the visible ones and these."""
    return _merge_cases() + [
        Case("'aaaaa', pair (a, a) -> 256", ([97] * 5, (97, 97), 256)),
        Case("'aaaa', pair (a, a) -> 256", ([97] * 4, (97, 97), 256)),
        Case("an empty list", ([], (1, 2), 3)),
        Case("pair at the very end", ([5, 6, 7, 8], (7, 8), 300)),
        Case("'ababab', pair (a, b) -> 256", (_ids("ababab"), (97, 98), 256)),
        Case("the bytes of a clinical sentence, pair (e, space)", (_ids(_CLINICAL), (101, 32), 256)),
    ]


MERGE = declare("06_bpe", "merge", check_merge,
            misconceptions=WRONG_MERGE,
            promises=(
                Breaks("the input list unchanged", _breaks_merge_in_place, "input modified in place"),
                Breaks("left to right, no overlap", wrong_answer(WRONG_MERGE, "overlapping occurrences merged twice"),
                       "overlapping occurrences merged twice"),
            ),
            right=(Right(_right_merge), Right(_right_merge_skip_flag),
                   Right(_right_merge_from_the_right_of_each_match)))


# ---------------------------------------------------------------- word_counts
def _counts_no_marker(text):
    out = {}
    for w in text.split():
        out[tuple(w)] = out.get(tuple(w), 0) + 1
    return out


def _counts_separate_marker(text):
    out = {}
    for w in text.split():
        key = tuple(w) + (_EOW,)
        out[key] = out.get(key, 0) + 1
    return out


def _counts_split_space(text):
    out = {}
    for w in text.split(" "):
        if w:
            key = tuple(w[:-1]) + (w[-1] + _EOW,)
            out[key] = out.get(key, 0) + 1
    return out


WRONG_WORD_COUNTS = [
    Wrong("forgot the end-of-word marker", _counts_no_marker,
          "the last character of each word must carry '</w>' ('low' -> ('l', 'o', 'w</w>')). Without it "
          "the word 'low' and the start of 'lower' are the same symbols, merges cannot prefer word "
          "endings, and decoding cannot tell where one word ends and the next begins."),
    Wrong("separate end-of-word symbol", _counts_separate_marker,
          "'</w>' was added as a separate symbol; in this course (as in subword-nmt and HF tokenizers) it "
          "is attached to the last character: ('l', 'o', 'w</w>')."),
    Wrong("split on single spaces", _counts_split_space,
          "text.split(' ') splits on the space character only, so newlines and tabs stay inside words; "
          "use text.split() (any run of whitespace)."),
]


def _right_word_counts(text):
    from collections import Counter

    return dict(Counter(tuple(w[:-1]) + (w[-1] + "</w>",) for w in text.split()))


def _right_word_counts_loop(text):
    counts = {}
    for word in text.split():
        key = tuple(word[:-1]) + (word[-1] + "</w>",)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _right_word_counts_from_word_counter(text):
    from collections import Counter

    return {tuple(w[:-1]) + (w[-1] + "</w>",): c for w, c in Counter(text.split()).items()}


def _breaks_word_counts_sorted(text):
    return dict(sorted(_right_word_counts(text).items()))


def word_count_cases() -> list[Case]:
    """The hidden cases of ``check_word_counts``: the visible ones and these."""
    return _word_count_cases() + [
        Case("a clinical note with punctuation and accents", (_CLINICAL,)),
        Case("one-letter words", ("a b a I",)),
        Case("only whitespace", (" \n\t ",)),
        Case("2,000 characters of real medical text", (_medical_sample(2000),)),
    ]


WORD_COUNTS = declare("06_bpe", "word_counts", check_word_counts,
            misconceptions=WRONG_WORD_COUNTS,
            promises=(
                Breaks("'</w>' on the last character", wrong_answer(WRONG_WORD_COUNTS, "forgot the end-of-word marker"),
                       "end-of-word marker"),
                Breaks("split on any whitespace", wrong_answer(WRONG_WORD_COUNTS, "split on single spaces"),
                       "split on single spaces"),
                Breaks("words in order of first appearance", _breaks_word_counts_sorted, "order of first appearance"),
            ),
            right=(Right(_right_word_counts), Right(_right_word_counts_loop),
                   Right(_right_word_counts_from_word_counter)))


# ---------------------------------------------------------------- train_naive
def _first_appearance(stats):
    return max(stats, key=stats.get)


def _largest_pair(stats):
    return max(stats, key=lambda p: (stats[p], p))


def _train_first_appearance(word_counts, num_merges, first_id=256):
    return _train_with(word_counts, num_merges, first_id, choose=_first_appearance)


def _train_largest_pair(word_counts, num_merges, first_id=256):
    return _train_with(word_counts, num_merges, first_id, choose=_largest_pair)


def _train_unweighted(word_counts, num_merges, first_id=256):
    return _train_with(word_counts, num_merges, first_id, weight=False)


def _train_no_recount(word_counts, num_merges, first_id=256):
    stats = {}
    for w, c in word_counts.items():
        for p, n in _stats(list(w)).items():
            stats[p] = stats.get(p, 0) + n * c
    ranked = sorted(stats, key=lambda p: (-stats[p], p))[:num_merges]
    return {p: first_id + i for i, p in enumerate(ranked)}


def _train_across_words(word_counts, num_merges, first_id=256):
    glued = []
    for w, c in word_counts.items():
        glued.extend(list(w) * c)
    return _train_with({tuple(glued): 1}, num_merges, first_id) if glued else {}


def _train_overlap_twice(word_counts, num_merges, first_id=256):
    return _train_with(word_counts, num_merges, first_id, merge_fn=_merge_overlap_twice)


def _train_ignore_first_id(word_counts, num_merges, first_id=256):
    return _train_with(word_counts, num_merges, 256)


_TIE_RULE = ("the course's rule: the highest count wins; among pairs with equal counts, the smallest pair "
             "wins, comparing (left, right) as tuples. One key can rank by both: a larger count first, then a "
             "smaller pair.")


WRONG_TRAIN = [
    Wrong("ties broken by first appearance", _train_first_appearance,
          "max(stats, key=stats.get) returns the tied pair that was counted first; " + _TIE_RULE),
    Wrong("ties broken by the largest pair", _train_largest_pair, "the largest tied pair was chosen; " + _TIE_RULE),
    Wrong("word counts ignored", _train_unweighted,
          "each distinct word was counted once; a word that occurs c times adds c to each of its pairs."),
    Wrong("counted once, never recounted", _train_no_recount,
          "the merges are the top pairs of the FIRST count; after every merge the pairs change (new ones "
          "with the new id appear, others vanish), so count again before choosing the next merge."),
    Wrong("pairs across word boundaries", _train_across_words,
          "the words were glued together, so pairs spanning two words were counted; count pairs inside "
          "each word only."),
    Wrong("overlapping occurrences merged twice", _train_overlap_twice, _OVERLAP_MESSAGE),
    Wrong("first_id ignored", _train_ignore_first_id,
          "new ids must be first_id, first_id + 1, ...; they were hard-coded to start at 256."),
]


def _right_train_naive(word_counts, num_merges, first_id=256):
    words = [(list(w), c) for w, c in word_counts.items()]
    merges = {}
    for step in range(num_merges):
        stats = {}
        for ids, c in words:
            for p, n in _right_get_stats(ids).items():
                stats[p] = stats.get(p, 0) + n * c
        if not stats:
            break
        best = max(stats.values())
        pair = min(p for p, n in stats.items() if n == best)
        merges[pair] = first_id + step
        words = [(_right_merge(ids, pair, first_id + step), c) for ids, c in words]
    return merges


def _right_train_sorted_stats(word_counts, num_merges, first_id=256):
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
        words = {tuple(_right_merge_skip_flag(list(w), pair, first_id + step)): c for w, c in words.items()}
    return merges


def _right_train_in_place(word_counts, num_merges, first_id=256):
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
            entry[0] = _right_merge_from_the_right_of_each_match(entry[0], best, first_id + step)
    return merges


def train_cases() -> list[Case]:
    """The hidden cases of ``check_train``: the visible ones and these."""
    return _train_cases() + [
        Case("bytes of a clinical sentence, 25 merges", (_byte_words(_CLINICAL), 25)),
        Case("3,000 bytes of real medical text, 40 merges", (_byte_words(_medical_sample(3000)), 40)),
        Case("'aaaaa aaa' bytes, 8 merges", (_byte_words("aaaaa aaa aaaaa"), 8)),
        Case("more merges than the corpus allows", ({(1, 2, 3): 1}, 10), {"first_id": 5}),
        Case("ties everywhere: 'abcabc' once, 4 merges, first_id=3", ({(0, 1, 2, 0, 1, 2): 1}, 4),
             {"first_id": 3}),
        Case("words split so that gluing them creates pairs", ({(1, 2): 1, (3, 1): 4, (2, 3): 1}, 2),
             {"first_id": 4}),
    ]


# train_fast: the same merges as train_naive, incrementally (tests/test_bpe.py compares them); WordBPE and
# ByteBPE train and encode with them (a whole tokenizer: lesson 06's exercises), so they go with them
TRAIN_NAIVE = declare("06_bpe", "train_naive", check_train, equivalents=("train_fast", "WordBPE", "ByteBPE",),
            misconceptions=WRONG_TRAIN,
            promises=(
                Breaks("ties: smallest pair", wrong_answer(WRONG_TRAIN, "ties broken by first appearance"),
                       "ties broken by first appearance"),
                Breaks("new ids start at first_id", wrong_answer(WRONG_TRAIN, "first_id ignored"), "first_id ignored"),
            ),
            right=(Right(_right_train_naive), Right(_right_train_sorted_stats), Right(_right_train_in_place)))


# ---------------------------------------------------------------- encode_ids
def _leftmost(ids, present, merges):
    return present[0]


def _most_frequent(ids, present, merges):
    stats = _stats(ids)
    return max(present, key=lambda p: stats[p])


def _newest(ids, present, merges):
    return max(present, key=lambda p: merges[p])


def _encode_leftmost(ids, merges):
    return _encode_with(ids, merges, choose=_leftmost)


def _encode_most_frequent(ids, merges):
    return _encode_with(ids, merges, choose=_most_frequent)


def _encode_newest(ids, merges):
    return _encode_with(ids, merges, choose=_newest)


def _encode_overlap_twice(ids, merges):
    return _encode_with(ids, merges, choose=lambda i, present, m: min(present, key=lambda p: m[p]),
                        merge_fn=_merge_overlap_twice)


_ORDER = ("merges must be applied in TRAINING order: at each step merge the present pair with the smallest "
          "new id (the earliest learned); a pair training never merged cannot be chosen. ")


WRONG_ENCODE = [
    Wrong("merges applied out of training order (leftmost first)", _encode_leftmost,
          _ORDER + "Merging the leftmost known pair first gives a segmentation training never produced."),
    Wrong("merges applied out of training order (most frequent first)", _encode_most_frequent,
          _ORDER + "The pair frequent in THIS text is irrelevant; the rank from training decides."),
    Wrong("merges applied out of training order (newest first)", _encode_newest,
          _ORDER + "The newest merges were applied first."),
    Wrong("overlapping occurrences merged twice", _encode_overlap_twice, _OVERLAP_MESSAGE),
]


def _right_encode_ids(ids, merges):
    ids = list(ids)
    for pair, idx in sorted(merges.items(), key=lambda kv: kv[1]):   # one pass in training order
        ids = _right_merge(ids, pair, idx)
    return ids


def _right_encode_min_rank(ids, merges):
    """minbpe's loop: merge the present pair with the smallest rank until none is known."""
    ids = list(ids)
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: merges.get(p, float("inf")))
        if pair not in merges:
            break
        ids = _right_merge_skip_flag(ids, pair, merges[pair])
    return ids


def _right_encode_rank_scan(ids, merges):
    """The same rule with an explicit scan for the best position each round."""
    ids = list(ids)
    while True:
        ranks = [(merges[(a, b)], (a, b)) for a, b in zip(ids, ids[1:]) if (a, b) in merges]
        if not ranks:
            return ids
        rank, pair = min(ranks)
        ids = _right_merge_from_the_right_of_each_match(ids, pair, rank)


def encode_cases() -> list[Case]:
    """The hidden cases of ``check_encode``: the visible ones and these."""
    small = _lowest_merges()
    merges = _input("medical 80 merges")
    return _encode_cases() + [
        Case("[2, 3, 4, 2, 3, 4] with {(3, 4): 10, (2, 3): 11, (10, 2): 12, (2, 10): 13}",
             ([2, 3, 4, 2, 3, 4], {(3, 4): 10, (2, 3): 11, (10, 2): 12, (2, 10): 13})),
        Case("an empty list", ([], small)),
        Case("'aaaaa' with {(a, a): 256, (256, a): 257}", ([97] * 5, {(97, 97): 256, (256, 97): 257})),
        Case("' hepatosplenomegaly' with 80 merges learned on medical text",
             (_ids(" hepatosplenomegaly"), merges)),
        Case("' acetaminophen' with 80 merges learned on medical text", (_ids(" acetaminophen"), merges)),
        Case("'the patient' with 80 merges learned on medical text", (_ids("the patient"), merges)),
        Case("'eee', {(e, e): 256, (e, 256): 257}", ([101] * 3, {(101, 101): 256, (101, 256): 257})),
        # training order, leftmost-first, most-frequent-first and newest-first each give another answer
        Case("[1, 3, 3, 2, 3, 3] with {(1, 3): 10, (3, 3): 11, (2, 3): 12}",
             ([1, 3, 3, 2, 3, 3], {(1, 3): 10, (3, 3): 11, (2, 3): 12})),
    ]


# apply_merges: the same ids as encode_ids (tests/test_bpe.py compares them)
ENCODE_IDS = declare("06_bpe", "encode_ids", check_encode, equivalents=("apply_merges",),
            misconceptions=WRONG_ENCODE,
            promises=(
                Breaks("merges in training order",
                       wrong_answer(WRONG_ENCODE, "merges applied out of training order (leftmost first)"),
                       "training order"),
            ),
            right=(Right(_right_encode_ids), Right(_right_encode_min_rank), Right(_right_encode_rank_scan)))


# ---------------------------------------------------------------- decode_ids
def _decode_each_replace(ids, vocab):
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)


def _decode_each_strict(ids, vocab):
    return "".join(vocab[i].decode("utf-8") for i in ids)


def _decode_latin1(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("latin-1")


def _decode_strict(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8")


def _decode_replace(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


def _decode_ignore(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="ignore")


_BY_TOKEN = ("the tokens were decoded one at a time: a character's UTF-8 bytes may be split over two tokens "
             "(an emoji is 4 bytes, 'é' is 2), and each half alone is not valid UTF-8. Put all the tokens' "
             "bytes TOGETHER first, then decode once.")


_SURROGATE = ("lone surrogates ('\\ud800') are encoded with errors='surrogatepass', so decode with "
              "errors='surrogatepass' too, or they cannot round-trip.")


WRONG_DECODE = [
    Wrong("decoding token by token", _decode_each_replace, _BY_TOKEN, variant="errors='replace'"),
    Wrong("decoding token by token", _decode_each_strict, _BY_TOKEN, variant="strict"),
    Wrong("decoded as Latin-1", _decode_latin1,
          "the bytes were decoded as Latin-1 (one character per byte: 'é' -> 'Ã©'); they are UTF-8."),
    Wrong("lone surrogates not passed through", _decode_strict, _SURROGATE, variant="strict"),
    Wrong("lone surrogates not passed through", _decode_replace, _SURROGATE, variant="errors='replace'"),
    Wrong("lone surrogates not passed through", _decode_ignore, _SURROGATE, variant="errors='ignore'"),
]


def _right_decode_ids(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="surrogatepass")


def _right_decode_bytearray(ids, vocab):
    buf = bytearray()
    for i in ids:
        buf += vocab[i]
    return buf.decode("utf-8", "surrogatepass")


def _right_decode_codecs(ids, vocab):
    import codecs

    return codecs.decode(bytes().join(map(vocab.__getitem__, ids)), "utf-8", "surrogatepass")


def _breaks_decode_hiding_bad_bytes(ids, vocab):
    """surrogatepass as promised, but bytes that are not UTF-8 come back as U+FFFD instead of raising."""
    data = b"".join(vocab[i] for i in ids)
    try:
        return data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace")


def decode_cases() -> list[Case]:
    """The hidden cases of ``check_decode``: the visible ones and these."""
    emoji = _private_vocab({(0xF0, 0x9F): 256})                 # first half of many emoji
    return _decode_cases() + [
        Case("an empty list", ([], _private_vocab({}))),
        Case(f"{_DECODE_SAMPLE!r} encoded with 120 merges",
             (_input("sample encoded with 120 merges"), _private_vocab(_input("medical 120 merges")))),
        Case("'💊' with its bytes merged 2 + 2", ([256, 0x92, 0x8A], emoji)),
    ]


def decode_bad_case() -> Case:
    """The hidden test's input that is not valid UTF-8 (``check_decode`` expects a ValueError)."""
    return Case("'caf' then the first byte of a two-byte character, cut off", ([99, 97, 102, 0xC3], _private_vocab({})))


DECODE_IDS = declare("06_bpe", "decode_ids", check_decode,
            misconceptions=WRONG_DECODE,
            promises=(
                Breaks("invalid UTF-8 raises ValueError", _breaks_decode_hiding_bad_bytes, "not valid UTF-8"),
                Breaks("UTF-8 decoded once, surrogatepass",
                       wrong_answer(WRONG_DECODE, "lone surrogates not passed through", fn_name="_decode_strict"),
                       "lone surrogates"),
            ),
            right=(Right(_right_decode_ids), Right(_right_decode_bytearray), Right(_right_decode_codecs)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (GET_STATS, MERGE, WORD_COUNTS, TRAIN_NAIVE, ENCODE_IDS, DECODE_IDS)
