"""README quotes the figures file (issue 35, item 5): every number in README's table "What the case
studies measure" is one of `notebooks/figures.json`'s values for that lesson (a seed's value, a mean,
a standard error, a largest p-value), as written, at the precision written; `make figures`
(tests/data_scripts/figures.py) wrote the file. No notebook runs here: it reads two files.

Numbers that are not results (a confidence level, an interval's width in passes, a setting the row
names) are listed per row in NOT_RESULTS, each with its reason; the failure message prints them."""
import json
import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "data_scripts"))
import figures as FIG  # noqa: E402  (tests/data_scripts/figures.py)

README = REPO / "README.md"
FIGURES = REPO / "notebooks" / "figures.json"
TABLE_INTRO = "What the case studies measure"

# lesson -> {number as written in its row: why it is not a result}
NOT_RESULTS: dict[str, dict[str, str]] = {
    "*": {"95": "the confidence level of an interval (95 %)",
          "3": "three: passes per subset (11), shots of the hard prompt, sampled paths (09), molecules (11)"},
    "08": {"400": "HPO terms drawn for the search (a setting, `hpo.layperson_pairs(n=400)`)"},
    "09": {"8": "the student's prompt: 8 optimiser steps (a setting)", "48": "the shipped prompt's steps (its README)",
           "24": "the shipped instruction prompt's steps (its README)"},
    "10": {"50": "k = 50 nearest proteins (a setting chosen on validation)"},
    "11": {"32861": "the validation molecule's ZMW id", "20": "subsets of 3 passes of ZMW 32861 (all of them)"},
    "12": {"238": "the CNN's receptive field in bases (arithmetic, section 3)", "512": "sequence length in bases",
           "450": "training steps per model (the budget `LESSON12_RUN`)"},
}

# a number: not part of a word or an identifier ("HNF4A", "F1", "SP1", "top-5"), with a sign only after a space or
# bracket ("+0.027", "[-0.01"); commas between thousands; an exponent ("8.8e-10"); "0-2" (a range) as one token
_TOKEN = re.compile(r"(?:(?<=[\s(\[/])[+\-−]|(?<![\w.+\-−]))"
                    r"(?:\d-\d(?![\d.])|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?)(?![\w])")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
# "lesson 05", "seeds 1 and 2", "section 7": references, not results
_REFERENCE = re.compile(r"\b(?:lessons?|seeds?|sections?)\s+\d{1,2}(?:\s*(?:,|and|-|to)\s*\d{1,2}\b(?![.,]\d))*", re.I)
_CODE = re.compile(r"`[^`]*`")


def table_rows(text: str) -> dict[str, str]:
    """{lesson: its row's result text} of README's case-study table."""
    start = text.index(TABLE_INTRO)
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("| lesson") or line.startswith("|---"):
            continue
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = " | ".join(cells[1:])
    return rows


def tokens(row: str) -> list[str]:
    """The numbers of a row as written (inline code and dates left out: settings and when, not results)."""
    return _TOKEN.findall(_REFERENCE.sub(" ", _DATE.sub(" ", _CODE.sub(" ", row))))


def file_values(lesson_figures: dict) -> list[float]:
    out = []
    for entry in lesson_figures.values():
        for key in ("value", "mean", "se", "max"):
            if key in entry:
                out.append(float(entry[key]))
        out += [float(v) for v in entry.get("values", {}).values()]
    return out


def matches(token: str, values: list[float]) -> bool:
    """Is the README number ``token`` one of ``values`` written at the token's own precision?"""
    written = token.replace(",", "").replace("−", "-")
    if "e" in written:  # scientific: the same significant digits
        mantissa = written.split("e")[0].lstrip("+-")
        sig = len(mantissa.replace(".", ""))
        return any(f"{v:.{sig - 1}e}" == f"{float(written):.{sig - 1}e}" for v in values)
    decimals = len(written.split(".")[1]) if "." in written else 0
    signed = written[0] in "+-"  # "+0.027": the sign is part of the claim; "0.09 points worse": the size
    target = f"{float(written):.{decimals}f}"
    return any((f"{v:.{decimals}f}" if signed else f"{abs(v):.{decimals}f}") == target for v in values)


def unquoted(rows: dict[str, str], figures: dict) -> list[str]:
    """Messages for README numbers that the figures file does not hold."""
    problems = []
    for lesson, row in rows.items():
        if lesson not in figures["lessons"]:
            problems.append(f"row {lesson}: no such lesson in {FIGURES.name} (lessons there: {sorted(figures['lessons'])})")
            continue
        values = file_values(figures["lessons"][lesson]["figures"])
        allowed = {**NOT_RESULTS["*"], **NOT_RESULTS.get(lesson, {})}
        for tok in tokens(row):
            if tok.lstrip("+-−") in allowed:
                continue
            if not matches(tok, values):
                problems.append(f"row {lesson}: {tok!r} is not a value of lesson {lesson} in {FIGURES.name}")
    return problems


