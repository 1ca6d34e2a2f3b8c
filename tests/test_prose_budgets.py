"""Lessons 01, 03-06 and 08 bound their training by steps or epochs, never by seconds (issue 42):
with a fixed seed their printed results are the same on every machine, whatever its speed or load."""
import ast
import pathlib

import nbformat
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
LESSONS = ["01_attention", "03_multihead", "04_positional", "05_blocks", "06_bpe", "08_clinical_text"]


def _code_cells(lesson):
    (path,) = sorted((REPO / "notebooks" / lesson).glob("*.ipynb"))
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_training_run_is_bounded_by_seconds(lesson):
    for source in _code_cells(lesson):
        code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.keyword) and node.arg == "max_seconds":
                pytest.fail(f"{lesson}: a training run is bounded by seconds (max_seconds), so its result depends "
                            f"on the machine; give it an epoch or step budget instead:\n{source[:300]}")


@pytest.mark.parametrize("lesson", ["05_blocks", "08_clinical_text"])
def test_the_training_lessons_still_train_with_an_epoch_budget(lesson):
    """Guards the test above from passing because the training cell disappeared."""
    assert any("TrainConfig(epochs=" in s for s in _code_cells(lesson)), f"{lesson}: no TrainConfig(epochs=...) found"
