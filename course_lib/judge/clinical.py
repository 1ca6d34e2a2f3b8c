"""The judge's material of ``course_lib.checks.clinical`` (see :mod:`course_lib.judge`): per exercise, its hidden
cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.

The hidden cases are drawn by the checks module's own builders (``*_cases_from``) from the judge's seeds, with more
shapes appended.
"""
from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.clinical import (
    _attn,
    _padded,
    _t,
    _with_zero_row,
    bad_k_cases_from,
    check_attention_rollout,
    check_cosine_top_k,
    check_freeze_for_probe,
    check_mean_pool,
    cosine_cases_from,
    float32_case_from,
    mean_pool_cases_from,
    rollout_cases_from,
    scaled_from,
)


# ---------------------------------------------------------------- mean_pool
def _mp(hidden, mask, *, kind):
    m = mask.to(hidden.dtype).unsqueeze(-1)
    if kind == "all":
        return hidden.mean(dim=-2)
    if kind == "padded length":
        return (hidden * m).sum(dim=-2) / hidden.shape[-2]
    if kind == "count only":
        return hidden.sum(dim=-2) / m.sum(dim=-2).clamp(min=1.0)
    if kind == "first":
        return hidden[..., 0, :]
    if kind == "normalised":
        return nn.functional.normalize((hidden * m).sum(dim=-2) / m.sum(dim=-2).clamp(min=1.0), dim=-1)
    if kind == "nan":
        return (hidden * m).sum(dim=-2) / m.sum(dim=-2)
    raise ValueError(kind)


_MP_MESSAGES = {
    "all": ("padding averaged in",
            "you averaged over every position, padding included; multiply by the mask before summing and "
            "divide by the number of REAL tokens: (hidden * mask[..., None]).sum(-2) / mask.sum(-1, keepdim=True)."),
    "padded length": ("divided by the padded length",
                      "the sum is masked, but you divided by T (the padded length); divide by the number of real "
                      "tokens of each row, mask.sum(-1, keepdim=True)."),
    "count only": ("padding left in the sum",
                   "you divided by the number of real tokens but summed over all positions; padding vectors must "
                   "be multiplied by 0 before the sum."),
    "first": ("first token only ([CLS] pooling)",
              "you returned the first token's vector ([CLS] pooling); mean pooling averages all real tokens."),
    "normalised": ("L2-normalised",
                   "mean_pool returns the plain mean; the model card normalises afterwards, as a separate step "
                   "(F.normalize(mean_pool(h, m), dim=-1))."),
    "nan": ("NaN for a row without real tokens",
            "a row whose mask is all 0 divides 0 by 0; clamp the count to at least 1 (count.clamp(min=1)) so "
            "that row gives zeros."),
}


WRONG_MEAN_POOL = [Wrong(name, (lambda k: lambda h, m: _mp(h, m, kind=k))(kind), msg)
                   for kind, (name, msg) in _MP_MESSAGES.items()]


def _more_mean_pool_cases(rng) -> list[Case]:
    return [
        Case("hidden (4, 9, 16), int mask, lengths 9, 1, 5, 0", _padded(rng, 4, 9, 16, [9, 1, 5, 0], torch.int64)),
        Case("hidden (6, 3), no batch axis", (_t(rng, 6, 3), torch.tensor([1, 1, 1, 0, 0, 0]))),
        Case("hidden (3, 12, 384) as MiniLM's, bool mask", _padded(rng, 3, 12, 384, [12, 7, 3], torch.bool)),
    ]


def mean_pool_cases() -> list[Case]:
    """The hidden cases of ``check_mean_pool``."""
    return mean_pool_cases_from(seeded(808), _more_mean_pool_cases)


def float32_case() -> Case:
    """The hidden test's float32 case of ``check_mean_pool``."""
    return float32_case_from(seeded(818))


def _right_mean_pool_einsum(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype)
    return torch.einsum("...td,...t->...d", hidden, m) / m.sum(-1, keepdim=True).clamp(min=1)


