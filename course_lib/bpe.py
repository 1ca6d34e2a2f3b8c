"""Byte-pair encoding (BPE): how text becomes the integer ids a transformer reads.

Covers
    * the building blocks, each a small pure function with a worked example:
      ``get_stats`` (count adjacent pairs), ``merge`` (replace a pair by a new id),
      ``encode_ids`` (apply learned merges in training order), ``decode_ids``;
    * two trainers that learn exactly the same merges from the same word counts:
      ``train_naive`` recounts every pair after every merge (the student exercise,
      O(merges x corpus)); ``train_fast`` keeps pair counts up to date incrementally
      with a priority queue (``heapq``, lazy invalidation) and an index of where each
      pair occurs, so a merge costs time proportional to its number of occurrences;
    * ``WordBPE``: classic word-level BPE (Sennrich, Haddow & Birch, ACL 2016):
      whitespace words, characters plus an end-of-word marker ``</w>``;
    * ``ByteBPE``: byte-level BPE over UTF-8 bytes (GPT-2, Radford et al. 2019) with
      an optional regex pre-split (``SPLIT_PATTERN``) and special tokens;
    * ``save``/``load``: a readable text file with a version header.

Does NOT cover
    * other subword algorithms (WordPiece, the unigram language model of SentencePiece),
      BPE-dropout, Unicode normalisation (NFC/NFKC: we keep the text exactly as given),
      parallel training, or the byte-to-unicode display mapping of GPT-2's files.

The rules, stated once (both trainers, the checks and the notebook follow them)
    * Counting: ``get_stats`` counts every adjacent position, so ``a a a`` holds the
      pair (a, a) twice (as minbpe, subword-nmt and HuggingFace ``tokenizers`` count).
      Pairs never cross a word (pre-split chunk) boundary. A word that occurs c times
      contributes c times each of its pairs.
    * Merging: occurrences are replaced left to right without overlap, so merging
      (a, a) in ``a a a`` gives ``aa a``, and in ``a a a a`` gives ``aa aa``.
    * Choosing: the pair with the highest count; among pairs with the same count,
      the smallest pair of ids in lexicographic order, ``min(pair)``; e.g. counts
      {(101, 32): 5, (32, 116): 5, (116, 104): 4} -> (32, 116). This is the rule of
      HuggingFace ``tokenizers``' BpeTrainer too (its heap orders equal counts by the
      smaller pair of ids); but it numbers its base alphabet differently (byte-level:
      by the code point of GPT-2's printable stand-in character, so the space byte 32,
      shown as 'Ġ' = U+0120, sorts after the letters; word-level: characters sorted,
      then end-of-word forms in order of first appearance), so the two agree exactly
      once the base ids are relabelled (tested in ``tests/test_bpe.py``).
    * New ids: merge number i (from 0) creates id ``first_id + i``, even when its bytes
      equal an existing token's (HF ``tokenizers`` reuses the existing id then; minbpe
      does as we do). ``merges`` is a dict ``{pair: new_id}`` in training order, so a
      smaller new id means an earlier merge.
    * Training stops after ``num_merges`` merges or when no pair is left.
    * Text <-> bytes uses UTF-8 with ``errors="surrogatepass"``: every Python ``str``,
      lone surrogates such as ``"\\ud800"`` included, round-trips exactly through
      ``ByteBPE``. Ids whose bytes are not valid UTF-8 (a sequence cut inside a
      character) raise ValueError, or give U+FFFD with ``errors="replace"``.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Union

import regex

from course_lib import solutions

_solution = solutions.of("course_lib.bpe")  # the exercises' bodies: course_lib/solutions/bpe.py


def __getattr__(name: str):
    """ByteBPE, WordBPE: whole classes built on this lesson's exercises, so references too; their code is in
    course_lib/solutions/bpe.py, looked up here when first asked for."""
    if name in ("ByteBPE", "WordBPE"):
        return getattr(_solution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "END_OF_WORD",
    "SPLIT_PATTERN",
    "get_stats",
    "merge",
    "word_counts",
    "chunk_counts",
    "train_naive",
    "train_fast",
    "encode_ids",
    "apply_merges",
    "build_vocab",
    "decode_ids",
    # WordBPE, ByteBPE: references too, resolved by __getattr__ above (so not in a star import)
    "load",
]

Pair = tuple[int, int]

END_OF_WORD = "</w>"
FORMAT_NAME = "course_lib.bpe"
FORMAT_VERSION = 1

#: Pre-split pattern for byte-level BPE, written for this course in the spirit of
#: GPT-2/GPT-4: merges never cross the boundaries of these chunks, so a token never
#: spans a word and the punctuation after it. One alternative per line:
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"        # English contractions, any case: "don't" -> don + 't
    r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+"    # a word (letters and combining accents) with one
                                           # leading space or symbol: " fever", "-induced"
    r"|\p{N}{1,3}"                         # numbers in groups of at most three digits: 250 mg
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"          # a run of punctuation/symbols, one optional space first
    r"|\s*[\r\n]+"                         # line breaks, with the spaces before them
    r"|\s+(?!\S)"                          # spaces, leaving the last one to start the next word
    r"|\s+"                                # any other whitespace
)


# ---------------------------------------------------------------- building blocks
def get_stats(ids: Sequence[int]) -> dict[Pair, int]:
    """Count every adjacent pair in ``ids`` (overlapping occurrences all count).

    Returns a new dict ``{(left, right): count}`` in order of first appearance.

    >>> get_stats([1, 2, 3, 1, 2])
    {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    >>> get_stats([7, 7, 7])           # 'a a a' holds (a, a) at positions 0 and 1
    {(7, 7): 2}
    """
    return _solution.get_stats(ids)


def merge(ids: Sequence[int], pair: Pair, idx: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids`` by ``idx``, left to right, no overlap.

    Returns a new list; the input list ``ids`` stays unchanged.

    >>> merge([1, 2, 3, 1, 2], (1, 2), 4)
    [4, 3, 4]
    >>> merge([7, 7, 7], (7, 7), 9)     # the middle 7 is used once, by the left pair
    [9, 7]
    >>> merge([7, 7, 7, 7], (7, 7), 9)
    [9, 9]
    """
    return _solution.merge(ids, pair, idx)


def word_counts(text: str) -> dict[tuple[str, ...], int]:
    """Classic (Sennrich) BPE input: whitespace words as character tuples with counts.

    The end-of-word marker ``</w>`` is attached to the last character, as in the
    authors' subword-nmt code and HF ``tokenizers`` (the paper's toy example writes it
    as a separate symbol; attaching it saves one merge per word-final character and
    keeps the two segmentations equivalent). Without it, "low" at the end of
    "widest low" and the "low" inside "lower" would be the same token, and decoding
    could not tell where words end. Words are split with ``str.split()`` (any run
    of Unicode whitespace); the dict is in order of first appearance.

    >>> word_counts("low lower low")
    {('l', 'o', 'w</w>'): 2, ('l', 'o', 'w', 'e', 'r</w>'): 1}
    """
    return _solution.word_counts(text)


def _compile(pattern: str | None):
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a regex string or None, got {type(pattern).__name__}")
    try:
        return regex.compile(pattern)
    except regex.error as err:
        raise ValueError(f"pattern is not a valid regular expression: {err}") from None


def _split(text: str, compiled) -> list[str]:
    if compiled is None:
        return [text] if text else []
    return compiled.findall(text)


def chunk_counts(text: str, pattern: str | None = SPLIT_PATTERN) -> dict[tuple[int, ...], int]:
    """Byte-level BPE input: pre-split ``text`` with ``pattern``; each chunk's UTF-8 bytes, counted.

    ``pattern=None`` keeps the whole text as one chunk (used for DNA). Bytes come
    from ``str.encode("utf-8", "surrogatepass")``.

    >>> chunk_counts("the cat, the hat")
    {(116, 104, 101): 1, (32, 99, 97, 116): 1, (44,): 1, (32, 116, 104, 101): 1, (32, 104, 97, 116): 1}
    """
    if not isinstance(text, str):
        raise ValueError(f"the corpus must be a str, got {type(text).__name__}")
    compiled = _compile(pattern)
    counts: dict[tuple[int, ...], int] = {}
    for chunk in _split(text, compiled):
        key = tuple(chunk.encode("utf-8", "surrogatepass"))
        counts[key] = counts.get(key, 0) + 1
    return counts


# ---------------------------------------------------------------- trainers
def train_naive(word_counts: Mapping[tuple[int, ...], int], num_merges: int,
                first_id: int = 256) -> dict[Pair, int]:
    """Learn up to ``num_merges`` merges by recounting every pair after every merge.

    ``word_counts`` maps each distinct word (a tuple of ids below ``first_id``) to how
    often it occurs. Returns ``{pair: new_id}`` in training order; merge i creates id
    ``first_id + i``. Ties: highest count, then the smallest pair. Stops early when no
    word has two symbols left. Cost: every merge rescans the whole corpus.

    >>> train_naive({(1, 2, 3): 2, (2, 3): 1}, 2, first_id=10)
    {(2, 3): 10, (1, 10): 11}
    """
    return _solution.train_naive(word_counts, num_merges, first_id)


def train_fast(word_counts: Mapping[tuple[int, ...], int], num_merges: int,
               first_id: int = 256) -> dict[Pair, int]:
    """Learn the same merges as :func:`train_naive`, updating pair counts incrementally.

    All words sit in one array of symbols linked as doubly linked lists (``prev``/
    ``next``, -1 at word ends); each position carries its word's count as weight.
    ``where[pair]`` holds the positions where the pair may start (entries are checked
    when used, never removed: lazy). A max-heap of ``(-count, pair)`` entries yields
    the best pair; an entry whose count is out of date is pushed again with the
    current count (lazy invalidation). Counts of existing pairs can only fall, and new
    pairs (those holding the new id) are pushed when created, so the first up-to-date
    entry popped is the true maximum, and ``(-count, pair)`` breaks ties exactly as
    the naive trainer does. Merging visits the positions of the pair in increasing
    order, which is left to right within each word (overlaps are handled like
    :func:`merge`). Cost per merge: O(occurrences x log).

    >>> train_fast({(1, 2, 3): 2, (2, 3): 1}, 2, first_id=10)
    {(2, 3): 10, (1, 10): 11}
    """
    return _solution.train_fast(word_counts, num_merges, first_id)


# ---------------------------------------------------------------- encode / decode
def encode_ids(ids: Sequence[int], merges: Mapping[Pair, int]) -> list[int]:
    """Apply learned ``merges`` to ``ids`` in training order (the teaching version).

    Repeatedly finds, among the adjacent pairs present, the one learned earliest
    (smallest new id) and merges all its occurrences; stops when no present pair was
    learned. Returns a new list.

    >>> merges = {(1, 2): 4, (4, 3): 5}
    >>> encode_ids([1, 2, 3, 1, 2], merges)
    [5, 4]
    >>> encode_ids([7, 7, 7], {(7, 7): 9, (9, 7): 10})
    [10]
    """
    return _solution.encode_ids(ids, merges)


def apply_merges(ids: Sequence[int], merges: Mapping[Pair, int]) -> list[int]:
    """Same result as :func:`encode_ids` in O(n log n): a heap of (rank, position).

    Pops the earliest-learned pair at the leftmost position, merges it in a linked
    list and pushes the two new neighbour pairs. A new pair always holds the newest
    id, so it ranks after the pair just merged: occurrences of one merge are all
    handled, left to right, before any later merge, exactly as in ``encode_ids``.

    >>> apply_merges([7, 7, 7, 7], {(7, 7): 9, (9, 9): 10})
    [10]
    """
    return _solution.apply_merges(ids, merges)


def build_vocab(merges: Mapping[Pair, int], base: Mapping[int, bytes] | None = None) -> dict[int, bytes]:
    """Id -> bytes for the base ids (default: the 256 single bytes) and every merge.

    >>> build_vocab({(104, 105): 256, (256, 33): 257})[257]
    b'hi!'
    """
    vocab = {i: bytes([i]) for i in range(256)} if base is None else dict(base)
    for (a, b), idx in merges.items():
        if a not in vocab or b not in vocab:
            raise ValueError(f"merge ({a}, {b}) -> {idx} uses an id that no earlier merge or base "
                             "symbol defines; merges must be in training order")
        vocab[idx] = vocab[a] + vocab[b]
    return vocab


def decode_ids(ids: Sequence[int], vocab: Mapping[int, bytes]) -> str:
    """Concatenate the tokens' bytes, then decode the whole byte string as UTF-8 once.

    Decoding token by token would break every character whose bytes are split over
    two tokens (an emoji is 4 bytes). Lone surrogates pass through
    (``errors="surrogatepass"``); bytes that are not valid UTF-8 raise ValueError
    (``UnicodeDecodeError`` is a ValueError).

    >>> vocab = build_vocab({(195, 169): 256})     # 'é' is the two bytes C3 A9
    >>> decode_ids([99, 97, 102, 256], vocab), decode_ids([99, 97, 102, 195, 169], vocab)
    ('café', 'café')
    """
    return _solution.decode_ids(ids, vocab)


# ---------------------------------------------------------------- file format


def load(path: Union[str, os.PathLike]):
    """Read a tokenizer written by ``save``: a :class:`ByteBPE` or a :class:`WordBPE`. Corrupt or foreign files raise ValueError.

    Format (UTF-8 text, one item per line)::

        course_lib.bpe 1                  <- name and format version
        flavour: byte                     <- or: word
        pattern: "<regex as JSON>"        <- byte only; null = no pre-split
        special: ["<|endoftext|>"]        <- byte only; ids follow the merges
        symbols: N, then N lines ["c", false]   <- word only: base symbols (text, ends word)
        merges: M
        116 104\t"th"                     <- left id, right id; after the tab the new
                                             token, for people (checked on load)
    """
    try:
        with open(path, encoding="utf-8", errors="surrogatepass") as fh:
            lines = fh.read().split("\n")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a {FORMAT_NAME} file (not UTF-8 text: {err.reason})") from None
    if lines and lines[-1] == "":
        lines.pop()
    reader = _Lines(path, lines)
    head = reader.next().split(" ")
    if len(head) != 2 or head[0] != FORMAT_NAME:
        raise ValueError(f"{path}: not a {FORMAT_NAME} file (first line should be '{FORMAT_NAME} "
                         f"{FORMAT_VERSION}', got {lines[0][:60]!r})")
    if head[1] != str(FORMAT_VERSION):
        raise ValueError(f"{path}: format version {head[1]!r} is not supported (this code reads "
                         f"version {FORMAT_VERSION})")
    flavour = reader.field("flavour")
    if flavour == "byte":
        pattern = reader.json_field("pattern")
        special = reader.json_field("special")
        if not (pattern is None or isinstance(pattern, str)) or not isinstance(special, list):
            raise ValueError(f"{path}: corrupt header (pattern must be a string or null, special a list)")
        merges = reader.merges(256)
        try:
            tok = _solution.ByteBPE(merges, pattern, special)
        except ValueError as err:
            raise ValueError(f"{path}: corrupt file: {err}") from None
    elif flavour == "word":
        n = reader.int_field("symbols")
        symbols = []
        for _ in range(n):
            item = reader.json_line()
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], bool)):
                raise ValueError(f"{path}: corrupt symbol line {reader.pos}: expected [\"c\", true/false]")
            symbols.append((item[0], item[1]))
        merges = reader.merges(n)
        try:
            tok = _solution.WordBPE(symbols, merges)
        except (ValueError, IndexError) as err:
            raise ValueError(f"{path}: corrupt file: {err}") from None
    else:
        raise ValueError(f"{path}: unknown flavour {flavour!r} (expected 'byte' or 'word')")
    if reader.pos != len(lines):
        raise ValueError(f"{path}: corrupt file: {len(lines) - reader.pos} unexpected lines after the merges")
    for lineno, idx, shown in reader.shown:
        if json.dumps(tok.tokens([idx])[0], ensure_ascii=False) != shown:
            raise ValueError(f"{path}: corrupt file: line {lineno} shows token {shown} but its ids build "
                             f"{tok.tokens([idx])[0]!r}")
    return tok


