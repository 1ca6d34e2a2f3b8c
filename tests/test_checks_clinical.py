"""The lesson 08 checks: every known wrong answer is named, correct answers pass, the reference is refused."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest
import torch
from torch import nn

from course_lib import clinical as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import clinical as chk
from named import assert_named_alone, wrong_answer_params


# ---------------------------------------------------------------- independent correct answers
def mean_pool_einsum(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype)
    return torch.einsum("...td,...t->...d", hidden, m) / m.sum(-1, keepdim=True).clamp(min=1)


def mean_pool_float32(hidden, attention_mask):
    h = hidden.float()
    keep = attention_mask.bool().unsqueeze(-1)
    total = torch.where(keep, h, torch.zeros((), dtype=torch.float32)).sum(-2)
    return total / keep.sum(-2).clamp(min=1).float()


def mean_pool_loop(hidden, attention_mask):
    flat_h = hidden.reshape(-1, *hidden.shape[-2:])
    flat_m = attention_mask.reshape(-1, attention_mask.shape[-1]).bool()
    rows = [h[m].mean(0) if m.any() else torch.zeros(h.shape[-1], dtype=h.dtype) for h, m in zip(flat_h, flat_m)]
    return torch.stack(rows).reshape(*hidden.shape[:-2], hidden.shape[-1])


def cosine_lexsort(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("bad k")
    qn = queries / np.clip(np.sqrt(np.einsum("qd,qd->q", queries, queries))[:, None], 1e-12, None)
    kn = keys / np.clip(np.sqrt(np.einsum("nd,nd->n", keys, keys))[:, None], 1e-12, None)
    s = np.einsum("qd,nd->qn", qn, kn)
    idx = np.stack([np.lexsort((np.arange(len(keys)), -row))[:k] for row in s])
    return np.take_along_axis(s, idx, 1), idx


def cosine_float32(queries, keys, k):
    if k < 1 or k > keys.shape[0]:
        raise ValueError("bad k")
    q = queries.astype(np.float32)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), np.float32(1e-12))
    kk = keys.astype(np.float32)
    kk = kk / np.maximum(np.linalg.norm(kk, axis=1, keepdims=True), np.float32(1e-12))
    s = q @ kk.T
    idx = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, idx, 1), idx


def cosine_loop(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("bad k")
    scores, idxs = [], []
    for q in queries:
        sims = [float(q @ key) / max(float(np.linalg.norm(q) * np.linalg.norm(key)), 1e-300) for key in keys]
        order = sorted(range(len(keys)), key=lambda j: (-sims[j], j))[:k]
        scores.append([sims[j] for j in order])
        idxs.append(order)
    return np.array(scores), np.array(idxs, dtype=np.int64)


def freeze_dot_prefix(model, head="classifier"):
    if not isinstance(getattr(model, head, None), nn.Module):
        raise ValueError(f"no submodule {head}")
    n = 0
    for name, p in model.named_parameters():
        keep = name.startswith(head + ".")
        p.requires_grad = keep
        n += p.numel() if keep else 0
    return n


def freeze_module_api(model, head="classifier"):
    try:
        sub = model.get_submodule(head)
    except AttributeError as err:
        raise ValueError(str(err)) from None
    model.requires_grad_(False)
    sub.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_by_ids(model, head="classifier"):
    modules = dict(model.named_modules())
    if head not in modules:
        raise ValueError(head)
    ids = set(map(id, modules[head].parameters()))
    total = 0
    for p in model.parameters():
        p.requires_grad_(id(p) in ids)
        total += p.numel() * (id(p) in ids)
    return int(total)


def rollout_float32(attentions, residual=True):
    a = attentions.float().mean(1)
    if residual:
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
    r = a[0]
    for layer in a[1:]:
        r = layer @ r
    return r


def rollout_multi_dot(attentions, residual=True):
    mats = list(attentions.mean(1).unbind(0))
    if residual:
        eye = torch.eye(mats[0].shape[-1], dtype=mats[0].dtype)
        mats = [(m + eye) / (m + eye).sum(-1, keepdim=True) for m in mats]
    return mats[0] if len(mats) == 1 else torch.linalg.multi_dot(mats[::-1])


def rollout_reduce(attentions, residual=True):
    L, H, T, _ = attentions.shape
    mixed = attentions.sum(1) / H
    if residual:
        mixed = (mixed + torch.eye(T, dtype=mixed.dtype)) / 2
    return functools.reduce(lambda acc, layer: layer @ acc, mixed[1:], mixed[0])


CORRECT = [(chk.check_mean_pool, f) for f in (mean_pool_einsum, mean_pool_float32, mean_pool_loop)] + \
          [(chk.check_cosine_top_k, f) for f in (cosine_lexsort, cosine_float32, cosine_loop)] + \
          [(chk.check_freeze_for_probe, f) for f in (freeze_dot_prefix, freeze_module_api, freeze_by_ids)] + \
          [(chk.check_attention_rollout, f) for f in (rollout_float32, rollout_multi_dot, rollout_reduce)]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=[f.__name__ for _, f in CORRECT])
def test_correct_independent_answers_pass(check, fn, hidden):
    check(fn, hidden=hidden)


WRONG_ANSWERS = wrong_answer_params((chk.check_mean_pool, chk.WRONG_MEAN_POOL),
                                   (chk.check_cosine_top_k, chk.WRONG_COSINE_TOP_K),
                                   (chk.check_freeze_for_probe, chk.WRONG_FREEZE),
                                   (chk.check_attention_rollout, chk.WRONG_ROLLOUT))


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


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
    for check, fn in CORRECT[::3]:
        check(fn)
    assert torch.equal(torch.get_rng_state(), state)


def test_required_misconceptions_are_named():
    assert {"padding averaged in", "divided by the padded length"} <= {w.name for w in chk.WRONG_MEAN_POOL}
    assert {"unnormalised dot product", "normalised over the wrong axis", "ties broken by the larger index"} <= \
        {w.name for w in chk.WRONG_COSINE_TOP_K}


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