def _right_mean_pool_float32(hidden, attention_mask):
    h = hidden.float()
    keep = attention_mask.bool().unsqueeze(-1)
    total = torch.where(keep, h, torch.zeros((), dtype=torch.float32)).sum(-2)
    return total / keep.sum(-2).clamp(min=1).float()


def _right_mean_pool_loop(hidden, attention_mask):
    flat_h = hidden.reshape(-1, *hidden.shape[-2:])
    flat_m = attention_mask.reshape(-1, attention_mask.shape[-1]).bool()
    rows = [h[m].mean(0) if m.any() else torch.zeros(h.shape[-1], dtype=h.dtype) for h, m in zip(flat_h, flat_m)]
    return torch.stack(rows).reshape(*hidden.shape[:-2], hidden.shape[-1])


def _breaks_masked_mean(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(-2) / m.sum(-2).clamp(min=1)


def _breaks_mp_always_float64(hidden, attention_mask):
    return _breaks_masked_mean(hidden.double(), attention_mask)


def _breaks_mp_three_dims_only(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype)
    return (hidden * m[:, :, None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)


def _breaks_mp_in_place(hidden, attention_mask):
    hidden.mul_(attention_mask.to(hidden.dtype).unsqueeze(-1))
    return hidden.sum(-2) / attention_mask.to(hidden.dtype).sum(-1, keepdim=True).clamp(min=1)


def _breaks_mp_bool_mask(hidden, attention_mask):
    pad = 1 - attention_mask  # fails on a bool mask
    return _breaks_masked_mean(hidden, 1 - pad)


MEAN_POOL = declare("08_clinical_text", "mean_pool", check_mean_pool,
            misconceptions=WRONG_MEAN_POOL,
            promises=(
                Breaks("padding is left out of the mean", wrong_answer(WRONG_MEAN_POOL, "padding averaged in"),
                       "padding averaged in", hidden=False),
                Breaks("divides by the number of real tokens",
                       wrong_answer(WRONG_MEAN_POOL, "divided by the padded length"), "padded length", hidden=False),
                Breaks("a row without real tokens gives zeros, not NaN",
                       wrong_answer(WRONG_MEAN_POOL, "NaN for a row without real tokens"),
                       "NaN for a row without real tokens", hidden=False),
                Breaks("returns the plain mean, not normalised", wrong_answer(WRONG_MEAN_POOL, "L2-normalised"),
                       "L2-normalised", hidden=False),
                Breaks("any leading axes (..., T, d)", _breaks_mp_three_dims_only, "two leading axes", hidden=False),
                Breaks("keeps hidden's dtype", _breaks_mp_always_float64, "expected torch.float32", hidden=False),
                Breaks("inputs are not changed", _breaks_mp_in_place, "changed its input", hidden=False),
                Breaks("int, bool or float mask", _breaks_mp_bool_mask, "bool mask", hidden=False),
            ),
            right=(Right(_right_mean_pool_einsum), Right(_right_mean_pool_float32), Right(_right_mean_pool_loop)))


# ---------------------------------------------------------------- cosine_top_k
def _unit(x, axis=-1):
    return x / np.maximum(np.linalg.norm(x, axis=axis, keepdims=True), 1e-12)


def _ctk(q, keys, k, *, kind):
    q, keys = np.asarray(q, dtype=float), np.asarray(keys, dtype=float)
    if kind == "dot":
        s = q @ keys.T
    elif kind == "keys raw":
        s = _unit(q) @ keys.T
    elif kind == "axis":
        s = _unit(q, 0) @ _unit(keys, 0).T
    elif kind == "zero norm":
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ (keys / np.linalg.norm(keys, axis=-1,
                                                                                          keepdims=True)).T
    else:
        s = _unit(q) @ _unit(keys).T
    if kind == "ascending":
        idx = np.argsort(s, axis=-1, kind="stable")[:, :k]
    elif kind == "reversed ties":
        idx = np.argsort(s, axis=-1, kind="stable")[:, ::-1][:, :k]
    else:
        idx = np.argsort(-s, axis=-1, kind="stable")[:, :k]
    return np.take_along_axis(s, idx, axis=-1), idx


_CTK_MESSAGES = {
    "dot": ("unnormalised dot product",
            "you ranked by the plain dot product q . k, which favours long vectors; cosine similarity divides by "
            "both norms: (q / |q|) . (k / |k|)."),
    "keys raw": ("keys not normalised",
                 "the queries are normalised but the keys are not; divide each key by its own norm too."),
    "axis": ("normalised over the wrong axis",
             "each vector (each ROW) is divided by its own norm, taken along the last axis; "
             "you normalised the columns (axis=0)."),
    "ascending": ("most dissimilar first",
                  "the best match comes first: sort the similarities in DECREASING order "
                  "(argsort sorts ascending: sort the negated similarities, with a stable sort)."),
    "zero norm": ("NaN for a zero vector",
                  "a zero vector (the embedding of an empty note, a padding row) has norm 0, so x / |x| is 0 / 0 = "
                  "NaN, and a NaN similarity sorts anywhere; the docstring says a zero vector has cosine 0 with "
                  "everything: divide by np.maximum(norm, 1e-12) instead of the bare norm."),
    "reversed ties": ("ties broken by the larger index",
                      "argsort(...)[:, ::-1] puts tied scores in reverse order (larger index first); the "
                      "docstring asks for the smaller key index first: a stable sort of the negated similarities keeps it."),
}


WRONG_COSINE_TOP_K = [Wrong(name, (lambda kd: lambda q, keys, k: _ctk(q, keys, k, kind=kd))(kind), msg)
                      for kind, (name, msg) in _CTK_MESSAGES.items()]


def _more_cosine_cases(rng) -> list[Case]:
    tie_keys2 = np.repeat(rng.integers(-2, 3, size=(4, 6)).astype(float) + 0.5, 3, axis=0)
    return [
        Case("20 queries, 50 keys (d=16), k=5", (scaled_from(rng, 20, 16), scaled_from(rng, 50, 16), 5)),
        Case("ties: every key three times, k=6", (rng.integers(-2, 3, size=(3, 6)).astype(float) + 0.5,
                                                  tie_keys2, 6)),
        Case("384-dim vectors like MiniLM's, k=2", (scaled_from(rng, 3, 384), scaled_from(rng, 9, 384), 2)),
        Case("two zero keys and a zero query, k=7", (_with_zero_row(scaled_from(rng, 4, 6), 3),
                                                     _with_zero_row(_with_zero_row(scaled_from(rng, 8, 6), 0), 5), 7)),
    ]


def cosine_cases() -> list[Case]:
    """The hidden cases of ``check_cosine_top_k``."""
    return cosine_cases_from(seeded(909), _more_cosine_cases)


def bad_k_cases() -> list[Case]:
    """The hidden test's out-of-range k cases of ``check_cosine_top_k``."""
    return bad_k_cases_from(seeded(919))


def _right_cosine_lexsort(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("bad k")
    qn = queries / np.clip(np.sqrt(np.einsum("qd,qd->q", queries, queries))[:, None], 1e-12, None)
    kn = keys / np.clip(np.sqrt(np.einsum("nd,nd->n", keys, keys))[:, None], 1e-12, None)
    s = np.einsum("qd,nd->qn", qn, kn)
    idx = np.stack([np.lexsort((np.arange(len(keys)), -row))[:k] for row in s])
    return np.take_along_axis(s, idx, 1), idx


def _right_cosine_float32(queries, keys, k):
    if k < 1 or k > keys.shape[0]:
        raise ValueError("bad k")
    q = queries.astype(np.float32)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), np.float32(1e-12))
    kk = keys.astype(np.float32)
    kk = kk / np.maximum(np.linalg.norm(kk, axis=1, keepdims=True), np.float32(1e-12))
    s = q @ kk.T
    idx = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, idx, 1), idx


