"""The lesson 09 checks: correct answers written differently pass (float32 too), every known wrong answer
is named, the reference is refused, the stub fails."""
from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

from course_lib import prompt_tuning as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import prompt_tuning as chk
from named import assert_named_alone, wrong_answer_params


# ---------------------------------------------------------------- independent correct answers
def prepend_ok(input_embeds, attention_mask, prompt):
    B, T, d = input_embeds.shape
    P = prompt.shape[0]
    embeds = torch.cat([prompt.unsqueeze(0).repeat(B, 1, 1).to(input_embeds.dtype), input_embeds], dim=1)
    return embeds, torch.cat([attention_mask.new_ones(B, P), attention_mask], dim=1)


def prepend_loop(input_embeds, attention_mask, prompt):
    rows = [torch.cat([prompt.to(x.dtype), x]) for x in input_embeds]
    masks = [torch.cat([torch.ones(prompt.shape[0], dtype=m.dtype), m]) for m in attention_mask]
    return torch.stack(rows), torch.stack(masks)


def prepend_float32(input_embeds, attention_mask, prompt):
    e, m = prepend_ok(input_embeds.float(), attention_mask, prompt.float())
    return e, m


def labels_ok(input_ids, attention_mask, prompt_len, answer_start):
    lab = input_ids.clone().long()
    for b in range(lab.shape[0]):
        lab[b, : int(answer_start[b])] = -100
    lab[attention_mask == 0] = -100
    return F.pad(lab, (prompt_len, 0), value=-100)


def labels_where(input_ids, attention_mask, prompt_len, answer_start):
    B, T = input_ids.shape
    idx = torch.arange(T).expand(B, T)
    keep = (idx >= answer_start[:, None]) & (attention_mask > 0)
    lab = input_ids.long().masked_fill(~keep, -100)
    return torch.cat([torch.full((B, prompt_len), -100), lab], 1)


def labels_python(input_ids, attention_mask, prompt_len, answer_start):
    out = []
    for ids, m, s in zip(input_ids.tolist(), attention_mask.tolist(), answer_start.tolist()):
        out.append([-100] * prompt_len + [t if (i >= s and mk) else -100 for i, (t, mk) in enumerate(zip(ids, m))])
    return torch.tensor(out, dtype=torch.long)


def loglik_ce(logits, labels, normalise=False):
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], ignore_index=-100, reduction="none")
    total = -ce.sum(1)
    if normalise:
        total = total / (labels[:, 1:] != -100).sum(1)
    return total


def loglik_loop(logits, labels, normalise=False):
    out = []
    for lg, lb in zip(logits, labels):
        s, n = lg.new_zeros(()), 0
        for t in range(1, lb.shape[0]):
            if lb[t] != -100:
                s = s + (lg[t - 1, lb[t]] - torch.logsumexp(lg[t - 1], 0))
                n += 1
        out.append(s / n if normalise and n else s)
    return torch.stack(out)


def loglik_float32(logits, labels, normalise=False):
    return loglik_ce(logits.float(), labels, normalise)  # float32 whatever the input


def freeze_ok(model):
    model.requires_grad_(False)
    model.eval()
    return sum(p.numel() for p in model.parameters())


def freeze_ptrs(model):
    seen, n = set(), 0
    for _, p in model.named_parameters(remove_duplicate=False):
        p.requires_grad = False
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    model.train(False)
    return n


def freeze_modules(model):
    for m in model.modules():
        m.eval()
        for p in m.parameters(recurse=False):
            p.requires_grad_(False)
    return int(sum(p.numel() for p in set(model.parameters())))


CORRECT = [(chk.check_prepend_soft_prompt, f) for f in (prepend_ok, prepend_loop, prepend_float32)] + \
          [(chk.check_answer_only_labels, f) for f in (labels_ok, labels_where, labels_python)] + \
          [(chk.check_option_log_likelihood, f) for f in (loglik_ce, loglik_loop, loglik_float32)] + \
          [(chk.check_freeze_model, f) for f in (freeze_ok, freeze_ptrs, freeze_modules)]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=[f.__name__ for _, f in CORRECT])
def test_correct_independent_answers_pass(check, fn, hidden):
    check(fn, hidden=hidden)


WRONG_ANSWERS = wrong_answer_params((chk.check_prepend_soft_prompt, chk.WRONG_PREPEND),
                                   (chk.check_answer_only_labels, chk.WRONG_LABELS),
                                   (chk.check_option_log_likelihood, chk.WRONG_LOGLIK),
                                   (chk.check_freeze_model, chk.WRONG_FREEZE))


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


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
