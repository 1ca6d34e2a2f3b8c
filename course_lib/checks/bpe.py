"""Checks for lesson 06 (byte-pair encoding): get_stats, merge, word_counts, the
training loop, encode and decode.

Each ``check_*`` runs the student's function and ``course_lib.bpe`` on fixed inputs
(and, with ``hidden=True``, other and larger ones taken from real medical text),
compares the results exactly (these are integers, tuples and strings, no tolerance),
checks that the input was not changed in place, and names these misconceptions:

* ``pairs counted once``            a set of pairs: each pair counted 1, not its frequency
* ``wrap-around pair``              (last, first) counted as if the sequence were circular
* ``every other position``          ``range(0, n - 1, 2)``: pairs starting at odd positions lost
* ``overlapping pairs skipped``     'a a a' counted as (a, a) once; every position counts here
* ``last pair missing``             off by one at the end of the sequence
* ``overlapping occurrences merged twice``  'a a a' -> [X, X]: the middle 'a' used by two
                                    merges; the pair must merge once, left to right -> [X, a]
* ``second element not skipped``    after a merge the loop moves on by 1 instead of 2
* ``merging right to left``         'a a a' -> [a, X]
* ``only the first occurrence``     one replacement per call instead of all of them
* ``forgot the end-of-word marker`` 'low' and the 'low' inside 'lower' become the same symbols
* ``separate end-of-word symbol``   '</w>' as its own symbol (the paper's drawing), where this
                                    course attaches it to the last character (as subword-nmt)
* ``split on single spaces``        ``text.split(' ')``: newlines and tabs stay inside words
* ``ties broken by first appearance``  ``max(stats, key=stats.get)``: the course rule is the
                                    highest count, then the smallest pair ``min(pair)``
* ``ties broken by the largest pair``
* ``word counts ignored``           each distinct word counted once, whatever its frequency
* ``counted once, never recounted`` the top pairs of the first count, without recounting
                                    after each merge
* ``pairs across word boundaries``  words glued together before counting
* ``first_id ignored``              new ids hard-coded to start at 256
* ``merges applied out of training order``  the leftmost learned pair, the most frequent
                                    one, or the newest one merged first, instead of the
                                    earliest-learned pair present
* ``decoding token by token``       each token's bytes decoded alone: a character whose UTF-8
                                    bytes are split over two tokens breaks
* ``decoded as Latin-1``            bytes read one character each: 'é' -> 'Ã©'
* ``lone surrogates not passed through``  ``errors`` other than 'surrogatepass'

``hidden=True`` selects other, larger inputs for the hidden tests.

The hidden cases, the known wrong answers behind these names (with the private BPE that builds the hidden cases'
merges) and the exercises' declarations are the judge's (``course_lib/judge/bpe.py``), which the students' and
the grading kernel's editions leave out. The visible cases' merges and word counts are written below as data.
"""
from __future__ import annotations

import builtins
import operator
from collections.abc import Mapping

from course_lib import bpe as ref
from course_lib.checks import core
from course_lib.checks.core import Case, Exact, assert_raises, compare_with_reference

__all__ = [
    "check_get_stats",
    "check_merge",
    "check_word_counts",
    "check_train",
    "check_encode",
    "check_decode",
]

FORBIDDEN = tuple(f"course_lib.bpe.{name}" for name in (
    "get_stats", "merge", "word_counts", "chunk_counts", "train_naive", "train_fast", "encode_ids",
    "apply_merges", "decode_ids", "_train", "ByteBPE", "ByteBPE.encode", "ByteBPE.decode", "WordBPE",
    "WordBPE.encode", "WordBPE.decode", "WordBPE._word_ids"))

_AssertionError = builtins.AssertionError
_isinstance = builtins.isinstance
_len = builtins.len


# ---------------------------------------------------------------- exact comparison (core.Exact)
# Normalisers turn each output into plain built-in values (exact int, str, tuple, list, dict), so an
# object with a rigged __eq__ cannot pass; core.compare_with_reference compares what they return.


def _exact_int(x, what):
    if _isinstance(x, float) and float.is_integer(x):
        x = int(x)
    try:
        v = operator.index(x)
    except TypeError:
        raise _AssertionError(f"{what}: expected integers, got {type(x).__name__} {x!r}") from None
    return int.__add__(v, 0)


def _as_pair_counts(x, what):
    if not _isinstance(x, Mapping):
        raise _AssertionError(f"{what}: expected a dict {{(left, right): count}}, got {type(x).__name__}")
    out = {}
    for k, v in x.items():
        try:
            key = tuple(_exact_int(i, what) for i in k)
        except TypeError:
            raise _AssertionError(f"{what}: keys must be pairs of ids like (104, 101), got {k!r}") from None
        if _len(key) != 2:
            raise _AssertionError(f"{what}: keys must be pairs (left, right), got {k!r}")
        out[key] = _exact_int(v, what)
    return out


def _as_ids(x, what):
    if _isinstance(x, (str, bytes, Mapping)) or not hasattr(x, "__iter__"):
        raise _AssertionError(f"{what}: expected a list of int ids, got {type(x).__name__}")
    return [_exact_int(i, what) for i in x]


