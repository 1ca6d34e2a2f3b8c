"""Prose follows the outputs (issue 42, item 2): the checker of tests/prose_numbers.py, which the
nbval run of the notebooks applies to every notebook after its last cell (tests/prose_numbers_plugin.py:
one "prose numbers" item per notebook, on the outputs nbval has just produced).

These tests show that it fails on a notebook whose prose states a stale number, passes when the
outputs show it, leaves citations, years, equations and the code's own hyperparameters alone, and
that the item is really added to each notebook's run."""
import json
import os
import pathlib
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

import prose_numbers as PN

REPO = pathlib.Path(__file__).resolve().parent.parent


def notebook(markdown: str, printed: str, code: str = "print(result)") -> nbformat.NotebookNode:
    cell = new_code_cell(code)
    cell.outputs = [new_output("stream", name="stdout", text=printed)]
    return new_notebook(cells=[cell, new_markdown_cell(markdown)])


def test_a_stale_number_fails():
    nb = notebook("In this run the transformer reached 0.79 test accuracy.", "transformer: test accuracy 0.756\n")
    problems = PN.stale_claims(nb)
    assert len(problems) == 1 and "'0.79'" in problems[0], problems


def test_the_printed_number_passes_at_the_claims_precision():
    assert PN.stale_claims(notebook("In this run the transformer reached 0.79.", "accuracy 0.7893\n")) == []
    assert PN.stale_claims(notebook("It scored 0.8 here.", "accuracy 0.7893\n")) == []  # 0.7893 -> 0.8
    assert PN.stale_claims(notebook("It scored 0.80 here.", "accuracy 0.7893\n")) != []  # 0.79 is not 0.80


def test_an_approximate_round_number_claims_its_significant_digits():
    assert PN.stale_claims(notebook("The ontology has about 19,000 terms (count printed below).", "19,034 terms\n")) == []
    assert PN.stale_claims(notebook("The ontology has about 19,000 terms (count printed below).", "18,034 terms\n"))
    assert PN.stale_claims(notebook("The ontology has 19,000 terms (count printed below).", "19,034 terms\n"))


def test_percentages_match_fractions_both_ways():
    assert PN.stale_claims(notebook("The k-mer neighbour scored 4.7% exact.", "exact match 0.047\n")) == []
    assert PN.stale_claims(notebook("The k-mer neighbour scored 0.79.", "exact 79.0%\n")) == []
    assert PN.stale_claims(notebook("The k-mer neighbour scored 5.7% exact.", "exact match 0.047\n")) != []


def test_every_result_phrase_makes_a_claim():
    for phrase in ("In our run", "In this run", "The model reached", "The model scored", "With an accuracy of",
                   "The full run gave"):
        nb = notebook(f"{phrase} 0.91, as the table shows.", "accuracy 0.756\n")
        assert PN.stale_claims(nb), phrase


def test_numbers_that_are_not_results_are_left_alone():
    text = ("In this run (Rost 1999, Protein Engineering 12:85-94) the twilight zone starts below 30 %; "
            "this run used $m = 256$ features and `epochs=7`, and it reached its budget of 130 steps in 2024.")
    nb = notebook(text, "accuracy 0.756\n", code="config = dict(steps=130, features=64)\nprint(config)")
    problems = PN.stale_claims(nb)
    # 30 % is neither printed nor set by the code: the one claim left; citation, math, code, 130, year are not
    assert len(problems) == 1 and "'30%'" in problems[0], problems
    assert PN.stale_claims(nb, allowed={"30%": "Rost 1999's threshold, not a result"}) == []


def test_references_to_lessons_and_cells_are_not_claims():
    assert PN.stale_claims(notebook("As lesson 07 and cells 27-30 showed, this run reached its end.", "done\n")) == []


def test_sentences_without_a_result_phrase_are_not_claims():
    assert PN.stale_claims(notebook("Titin has more than 30,000 residues.", "nothing\n")) == []


def test_an_unexecuted_notebook_is_recognised():
    nb = new_notebook(cells=[new_code_cell("print(1)"), new_markdown_cell("In this run it reached 0.9.")])
    assert not PN.executed_has_outputs(nb)
    assert PN.executed_has_outputs(notebook("x", "1\n"))