def _right_cosine_loop(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("bad k")
    scores, idxs = [], []
    for q in queries:
        sims = [float(q @ key) / max(float(np.linalg.norm(q) * np.linalg.norm(key)), 1e-300) for key in keys]
        order = sorted(range(len(keys)), key=lambda j: (-sims[j], j))[:k]
        scores.append([sims[j] for j in order])
        idxs.append(order)
    return np.array(scores), np.array(idxs, dtype=np.int64)


def _breaks_cosine_sorted(queries, keys, k):
    qn = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    kn = keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)
    s = qn @ kn.T
    idx = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, idx, 1), idx


def _breaks_ctk_clamps_k(queries, keys, k):
    return _breaks_cosine_sorted(queries, keys, min(max(k, 1), len(keys)))


def _breaks_ctk_float_indices(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("k")
    s, idx = _breaks_cosine_sorted(queries, keys, k)
    return s, idx.astype(np.float64)


def _breaks_ctk_in_place(queries, keys, k):
    if not 1 <= k <= len(keys):
        raise ValueError("k")
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return _breaks_cosine_sorted(queries, keys, k)


COSINE_TOP_K = declare("08_clinical_text", "cosine_top_k", check_cosine_top_k,
            misconceptions=WRONG_COSINE_TOP_K,
            promises=(
                Breaks("cosine, not the raw dot product", wrong_answer(WRONG_COSINE_TOP_K, "unnormalised dot product"),
                       "unnormalised dot product", hidden=False),
                Breaks("best first", wrong_answer(WRONG_COSINE_TOP_K, "most dissimilar first"),
                       "most dissimilar first", hidden=False),
                Breaks("A zero vector has cosine 0 with everything",
                       wrong_answer(WRONG_COSINE_TOP_K, "NaN for a zero vector"), "NaN for a zero vector",
                       hidden=False),
                Breaks("equal scores keep the smaller index first",
                       wrong_answer(WRONG_COSINE_TOP_K, "ties broken by the larger index"),
                       "ties broken by the larger index", hidden=False),
                Breaks("k outside 1..N raises ValueError", _breaks_ctk_clamps_k, "expected a ValueError",
                       hidden=False),
                Breaks("indices are integers", _breaks_ctk_float_indices, "integer array", hidden=False),
                Breaks("inputs are not changed", _breaks_ctk_in_place, "changed its input", hidden=False),
            ),
            right=(Right(_right_cosine_lexsort), Right(_right_cosine_float32), Right(_right_cosine_loop)))


# ---------------------------------------------------------------- freeze_for_probe
def _fr_eval(model, head="classifier"):
    model.eval()
    return sum(p.numel() for p in getattr(model, head).parameters())


def _fr_all(model, head="classifier"):
    for p in model.parameters():
        p.requires_grad_(False)
    return 0


def _fr_not_on(model, head="classifier"):
    keep = {id(p) for p in getattr(model, head).parameters()}
    for p in model.parameters():
        if id(p) not in keep:
            p.requires_grad_(False)
    return sum(p.numel() for p in getattr(model, head).parameters() if p.requires_grad)


def _fr_prefix(model, head="classifier"):
    n = 0
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(head))
        n += p.numel() if name.startswith(head) else 0
    return n


