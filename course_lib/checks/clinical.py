"""Checks for lesson 08 (clinical text with a pretrained encoder), with the misconceptions they name.

    check_mean_pool(mean_pool)                   # mean_pool(hidden, attention_mask)
    check_cosine_top_k(cosine_top_k)             # cosine_top_k(queries, keys, k)
    check_freeze_for_probe(freeze_for_probe)     # freeze_for_probe(model, head="classifier")
    check_attention_rollout(attention_rollout)   # attention_rollout(attentions, residual=True)

Named misconceptions
    mean_pool: padding averaged in; divided by the padded length; padding left in the sum
    (only the count masked); first token only ([CLS] pooling); L2-normalised; NaN for a
    row without real tokens.
    cosine_top_k: unnormalised dot product; keys not normalised; normalised over the wrong
    axis; most dissimilar first (ascending order); ties broken by the larger index
    (argsort(...)[::-1]).
    freeze_for_probe: encoder not frozen (model.eval() does not freeze); head frozen too;
    head not switched back on; name prefix without the dot (a parameter called
    ``classifier_scale`` is not part of ``classifier``); counted tensors, not elements;
    counted every parameter.
    attention_rollout: layers composed in the wrong order; residual stream ignored; identity
    added without halving (rows sum to 2); heads summed instead of averaged; residual flag
    ignored; last layer only.

None of these needs the pretrained model: every input is a small seeded tensor or model.
``hidden=True`` uses other, larger inputs.

Which parameters freeze_for_probe froze is never read from the model object the student's
function was given (it can be shadowed: instance methods, a swapped ``__class__``). The check
takes the model's parameter tensors before the call, trains them for 5 SGD steps after it
through its own forward (autograd gives a frozen tensor no gradient), and records their
values; the verifier compares them with a model it builds itself from the same seed.
"""
from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

from course_lib import clinical as ref
from course_lib.checks import gradients as _gradients
from course_lib.checks import transcript as _transcript
from course_lib.checks.core import (
    forbid,
    Case,
    Wrong,
    assert_close,
    call_student,
    compare_with_reference,
    reference,
    seeded,
    to_numpy,
)
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer  # noqa: F401

__all__ = [
    "check_mean_pool",
    "check_cosine_top_k",
    "check_freeze_for_probe",
    "check_attention_rollout",
    "WRONG_MEAN_POOL",
    "WRONG_COSINE_TOP_K",
    "WRONG_FREEZE",
    "WRONG_ROLLOUT",
]

FORBIDDEN_MEAN_POOL = ("course_lib.clinical.mean_pool", "course_lib.clinical.EncoderClassifier.forward",
                       "course_lib.pretrained._pool_normalise", "course_lib.pretrained.sentence_embeddings",
                       "course_lib.blocks.masked_mean")
FORBIDDEN_COSINE = forbid("course_lib.clinical.cosine_top_k", "course_lib.clinical.tfidf_vectors",
                    "torch.nn.functional.cosine_similarity", "torch.cosine_similarity")
FORBIDDEN_FREEZE = ("course_lib.clinical.freeze_for_probe",)
FORBIDDEN_ROLLOUT = ("course_lib.clinical.attention_rollout",)


def _t(rng, *shape, scale=1.0):
    return torch.from_numpy(rng.normal(size=shape) * scale)


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


def _lengths_mask(lengths, T, dtype):
    m = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T) True = real
    return m if dtype is torch.bool else m.to(dtype)


