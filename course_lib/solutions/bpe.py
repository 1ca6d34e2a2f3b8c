"""The reference solutions of ``course_lib.bpe`` (see :mod:`course_lib.solutions`): each function here is
the body of the same-named one there, which keeps the signature and the docstring. An edition without this
lesson's solutions released leaves this file out."""
from __future__ import annotations

import heapq
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Union

import regex

from course_lib.bpe import (
    END_OF_WORD, FORMAT_NAME, FORMAT_VERSION, Pair, SPLIT_PATTERN, _compile, _split, build_vocab, chunk_counts)


def get_stats(ids: Sequence[int]) -> dict[Pair, int]:
    counts: dict[Pair, int] = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def merge(ids: Sequence[int], pair: Pair, idx: int) -> list[int]:
    a, b = pair
    out: list[int] = []
    i, n = 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def word_counts(text: str) -> dict[tuple[str, ...], int]:
    if not isinstance(text, str):
        raise ValueError(f"word_counts expects a str, got {type(text).__name__}")
    counts: dict[tuple[str, ...], int] = {}
    for word in text.split():
        symbols = tuple(word[:-1]) + (word[-1] + END_OF_WORD,)
        counts[symbols] = counts.get(symbols, 0) + 1
    return counts


def _check_words(word_counts: Mapping, num_merges: int, first_id: int) -> list[tuple[tuple[int, ...], int]]:
    """Validate trainer input; return [(word ids, count)] in the given order."""
    if not isinstance(word_counts, Mapping):
        raise ValueError("word_counts must be a dict {tuple of int ids: count}, "
                         f"got {type(word_counts).__name__}")
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be an int >= 0, got {num_merges!r}")
    if isinstance(first_id, bool) or not isinstance(first_id, int) or first_id < 0:
        raise ValueError(f"first_id must be an int >= 0, got {first_id!r}")
    words = []
    for word, count in word_counts.items():
        if not isinstance(word, tuple) or not all(isinstance(i, int) and 0 <= i < first_id for i in word):
            raise ValueError(f"each word must be a tuple of int ids in [0, first_id={first_id}), got {word!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"each word count must be an int >= 1, got {count!r} for {word!r}")
        words.append((word, count))
    return words


def _best_pair(stats: Mapping[Pair, int]) -> Pair:
    """The highest count; ties go to the smallest pair. {(5, 1): 3, (2, 9): 3} -> (2, 9)."""
    return min(stats, key=lambda p: (-stats[p], p))


def train_naive(word_counts: Mapping[tuple[int, ...], int], num_merges: int,
                first_id: int = 256) -> dict[Pair, int]:
    words = [(list(word), count) for word, count in _check_words(word_counts, num_merges, first_id)]
    merges: dict[Pair, int] = {}
    for step in range(num_merges):
        stats: dict[Pair, int] = {}
        for ids, count in words:
            for pair, n in get_stats(ids).items():
                stats[pair] = stats.get(pair, 0) + n * count
        if not stats:
            break
        pair = _best_pair(stats)
        idx = first_id + step
        words = [(merge(ids, pair, idx), count) for ids, count in words]
        merges[pair] = idx
    return merges


def train_fast(word_counts: Mapping[tuple[int, ...], int], num_merges: int,
               first_id: int = 256) -> dict[Pair, int]:
    words = _check_words(word_counts, num_merges, first_id)
    sym: list[int] = []      # symbol at each position; -1 once merged into its left neighbour
    prv: list[int] = []
    nxt: list[int] = []
    weight: list[int] = []   # count of the word the position belongs to
    for word, count in words:
        start, n = len(sym), len(word)
        if n == 0:
            continue
        sym.extend(word)
        weight.extend([count] * n)
        prv.extend(range(start - 1, start + n - 1))
        nxt.extend(range(start + 1, start + n + 1))
        prv[start] = -1
        nxt[start + n - 1] = -1

    counts: dict[Pair, int] = {}
    where: dict[Pair, set[int]] = {}
    for i in range(len(sym) - 1):
        if nxt[i] != -1:
            pair = (sym[i], sym[i + 1])
            counts[pair] = counts.get(pair, 0) + weight[i]
            where.setdefault(pair, set()).add(i)
    heap = [(-c, p) for p, c in counts.items()]
    heapq.heapify(heap)

    merges: dict[Pair, int] = {}
    while len(merges) < num_merges and heap:
        neg, pair = heapq.heappop(heap)
        current = counts.get(pair, 0)
        if current != -neg:                  # stale entry: counts only fall, re-queue the true one
            if current > 0:
                heapq.heappush(heap, (-current, pair))
            continue
        idx = first_id + len(merges)
        merges[pair] = idx
        a, b = pair
        touched: set[Pair] = set()
        for i in sorted(where.pop(pair, ())):
            if sym[i] != a:                  # dead or already changed by an earlier merge
                continue
            j = nxt[i]
            if j == -1 or sym[j] != b:
                continue
            w = weight[i]
            h = prv[i]
            if h != -1:                      # (x, a) becomes (x, idx)
                old = (sym[h], a)
                counts[old] -= w
                new = (sym[h], idx)
                counts[new] = counts.get(new, 0) + w
                where.setdefault(new, set()).add(h)
                touched.add(new)
            k = nxt[j]
            if k != -1:                      # (b, y) becomes (idx, y)
                old = (b, sym[k])
                counts[old] -= w
                new = (idx, sym[k])
                counts[new] = counts.get(new, 0) + w
                where.setdefault(new, set()).add(i)
                touched.add(new)
                prv[k] = i
            nxt[i] = k
            sym[i] = idx
            sym[j] = -1
        del counts[pair]
        for p in touched:
            c = counts[p]
            if c > 0:
                heapq.heappush(heap, (-c, p))
    return merges


def encode_ids(ids: Sequence[int], merges: Mapping[Pair, int]) -> list[int]:
    ids = list(ids)
    while len(ids) >= 2:
        stats = get_stats(ids)
        pair = min(stats, key=lambda p: merges.get(p, math.inf))
        if pair not in merges:
            break
        ids = merge(ids, pair, merges[pair])
    return ids


def apply_merges(ids: Sequence[int], merges: Mapping[Pair, int]) -> list[int]:
    sym = list(ids)
    n = len(sym)
    if n < 2:
        return sym
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap = []
    for i in range(n - 1):
        rank = merges.get((sym[i], sym[i + 1]))
        if rank is not None:
            heap.append((rank, i))
    heapq.heapify(heap)
    while heap:
        rank, i = heapq.heappop(heap)
        j = nxt[i]
        if sym[i] == -1 or j == -1 or merges.get((sym[i], sym[j])) != rank:
            continue                          # stale: position merged away or pair changed
        sym[i] = rank
        sym[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k != -1:
            prv[k] = i
            r = merges.get((rank, sym[k]))
            if r is not None:
                heapq.heappush(heap, (r, i))
        h = prv[i]
        if h != -1:
            r = merges.get((sym[h], rank))
            if r is not None:
                heapq.heappush(heap, (r, h))
    return [s for s in sym if s != -1]


def decode_ids(ids: Sequence[int], vocab: Mapping[int, bytes]) -> str:
    parts = []
    for i in ids:
        if i not in vocab:
            raise ValueError(f"cannot decode unknown token id {i!r}: ids run from 0 to {len(vocab) - 1}")
        parts.append(vocab[i])
    return b"".join(parts).decode("utf-8", "surrogatepass")


def _train(word_counts, num_merges: int, first_id: int, trainer: str) -> dict[Pair, int]:
    if trainer == "fast":
        return train_fast(word_counts, num_merges, first_id)
    if trainer == "naive":
        return train_naive(word_counts, num_merges, first_id)
    raise ValueError(f"trainer must be 'fast' or 'naive', got {trainer!r}")


def _check_vocab_size(vocab_size, minimum: int, what: str) -> None:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise ValueError(f"vocab_size must be an int, got {vocab_size!r}")
    if vocab_size < minimum:
        raise ValueError(f"vocab_size={vocab_size} is below the base alphabet: {what} need {minimum} ids "
                         "before any merge")


def _check_merge_table(merges: Mapping[Pair, int], first_id: int) -> dict[Pair, int]:
    merges = dict(merges)
    for step, ((a, b), idx) in enumerate(merges.items()):
        if idx != first_id + step:
            raise ValueError(f"merge {step} ({a}, {b}) has id {idx}, expected {first_id + step}: "
                             "merges must be {pair: id} in training order with consecutive ids")
        if not (0 <= a < idx and 0 <= b < idx):
            raise ValueError(f"merge {step} ({a}, {b}) -> {idx} uses an id not defined before it")
    return merges


class WordBPE:
    """Classic word-level BPE (Sennrich et al. 2016) with the end-of-word marker.

    Base symbols: ``<unk>`` (id 0) and ``<unk></w>`` (id 1) for characters never seen
    in training, then every training character c twice, as ``c`` (inside a word) and
    ``c</w>`` (ending a word), each group sorted by code point. Merges follow.
    Each token is stored as ``(text, ends_word)``, never as one string, so a literal
    "</w>" typed in the text cannot be mistaken for a word boundary.

    Round trip: ``decode(encode(s)) == " ".join(s.split())`` with characters unseen in
    training replaced by U+FFFD: whitespace is normalised, as in the original method.
    For exact round trips of any string use :class:`ByteBPE`.

    >>> tok = WordBPE.train("low low lower lowest", vocab_size=20)
    >>> tok.tokens(tok.encode("lower low"))
    ['lowe', 'r</w>', 'low</w>']
    """

    UNKNOWN = "\ufffd"

    def __init__(self, symbols: Sequence[tuple[str, bool]], merges: Mapping[Pair, int]):
        symbols = [(str(t), bool(e)) for t, e in symbols]
        if symbols[:2] != [("<unk>", False), ("<unk>", True)]:
            raise ValueError("symbols must start with ('<unk>', False), ('<unk>', True)")
        if len(set(symbols)) != len(symbols):
            raise ValueError("base symbols must be distinct")
        if any(len(t) != 1 for t, _ in symbols[2:]):
            raise ValueError("every base symbol after the two <unk> must be one character")
        self.symbols = symbols
        self.merges = _check_merge_table(merges, len(symbols))
        self.vocab: dict[int, tuple[str, bool]] = dict(enumerate(symbols))
        for (a, b), idx in self.merges.items():
            if self.vocab[a][1]:
                raise ValueError(f"merge ({a}, {b}): a word-final token cannot be the left of a pair")
            self.vocab[idx] = (self.vocab[a][0] + self.vocab[b][0], self.vocab[b][1])
        self._base = {s: i for i, s in enumerate(symbols)}
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @classmethod
    def base_symbols(cls, text: str) -> list[tuple[str, bool]]:
        """The two ``<unk>`` symbols, then each character of ``text`` without and with ``</w>``."""
        chars = sorted({c for c in text if not c.isspace()})
        return [("<unk>", False), ("<unk>", True)] + [(c, False) for c in chars] + [(c, True) for c in chars]

    @classmethod
    def train(cls, text: str, vocab_size: int, *, trainer: str = "fast") -> "WordBPE":
        """Learn ``vocab_size - len(base symbols)`` merges (fewer if the corpus runs out)."""
        if not isinstance(text, str):
            raise ValueError(f"the corpus must be a str, got {type(text).__name__}")
        symbols = cls.base_symbols(text)
        _check_vocab_size(vocab_size, len(symbols), f"the {len(symbols)} base symbols (2 <unk> + 2 per "
                                                    "character)")
        index = {s: i for i, s in enumerate(symbols)}
        counts = {}
        for word, c in word_counts(text).items():      # ('l', 'o', 'w</w>') -> ids
            last = word[-1][:-len(END_OF_WORD)]
            counts[tuple(index[(s, False)] for s in word[:-1]) + (index[(last, True)],)] = c
        merges = _train(counts, vocab_size - len(symbols), len(symbols), trainer)
        return cls(symbols, merges)

    def _word_ids(self, word: str) -> list[int]:
        ids = [self._base.get((c, False), 0) for c in word[:-1]]
        ids.append(self._base.get((word[-1], True), 1))
        return apply_merges(ids, self.merges)

    def encode(self, text: str) -> list[int]:
        """Whitespace words -> base symbol ids -> merges in training order."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {type(text).__name__}")
        out: list[int] = []
        for word in text.split():
            ids = self._cache.get(word)
            if ids is None:
                ids = self._cache[word] = self._word_ids(word)
            out.extend(ids)
        return out

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Readable tokens, word-final ones shown with ``</w>``."""
        out = []
        for i in ids:
            text, end = self._lookup(i)
            out.append(text + (END_OF_WORD if end else ""))
        return out

    def _lookup(self, i) -> tuple[str, bool]:
        if isinstance(i, bool) or not isinstance(i, int) or i not in self.vocab:
            raise ValueError(f"cannot decode unknown token id {i!r}: ids run from 0 to {len(self.vocab) - 1}")
        return self.vocab[i]

    def decode(self, ids: Iterable[int]) -> str:
        """Concatenate token texts, a space after every word-final token (none at the very end)."""
        pieces = []
        for i in ids:
            text, end = self._lookup(i)
            pieces.append(text.replace("<unk>", self.UNKNOWN) if i in (0, 1) else text)
            if end:
                pieces.append(" ")
        if pieces and pieces[-1] == " ":
            pieces.pop()
        return "".join(pieces)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the readable text format (see :func:`load`)."""
        lines = [f"{FORMAT_NAME} {FORMAT_VERSION}", "flavour: word", f"symbols: {len(self.symbols)}"]
        lines += [json.dumps([t, e], ensure_ascii=False) for t, e in self.symbols]
        lines.append(f"merges: {len(self.merges)}")
        for (a, b), idx in self.merges.items():
            lines.append(f"{a} {b}\t{json.dumps(self.tokens([idx])[0], ensure_ascii=False)}")
        _write(path, lines)


class ByteBPE:
    """Byte-level BPE: ids 0-255 are the bytes, then one id per merge, then special tokens.

    Any string encodes (no unknown token): text -> split at special tokens ->
    pre-split with ``pattern`` -> each chunk's UTF-8 bytes -> merges in training
    order. ``decode(encode(s)) == s`` for every ``str``, including lone surrogates.

    >>> tok = ByteBPE.train("the cat, the hat, the bat", vocab_size=260)
    >>> tok.tokens(range(256, 260))             # the 4 merges, in training order
    ['at', 'he', 'the', ' the']
    >>> tok.tokens(tok.encode("the hat"))
    ['the', ' ', 'h', 'at']
    >>> tok.decode(tok.encode("thé ☕")) == "thé ☕"
    True
    """

    def __init__(self, merges: Mapping[Pair, int] | None = None, pattern: str | None = SPLIT_PATTERN,
                 special_tokens: Sequence[str] = ()):
        self.merges = _check_merge_table(merges or {}, 256)
        self.pattern = pattern
        self._compiled = _compile(pattern)
        special_tokens = list(special_tokens)
        if not all(isinstance(s, str) and s for s in special_tokens) or len(set(special_tokens)) != len(
                special_tokens):
            raise ValueError(f"special tokens must be distinct non-empty strings, got {special_tokens!r}")
        first = 256 + len(self.merges)
        self.special_tokens: dict[str, int] = {s: first + k for k, s in enumerate(special_tokens)}
        self.vocab: dict[int, bytes] = build_vocab(self.merges)
        for s, i in self.special_tokens.items():
            self.vocab[i] = s.encode("utf-8", "surrogatepass")
        self._special_ids = {i: s for s, i in self.special_tokens.items()}
        # longest first, so "<|a|>" never splits "<|a|><|ab|>" wrongly
        self._special_re = regex.compile("|".join(regex.escape(s) for s in sorted(
            special_tokens, key=len, reverse=True))) if special_tokens else None
        self._cache: dict[str, tuple[int, ...]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @classmethod
    def train(cls, text: str, vocab_size: int, *, pattern: str | None = SPLIT_PATTERN,
              special_tokens: Sequence[str] = (), trainer: str = "fast") -> "ByteBPE":
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges (fewer if the corpus runs out).

        Special tokens are cut out of the training text first (no merge spans them).
        """
        if not isinstance(text, str):
            raise ValueError(f"the corpus must be a str, got {type(text).__name__}")
        special_tokens = list(special_tokens)
        _check_vocab_size(vocab_size, 256 + len(special_tokens),
                          f"the 256 byte values and {len(special_tokens)} special tokens")
        tmp = cls({}, pattern, special_tokens)        # validates pattern and special tokens
        counts: dict[tuple[int, ...], int] = {}
        for part in tmp._split_special(text):
            if isinstance(part, str):
                for key, c in chunk_counts(part, pattern).items():
                    counts[key] = counts.get(key, 0) + c
        merges = _train(counts, vocab_size - 256 - len(special_tokens), 256, trainer)
        return cls(merges, pattern, special_tokens)

    def _split_special(self, text: str, allowed: bool = True) -> list:
        """Text pieces (str) and special token ids (int), in order."""
        if self._special_re is None or not allowed:
            return [text]
        out: list = []
        pos = 0
        for m in self._special_re.finditer(text):
            if m.start() > pos:
                out.append(text[pos:m.start()])
            out.append(self.special_tokens[m.group()])
            pos = m.end()
        if pos < len(text):
            out.append(text[pos:])
        return out

    def encode(self, text: str, *, allowed_special: bool = True) -> list[int]:
        """Token ids of ``text``. With ``allowed_special=False`` special-token strings are plain text."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {type(text).__name__}")
        out: list[int] = []
        cache = self._cache
        for part in self._split_special(text, allowed_special):
            if isinstance(part, int):
                out.append(part)
                continue
            for chunk in _split(part, self._compiled):
                ids = cache.get(chunk)
                if ids is None:
                    ids = tuple(apply_merges(chunk.encode("utf-8", "surrogatepass"), self.merges))
                    if len(cache) < 200_000:
                        cache[chunk] = ids
                out.extend(ids)
        return out

    def decode(self, ids: Iterable[int], *, errors: str = "strict") -> str:
        """The text of ``ids``: all bytes joined, then decoded once as UTF-8.

        ``errors="strict"``: invalid UTF-8 (ids cut inside a character) raises ValueError;
        ``errors="replace"``: invalid bytes become U+FFFD (useful while streaming).
        """
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        parts = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or i not in self.vocab:
                raise ValueError(f"cannot decode unknown token id {i!r}: ids run from 0 to "
                                 f"{len(self.vocab) - 1}")
            parts.append(self.vocab[i])
        data = b"".join(parts)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as err:
            if errors == "replace":
                return data.decode("utf-8", "replace")
            raise ValueError(f"the tokens' bytes are not valid UTF-8 at byte {err.start} ({err.reason}): "
                             "the ids probably stop inside a multi-byte character; "
                             "pass errors='replace' to get U+FFFD instead") from None

    def token_bytes(self, i: int) -> bytes:
        """The bytes of one token id."""
        if i not in self.vocab:
            raise ValueError(f"unknown token id {i!r}: ids run from 0 to {len(self.vocab) - 1}")
        return self.vocab[i]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Readable tokens: each token's bytes decoded alone, invalid bytes shown as \\xNN."""
        return [self.token_bytes(i).decode("utf-8", "backslashreplace") for i in ids]

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the readable text format (see :func:`load`)."""
        lines = [f"{FORMAT_NAME} {FORMAT_VERSION}", "flavour: byte", f"pattern: {json.dumps(self.pattern)}",
                 f"special: {json.dumps(list(self.special_tokens), ensure_ascii=False)}",
                 f"merges: {len(self.merges)}"]
        for (a, b), idx in self.merges.items():
            lines.append(f"{a} {b}\t{json.dumps(self.tokens([idx])[0], ensure_ascii=False)}")
        _write(path, lines)


def _write(path, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", errors="surrogatepass", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")