def _fr_tensors(model, head="classifier"):
    keep = {id(p) for p in getattr(model, head).parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) in keep)
    return len(keep)


def _fr_total(model, head="classifier"):
    keep = {id(p) for p in getattr(model, head).parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) in keep)
    return sum(p.numel() for p in model.parameters())


WRONG_FREEZE = [
    Wrong("encoder not frozen (model.eval() does not freeze)", _fr_eval,
          "every encoder parameter still has requires_grad=True, so an optimiser would change the encoder. "
          "model.eval() only switches dropout and batch-norm behaviour; set p.requires_grad_(False) on each "
          "parameter outside the head."),
    Wrong("head frozen too", _fr_all,
          "nothing is left to train: the head's parameters must keep (or get) requires_grad=True."),
    Wrong("head not switched back on", _fr_not_on,
          "a head parameter that was frozen before the call is still frozen; set requires_grad_(True) on every "
          "parameter of model.<head>, not only leave it alone."),
    Wrong("name prefix without the dot", _fr_prefix,
          "you kept every parameter whose NAME starts with the head's name, which also catches a parameter "
          "such as 'classifier_scale' that is not in the head; use the submodule itself, "
          "getattr(model, head).parameters() (or names starting with head + '.')."),
    Wrong("counted tensors, not elements", _fr_tensors,
          "the flags are right but the count is the number of parameter TENSORS; return the number of trainable "
          "scalar parameters, sum(p.numel() for p in ... if p.requires_grad)."),
    Wrong("counted every parameter", _fr_total,
          "the flags are right but you returned the size of the whole model; count only the trainable ones."),
]