def _mp_cases(hidden: bool) -> list[Case]:
    rng = seeded(808 if hidden else 8)

    def padded(B, T, d, lengths, dtype):
        h = _t(rng, B, T, d)
        m = _lengths_mask(lengths, T, dtype)
        h = torch.where(m.bool()[..., None], h, h * 50.0 + 20.0)  # large padding vectors: leaking them shows
        return h, m

    cases = [
        Case("hidden (2, 5, 4), int mask, lengths 5 and 3", padded(2, 5, 4, [5, 3], torch.int64)),
        Case("hidden (3, 4, 6), bool mask, lengths 4, 1 and 2", padded(3, 4, 6, [4, 1, 2], torch.bool)),
        Case("hidden (2, 3, 2), float mask, second row all padding", padded(2, 3, 2, [2, 0], torch.float64)),
    ]
    h, m = padded(4, 5, 3, [5, 2, 3, 1], torch.int64)
    cases.append(Case("hidden (2, 2, 5, 3), two leading axes", (h.reshape(2, 2, 5, 3), m.reshape(2, 2, 5))))
    if hidden:
        cases += [
            Case("hidden (4, 9, 16), int mask, lengths 9, 1, 5, 0", padded(4, 9, 16, [9, 1, 5, 0], torch.int64)),
            Case("hidden (6, 3), no batch axis", (_t(rng, 6, 3), torch.tensor([1, 1, 1, 0, 0, 0]))),
            Case("hidden (3, 12, 384) as MiniLM's, bool mask", padded(3, 12, 384, [12, 7, 3], torch.bool)),
        ]
    return cases


def _inputs_after(case: Case):
    """observe= helper: the output plus the inputs as they are after the call (in-place changes show)."""
    def observe(out):
        snap = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else np.array(a, copy=True)
                     for a in case.args if isinstance(a, (torch.Tensor, np.ndarray)))
        return out, snap
    return observe


def _check_unchanged(student, case: Case, exercise: str, forbidden) -> object:
    """Call once more and check that the inputs are not modified in place; returns the output."""
    arrays = [(i, a) for i, a in enumerate(case.args) if isinstance(a, (torch.Tensor, np.ndarray))]
    originals = tuple(a.clone() if isinstance(a, torch.Tensor) else np.array(a, copy=True) for _, a in arrays)
    out, after = call_student(student, case, exercise, forbidden, observe=_inputs_after(case))
    for (i, _), before, now in zip(arrays, originals, after):
        if not np.array_equal(to_numpy(before), to_numpy(now), equal_nan=True):
            raise AssertionError(f"{exercise}: your function changed its input argument {i + 1} in place on "
                                 f"'{case.label}'; compute into new tensors/arrays (no +=, *=, out=, or "
                                 "in-place methods ending in _ on the inputs).")
    return out


def check_mean_pool(student, hidden: bool = False) -> None:
    """mean_pool equals the masked mean on several shapes and mask dtypes; dtype kept; inputs unchanged."""
    exercise = "mean_pool"
    cases = _mp_cases(hidden)
    compare_with_reference(student, ref.mean_pool, cases, exercise=exercise, wrongs=WRONG_MEAN_POOL,
                           forbidden=FORBIDDEN_MEAN_POOL)
    rng = seeded(818 if hidden else 18)
    h32 = torch.from_numpy(rng.normal(size=(2, 4, 3)).astype(np.float32))
    case = Case("float32 hidden (2, 4, 3), int mask", (h32, _lengths_mask([4, 2], 4, torch.int64)))
    out = _check_unchanged(student, case, exercise, FORBIDDEN_MEAN_POOL)
    if not isinstance(out, torch.Tensor):
        raise AssertionError(f"{exercise}: expected a torch.Tensor on '{case.label}', got {type(out).__name__}")
    if out.dtype != torch.float32:
        raise AssertionError(f"{exercise}: on '{case.label}' the output is {out.dtype}, expected torch.float32 "
                             "(hidden's dtype): convert the mask to hidden's dtype, not the other way round.")


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
                      "argsort(...)[:, ::-1] puts equal scores in reverse order (larger index first); the "
                      "docstring asks for the smaller key index first: a stable sort of the negated similarities keeps it."),
}
WRONG_COSINE_TOP_K = [Wrong(name, (lambda kd: lambda q, keys, k: _ctk(q, keys, k, kind=kd))(kind), msg)
                      for kind, (name, msg) in _CTK_MESSAGES.items()]


