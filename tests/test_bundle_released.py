"""A partly released students' bundle (solutions of 01-06 out): the lessons after 06 where an answer of
course_lib.released() changes once 01-06 are out (bundle_fixtures.RELEASED_RERUN; the others run the same code
as in the default bundle, test_bundle_lessons_b.py), filled with the instructor's solutions and run in an
environment installed as the bundle's README says, raise in no cell (issue 41 item 3). What runs again of such
a lesson is the cells whose answers change, the cells that read what they make, and the cells that make their
inputs (bundle_fixtures.rerun_cells): every other cell runs the same code on the same inputs as in the default
bundle's run, which shows it raises nothing."""
import copy

import nbformat
import pytest

from bundle_fixtures import (NOT_RERUN, PARTLY_RELEASED, RELEASED_RERUN, built_bundle, check_lesson,
                             decides_differently, keep_rerun_cells, lesson_params, rerun_cells)
from grading import bundle

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_bundle(tmp_path_factory, PARTLY_RELEASED)


@pytest.mark.parametrize("lesson", lesson_params("released-01-06", RELEASED_RERUN))
def test_partly_released_bundle_runs_the_lesson_without_errors(lesson, built, tmp_path):
    assert built["released"] == PARTLY_RELEASED
    check_lesson(built, lesson, str(tmp_path), edit=keep_rerun_cells(PARTLY_RELEASED))


def test_the_rerun_lessons_are_the_ones_whose_released_answers_change():
    """Lesson 10 measures lesson 01's attention once 01 is out; lesson 07 asks about 01 only together with 07
    (still withheld in this bundle), so it takes the branches it takes in the default bundle, until 07 is out."""
    assert RELEASED_RERUN == ["10_proteins"], RELEASED_RERUN
    assert not decides_differently("07_efficient", PARTLY_RELEASED)
    assert decides_differently("07_efficient", PARTLY_RELEASED + ["07_efficient"])
    assert decides_differently("10_proteins", ["01_attention"])


def test_a_changed_answer_reruns_what_reads_it_and_what_it_reads_and_nothing_else():
    cells = ["import numpy as np\nfrom course_lib import released",        # 0 setup: read by 2
             "x = np.arange(3)\ny = 2",                                  # 1 x read by 2
             "z = np.ones(9).sum()  # slow training",                       # 2' (index 2) unrelated
             "model = [1]\nmodel.append(0)",                                # 3 binds model, changes it itself
             None,                                                         # 4 markdown
             "model.append(x[0])",                                         # 5 changes model: an input of 6
             "if released('01_attention'):\n    w = x + 1\nelse:\n    w = x\nv = [w for w in model]",  # 6
             "print(y)",                                                   # 7 unrelated
             "print(w.sum(), v)",                                          # 8 reads w: runs again
             "w = 0\nprint(w)",                                            # 9 binds w before reading it
             "for i in range(2):\n    t = i\nprint(t, z)"]                 # 10 reads z only
    assert rerun_cells(cells, ["01_attention"]) == {0, 1, 3, 5, 6, 8}
    assert rerun_cells(cells, ["02_masking"]) == set()
    assert rerun_cells(cells[:6] + ["if released(name):\n    pass"], ["01_attention"]) == {0, 6}
    assert rerun_cells(["x = (", "print(released('01_attention'))"], ["01_attention"]) == {0, 1}  # unparsable: all


def test_lesson_10_reruns_its_attention_measurement_and_its_inputs_not_its_training():
    """Lesson 10's released("01_attention") cell measures lesson 01's attention: it runs again with the setup, the
    proteins, the encoder and the FAVOR+ exercise it reads; the masked-language model's training does not."""
    (path,) = bundle.source_notebooks("10_proteins")
    nb = nbformat.read(path, as_version=4)
    keep = rerun_cells([c.source if c.cell_type == "code" else None for c in nb.cells], PARTLY_RELEASED)
    kept = [nb.cells[i].source for i in sorted(keep)]
    assert any('released("01_attention")' in s for s in kept), kept
    assert any(s.startswith("def encode_proteins(") for s in kept) and \
        any(s.startswith("def favor_padded_attention(") for s in kept)
    assert not any("MLM_LEN = " in s for s in kept), "the MLM's training runs again"
    edited = copy.deepcopy(nb)
    keep_rerun_cells(PARTLY_RELEASED)(edited)
    assert [i for i, c in enumerate(edited.cells) if c.cell_type == "code" and c.source != NOT_RERUN] == sorted(keep)