def freeze_cases() -> list[Case]:
    """The hidden cases of ``check_freeze_for_probe`` (the probe model's seed and sizes, the head's name)."""
    return [Case("encoder 7 -> 12, head 'classifier' (12 -> 5)", (), {"seed": 81, "head": "classifier",
                                                                      "d_in": 7, "d": 12, "classes": 5}),
            Case("head called 'probe' (6 -> 2)", (), {"seed": 82, "head": "probe", "d_in": 3, "d": 6,
                                                      "classes": 2})]


def _right_freeze_dot_prefix(model, head="classifier"):
    if not isinstance(getattr(model, head, None), nn.Module):
        raise ValueError(f"no submodule {head}")
    n = 0
    for name, p in model.named_parameters():
        keep = name.startswith(head + ".")
        p.requires_grad = keep
        n += p.numel() if keep else 0
    return n


def _right_freeze_module_api(model, head="classifier"):
    try:
        sub = model.get_submodule(head)
    except AttributeError as err:
        raise ValueError(str(err)) from None
    model.requires_grad_(False)
    sub.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _right_freeze_by_ids(model, head="classifier"):
    modules = dict(model.named_modules())
    if head not in modules:
        raise ValueError(head)
    ids = set(map(id, modules[head].parameters()))
    total = 0
    for p in model.parameters():
        p.requires_grad_(id(p) in ids)
        total += p.numel() * (id(p) in ids)
    return int(total)


def _breaks_fr_key_error(model, head="classifier"):
    sub = dict(model.named_modules())[head]  # KeyError, not ValueError, for a missing head
    for p in model.parameters():
        p.requires_grad_(False)
    sub.requires_grad_(True)
    return sum(p.numel() for p in sub.parameters())


FREEZE_FOR_PROBE = declare("08_clinical_text", "freeze_for_probe", check_freeze_for_probe,
            misconceptions=WRONG_FREEZE,
            promises=(
                Breaks("freezes (requires_grad False), eval() is not enough",
                       wrong_answer(WRONG_FREEZE, "encoder not frozen (model.eval() does not freeze)"),
                       "model.eval() does not freeze", hidden=False),
                Breaks("the head's parameters become trainable even if frozen before",
                       wrong_answer(WRONG_FREEZE, "head not switched back on"), "head not switched back on",
                       hidden=False),
                Breaks("the head is the submodule, not a name prefix",
                       wrong_answer(WRONG_FREEZE, "name prefix without the dot"), "name prefix without the dot",
                       hidden=False),
                Breaks("returns the number of scalar parameters",
                       wrong_answer(WRONG_FREEZE, "counted tensors, not elements"), "counted tensors, not elements",
                       hidden=False),
                Breaks("a missing head raises ValueError", _breaks_fr_key_error, "raise ValueError", hidden=False),
            ),
            right=(Right(_right_freeze_dot_prefix), Right(_right_freeze_module_api), Right(_right_freeze_by_ids)))


# ---------------------------------------------------------------- attention_rollout
def _ro(att, residual=True, *, kind):
    a = att.sum(dim=1) if kind == "sum heads" else att.mean(dim=1)
    eye = torch.eye(a.shape[-1], dtype=a.dtype)
    if kind == "no residual":
        residual = False
    if kind == "always residual":
        residual = True
    if residual:
        a = a + eye if kind == "no half" else 0.5 * a + 0.5 * eye
    if kind == "last only":
        return a[-1]
    r = a[0]
    for layer in a[1:]:
        r = r @ layer if kind == "order" else layer @ r
    return r