def _with_zero_row(x: np.ndarray, row: int) -> np.ndarray:
    x = x.copy()
    x[row] = 0.0
    return x


def _ctk_cases(hidden: bool) -> list[Case]:
    rng = seeded(909 if hidden else 9)

    def scaled(n, d):
        return rng.normal(size=(n, d)) * rng.uniform(0.2, 5.0, size=(n, 1))  # very different lengths

    # integer-valued vectors: equal cosines are computed exactly equal, so ties are real ties
    base = rng.integers(-3, 4, size=(3, 4)).astype(float)
    base[np.all(base == 0, axis=1)] = 1.0
    tie_keys = np.concatenate([base[[0]], base[[1]], base[[0]], base[[2]], base[[1]], base[[0]]])
    tie_q = rng.integers(-3, 4, size=(3, 4)).astype(float)
    tie_q[np.all(tie_q == 0, axis=1)] = 1.0
    cases = [
        Case("4 queries, 6 keys of very different lengths, k=3", (scaled(4, 5), scaled(6, 5), 3)),
        Case("ties: 6 keys with repeated rows, k=4", (tie_q, tie_keys, 4)),
        Case("k = N = 5 (full ranking)", (scaled(2, 3), scaled(5, 3), 5)),
        Case("one query (1, 8), 7 keys, k=1", (scaled(1, 8), scaled(7, 8), 1)),
        Case("a zero key and a zero query (a zero vector has cosine 0 with everything), k=3",
             (_with_zero_row(scaled(3, 4), 1), _with_zero_row(scaled(5, 4), 2), 3)),
    ]
    if hidden:
        tie_keys2 = np.repeat(rng.integers(-2, 3, size=(4, 6)).astype(float) + 0.5, 3, axis=0)
        cases += [
            Case("20 queries, 50 keys (d=16), k=5", (scaled(20, 16), scaled(50, 16), 5)),
            Case("ties: every key three times, k=6", (rng.integers(-2, 3, size=(3, 6)).astype(float) + 0.5,
                                                      tie_keys2, 6)),
            Case("384-dim vectors like MiniLM's, k=2", (scaled(3, 384), scaled(9, 384), 2)),
            Case("two zero keys and a zero query, k=7", (_with_zero_row(scaled(4, 6), 3),
                                                         _with_zero_row(_with_zero_row(scaled(8, 6), 0), 5), 7)),
        ]
    return cases


def _expect_value_error(student, case: Case, exercise: str, forbidden) -> None:
    try:
        out = call_student(student, case, exercise, forbidden)
    except AssertionError as failure:
        if isinstance(failure.__cause__, ValueError):
            return
        if failure.__cause__ is None:
            raise
        raise AssertionError(f"{exercise}: on '{case.label}' expected a ValueError (k must be between 1 and the "
                             f"number of keys), got {type(failure.__cause__).__name__}") from None
    raise AssertionError(f"{exercise}: on '{case.label}' expected a ValueError (k must be between 1 and the number "
                         f"of keys), but your function returned {type(out).__name__}")


