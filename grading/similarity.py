"""Which submissions' solution cells are unusually alike: a flag for a person to look at, never a grade.

For one exercise (one solution cell, the same ``grade_id`` in every submission), plus the
instructor's solution as one more, pseudo-submission (``SOLUTION``):

1. each cell is cut into Python's tokens (a regular expression that gives what ``tokenize`` gives,
   at a class's scale), line by line; comments, blank lines, indentation and the layout of a line
   are dropped, string literals become ``STR`` (a string over several lines, a docstring, is one
   ``STR`` on the line where it starts), and every name the student chose becomes ``v0, v1, ...``
   in order of first use in the cell (builtins, keywords and attribute names after a dot are kept:
   ``x.shape`` stays ``.shape``). The release cell is normalised first, so the names it gives
   everyone (the function and its parameters) get the same canonical name in every submission.
   Renaming variables, reformatting or re-commenting a copy changes nothing.
   Example: ``def f(q):  # mine\\n    s = q @ q.T`` and ``def f(a):\\n    t=a@a.T`` give the
   same lines.
2. the unit compared is one such normalised line of at least ``MIN_TOKENS`` tokens (``else:``,
   ``)`` or ``return x`` say nothing). The lines of the release cell (the signature,
   ``raise NotImplementedError()``: code everyone got) are removed, and so are lines that more than
   ``COMMON_SHARE`` of the class, or more than ``COMMON_MAX`` submissions, wrote (the usual way to
   write it: evidence of nothing; the instructor's solution is not counted in the class). A blank
   submission keeps nothing and is never paired.
3. a pair's similarity is the Jaccard index of what is left (shared / either). A pair is flagged
   when it is at least ``THRESHOLD`` and shares at least ``MIN_SHARED`` lines (one line in common is
   too little to say anything). Flagged pairs are ranked by similarity, then by shared lines, and
   each comes with the numbers of the matched lines in both cells: what counted is what the
   report highlights. A student flagged with ``SOLUTION`` handed in (a renaming of) the
   instructor's solution; two students both flagged with it share the instructor's solution,
   which the report says ("matches the instructor's solution") rather than suggesting one copied
   the other.

Why lines and not token n-grams (this module's first version, 5-token n-grams): a class of 1,000
students hands in about 45,000 solution cells; most lines of most cells are the same few lines, so
a line is read and normalised once (cached) and a cell costs a dictionary look-up per line, where
n-grams cost a tuple per token (about 6 s of CPU of the report's 5 s budget, measured with
``tests/benchmarks/bench_report.py``); and the evidence shown is the unit that matched. A line
match misses a copy whose lines were split or joined, and does not see the order of the lines
(a copy with its statements reordered is still found).

Why not a maintained detector: copydetect (PyPI, winnowing as MOSS, last release 0.5.0, 2024)
compares files, every file with every other (about 500,000 comparisons per exercise for 1,000
students), with boilerplate given as files; Dolos is a Node.js package (npm ``@dodona/dolos``),
not installable from PyPI. Neither reads a notebook cell by cell.

Candidate pairs come from an inverted index of the kept lines (only pairs that share one are
compared), so a class of hundreds stays fast.

Does NOT cover: code copied across exercises or from outside the class (besides the instructor's
solution), paraphrases that change the lines, or deciding anything: the table goes to the instructor.
"""
from __future__ import annotations

import builtins
import collections
import dataclasses
import io
import keyword
import re
import tokenize

THRESHOLD = 0.7
MIN_SHARED = 2
MIN_TOKENS = 3
# lines written by more than COMMON_SHARE of the class, or by more than COMMON_MAX submissions, are ignored
# (from 6 submissions up; in a tiny class every line would be "common")
COMMON_SHARE = 0.5
COMMON_MAX = 10
SOLUTION = "instructor's solution"  # the pseudo-submission holding the instructor's solution

_KEEP = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
# Python's tokens, as a regular expression (about 4 times faster than ``tokenize``, which matters on a class of
# thousands of cells; ``test_report`` checks that both give the same tokens on every instructor's solution):
# strings (any prefix, triple or single quotes, escapes), comments, names, numbers, operators
_STRING = (r"(?:[rRbBuUfF]{1,2})?(?:'''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''"
           r'|"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""'
           r"""|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")""")
_NUMBER = r"(?:0[xXoObB][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?[jJ]?)"
_OPERATOR = r"(?:\*\*=|//=|>>=|<<=|\.\.\.|->|:=|[-+*/%&|^@<>=!]=|\*\*|//|<<|>>|[-+*/%&|^@<>=~:;,.()\[\]{}])"
_TOKEN = re.compile(rf"(?P<s>{_STRING})|(?P<c>#[^\n]*)|(?P<d>{_NUMBER})|(?P<n>[^\W\d]\w*)|(?P<o>{_OPERATOR})|(?P<x>\S)")


