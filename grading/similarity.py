"""Which submissions' solution cells are unusually alike: a flag for a person to look at, never a grade.

For one exercise (one solution cell, the same ``grade_id`` in every submission):

1. each cell is cut into Python's tokens (a regular expression that gives what ``tokenize`` gives,
   at a class's scale); comments, blank lines, indentation and the layout of a line are dropped,
   string literals become ``STR``, and every name the student chose becomes ``v0, v1, ...`` in
   order of first use (builtins, keywords and attribute names
   after a dot are kept: ``x.shape`` stays ``.shape``). The release cell is normalised first, so
   the names it gives everyone (the function and its parameters) get the same canonical name in
   every submission. Renaming variables, reformatting or re-commenting a copy changes nothing.
   Example: ``def f(q):  # mine\\n    s = q @ q.T`` and ``def f(a):\\n    t=a@a.T`` give the
   same tokens.
2. the tokens are cut into overlapping n-grams (``N = 5``); the n-grams of the release cell
   (the signature, the docstring, ``raise NotImplementedError()``: code everyone got) are
   removed, and so are n-grams that more than ``COMMON_SHARE`` of the class, or more than
   ``COMMON_MAX`` submissions, wrote (the usual way to write it: evidence of nothing). A blank
   submission keeps nothing and is never paired.
3. a pair's similarity is the Jaccard index of what is left (shared / either). A pair is flagged
   when it is at least ``THRESHOLD`` and shares at least ``MIN_SHARED`` n-grams (a one-line
   answer is too short to say anything). Flagged pairs are ranked by similarity, then by shared
   n-grams.

Candidate pairs come from an inverted index of the n-grams (only pairs that share one are
compared), so a class of hundreds stays fast.

Does NOT cover: code copied across exercises or from outside the class, paraphrases that change
the algorithm's token order, or deciding anything: the table goes to the instructor.
"""
from __future__ import annotations

import builtins
import dataclasses
import io
import keyword
import re
import tokenize

N = 5
THRESHOLD = 0.7
MIN_SHARED = 8
# n-grams written by more than COMMON_SHARE of the class, or by more than COMMON_MAX submissions, are ignored
# (from 6 submissions up; in a tiny class every n-gram would be "common")
COMMON_SHARE = 0.5
COMMON_MAX = 10

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


def _names(tokens, names: dict) -> list[str]:
    out, prev = [], ""
    keep = _KEEP
    for kind, tok in tokens:
        if kind == "name" and prev != "." and tok not in keep:
            tok = names.get(tok) or names.setdefault(tok, f"v{len(names)}")
        out.append(tok)
        prev = tok
    return out


def normalise(source: str, given: str = "") -> list[str]:
    r"""The cell's tokens with comments, layout and strings normalised and chosen names renamed canonically.

    ``given`` (the release cell) is read first, so its names map to the same canonical names.
    >>> normalise("def f(q):  # mine\n    s = q @ q.T\n") == normalise("def f(a):\n    t=a@a.T")
    True
    """
    names: dict[str, str] = {}
    _names(raw_tokens(given), names)
    return _names(raw_tokens(source), names)


def ngrams(tokens: list[str], n: int = N) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


@dataclasses.dataclass
class Pair:
    a: str
    b: str
    similarity: float  # Jaccard index of the kept n-grams
    shared: int  # kept n-grams both wrote

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "similarity": round(self.similarity, 3), "shared": self.shared}


def fingerprints(cells: dict[str, str], given: str = "", n: int = N) -> dict[str, set]:
    """{submission: its n-grams minus the release cell's}."""
    seed: dict[str, str] = {}
    released = ngrams(_names(raw_tokens(given), seed), n) if given else set()
    cache: dict[str, set] = {}
    out = {}
    for who, source in cells.items():
        if source not in cache:
            cache[source] = ngrams(_names(raw_tokens(source), dict(seed)), n) - released
        out[who] = cache[source]
    return out


def similar_pairs(cells: dict[str, str], given: str = "", n: int = N, threshold: float = THRESHOLD,
                  min_shared: int = MIN_SHARED, common_share: float = COMMON_SHARE,
                  common_max: int = COMMON_MAX) -> list[Pair]:
    """Flagged pairs of one exercise, most similar first.

    ``cells``: {submission id: the solution cell's source}; ``given``: the release cell's source.
    """
    prints = fingerprints(cells, given, n)
    index: dict[tuple, list[str]] = {}
    for who, grams in prints.items():
        for g in grams:
            index.setdefault(g, []).append(who)
    common = set()
    if len(prints) >= 6:  # in a tiny class every n-gram is "common": nothing would be left to compare
        limit = min(common_share * len(prints), common_max)
        common = {g for g, holders in index.items() if len(holders) > limit}
    kept = {who: grams - common for who, grams in prints.items()}
    shared: dict[tuple[str, str], int] = {}
    for g, holders in index.items():
        if g in common or len(holders) < 2:
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
            pairs.append(Pair(a, b, sim, count))
    pairs.sort(key=lambda p: (-p.similarity, -p.shared, p.a, p.b))
    return pairs