def check_cosine_top_k(student, hidden: bool = False) -> None:
    """cosine_top_k: scores and indices equal the reference (ties: smaller index first); bad k raises."""
    exercise = "cosine_top_k"
    cases = _ctk_cases(hidden)
    compare_with_reference(student, ref.cosine_top_k, cases, exercise=exercise, wrongs=WRONG_COSINE_TOP_K,
                           forbidden=FORBIDDEN_COSINE, output_names=("scores", "indices"))
    out = _check_unchanged(student, cases[0], exercise, FORBIDDEN_COSINE)
    idx = out[1] if isinstance(out, (tuple, list)) and len(out) == 2 else None
    kind = getattr(getattr(idx, "dtype", None), "kind", None)  # numpy dtypes; torch ones have no .kind
    if isinstance(idx, torch.Tensor):
        kind = "f" if idx.is_floating_point() or idx.dtype == torch.bool else "i"
    if kind not in ("i", "u"):
        raise AssertionError(f"{exercise}: return (scores, indices) with the indices as an integer array "
                             f"(got {getattr(idx, 'dtype', type(idx).__name__)}); they index rows of keys")
    rng = seeded(919 if hidden else 19)
    q, keys = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    _expect_value_error(student, Case("k = 5 with only 4 keys", (q, keys, 5)), exercise, FORBIDDEN_COSINE)
    _expect_value_error(student, Case("k = 0", (q, keys, 0)), exercise, FORBIDDEN_COSINE)


# ---------------------------------------------------------------- freeze_for_probe
class _ProbeModel(nn.Module):
    """A tiny encoder + head, with a decoy parameter whose name starts with the head's name."""

    def __init__(self, seed: int, head: str, d_in: int, d: int, classes: int):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.encoder = nn.Sequential(nn.Linear(d_in, d), nn.LayerNorm(d), nn.Tanh(), nn.Linear(d, d))
            setattr(self, head, nn.Linear(d, classes))
            setattr(self, f"{head}_scale", nn.Parameter(torch.ones(d)))  # NOT part of the head
        self.head_name = head
        getattr(self, head).bias.requires_grad_(False)  # a head parameter that starts frozen
        self.double()

    def forward(self, x):
        return getattr(self, self.head_name)(self.encoder(x) * getattr(self, f"{self.head_name}_scale"))


def _probe_data(seed: int, n: int, d_in: int, classes: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g, dtype=torch.float64)
    y = torch.randint(0, classes, (n,), generator=g)
    return x, y


# torch's own function, bound when this module is imported (before any student cell runs): the check
# takes the model's parameter tensors through it BEFORE the student's call, never through attributes of
# the model object afterwards, which the student's function can shadow (``model.named_parameters = ...``)
_NAMED_PARAMETERS = nn.Module.named_parameters
PROBE_LR = 0.5
PROBE_STEPS = 5


def _probe_forward(p: dict, head: str, x: torch.Tensor) -> torch.Tensor:
    """_ProbeModel.forward written out on the check's own tensors (a shadowed model.forward is never called)."""
    h = nn.functional.linear(x, p["encoder.0.weight"], p["encoder.0.bias"])
    h = nn.functional.layer_norm(h, h.shape[-1:], p["encoder.1.weight"], p["encoder.1.bias"])
    h = nn.functional.linear(torch.tanh(h), p["encoder.3.weight"], p["encoder.3.bias"])
    return nn.functional.linear(h * p[f"{head}_scale"], p[f"{head}.weight"], p[f"{head}.bias"])