class _Lines:
    """Line reader for :func:`load` that turns every problem into a ValueError with a line number."""

    def __init__(self, path, lines):
        self.path, self.lines, self.pos = path, lines, 0
        self.shown: list[tuple[int, int, str]] = []

    def next(self) -> str:
        if self.pos >= len(self.lines):
            raise ValueError(f"{self.path}: corrupt file: ends early after line {self.pos}")
        self.pos += 1
        return self.lines[self.pos - 1]

    def field(self, name: str) -> str:
        line = self.next()
        if not line.startswith(name + ": "):
            raise ValueError(f"{self.path}: corrupt file: line {self.pos} should start with '{name}: ', "
                             f"got {line[:60]!r}")
        return line[len(name) + 2:]

    def json_field(self, name: str):
        raw = self.field(name)
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"{self.path}: corrupt file: line {self.pos} ({name}) is not valid JSON") from None

    def int_field(self, name: str) -> int:
        raw = self.field(name)
        if not raw.isdigit():
            raise ValueError(f"{self.path}: corrupt file: line {self.pos} ({name}) should be a count, got {raw!r}")
        return int(raw)

    def json_line(self):
        try:
            return json.loads(self.next())
        except json.JSONDecodeError:
            raise ValueError(f"{self.path}: corrupt file: line {self.pos} is not valid JSON") from None

    def merges(self, first_id: int) -> dict[Pair, int]:
        n = self.int_field("merges")
        merges: dict[Pair, int] = {}
        for step in range(n):
            line = self.next()
            ids, _, shown = line.partition("\t")
            parts = ids.split(" ")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise ValueError(f"{self.path}: corrupt file: line {self.pos} should be 'left right', "
                                 f"got {line[:60]!r}")
            a, b = int(parts[0]), int(parts[1])
            idx = first_id + step
            if a >= idx or b >= idx:
                raise ValueError(f"{self.path}: corrupt file: line {self.pos}: merge ({a}, {b}) uses an id "
                                 f">= {idx}, which does not exist yet")
            if (a, b) in merges:
                raise ValueError(f"{self.path}: corrupt file: line {self.pos}: merge ({a}, {b}) appears twice")
            merges[(a, b)] = idx
            if shown:
                self.shown.append((self.pos, idx, shown))
        return merges
