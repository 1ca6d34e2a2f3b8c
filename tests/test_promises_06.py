"""Lesson 06: the promise of dicts in order of first appearance holds when graded outside the kernel too (the
promises, with the answer that breaks each, are declared in course_lib/judge/bpe.py: tests/test_exercises.py)."""
import pytest

from course_lib.checks import bpe as C
from course_lib.judge import bpe as J

# the right answers are declared with the exercises (course_lib/judge/bpe.py), with the answers that break each
# promise (tests/test_exercises.py tests them); the test below sorts their dicts
my_get_stats = J._right_get_stats
my_word_counts = J._right_word_counts


@pytest.mark.parametrize("check, answer", [
    ("check_get_stats", lambda ids: dict(sorted(my_get_stats(ids).items()))),
    ("check_word_counts", lambda text: dict(sorted(my_word_counts(text).items()))),
])
def test_the_order_of_first_appearance_survives_the_record(check, answer):
    """Graded outside the kernel (record, then replay in the verifier), a dict in another order still fails:
    the record keeps the keys' order."""
    import json

    from course_lib.checks import transcript
    from grading import verify

    for hidden in (False, True):
        with transcript.using("record") as state:
            getattr(C, check)(answer, hidden=hidden)
            calls = json.loads(json.dumps(state.calls, ensure_ascii=False))
        source = f"checks.bpe.{check}(f{', hidden=True' if hidden else ''})\n"
        verdict = verify.verify_cell(source, calls)
        assert verdict is not None and "order of first appearance" in verdict, verdict
