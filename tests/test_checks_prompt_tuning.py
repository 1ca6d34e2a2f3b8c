"""The lesson 09 checks: every known wrong answer is named, the reference is refused, the stub fails (right
alternatives and promise-breaking answers are declared in course_lib/checks/prompt_tuning.py:
tests/test_exercises.py)."""
from __future__ import annotations


import pytest
import torch

from course_lib import prompt_tuning as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import prompt_tuning as chk
from course_lib.judge import prompt_tuning as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/prompt_tuning.py; each keeps
# full marks: tests/test_exercises.py); the tests below use one of them
freeze_ok = J._right_freeze_ok


WRONG_ANSWERS = declared_wrong_answers("09_prompt_tuning")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


@pytest.mark.parametrize("check, name", [(chk.check_prepend_soft_prompt, "prepend_soft_prompt"),
                                         (chk.check_answer_only_labels, "answer_only_labels"),
                                         (chk.check_option_log_likelihood, "option_log_likelihood"),
                                         (chk.check_freeze_model, "freeze_model")])
def test_reference_is_refused_and_stub_fails(check, name):
    reference = getattr(ref, name)

    def calls_reference(*args, **kwargs):
        return reference(*args, **kwargs)

    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(IntegrityError):
        check(calls_reference)
    with pytest.raises(NotImplementedYet):
        check(stub)


def test_checks_leave_global_rng_alone():
    state = torch.get_rng_state()
    chk.check_freeze_model(freeze_ok)
    assert torch.equal(torch.get_rng_state(), state)


# ---------------------------------------------------------------- freezing judged from values (issue 33 item 2)
def _shadowed_freeze():
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from adversarial import cases

    ns = {"nn": torch.nn}
    exec(cases._SHADOWED_FROZEN_MODEL, ns)
    return ns["freeze_model"]


def _record_and_replay(student, edit=None, hidden=False):
    import json

    from course_lib.checks import transcript

    with transcript.using("record") as state:
        chk.check_freeze_model(student, hidden=hidden)
        calls = json.loads(json.dumps(list(state.calls)))
    if edit is not None:
        edit(calls)
    return transcript.replay(chk.check_freeze_model, {"hidden": hidden}, calls)[0]


def test_a_shadowed_model_does_not_pass():
    """Parameter lists shadowed with detached copies, nothing frozen: full marks on main until 2026-11-25
    (flags read through the model), now a training step on the tensors the check took decides."""
    shadowed = _shadowed_freeze()
    with pytest.raises(AssertionError, match="requires_grad"):
        chk.check_freeze_model(shadowed)
    assert "requires_grad" in _record_and_replay(shadowed)


def test_a_swapped_class_does_not_hide_training_mode_or_trainable_parameters():
    def swapped(model):
        total = sum(p.numel() for p in model.parameters())

        class Shadow(type(model)):
            training = property(lambda self: False, lambda self, value: None)

            def named_parameters(self, *args, **kwargs):
                return ((n, p.detach()) for n, p in super().named_parameters(*args, **kwargs))

        model.__class__ = Shadow
        return total

    verdict = _record_and_replay(swapped)
    assert verdict is not None and ("requires_grad" in verdict or "training mode" in verdict), verdict


@pytest.mark.parametrize("hidden", [False, True])
def test_the_verifier_judges_values_not_what_the_kernel_says(hidden):
    assert _record_and_replay(freeze_ok, hidden=hidden) is None

    def moved(calls):  # a frozen parameter's value after the probe step, changed after the fact
        from course_lib.checks import transcript

        after = calls[-1]["output"]["__tuple__"][3]["__list__"]
        t = transcript.decode(after[0]).clone()
        seed = 4 if hidden else 2  # the last case's model
        t -= chk.PROBE_LR * chk._probe_direction(seed, 0, t.shape).to(t.dtype)
        after[0] = transcript.encode(t)

    assert "requires_grad=True" in _record_and_replay(freeze_ok, moved, hidden=hidden)

    def fewer(calls):
        calls[0]["output"]["__tuple__"][3]["__list__"].pop()

    assert "not the model" in _record_and_replay(freeze_ok, fewer, hidden=hidden)