def test_the_nbval_run_adds_a_prose_item_per_notebook():
    """Collection only (no kernel): `pytest notebooks --nbval-lax` gets one 'prose numbers' item per notebook,
    right after its last cell."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval-lax",
                          "--nbval-current-env", "-p", "no:cacheprovider", "-p", "prose_numbers_plugin", "notebooks"],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    lines = [line for line in run.stdout.splitlines() if "::" in line]
    notebooks = sorted(REPO.glob("notebooks/*/*.ipynb"))
    prose = [line for line in lines if line.endswith("::prose numbers")]
    assert len(prose) == len(notebooks), run.stdout[-2000:] + run.stderr[-2000:]
    for item in prose:
        nb_path = item.split("::")[0]
        cells = [i for i, line in enumerate(lines) if line.startswith(nb_path + "::")]
        assert lines[cells[-1]] == item, f"{item} is not the last item of its notebook"


@pytest.mark.slow
def test_the_nbval_run_fails_on_a_stale_notebook(tmp_path):
    """End to end: a two-cell notebook whose markdown states a number its output does not print fails under
    nbval with the plugin of tests/prose_numbers_plugin.py; the same notebook with the right number passes."""
    results = {}
    for claim in ("0.79", "0.76"):
        folder = tmp_path / f"claim_{claim.replace('.', '_')}"
        folder.mkdir()
        nb = new_notebook(cells=[new_code_cell("print(f'accuracy {0.756:.3f}')"),
                                 new_markdown_cell(f"In this run the model reached {claim}.")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / "lesson.ipynb")
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "prose_numbers_plugin",
                              "--nbval-lax", "--nbval-current-env", str(folder / "lesson.ipynb")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
        results[claim] = run
    assert results["0.79"].returncode != 0 and "states '0.79'" in results["0.79"].stdout, results["0.79"].stdout[-3000:]
    assert results["0.76"].returncode == 0 and "2 passed" in results["0.76"].stdout, results["0.76"].stdout[-3000:]


# --- exercise instructions agree with the reference's docstring (issue 63) ----------------------------

HALF_LIFE_CASES = [dict(min_half_life=3.0, seq_len=1536, num_basis=8),
                   dict(min_half_life=1.0, seq_len=100, num_basis=5)]


def half_life_mismatches(instruction: str) -> list[str]:
    """The numpy formulas stated in ``instruction`` whose values differ from the half-lives that
    exponential_basis's docstring states (h_i = 2^x_i, x_i = np.linspace(...)) and that the reference
    computes (f_i(h_i) = 0.5); [] when they agree. Raises when the instruction states no formula."""
    import numpy as np

    from course_lib import positional
    doc = positional.exponential_basis.__doc__
    assert "h_i = 2^x_i" in doc, "the docstring no longer states h_i = 2^x_i: update this check"
    (x_doc,) = PN.call_expressions(doc, "linspace")
    formulas = PN.numpy_formulas(instruction)
    assert formulas, "the instruction states no formula in inline code"
    wrong = []
    for case in HALF_LIFE_CASES:
        h_doc = 2.0 ** PN.evaluate_formula(x_doc, case)
        basis = positional.exponential_basis(h_doc, case["num_basis"], case["seq_len"], case["min_half_life"])
        assert np.allclose(np.diag(basis), 0.5), "the docstring's half-lives are not the reference's"
        for formula in formulas:
            if not np.allclose(PN.evaluate_formula(formula, case), h_doc):
                wrong.append(formula)
    return sorted(set(wrong))


def test_the_exponential_basis_instruction_states_the_docstrings_half_lives():
    nb = nbformat.read(REPO / "notebooks" / "04_positional" / "positional.ipynb", as_version=4)
    assert half_life_mismatches(PN.instruction_cell(nb, "exponential_basis")) == []


def test_the_instruction_check_fails_on_the_first_readings_formula():
    """The wording issue 63 found (np.geomspace from min_half_life to seq_len) is caught."""
    old = "The half-lives are `np.geomspace(min_half_life, seq_len, num_basis)`. Check: $f_i(0) = 1$."
    assert half_life_mismatches(old) == ["np.geomspace(min_half_life, seq_len, num_basis)"]
    assert half_life_mismatches("`2 ** np.linspace(min_half_life, np.log2(seq_len), num_basis)`") == []


# --- typed per-seed numbers agree with notebooks/figures.json (issue 63) ---------------------------------

FIGURES = json.loads((REPO / "notebooks" / "figures.json").read_text(encoding="utf-8"))["lessons"]


@pytest.mark.parametrize("lesson", sorted(FIGURES))
def test_typed_per_seed_numbers_are_those_of_figures_json(lesson):
    (path,) = REPO.glob(f"notebooks/{lesson}_*/*.ipynb")
    assert PN.per_seed_mismatches(PN.read(path), FIGURES[lesson]["figures"]) == []


def test_the_per_seed_check_fails_on_a_wrong_or_reordered_triple_and_a_wrong_mean():
    figures = {"acc": {"mean": 0.999, "se": 0.0, "values": {"0": 1.0, "1": 0.999, "2": 1.0}}}
    md = lambda text: new_notebook(cells=[new_markdown_cell(text)])  # noqa: E731
    assert PN.per_seed_mismatches(md("Over seeds 0-2 it is 1.000, 0.999, 1.000."), figures) == []
    assert PN.per_seed_mismatches(md("Over seeds 0-2 it is 0.999 ± 0.000."), figures) == []
    assert len(PN.per_seed_mismatches(md("Over seeds 0-2 it is 0.999, 1.000, 1.000."), figures)) == 1
    assert len(PN.per_seed_mismatches(md("Over seeds 0-2 it is 1.000, 0.998 and 1.000."), figures)) == 1
    assert len(PN.per_seed_mismatches(md("Over seeds 0-2 it is 0.990 ± 0.001."), figures)) == 1
    assert PN.per_seed_mismatches(md("It is 0.5, 0.6, 0.7 in the paper."), figures) == []  # names no seed
