"""The lesson 08 checks: every known wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/clinical.py: tests/test_exercises.py)."""
from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from course_lib import clinical as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import clinical as chk
from course_lib.judge import clinical as judge
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/clinical.py; each keeps full
# marks: tests/test_exercises.py); the tests below use some of them
freeze_by_ids = judge._right_freeze_by_ids


WRONG_ANSWERS = declared_wrong_answers("08_clinical_text")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


CHECKS = [(chk.check_mean_pool, ref.mean_pool), (chk.check_cosine_top_k, ref.cosine_top_k),
          (chk.check_freeze_for_probe, ref.freeze_for_probe), (chk.check_attention_rollout, ref.attention_rollout)]


@pytest.mark.parametrize("check, reference", CHECKS, ids=[c.__name__ for c, _ in CHECKS])
def test_stub_and_reference_fail(check, reference):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet):
        check(stub)
    with pytest.raises(AssertionError):
        check(reference)

    def calls_reference(*args, **kwargs):
        return reference(*args, **kwargs)

    with pytest.raises(IntegrityError):
        check(calls_reference)


def test_cosine_builtin_is_refused():
    def uses_torch(queries, keys, k):
        s = torch.nn.functional.cosine_similarity(torch.as_tensor(queries)[:, None], torch.as_tensor(keys)[None], dim=-1)
        top = torch.topk(s, k, dim=-1)
        return top.values.numpy(), top.indices.numpy()

    with pytest.raises(IntegrityError):
        chk.check_cosine_top_k(uses_torch)


def test_checks_leave_global_rng_alone():
    state = torch.get_rng_state()
    for check, fn in ((chk.check_mean_pool, judge._right_mean_pool_einsum),
                      (chk.check_cosine_top_k, judge._right_cosine_lexsort),
                      (chk.check_freeze_for_probe, judge._right_freeze_dot_prefix),
                      (chk.check_attention_rollout, judge._right_rollout_float32)):
        check(fn)
    assert torch.equal(torch.get_rng_state(), state)


def test_required_misconceptions_are_named():
    assert {"padding averaged in", "divided by the padded length"} <= {w.name for w in judge.WRONG_MEAN_POOL}
    assert {"unnormalised dot product", "normalised over the wrong axis", "ties broken by the larger index"} <= \
        {w.name for w in judge.WRONG_COSINE_TOP_K}


# ---------------------------------------------------------------- freezing judged from values (issue 33 item 2)
def _shadowed_probe():
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from adversarial import cases

    ns = {"nn": nn}
    exec(cases._SHADOWED_PROBE, ns)
    return ns["freeze_for_probe"]


def _record_and_replay(check, student, edit=None):
    import json

    from course_lib.checks import transcript

    with transcript.using("record") as state:
        check(student)
        calls = json.loads(json.dumps(list(state.calls)))
    if edit is not None:
        edit(calls)
    return transcript.replay(check, {}, calls)[0]


def test_probe_forward_is_the_models_forward():
    """The check trains through its own forward on the tensors it took; it must be the model's."""
    model = chk._ProbeModel(8, "probe", 4, 6, 3)
    x, _ = chk._probe_data(8, 5, 4, 3)
    params = dict(chk._NAMED_PARAMETERS(model))
    torch.testing.assert_close(chk._probe_forward(params, "probe", x), model(x), rtol=0, atol=0)


def test_the_reference_probe_trains_the_head_and_lowers_the_loss():
    """What the notebook's test promises (5 SGD steps lower the loss), shown on the reference's record."""
    kw = {"seed": 8, "head": "classifier", "d_in": 4, "d": 8, "classes": 3}
    count, names, before, after = chk._reference_probe(ref.freeze_for_probe, **kw)
    _, initial = chk._untouched_probe(**kw)
    assert chk._probe_summary((count, names, before, after), (names, initial)) == \
        (count, "classifier.weight,classifier.bias", "")
    x, y = chk._probe_data(8, 32, 4, 3)
    loss = lambda values: float(nn.functional.cross_entropy(  # noqa: E731
        chk._probe_forward(dict(zip(names.split(","), values)), "classifier", x), y))
    assert loss(after) < loss(initial)


def test_a_shadowed_model_does_not_pass():
    """A model whose class reports the encoder frozen, while nothing outside the head is: full marks on
    main until 2026-11-25 (flags read through the model), now the frozen parameters' values decide."""
    shadowed = _shadowed_probe()
    with pytest.raises(AssertionError, match="requires_grad is wrong for .*encoder.0.weight"):
        chk.check_freeze_for_probe(shadowed)
    assert "requires_grad is wrong for" in _record_and_replay(chk.check_freeze_for_probe, shadowed)


def test_the_verifier_judges_values_not_what_the_kernel_says():
    """A record whose frozen values were changed after the fact fails; names that are not the model's fail."""
    assert _record_and_replay(chk.check_freeze_for_probe, freeze_by_ids) is None

    def moved(calls):
        out = calls[0]["output"]["__tuple__"]
        after = out[3]["__list__"]
        i = out[1].split(",").index("encoder.0.weight")  # a parameter that must stay frozen
        t = transcript_decode(after[i]).clone()
        t += 0.25
        after[i] = transcript_encode(t)

    assert "requires_grad is wrong for" in _record_and_replay(chk.check_freeze_for_probe, freeze_by_ids, moved)

    def renamed(calls):
        calls[0]["output"]["__tuple__"][1] = "encoder.weight"

    assert _record_and_replay(chk.check_freeze_for_probe, freeze_by_ids, renamed) is not None


def transcript_decode(x):
    from course_lib.checks import transcript

    return transcript.decode(x)


def transcript_encode(x):
    from course_lib.checks import transcript

    return transcript.encode(x)