def _token(string, number, name, operator, other):
    if name:
        return ("name", name)
    if operator:
        return ("op", operator)
    if number:
        return ("num", number)
    if string:
        return ("str", "STR")
    if other and other != "\\":  # a stray character; a backslash continues a line
        return ("op", other)
    return None


def raw_tokens(source: str) -> list[tuple[str, str]]:
    """(kind, text) of the code's tokens without comments and layout: kind is 'name', 'str', 'num' or 'op'.

    >>> raw_tokens("x = f'a{b}'  # note")
    [('name', 'x'), ('op', '='), ('str', 'STR')]
    """
    out = []
    for string, comment, number, name, operator, other in _TOKEN.findall(source):
        if name:
            out.append(("name", name))
        elif operator:
            out.append(("op", operator))
        elif number:
            out.append(("num", number))
        elif string:
            out.append(("str", "STR"))
        elif other and other != "\\":  # a stray character; a backslash continues a line
            out.append(("op", other))
    return out


def tokenize_tokens(source: str) -> list[tuple[str, str]]:
    """The same as :func:`raw_tokens`, read by Python's ``tokenize`` (the reference the tests compare with)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME:
            out.append(("name", tok.string))
        elif tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_START", -1):
            out.append(("str", "STR"))
        elif tok.type == tokenize.NUMBER:
            out.append(("num", tok.string))
        elif tok.type == tokenize.OP:
            out.append(("op", tok.string))
    return out


def line_tokens(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """One line's tokens, and the quote (``'''`` or ``\"\"\"``) of a string it opens and does not close, or None."""
    out = raw_tokens(text)
    if ("op", '"') not in out and ("op", "'") not in out:
        return out, None
    out = []
    for m in _TOKEN.finditer(text):
        string, _, number, name, operator, other = m.groups()
        if other in ("'", '"') and text[m.start() - 2:m.start() + 1] == other * 3 and out and out[-1][0] == "str":
            return out, other * 3  # the regular expression read the opening quote's first two as an empty string
        tok = _token(string, number, name, operator, other)
        if tok:
            out.append(tok)
    return out, None


def logical_lines(source: str, read=line_tokens):
    """(line number, ``read(text)``'s first value) of each line of ``source`` outside a string that spans lines;
    a line that closes such a string gives what follows the closing quote. ``read`` returns what
    :func:`line_tokens` returns (or a cached summary of it)."""
    quote = None
    for number, text in enumerate(source.split("\n")):
        if quote:
            end = text.find(quote)
            if end < 0:
                continue
            text, quote = text[end + 3:], None
        info, quote = read(text)
        yield number, info


class Normaliser:
    """Normalised lines, each distinct line read once (a class's cells share most of their lines).

    A name the release cell gives (the function, its parameters) has its canonical number in every
    line; a name the student chose is numbered within its line (``s = q @ q.T`` and ``t = q @ q.T``
    are the same line), so that a line is normalised once for the whole class."""

    def __init__(self):
        self._raw: dict[str, tuple] = {}  # line -> ((template, names, tokens), opening quote)
        self._templates: dict[tuple, int] = {}

    def _read(self, text: str):
        hit = self._raw.get(text)
        if hit is not None:
            return hit
        template, names, slot, prev, keep = [], [], {}, "", _KEEP
        quote = None
        if "'" in text or '"' in text:  # a string may open here and go on over the next lines: read it exactly
            tokens, quote = line_tokens(text)
            found = [("", "", "", tok, "", "") if kind == "name" else ("", "", "", "", tok, "") for kind, tok in tokens]
        else:
            found = _TOKEN.findall(text)
        for string, _, number, name, operator, other in found:
            if name:
                if prev != "." and name not in keep:
                    if name not in slot:
                        slot[name] = len(names)
                        names.append(name)
                    template.append(slot[name])  # an int: the line's k-th chosen name
                else:
                    template.append(name)
                prev = name
            else:
                tok = operator or number or ("STR" if string else other)
                if tok and tok != "\\":
                    template.append(tok)
                    prev = tok
        tid = self._templates.setdefault(tuple(template), len(self._templates))
        hit = self._raw[text] = ((tid, tuple(names), len(template)), quote)
        return hit

    def reader(self, given: str = ""):
        """A function: a cell's source -> [(line number, normalised line)] of its lines of at least MIN_TOKENS
        tokens, the names of ``given`` (the release cell) numbered as there, every other name within its line."""
        seed: dict[str, str] = {}
        for _, (_, names, _) in logical_lines(given, self._read):
            for n in names:
                seed.setdefault(n, f"g{len(seed)}")
        units: dict[str, tuple] = {}  # line -> (its unit or None, opening quote)
        read = self._read

        def unit_of(text):
            (tid, names, count), quote = read(text)
            if count < MIN_TOKENS:
                return None, quote
            local: dict[str, int] = {}
            return (tid, tuple([seed.get(n) or local.setdefault(n, len(local)) for n in names])), quote

        def lines(source: str) -> list[tuple[int, tuple]]:
            out = []
            quote = None
            for number, text in enumerate(source.split("\n")):
                if quote:  # inside a string that spans lines: skip to the line that closes it
                    end = text.find(quote)
                    if end < 0:
                        continue
                    unit, quote = unit_of(text[end + 3:])  # what follows the closing quote
                else:
                    hit = units.get(text)
                    if hit is None:
                        hit = units[text] = unit_of(text)
                    unit, quote = hit
                if unit is not None:
                    out.append((number, unit))
            return out

        return lines

    def text(self, unit) -> str:
        """A normalised line as text (for tests and for reading): ``v0 = g1 @ g1 . T``."""
        tid, canon = unit
        template = next(t for t, i in self._templates.items() if i == tid)
        return " ".join((canon[t] if isinstance(canon[t], str) else f"v{canon[t]}") if isinstance(t, int) else t
                        for t in template)