_RO_MESSAGES = {
    "order": ("layers composed in the wrong order",
              "the first layer acts first, so later layers multiply from the LEFT: R = A_L @ ... @ A_2 @ A_1 "
              "(rollout = layer @ rollout in the loop), not rollout @ layer."),
    "no residual": ("residual stream ignored",
                    "with residual=True each layer's mixing is (A + I) / 2: half of every token's vector comes "
                    "through the skip connection unchanged."),
    "no half": ("identity added without halving",
                "A + I has rows that sum to 2; use 0.5 * A + 0.5 * I so every row still sums to 1."),
    "sum heads": ("heads summed instead of averaged",
                  "average the heads (mean over axis 1); a sum has rows that sum to H, not 1."),
    "always residual": ("residual flag ignored",
                        "with residual=False use the head-averaged attention alone, without the identity."),
    "last only": ("last layer only",
                  "rollout composes EVERY layer (a product of L matrices), not only the last one."),
}


WRONG_ROLLOUT = [Wrong(name, (lambda k: lambda att, residual=True: _ro(att, residual, kind=k))(kind), msg)
                 for kind, (name, msg) in _RO_MESSAGES.items()]


def _more_rollout_cases(rng) -> list[Case]:
    return [
        Case("6 layers, 12 heads, 7 tokens (MiniLM's shape)", (_attn(rng, 6, 12, 7),)),
        Case("1 layer, 1 head, 2 tokens", (_attn(rng, 1, 1, 2),)),
        Case("5 layers, 2 heads, 6 tokens, residual=False", (_attn(rng, 5, 2, 6),), {"residual": False}),
    ]


def rollout_cases() -> list[Case]:
    """The hidden cases of ``check_attention_rollout``."""
    return rollout_cases_from(seeded(1010), _more_rollout_cases)


def _right_rollout_float32(attentions, residual=True):
    a = attentions.float().mean(1)
    if residual:
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
    r = a[0]
    for layer in a[1:]:
        r = layer @ r
    return r


def _right_rollout_multi_dot(attentions, residual=True):
    mats = list(attentions.mean(1).unbind(0))
    if residual:
        eye = torch.eye(mats[0].shape[-1], dtype=mats[0].dtype)
        mats = [(m + eye) / (m + eye).sum(-1, keepdim=True) for m in mats]
    return mats[0] if len(mats) == 1 else torch.linalg.multi_dot(mats[::-1])


def _right_rollout_reduce(attentions, residual=True):
    L, H, T, _ = attentions.shape
    mixed = attentions.sum(1) / H
    if residual:
        mixed = (mixed + torch.eye(T, dtype=mixed.dtype)) / 2
    return functools.reduce(lambda acc, layer: layer @ acc, mixed[1:], mixed[0])


def _breaks_ro_in_place(attentions, residual=True):
    a = attentions.mean(1)
    if residual:
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
    r = a[0]
    for layer in a[1:]:
        r = layer @ r
    attentions.zero_()
    return r


ATTENTION_ROLLOUT = declare("08_clinical_text", "attention_rollout", check_attention_rollout,
            misconceptions=WRONG_ROLLOUT,
            promises=(
                Breaks("layers composed first to last",
                       wrong_answer(WRONG_ROLLOUT, "layers composed in the wrong order"), "wrong order", hidden=False),
                Breaks("residual stream as (A + I) / 2", wrong_answer(WRONG_ROLLOUT, "residual stream ignored"),
                       "residual stream ignored", hidden=False),
                Breaks("rows sum to 1", wrong_answer(WRONG_ROLLOUT, "identity added without halving"),
                       "without halving", hidden=False),
                Breaks("residual=False uses attention alone", wrong_answer(WRONG_ROLLOUT, "residual flag ignored"),
                       "residual flag ignored", hidden=False),
                Breaks("heads averaged", wrong_answer(WRONG_ROLLOUT, "heads summed instead of averaged"),
                       "heads summed", hidden=False),
                Breaks("inputs are not changed", _breaks_ro_in_place, "changed its input", hidden=False),
            ),
            right=(Right(_right_rollout_float32), Right(_right_rollout_multi_dot), Right(_right_rollout_reduce)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (MEAN_POOL, COSINE_TOP_K, FREEZE_FOR_PROBE, ATTENTION_ROLLOUT)
