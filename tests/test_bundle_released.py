"""A partly released students' bundle (solutions of 01-06 out): lessons 07-12, filled with the instructor's
solutions and run top to bottom in an environment installed as the bundle's README says, raise in no
cell (issue 41 item 3)."""
import pytest

from bundle_fixtures import LESSONS, PARTLY_RELEASED, built_bundle, check_lesson, lesson_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_bundle(tmp_path_factory, PARTLY_RELEASED)


@pytest.mark.parametrize("lesson", lesson_params("released-01-06", [a for a in LESSONS if a not in PARTLY_RELEASED]))
def test_partly_released_bundle_runs_the_lesson_without_errors(lesson, built, tmp_path):
    assert built["released"] == PARTLY_RELEASED
    check_lesson(built, lesson, str(tmp_path))