def _as_word_counts(x, what):
    if not _isinstance(x, Mapping):
        raise _AssertionError(f"{what}: expected a dict {{tuple of symbols: count}}, got {type(x).__name__}")
    out = {}
    for k, v in x.items():
        if not _isinstance(k, tuple) or not all(_isinstance(s, str) for s in k):
            raise _AssertionError(f"{what}: keys must be tuples of strings like ('l', 'o', 'w</w>'), got {k!r}")
        out[tuple(str.__str__(s) for s in k)] = _exact_int(v, what)
    return out


def _as_str(x, what):
    if not _isinstance(x, str):
        raise _AssertionError(f"{what}: expected a str, got {type(x).__name__}")
    return str.__str__(x)


# ---------------------------------------------------------------- the visible cases
_TOY = "low low low low low lower lower newest newest newest newest newest newest widest widest widest"
# word_counts(_TOY) and the 12 merges a byte-level BPE learns on "low lower newest widest lowest " * 3 (the
# reference's word_counts and train_naive; tests/test_checks_bpe.py builds them again): written here as data, so
# that no BPE ships with the checks (it would compute this lesson's exercises for a blank answer). A merge's pair
# is written with characters for the bytes (ord("e") = 101) and ids for the tokens learned before it.
_TOY_WORD_COUNTS = ((("l", "o", "w</w>"), 5), (("l", "o", "w", "e", "r</w>"), 2),
                    (("n", "e", "w", "e", "s", "t</w>"), 6), (("w", "i", "d", "e", "s", "t</w>"), 3))
_LOWEST_MERGES = ((("e", "s"), 256), (("l", "o"), 257), ((256, "t"), 258), ((257, "w"), 259), ((" ", 259), 260),
                  ((" ", "n"), 261), ((" ", "w"), 262), (("d", 258), 263), (("e", "r"), 264), (("e", "w"), 265),
                  (("i", 263), 266), ((260, 258), 267))


def _lowest_merges() -> dict:
    """``_LOWEST_MERGES`` as the merges dict {(left id, right id): new id}."""
    def as_id(x):
        return ord(x) if isinstance(x, str) else x

    return {(as_id(a), as_id(b)): idx for (a, b), idx in _LOWEST_MERGES}


def _private_vocab(merges: dict) -> dict:
    vocab = {i: bytes([i]) for i in range(256)}
    for (a, b), idx in merges.items():
        vocab[idx] = vocab[a] + vocab[b]
    return vocab


def _ids(text: str) -> list[int]:
    return list(text.encode("utf-8", "surrogatepass"))


def _stats_cases() -> list[Case]:
    return [
        Case("[1, 2, 3, 1, 2]", ([1, 2, 3, 1, 2],)),
        Case("'a a a' = [97, 97, 97] (overlapping pairs)", ([97, 97, 97],)),
        Case("a single id [5]", ([5],)),
        Case("the bytes of 'banana'", (_ids("banana"),)),
    ]


def _merge_cases() -> list[Case]:
    return [
        Case("[1, 2, 3, 1, 2], pair (1, 2) -> 4", ([1, 2, 3, 1, 2], (1, 2), 4)),
        Case("'a a a', pair (a, a) -> 256 (overlap)", ([97, 97, 97], (97, 97), 256)),
        Case("pair not present", ([1, 2, 3], (3, 1), 9)),
        Case("'banana', pair (a, n) -> 256", (_ids("banana"), (97, 110), 256)),
    ]


def _word_count_cases() -> list[Case]:
    return [
        Case("'low lower low'", ("low lower low",)),
        Case("Sennrich's toy corpus", (_TOY,)),
        Case("words separated by a newline and a tab", ("fever\ncough\tfever",)),
    ]


def _as_ints(words: dict[tuple[str, ...], int]) -> dict[tuple[int, ...], int]:
    """Symbols -> ids (sorted), for training cases built from word counts."""
    symbols = sorted({s for w in words for s in w})
    index = {s: i for i, s in enumerate(symbols)}
    return {tuple(index[s] for s in w): c for w, c in words.items()}


def _train_cases() -> list[Case]:
    toy = _as_ints(dict(_TOY_WORD_COUNTS))
    return [
        Case("Sennrich's toy corpus (as ids), 6 merges, first_id=20", (toy, 6), {"first_id": 20}),
        Case("'aaaa' once (overlapping pairs), 3 merges, first_id=1", ({(0, 0, 0, 0): 1}, 3), {"first_id": 1}),
        Case("a tie: (9, 8) and (1, 2) both twice, 1 merge", ({(9, 8): 2, (1, 2): 2}, 1), {"first_id": 10}),
        Case("two words, one 3 times: {(1, 2): 3, (2, 1, 2, 3): 1}, 3 merges, first_id=4",
             ({(1, 2): 3, (2, 1, 2, 3): 1}, 3), {"first_id": 4}),
    ]