def _observe_probe(model: _ProbeModel, seed: int):
    """observe=: the parameter tensors are taken BEFORE the student's call; after it, the probe is trained
    for 5 SGD steps on them (autograd decides which get gradients: a frozen tensor gets none), and what
    is recorded is plain data the verifier judges against a model it builds itself:

    (count returned, parameter names, each parameter's value after the call, each after training).

    The model is left as it was: the training runs on copies of its tensors (a gradient hook on a parameter
    is refused, issue 57)."""
    params = list(_NAMED_PARAMETERS(model))
    head = model.head_name
    shapes = {name: tuple(p.shape) for name, p in params}
    d_in, classes = shapes["encoder.0.weight"][1], shapes[f"{head}.weight"][0]

    def observe(count):
        count_out = count if isinstance(count, (int, np.integer)) and not isinstance(count, bool) \
            else f"<{type(count).__name__}>"
        tensors = {name: p for name, p in params}
        hooked = [name for name, p in tensors.items() if _gradients.hooks_on(p)]
        if hooked:  # refused, never run: a hook that zeroes gradients would pass for a frozen parameter
            count_out = (f"<refused: a gradient hook on {', '.join(hooked[:4])}; freeze with "
                         "requires_grad_(False), never with hooks>")
        before = [p.detach().clone() for p in tensors.values()]
        # trained on fresh copies that require gradients exactly as the originals do (torch's own descriptor):
        # no hook, no grad_fn, nothing the student's call attached to the originals takes part
        copies = {name: b.clone().requires_grad_(bool(_gradients._REQUIRES_GRAD(p)))
                  for (name, p), b in zip(tensors.items(), before)}
        x, y = _probe_data(seed, 32, d_in, classes)
        for _ in range(PROBE_STEPS):
            for p in copies.values():
                p.grad = None
            with torch.enable_grad():
                loss = nn.functional.cross_entropy(_probe_forward(copies, head, x), y)
                if not loss.requires_grad:
                    break  # nothing trainable
                loss.backward()
            with torch.no_grad():
                for p in copies.values():
                    if p.grad is not None:
                        p.sub_(PROBE_LR * p.grad)
        after = [p.detach().clone() for p in copies.values()]
        return count_out, ",".join(tensors), before, after
    return observe


def _reference_probe(fn, seed: int, head: str, d_in: int, d: int, classes: int):
    model = _ProbeModel(seed, head, d_in, d, classes)
    return _observe_probe(model, seed)(fn(model, head))


def _untouched_probe(seed: int, head: str, d_in: int, d: int, classes: int):
    """The verifier's own model, never given to anyone: (parameter names, their values)."""
    params = list(_NAMED_PARAMETERS(_ProbeModel(seed, head, d_in, d, classes)))
    return ",".join(n for n, _ in params), [p.detach().clone() for _, p in params]


def _probe_summary(observed, untouched) -> tuple:
    """(count, names the training changed, names the student's call changed), from recorded values and
    the verifier's untouched model."""
    count, names, before, after = observed
    u_names, initial = untouched
    if names != u_names or len(before) != len(initial) or len(after) != len(initial):
        return count, "", "<the recorded parameters are not the model's>"
    trained, touched = [], []
    for name, b, a, x in zip(names.split(","), before, after, initial):
        b, a = torch.as_tensor(b), torch.as_tensor(a)
        if b.shape != x.shape or not torch.equal(b.to(x.dtype), x):
            touched.append(name)
        elif a.shape != x.shape or not torch.equal(a.to(x.dtype), x):
            trained.append(name)
    return count, ",".join(trained), ",".join(touched)


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


def _fr_cases(hidden: bool) -> list[Case]:
    if hidden:
        return [Case("encoder 7 -> 12, head 'classifier' (12 -> 5)", (), {"seed": 81, "head": "classifier",
                                                                          "d_in": 7, "d": 12, "classes": 5}),
                Case("head called 'probe' (6 -> 2)", (), {"seed": 82, "head": "probe", "d_in": 3, "d": 6,
                                                          "classes": 2})]
    return [Case("encoder 4 -> 8, head 'classifier' (8 -> 3)", (), {"seed": 8, "head": "classifier", "d_in": 4,
                                                                    "d": 8, "classes": 3}),
            Case("head called 'head' (5 -> 2)", (), {"seed": 9, "head": "head", "d_in": 3, "d": 5, "classes": 2})]


def _wrong_probe(wrong: Wrong, kw: dict):
    """A known wrong answer's (count, flags, names) on the probe model of ``kw`` (None when it raises), through
    ``transcript.wrong_value``: stored in the students' bundle, so stored mode names the same misconception."""
    try:
        return _transcript.wrong_value(wrong.name, lambda **k: _reference_probe(wrong.fn, **k), (), kw, key=wrong.key)
    except Exception:
        return None