@pytest.fixture(scope="module")
def figures():
    return json.loads(FIGURES.read_text())


@pytest.fixture(scope="module")
def rows():
    return table_rows(README.read_text())


def test_every_number_readme_quotes_is_in_the_figures_file(rows, figures):
    assert rows, f"README has no table after {TABLE_INTRO!r}"
    problems = unquoted(rows, figures)
    assert not problems, ("README's case-study table states numbers that notebooks/figures.json does not hold "
                          "(rerun `make figures` and quote it, or list a number that is not a result in NOT_RESULTS "
                          "of tests/test_figures.py with its reason):\n" + "\n".join(problems)
                          + "\nnot results, per row: " + json.dumps(NOT_RESULTS, indent=1))


def test_the_table_has_a_row_for_every_case_study(rows, figures):
    assert set(rows) == set(figures["lessons"]) == set(FIG.LESSONS), (sorted(rows), sorted(figures["lessons"]))


def test_changing_a_readme_number_fails(rows, figures):
    """The check is not vacuous: in each row, a result number with one digit changed is reported."""
    for lesson, row in rows.items():
        allowed = {**NOT_RESULTS["*"], **NOT_RESULTS.get(lesson, {})}
        results = [t for t in tokens(row) if t.lstrip("+-−") not in allowed and re.search(r"\.\d\d", t)]
        assert results, f"row {lesson} quotes no result with two decimals or more"
        tok = results[0]
        changed = tok[:-1] + str((int(tok[-1]) + 5) % 10)
        assert unquoted({lesson: row.replace(tok, changed, 1)}, figures), f"row {lesson}: {tok} -> {changed} not caught"


def test_the_file_is_the_commands_output(figures):
    """The file names the command that wrote it and holds every figure the script defines, for every seed."""
    meta = figures["meta"]
    assert meta["command"] == FIG.COMMAND == "make figures", meta["command"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^figures:.*\n(?:\t.*\n)*\t.*tests/data_scripts/figures\.py", makefile, re.M), \
        "the Makefile has no `figures` target running tests/data_scripts/figures.py"
    for key in ("date", "machine", "commit", "wall_seconds"):
        assert meta.get(key), f"metadata {key!r} missing"
    for key in ("nproc", "cpu", "torch"):
        assert meta["machine"].get(key), f"machine {key!r} missing"
    for lesson, spec in FIG.LESSONS.items():
        got = figures["lessons"][lesson]
        assert got["seeds"] == list(spec["seeds"]), (lesson, got["seeds"])
        assert set(got["figures"]) == set(spec["figures"]), (lesson, set(spec["figures"]) ^ set(got["figures"]))
        for seed in spec["seeds"]:
            assert f"{lesson} seed {seed}" in meta["wall_seconds"], (lesson, seed)
        for name, entry in got["figures"].items():
            assert ("value" in entry) != ("values" in entry), (lesson, name, entry)
            if "values" in entry:
                assert sorted(entry["values"]) == sorted(str(s) for s in spec["seeds"]), (lesson, name)


def test_summaries():
    """mean and standard error over seeds; one value when the seeds agree; p-values never averaged."""
    e = FIG.summarise({0: 0.5, 1: 0.6, 2: 0.7}, "acc", "x")
    assert e["mean"] == 0.6 and e["se"] == pytest.approx(0.058, abs=1e-3), e
    assert FIG.summarise({0: 0.1234, 1: 0.1234}, "acc", "x") == {"meaning": "x", "kind": "acc", "value": 0.123,
                                                                  "same_for_all_seeds": True}
    p = FIG.summarise({0: 0.00088, 1: 0.04}, "p", "x")
    assert p["max"] == 0.04 and "mean" not in p and p["values"] == {"0": 0.00088, "1": 0.04}


def test_the_token_reader():
    row = ("top-1 0.495 (F1 0.115; HNF4A, SP1) vs +0.027 [-0.014, +0.039], p = 8.8e-10, 1,011 vs 753, "
           "`k = 50` on 2026-11-22, seeds 0-2, lesson 05's, with seeds 1 and 2 and seed 0 in section 7, 64.6 / 58.3 %")
    assert tokens(row) == ["0.495", "0.115", "+0.027", "-0.014", "+0.039", "8.8e-10", "1,011", "753", "64.6", "58.3"]
    assert matches("0.927", [0.9271]) and not matches("0.928", [0.9271])
    assert matches("8.8e-10", [8.8e-10]) and not matches("8.9e-10", [8.8e-10])
    assert matches("0.0009", [0.00088]) and matches("1,011", [1011]) and matches("-0.014", [-0.014])