def normalise(source: str, given: str = "") -> list[str]:
    r"""The cell's normalised lines as text: the release cell's names as ``g0, g1, ...``, the others numbered
    within their line as ``v0, v1, ...``.

    >>> normalise("def f(q):  # mine\n    s = q @ q.T\n") == normalise("def f(a):\n    t=a@a.T")
    True
    """
    norm = Normaliser()
    return [norm.text(unit) for _, unit in norm.reader(given)(source)]


@dataclasses.dataclass
class Pair:
    a: str
    b: str
    similarity: float  # Jaccard index of the kept lines
    shared: int  # kept lines both wrote
    lines_a: list  # numbers (from 0) of a's lines that matched b's
    lines_b: list

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "similarity": round(self.similarity, 3), "shared": self.shared,
                "lines_a": self.lines_a, "lines_b": self.lines_b}


def fingerprints(cells: dict[str, str], given: str = "", norm: Normaliser | None = None) -> dict[str, list]:
    """{submission: its (line number, normalised line) without the release cell's lines}."""
    read = (norm or Normaliser()).reader(given)
    released = {u for _, u in read(given)} if given else set()
    cache: dict[str, list] = {}
    out = {}
    for who, source in cells.items():
        hit = cache.get(source)
        if hit is None:
            hit = cache[source] = [(n, u) for n, u in read(source) if u not in released]
        out[who] = hit
    return out


def similar_pairs(cells: dict[str, str], given: str = "", threshold: float = THRESHOLD,
                  min_shared: int = MIN_SHARED, common_share: float = COMMON_SHARE,
                  common_max: int = COMMON_MAX, norm: Normaliser | None = None) -> list[Pair]:
    """Flagged pairs of one exercise, most similar first.

    ``cells``: {submission id: the solution cell's source}, the instructor's solution under ``SOLUTION`` if
    given; ``given``: the release cell's source.
    """
    prints = fingerprints(cells, given, norm)
    sets = {who: {u for _, u in lines} for who, lines in prints.items()}
    class_sets = [s for who, s in sets.items() if who != SOLUTION]
    common = set()
    if len(class_sets) >= 6:  # in a tiny class every line is "common": nothing would be left to compare
        limit = min(common_share * len(class_sets), common_max)
        counts = collections.Counter()
        for s in class_sets:
            counts.update(s)
        common = {u for u, c in counts.items() if c > limit}
    kept = {who: s - common for who, s in sets.items()}
    index: dict[tuple, list[str]] = {}
    for who, s in kept.items():
        for u in s:
            index.setdefault(u, []).append(who)
    shared: dict[tuple[str, str], int] = {}
    for holders in index.values():
        if len(holders) < 2:
            continue
        holders = sorted(holders)
        for i, a in enumerate(holders):
            for b in holders[i + 1:]:
                shared[(a, b)] = shared.get((a, b), 0) + 1
    pairs = []
    for (a, b), count in shared.items():
        if count < min_shared:
            continue
        union = len(kept[a]) + len(kept[b]) - count
        sim = count / union if union else 0.0
        if sim >= threshold:
            both = kept[a] & kept[b]
            pairs.append(Pair(a, b, sim, count, [n for n, u in prints[a] if u in both],
                              [n for n, u in prints[b] if u in both]))
    pairs.sort(key=lambda p: (-p.similarity, -p.shared, p.a, p.b))
    return pairs