def _encode_cases() -> list[Case]:
    return [
        Case("[1, 2, 3, 1, 2] with merges {(1, 2): 4, (4, 3): 5}", ([1, 2, 3, 1, 2], {(1, 2): 4, (4, 3): 5})),
        Case("[1, 2, 3] with {(2, 3): 10, (1, 2): 11}: (2, 3) was learned first",
             ([1, 2, 3], {(2, 3): 10, (1, 2): 11})),
        Case("'aaaa' with {(a, a): 256, (256, 256): 257}", ([97] * 4, {(97, 97): 256, (256, 256): 257})),
        Case("'lowest' with 12 merges learned on 'low lower newest widest lowest'",
             (_ids("lowest"), _lowest_merges())),
    ]


def _decode_cases() -> list[Case]:
    plain = _private_vocab({})
    emoji = _private_vocab({(0xF0, 0x9F): 256})                 # first half of many emoji
    return [
        Case("'hi' as bytes", ([104, 105], plain)),
        Case("'café' with é as its two bytes C3 A9", (_ids("café"), plain)),
        Case("'🩺' whose 4 bytes are split over two tokens", ([256, 0xA9, 0xBA], emoji)),
        Case("'interferon-γ' as bytes", (_ids("interferon-γ"), plain)),
        Case("a lone surrogate '\\ud800' between letters", (_ids("a\ud800b"), plain)),  # the docstring's surrogatepass
    ]


def warm_up() -> None:
    """Build the inputs that take time (the merges the judge's hidden encode and decode cases learn on medical
    text), so that a process forked after this call has them (the verifier's workers, ``grading.verify``). Where
    the judge module is absent (the students' and the grading kernel's editions) there is nothing to build."""
    judge = core.judge(__name__)
    if judge is not None:
        judge.warm_up()


# ---------------------------------------------------------------- checks
def _compare(student, reference, cases, *, exercise: str, wrongs, normalise, ordered: str = "") -> None:
    compare_with_reference(student, reference, cases, exercise=exercise, wrongs=wrongs, forbidden=FORBIDDEN,
                           exact=Exact(normalise, ordered))


@core.graded
def check_get_stats(student, hidden: bool = False) -> None:
    """Student ``get_stats(ids)`` -> {(left, right): count} over every adjacent position."""
    cases = core.hidden_part(__name__).stats_cases() if hidden else _stats_cases()
    _compare(student, ref.get_stats, cases, exercise="get_stats", wrongs=core.wrongs(__name__, "GET_STATS"),
             ordered="pairs", normalise=_as_pair_counts)


@core.graded
def check_merge(student, hidden: bool = False) -> None:
    """Student ``merge(ids, pair, idx)``: every occurrence, left to right, no overlap, input unchanged."""
    cases = core.hidden_part(__name__).merge_cases() if hidden else _merge_cases()
    _compare(student, ref.merge, cases, exercise="merge", wrongs=core.wrongs(__name__, "MERGE"), normalise=_as_ids)


@core.graded
def check_word_counts(student, hidden: bool = False) -> None:
    """Student ``word_counts(text)``: whitespace words as character tuples, '</w>' on the last one."""
    cases = core.hidden_part(__name__).word_count_cases() if hidden else _word_count_cases()
    _compare(student, ref.word_counts, cases, exercise="word_counts", wrongs=core.wrongs(__name__, "WORD_COUNTS"),
             normalise=_as_word_counts, ordered="words")


@core.graded
def check_train(student, hidden: bool = False) -> None:
    """Student ``train_naive(word_counts, num_merges, first_id=256)`` learns the reference's merges."""
    cases = core.hidden_part(__name__).train_cases() if hidden else _train_cases()
    _compare(student, ref.train_naive, cases, exercise="train_naive", wrongs=core.wrongs(__name__, "TRAIN"),
             normalise=_as_pair_counts)


@core.graded
def check_encode(student, hidden: bool = False) -> None:
    """Student ``encode_ids(ids, merges)`` applies merges in training order."""
    cases = core.hidden_part(__name__).encode_cases() if hidden else _encode_cases()
    _compare(student, ref.encode_ids, cases, exercise="encode_ids", wrongs=core.wrongs(__name__, "ENCODE"),
             normalise=_as_ids)


@core.graded
def check_decode(student, hidden: bool = False) -> None:
    """Student ``decode_ids(ids, vocab)`` joins all bytes, then decodes UTF-8 once (surrogatepass)."""
    cases = core.hidden_part(__name__).decode_cases() if hidden else _decode_cases()
    _compare(student, ref.decode_ids, cases, exercise="decode_ids", wrongs=core.wrongs(__name__, "DECODE"),
             normalise=_as_str)
    # the docstring: bytes that are not valid UTF-8 raise ValueError (errors="replace" or "ignore" hide them)
    bad = core.hidden_part(__name__).decode_bad_case() if hidden else \
        Case("bytes FF FE, which no UTF-8 text has", ([0xFF, 0xFE], _private_vocab({})))
    assert_raises(student, bad, "decode_ids", ValueError, "when the bytes are not valid UTF-8", FORBIDDEN)
