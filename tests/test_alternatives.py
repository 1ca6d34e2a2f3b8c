"""Issue 10's rule, kept visible: every graded exercise of lessons 01-07 has at least three correct
alternatives (another dtype, einsum or a loop, another valid formulation) in its test file's CORRECT
list, and each of them passes the visible and the hidden check (tested there)."""
import importlib

import pytest

LESSONS = {"attention": "test_checks_attention", "masking": "test_checks_masking",
           "multihead": "test_checks_multihead", "positional": "test_checks_positional",
           "blocks": "test_checks_blocks", "bpe": "test_checks_bpe"}


@pytest.mark.parametrize("module, tests", LESSONS.items())
def test_every_graded_exercise_has_three_correct_alternatives(module, tests):
    checks = importlib.import_module(f"course_lib.checks.{module}")
    correct = importlib.import_module(tests).CORRECT
    graded = sorted(n for n in getattr(checks, "__all__", dir(checks)) if n.startswith("check_"))
    assert graded, module
    counts = {name: sum(1 for check, *_ in correct if check.__name__ == name) for name in graded}
    short = {name: n for name, n in counts.items() if n < 3}
    assert not short, f"{module}: fewer than 3 correct alternatives for {short}"