def check_freeze_for_probe(student, hidden: bool = False) -> None:
    """Only the head's parameters require gradients; the count is right; 5 SGD steps lower the loss and leave
    the frozen parameters unchanged; a missing head raises ValueError.

    Which parameters are frozen is judged from what 5 SGD steps do to the parameter tensors the check took
    before the call, compared (by the verifier, when grading) with an untouched model it builds itself."""
    exercise = "freeze_for_probe"
    if student is ref.freeze_for_probe:
        raise AssertionError(f"{exercise}: your function is the reference implementation from course_lib itself")
    for spec in _fr_cases(hidden):
        kw = spec.kwargs
        model = _ProbeModel(kw["seed"], kw["head"], kw["d_in"], kw["d"], kw["classes"])
        case = Case(spec.label, (model, kw["head"]))
        observed = call_student(student, case, exercise, FORBIDDEN_FREEZE, observe=_observe_probe(model, kw["seed"]))
        expected = reference(_reference_probe, ref.freeze_for_probe, **kw)
        if _transcript.mode() == "capture":  # the bundle stores every wrong answer's output too
            for wrong in WRONG_FREEZE:
                _wrong_probe(wrong, kw)
        if _transcript.is_pending(expected):
            continue  # record mode: the verifier judges, outside the kernel
        untouched = reference(_untouched_probe, **kw)
        got, e_sum = _probe_summary(observed, untouched), _probe_summary(expected, untouched)
        count, trained, touched = got
        if touched:
            raise AssertionError(f"{exercise} on '{case.label}': your function changed the values of "
                                 f"{touched.split(',')[:4]}; freezing changes requires_grad, never the weights")
        if got != e_sum:
            for wrong in WRONG_FREEZE:
                w_out = _wrong_probe(wrong, kw)
                w = None if w_out is None else _probe_summary(w_out, untouched)
                if w == got and w != e_sum:
                    raise AssertionError(f"{exercise}: likely misconception '{wrong.name}': {wrong.message} "
                                         f"(input: {case.label})")
            if not trained:
                raise AssertionError(f"{exercise} on '{case.label}': no parameter requires gradients after your "
                                     "call, so nothing can train; the head must stay trainable.")
            if trained != e_sum[1]:
                should, did = set(e_sum[1].split(",")), set(trained.split(","))
                parts = ([f"5 SGD steps changed {', '.join(sorted(did - should))}, which must stay frozen"]
                         if did - should else []) + \
                        ([f"they left {', '.join(sorted(should - did))} unchanged, which should train"]
                         if should - did else [])
                raise AssertionError(
                    f"{exercise} on '{case.label}': requires_grad is wrong for "
                    f"{', '.join(sorted((did - should) | (should - did)))}: {'; '.join(parts)} (only the parameters "
                    f"of model.{kw['head']} should require gradients)")
            raise AssertionError(f"{exercise} on '{case.label}': returned {count!r}, expected the number of "
                                 f"trainable scalar parameters, {e_sum[0]}")
        # the right parameters trained: their values after 5 steps are the reference's (the loss went down)
        names = observed[1].split(",")
        for name, a, e in zip(names, observed[3], expected[3]):
            if name in trained.split(",") and not torch.allclose(torch.as_tensor(a).double(), e.double(),
                                                                 rtol=1e-6, atol=1e-9):
                raise AssertionError(f"{exercise} on '{case.label}': 5 SGD steps on the trainable parameters did "
                                     f"not give the expected value of {name}")
    model = _ProbeModel(7, "classifier", 3, 4, 2)
    try:
        out = call_student(student, Case("head 'decoder' does not exist", (model, "decoder")), exercise,
                           FORBIDDEN_FREEZE, observe=lambda c: c if isinstance(c, (int, np.integer)) else repr(c))
    except AssertionError as failure:
        if isinstance(failure.__cause__, (ValueError, AttributeError, KeyError)):
            if not isinstance(failure.__cause__, ValueError):
                raise AssertionError(f"{exercise}: with a head name the model does not have, raise ValueError "
                                     f"(yours raised {type(failure.__cause__).__name__})") from None
            return
        raise
    raise AssertionError(f"{exercise}: with a head name the model does not have ('decoder'), expected a ValueError, "
                         f"your function returned {out!r}")


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


