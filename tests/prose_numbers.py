"""Prose follows the outputs (issue 42): find result numbers that a notebook's markdown (model answers
included) states and that its executed outputs do not show.

A *claim* is a number in a markdown sentence that talks about a result: the sentence contains one of
RESULT_PHRASES ("this run", "reached", "scored", "accuracy of", ...). A claim is *shown* when some
number printed by a code cell (streams, text/plain, text/html, errors) equals it to the claim's own
precision (0.79 is shown by 0.7893; 4.7 % by 4.7 %, 4.71 % or 0.047; "about 19,000" by 19,034). Not
results, and never
claims:

* years (1900-2099), numbers inside a citation's parentheses "(Rost 1999, ...)", and references
  such as "lesson 07", "section 4", "cells 27-30";
* numbers in LaTeX math ($...$) and in inline code (`...`): equations and code, not measurements;
* numbers the code sets: numeric literals of the notebook's code cells (hyperparameters such as
  ``m = 64`` or ``epochs=10``), read from the code, not from its comments;
* the few numbers a notebook lists in ``ALLOWED`` below, each with its reason.

What this does not catch: a stale number in a sentence without a result phrase, and a stale number
that happens to equal some other printed number. It is a tripwire for typed results, not a proof.

Two more checks live here (issue 63), both run by tests/test_prose_numbers.py without executing a notebook:
``per_seed_mismatches`` (per-seed triples and "mean ± se" typed in a sentence about seeds must be values
of notebooks/figures.json) and the helpers that compare an exercise instruction's formula with the
reference's docstring (``numpy_formulas``, ``call_expressions``, ``evaluate_formula``, ``instruction_cell``).
"""
from __future__ import annotations

import ast
import re

import nbformat

# past tense "reached", not "reaches": "Enformer reaches about 100 kb" describes a paper's model, not this run
RESULT_PHRASES = re.compile(
    r"\b(our run|this run|in this run|the default run|default run|full run|reached|scored|"
    r"accuracy of|we measured|measured here|printed above|printed below)\b", re.I)
# "lesson 07", "section 4", "cell 29": references, not numbers
_REFERENCE = re.compile(r"\b(?:lessons?|sections?|cells?|exercises?|chapters?|figures?|tables?)\s+"
                        r"\d+(?:\s*(?:,|and|-|to)\s*\d+)*", re.I)

# lesson folder -> {number as written: why it is not a result of the run}
ALLOWED: dict[str, dict[str, str]] = {}

_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*(%)?")
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$", re.S)
_CODE = re.compile(r"`[^`]*`")
_CITATION = re.compile(r"\([^()]*\b(?:19|20)\d\d[a-z]?\b[^()]*\)")
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z*(\"'`$\d-])|\n\s*\n|\n\s*[-*]\s|\n\s*\d+\.\s")


_APPROX = re.compile(r"(?:about|around|roughly|approximately|nearly|almost|~|≈)\s*$", re.I)


def _numbers(text: str):
    """(written, value, decimals, is_percent) of each number in ``text``. An approximate round number
    ("about 19,000") has negative decimals: it claims only its significant digits."""
    for m in _NUMBER.finditer(text):
        whole, frac, pct = m.group(1), m.group(2) or "", m.group(3)
        written = whole + frac + (pct or "")
        decimals = len(frac) - 1 if frac else 0
        digits = whole.replace(",", "")
        if not frac and _APPROX.search(text[: m.start()]) and digits.rstrip("0") != digits:
            decimals = -(len(digits) - len(digits.rstrip("0")))
        yield written.strip(), float(digits + frac), decimals, bool(pct)


def output_text(nb) -> str:
    """Everything the code cells of an executed notebook printed or displayed as text."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
            for key in ("text/plain", "text/html", "text/markdown"):
                data = out.get("data", {}).get(key)
                if data:
                    parts.append(data if isinstance(data, str) else "".join(data))
            if out.get("output_type") == "error":
                parts.append(out.get("evalue", ""))
    return "\n".join(parts)


def code_constants(nb) -> set[float]:
    """Numeric literals in the notebook's code cells (magics and shell lines ignored)."""
    found = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                    and not isinstance(node.value, bool):
                found.add(float(node.value))
    return found


def _shown(value: float, decimals: int, percent: bool, printed: list[tuple[float, int, bool]]) -> bool:
    """Does a printed number equal the claim to the claim's precision (as a fraction or a percentage)?"""
    tol = 0.5 * 10 ** -decimals + 1e-9
    for v, _, p_pct in printed:
        candidates = [v]
        if percent and not p_pct:
            candidates.append(v * 100)  # 4.7 % shown as 0.047
        if p_pct and not percent:
            candidates.append(v / 100)  # 0.79 shown as 79.0 %
        if any(abs(c - value) <= tol for c in candidates):
            return True
    return False


