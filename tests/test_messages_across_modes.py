"""A known wrong answer gets the same message wherever its check runs (issue 34 item 2).

For every graded exercise of the registry and every known wrong answer of its check (the ``WRONG_*`` lists
the check names), the visible check runs three ways and the messages must be identical:

* live, as in the student's JupyterLab;
* record -> JSON -> replay, as in grading: the kernel records the calls of the student's function
  (``transcript`` record mode, no reference in the kernel) and the verifier, outside the kernel, decides
  (``transcript.replay``); the verifier's message is the one the student's feedback shows;
* stored, as in the students' bundle: the expected values and the wrong answers' outputs captured from the
  reference (capture mode), the check run on the stored values only.

The hidden check runs live and record -> replay too. A crash is named from the outputs the wrong answer
gives on the check's other inputs (``core.name_crash``), so the grading kernel must record the calls after a
crash for the verifier to name it: this test is where that shows.
"""
from __future__ import annotations

import contextlib
import json

import pytest

from course_lib.checks import core, registry, transcript


def _pairs() -> list:
    """(exercise, check, known wrong answer) for every misconception an exercise declares, for each of its checks."""
    out = []
    for ex in registry.exercises():
        for qualified in ex.checks:
            check = registry.resolve(qualified)
            seen: dict = {}
            for w in ex.misconceptions:
                seen[w.name] = seen.get(w.name, 0) + 1
                label = w.name if seen[w.name] == 1 else f"{w.name} #{seen[w.name]}"
                out.append(pytest.param(ex, qualified, w, id=f"{ex.assignment}:{check.__name__}:{label}"))
    return out


PAIRS = _pairs()


def _message(run) -> str | None:
    try:
        run()
    except AssertionError as err:
        return str(err)
    return None


def _recorded_then_replayed(check, answer, hidden: bool) -> tuple[str | None, str | None]:
    with transcript.using("record") as state:
        kernel = _message(lambda: check(answer, hidden=hidden))
        calls = state.calls
    records = json.loads(json.dumps(calls, ensure_ascii=False).encode("utf-8"))  # as the kernel's messages carry it
    verdict, _ = transcript.replay(check, {"hidden": hidden}, records)
    return kernel, verdict


_STORES: dict = {}  # check -> the values the bundle would store for it (capture mode, the reference)


def test_every_exercise_has_known_wrong_answers():
    with_wrongs = {ex.name for ex, *_ in (p.values for p in PAIRS)}
    assert with_wrongs == {ex.name for ex in registry.exercises()}, \
        sorted({ex.name for ex in registry.exercises()} - with_wrongs)


@pytest.mark.parametrize("exercise,qualified,wrong", PAIRS)
def test_a_wrong_answer_gets_one_message_live_in_grading_and_in_the_bundle(exercise, qualified, wrong, monkeypatch):
    check = registry.resolve(qualified)
    live = _message(lambda: check(exercise.answer(wrong)))
    kernel, replayed = _recorded_then_replayed(check, exercise.answer(wrong), hidden=False)
    if live is None:  # a visible test need not catch every wrong answer; then it passes in every mode
        assert kernel is None and replayed is None, (kernel, replayed)
    else:
        assert replayed == live, f"live:\n{live}\nverifier:\n{replayed}"

    if qualified not in _STORES:  # what the bundle ships, captured once per check
        reference = registry.resolve(exercise.reference)
        with monkeypatch.context() as patch, transcript.using("capture") as state:
            # the bundle captures the instructor's solution cells; here the reference stands in for them, so the
            # doors that keep a student's answer off the reference stay open for this run only
            patch.setattr(core, "forbidden_calls", lambda paths, exercise: contextlib.nullcontext())
            captured = _message(lambda: check(lambda *a, **k: reference(*a, **k)))
            _STORES[qualified] = dict(state.store)
        assert captured is None, captured
    store = _STORES[qualified]
    with transcript.using("stored") as state:
        state.store = store
        stored = _message(lambda: check(exercise.answer(wrong)))
    assert stored == live, f"live:\n{live}\nstudents' bundle:\n{stored}"


@pytest.fixture(scope="module")
def hidden_feed():
    """The hidden tests' inputs as the grader hands them to the kernel (grading.feed), captured once."""
    from grading import feed

    return feed.capture()


@pytest.mark.parametrize("exercise,qualified,wrong", PAIRS)
def test_a_wrong_answer_gets_one_message_from_the_hidden_test_live_and_in_grading(exercise, qualified, wrong,
                                                                                   hidden_feed):
    check = registry.resolve(qualified)
    live = _message(lambda: check(exercise.answer(wrong), hidden=True))
    kernel, replayed = _recorded_then_replayed(check, exercise.answer(wrong), hidden=True)
    assert live is not None, f"the hidden test passed the wrong answer '{wrong.name}'"
    assert replayed == live, f"live:\n{live}\nverifier:\n{replayed}"
    if " raised " not in live:
        return
    # a crash: in the grading kernel the hidden inputs come from the feed (core.run_hidden_from_feed), and the
    # kernel must go on making its calls after the crash for the verifier to name it from the other outputs
    with transcript.using("record") as state:
        _message(lambda: core._run_feed_calls(hidden_feed[f"{check.__module__}.{check.__name__}"][0], exercise.answer(wrong)))
        calls = state.calls
    records = json.loads(json.dumps(calls, ensure_ascii=False).encode("utf-8"))
    fed, _ = transcript.replay(check, {"hidden": True}, records)
    assert fed == live, f"live:\n{live}\nverifier, hidden inputs from the feed:\n{fed}"


def test_the_known_wrong_answers_of_a_check_are_stored_under_distinct_keys():
    """The students' bundle finds each wrong answer's stored outputs by ``Wrong.key`` (its implementation is a
    stub there): two that share a name and a message must say which variant they are."""
    for ex in registry.exercises():
        keys = [w.key for w in ex.misconceptions]
        assert len(keys) == len(set(keys)), (ex.name, sorted(k for k in keys if keys.count(k) > 1))
