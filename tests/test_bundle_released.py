"""A partly released students' bundle (solutions of 01-06 out): the lessons after 06 where an answer of
course_lib.released() changes once 01-06 are out (bundle_fixtures.RELEASED_RERUN; the others run the same code
as in the default bundle, test_bundle_lessons_b.py), filled with the instructor's
solutions and run top to bottom in an environment installed as the bundle's README says, raise in no
cell (issue 41 item 3)."""
import pytest

from bundle_fixtures import (PARTLY_RELEASED, RELEASED_RERUN, built_bundle, check_lesson, decides_differently,
                             lesson_params)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_bundle(tmp_path_factory, PARTLY_RELEASED)


@pytest.mark.parametrize("lesson", lesson_params("released-01-06", RELEASED_RERUN))
def test_partly_released_bundle_runs_the_lesson_without_errors(lesson, built, tmp_path):
    assert built["released"] == PARTLY_RELEASED
    check_lesson(built, lesson, str(tmp_path))


def test_the_rerun_lessons_are_the_ones_whose_released_answers_change():
    """Lesson 10 measures lesson 01's attention once 01 is out; lesson 07 asks about 01 only together with 07
    (still withheld in this bundle), so it takes the branches it takes in the default bundle, until 07 is out."""
    assert RELEASED_RERUN == ["10_proteins"], RELEASED_RERUN
    assert not decides_differently("07_efficient", PARTLY_RELEASED)
    assert decides_differently("07_efficient", PARTLY_RELEASED + ["07_efficient"])
    assert decides_differently("10_proteins", ["01_attention"])