def claims(nb) -> list[tuple[int, str, str, int]]:
    """(markdown cell index, number as written, its sentence, its precision in decimals) for every number in a
    result sentence."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = _REFERENCE.sub(" ", _CITATION.sub(" ", _CODE.sub(" ", _MATH.sub(" ", cell.source))))
        for sentence in _SENTENCE.split(text):
            if not RESULT_PHRASES.search(sentence):
                continue
            for written, value, decimals, percent in _numbers(sentence):
                if not percent and decimals == 0 and 1900 <= value <= 2099:
                    continue  # a year
                out.append((i, written, " ".join(sentence.split()), decimals))
    return out


def stale_claims(nb, allowed: dict[str, str] | None = None) -> list[str]:
    """Messages for the result numbers in the prose of the executed ``nb`` that its outputs do not show."""
    allowed = allowed or {}
    printed = list((v, d, p) for _, v, d, p in _numbers(output_text(nb)))
    constants = code_constants(nb)
    problems = []
    for i, written, sentence, decimals in claims(nb):
        _, value, _, percent = next(_numbers(written))
        if written in allowed or (not percent and value in constants):
            continue
        if not _shown(value, decimals, percent, printed):
            problems.append(f"markdown cell {i} states {written!r}, which no output of this run shows: "
                            f"\"{sentence[:240]}\"")
    return problems


def executed_has_outputs(nb) -> bool:
    """Guards against checking an unexecuted notebook (whose prose would then be judged against nothing)."""
    return any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")


def read(path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


# --- exercise instructions against the reference's docstring (issue 63) ---------------------------------
# An instruction that states a formula in inline code (`2 ** np.linspace(...)`) must compute what the
# reference's docstring states. The first check of this kind covers the half-lives of
# course_lib.positional.exponential_basis, whose instruction once said np.geomspace(...) while the
# docstring and the checks use 2 ** np.linspace(min_half_life, log2(seq_len), n).
_NUMPY_SPAN = re.compile(r"`([^`]*\bnp\.[a-z_0-9]+\([^`]*)`")


def numpy_formulas(text: str) -> list[str]:
    """The inline-code spans of ``text`` that call a numpy function: the formulas an instruction states."""
    return _NUMPY_SPAN.findall(text)


def call_expressions(text: str, name: str) -> list[str]:
    """Every ``np.<name>(...)`` call in ``text`` with balanced parentheses, line breaks removed
    (a docstring wraps its formulas)."""
    found, start = [], 0
    while (k := text.find(f"np.{name}(", start)) >= 0:
        depth, j = 0, k + len(f"np.{name}")
        for j in range(j, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                break
        found.append(" ".join(text[k:j + 1].split()))
        start = j + 1
    return found


def evaluate_formula(expression: str, variables: dict):
    """The value of a formula written with numpy (``np``), ``math`` and bare ``log2``, with ``variables``."""
    import math

    import numpy as np
    return np.asarray(eval(expression, {"__builtins__": {}, "np": np, "math": math, "log2": np.log2}, dict(variables)))


def instruction_cell(nb: nbformat.NotebookNode, function: str) -> str:
    """The markdown of the exercise whose heading names ``function`` in inline code."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and re.search(rf"###\s+Exercise[^\n]*`{function}`", cell.source):
            return cell.source.split(f"`{function}`", 1)[1]
    raise LookupError(f"no exercise heading names `{function}`")


# --- typed per-seed numbers against notebooks/figures.json (issue 63) ----------------------------------
# Prose that quotes the seeds 0-2 of `make figures` (three numbers in a row, "1.000, 0.999, 1.000", or a
# "mean ± standard error") must quote notebooks/figures.json: each triple must be some figure's values for
# seeds 0, 1, 2 in that order, and each "m ± s" some figure's mean and standard error, at the precision
# written. Sentences that name no seed are left alone.
_SEEDS = re.compile(r"\bseeds?\b", re.I)
_TRIPLE = re.compile(r"(?<![\w.])(\d+\.\d+),\s*(\d+\.\d+),?\s+(?:and\s+)?(\d+\.\d+)(?![\d])")
_PLUS_MINUS = re.compile(r"(?<![\w.])(\d+\.\d+)\s*(?:±|\+/-|\\pm)\s*(\d+\.\d+)")


def _same(written: str, value: float) -> bool:
    decimals = len(written.split(".")[1])
    return abs(float(written) - value) <= 0.5 * 10 ** -decimals + 1e-9


def per_seed_mismatches(nb: nbformat.NotebookNode, lesson_figures: dict) -> list[str]:
    """Messages for the per-seed triples and "mean ± se" pairs typed in the markdown of ``nb`` (sentences
    that mention a seed) that no figure of ``lesson_figures`` (figures.json's "figures" of its lesson) has."""
    seeds_values = [[e["values"][s] for s in ("0", "1", "2")] for e in lesson_figures.values()
                    if all(s in e.get("values", {}) for s in ("0", "1", "2"))]
    seeds_values += [[e["value"]] * 3 for e in lesson_figures.values() if "value" in e]
    mean_se = [(e["mean"], e["se"]) for e in lesson_figures.values() if "mean" in e and "se" in e]
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = _CODE.sub(" ", _MATH.sub(" ", cell.source))
        for sentence in _SENTENCE.split(text):
            if not _SEEDS.search(sentence):
                continue
            flat = " ".join(sentence.split())
            for m in _TRIPLE.finditer(flat):
                if not any(all(_same(w, v) for w, v in zip(m.groups(), vals)) for vals in seeds_values):
                    problems.append(f"markdown cell {i} types seeds' values {', '.join(m.groups())} that no figure "
                                    f"of notebooks/figures.json has for seeds 0, 1, 2: \"{flat[:200]}\"")
            for m in _PLUS_MINUS.finditer(flat):
                if not any(_same(m[1], mean) and _same(m[2], se) for mean, se in mean_se):
                    problems.append(f"markdown cell {i} types {m[1]} ± {m[2]}, no figure's mean ± standard error "
                                    f"in notebooks/figures.json: \"{flat[:200]}\"")
    return problems
