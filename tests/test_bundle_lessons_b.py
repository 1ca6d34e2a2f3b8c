"""The default students' bundle (no solution released), lessons 07-12: each release notebook, filled with the
instructor's solutions and run top to bottom in an environment installed as the bundle's README says,
raises in no cell (issue 41 item 3). Lessons 01-06: test_bundle_lessons_a.py (xdist runs the files apart)."""
import pytest

from bundle_fixtures import LESSONS, built_bundle, check_lesson, lesson_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_bundle(tmp_path_factory, [])


@pytest.mark.parametrize("lesson", lesson_params("default", LESSONS[6:]))
def test_default_bundle_runs_the_lesson_without_errors(lesson, built, tmp_path):
    check_lesson(built, lesson, str(tmp_path))