def _attn(rng, L, H, T, scale=1.5):
    logits = rng.normal(size=(L, H, T, T)) * scale
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return torch.from_numpy(w / w.sum(-1, keepdims=True))


def _ro_cases(hidden: bool) -> list[Case]:
    rng = seeded(1010 if hidden else 10)
    cases = [
        Case("3 layers, 4 heads, 5 tokens", (_attn(rng, 3, 4, 5),)),
        Case("2 layers, 2 heads, 4 tokens, residual=False", (_attn(rng, 2, 2, 4),), {"residual": False}),
        Case("4 layers, 3 heads, 3 tokens, near one-hot rows", (_attn(rng, 4, 3, 3, scale=6.0),)),
    ]
    if hidden:
        cases += [
            Case("6 layers, 12 heads, 7 tokens (MiniLM's shape)", (_attn(rng, 6, 12, 7),)),
            Case("1 layer, 1 head, 2 tokens", (_attn(rng, 1, 1, 2),)),
            Case("5 layers, 2 heads, 6 tokens, residual=False", (_attn(rng, 5, 2, 6),), {"residual": False}),
        ]
    return cases


def check_attention_rollout(student, hidden: bool = False) -> None:
    """attention_rollout equals the reference (heads averaged, (A + I) / 2, layers composed first to last)."""
    exercise = "attention_rollout"
    cases = _ro_cases(hidden)
    compare_with_reference(student, ref.attention_rollout, cases, exercise=exercise, wrongs=WRONG_ROLLOUT,
                           forbidden=FORBIDDEN_ROLLOUT)
    out = _check_unchanged(student, cases[0], exercise, FORBIDDEN_ROLLOUT)
    if not hasattr(out, "sum") or getattr(out, "ndim", 0) != 2:
        raise AssertionError(f"{exercise}: expected a (T, T) tensor on '{cases[0].label}', got {type(out).__name__}")
    assert_close(out.sum(-1), np.ones(out.shape[0]),  # tolerance follows the answer's dtype
                 f"{exercise}: every row of the rollout sums to 1 ('{cases[0].label}')")


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
# written independently of course_lib.clinical; the students' and the kernel's editions replace each by a stub
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


# ---------------------------------------------------------------- answers that break one promise each
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


def _breaks_fr_key_error(model, head="classifier"):
    sub = dict(model.named_modules())[head]  # KeyError, not ValueError, for a missing head
    for p in model.parameters():
        p.requires_grad_(False)
    sub.requires_grad_(True)
    return sum(p.numel() for p in sub.parameters())


def _breaks_ro_in_place(attentions, residual=True):
    a = attentions.mean(1)
    if residual:
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
    r = a[0]
    for layer in a[1:]:
        r = layer @ r
    attentions.zero_()
    return r


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("08_clinical_text", "mean_pool", check_mean_pool,
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
            right=(Right(_right_mean_pool_einsum), Right(_right_mean_pool_float32), Right(_right_mean_pool_loop))),
    declare("08_clinical_text", "cosine_top_k", check_cosine_top_k,
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
            right=(Right(_right_cosine_lexsort), Right(_right_cosine_float32), Right(_right_cosine_loop))),
    declare("08_clinical_text", "freeze_for_probe", check_freeze_for_probe,
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
            right=(Right(_right_freeze_dot_prefix), Right(_right_freeze_module_api), Right(_right_freeze_by_ids))),
    declare("08_clinical_text", "attention_rollout", check_attention_rollout,
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
            right=(Right(_right_rollout_float32), Right(_right_rollout_multi_dot), Right(_right_rollout_reduce))),
)
