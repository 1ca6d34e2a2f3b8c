"""Every promise of lesson 08's docstrings is exercised: a wrong answer that breaks it fails with this message."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.checks import clinical as chk

CHECKS = {"mean_pool": chk.check_mean_pool, "cosine_top_k": chk.check_cosine_top_k,
          "freeze_for_probe": chk.check_freeze_for_probe, "attention_rollout": chk.check_attention_rollout}


def _mean(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(-2) / m.sum(-2).clamp(min=1)


def mp_always_float64(hidden, attention_mask):
    return _mean(hidden.double(), attention_mask)


def mp_three_dims_only(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype)
    return (hidden * m[:, :, None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)


def mp_in_place(hidden, attention_mask):
    hidden.mul_(attention_mask.to(hidden.dtype).unsqueeze(-1))
    return hidden.sum(-2) / attention_mask.to(hidden.dtype).sum(-1, keepdim=True).clamp(min=1)


def mp_bool_breaks(hidden, attention_mask):
    pad = 1 - attention_mask  # fails on a bool mask
    return _mean(hidden, 1 - pad)


def _cos(queries, keys, k):
    qn = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    kn = keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)
    s = qn @ kn.T
    idx = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, idx, 1), idx


def ctk_clamps_k(queries, keys, k):
    return _cos(queries, keys, min(max(k, 1), len(keys)))


def ctk_float_indices(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("k")
    s, idx = _cos(queries, keys, k)
    return s, idx.astype(np.float64)


def ctk_in_place(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("k")
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return _cos(queries, keys, k)


def fr_key_error(model, head="classifier"):
    sub = dict(model.named_modules())[head]  # KeyError, not ValueError, for a missing head
    for p in model.parameters():
        p.requires_grad_(False)
    sub.requires_grad_(True)
    return sum(p.numel() for p in sub.parameters())


def ro_in_place(attentions, residual=True):
    a = attentions.mean(1)
    if residual:
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
    r = a[0]
    for layer in a[1:]:
        r = layer @ r
    attentions.zero_()
    return r


W = {w.name: w.fn for w in chk.WRONG_MEAN_POOL + chk.WRONG_COSINE_TOP_K + chk.WRONG_FREEZE + chk.WRONG_ROLLOUT}

PROMISES = [
    ("mean_pool", "padding is left out of the mean", W["padding averaged in"], "padding averaged in"),
    ("mean_pool", "divides by the number of real tokens", W["divided by the padded length"], "padded length"),
    ("mean_pool", "a row without real tokens gives zeros, not NaN", W["NaN for a row without real tokens"],
     "NaN for a row without real tokens"),
    ("mean_pool", "returns the plain mean, not normalised", W["L2-normalised"], "L2-normalised"),
    ("mean_pool", "any leading axes (..., T, d)", mp_three_dims_only, "two leading axes"),
    ("mean_pool", "keeps hidden's dtype", mp_always_float64, "expected torch.float32"),
    ("mean_pool", "inputs are not changed", mp_in_place, "changed its input"),
    ("mean_pool", "int, bool or float mask", mp_bool_breaks, "bool mask"),
    ("cosine_top_k", "cosine, not the raw dot product", W["unnormalised dot product"], "unnormalised dot product"),
    ("cosine_top_k", "best first", W["most dissimilar first"], "most dissimilar first"),
    ("cosine_top_k", "A zero vector has cosine 0 with everything", W["NaN for a zero vector"], "NaN for a zero vector"),
    ("cosine_top_k", "equal scores keep the smaller index first", W["ties broken by the larger index"],
     "ties broken by the larger index"),
    ("cosine_top_k", "k outside 1..N raises ValueError", ctk_clamps_k, "expected a ValueError"),
    ("cosine_top_k", "indices are integers", ctk_float_indices, "integer array"),
    ("cosine_top_k", "inputs are not changed", ctk_in_place, "changed its input"),
    ("freeze_for_probe", "freezes (requires_grad False), eval() is not enough",
     W["encoder not frozen (model.eval() does not freeze)"], "model.eval() does not freeze"),
    ("freeze_for_probe", "the head's parameters become trainable even if frozen before",
     W["head not switched back on"], "head not switched back on"),
    ("freeze_for_probe", "the head is the submodule, not a name prefix", W["name prefix without the dot"],
     "name prefix without the dot"),
    ("freeze_for_probe", "returns the number of scalar parameters", W["counted tensors, not elements"],
     "counted tensors, not elements"),
    ("freeze_for_probe", "a missing head raises ValueError", fr_key_error, "raise ValueError"),
    ("attention_rollout", "layers composed first to last", W["layers composed in the wrong order"], "wrong order"),
    ("attention_rollout", "residual stream as (A + I) / 2", W["residual stream ignored"], "residual stream ignored"),
    ("attention_rollout", "rows sum to 1", W["identity added without halving"], "without halving"),
    ("attention_rollout", "residual=False uses attention alone", W["residual flag ignored"], "residual flag ignored"),
    ("attention_rollout", "heads averaged", W["heads summed instead of averaged"], "heads summed"),
    ("attention_rollout", "inputs are not changed", ro_in_place, "changed its input"),
]


@pytest.mark.parametrize("exercise, promise, wrong, expected", PROMISES, ids=[p[1] for p in PROMISES])
def test_promise_is_checked(exercise, promise, wrong, expected):
    with pytest.raises(AssertionError) as info:
        CHECKS[exercise](wrong, hidden=False)
    assert expected in str(info.value), str(info.value)
