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

The hidden cases (the same builders below, with the judge's seeds and more shapes), the known wrong answers behind
these names and the exercises' declarations are the judge's (``course_lib/judge/clinical.py``), which the students'
and the grading kernel's editions leave out.

Which parameters freeze_for_probe froze is never read from the model object the student's
function was given (it can be shadowed: instance methods, a swapped ``__class__``). The check
takes the model's parameter tensors before the call, trains them for 5 SGD steps after it
through its own forward (autograd gives a frozen tensor no gradient), and records their
values; the verifier compares them with a model it builds itself from the same seed.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from course_lib import clinical as ref
from course_lib.checks import core
from course_lib.checks import gradients as _gradients
from course_lib.checks import transcript as _transcript
from course_lib.checks.core import (
    forbid,
    Case,
    assert_close,
    call_student,
    compare_with_reference,
    reference,
    seeded,
    to_numpy,
)

__all__ = [
    "check_mean_pool",
    "check_cosine_top_k",
    "check_freeze_for_probe",
    "check_attention_rollout",
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
def _lengths_mask(lengths, T, dtype):
    m = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T) True = real
    return m if dtype is torch.bool else m.to(dtype)


def _padded(rng, B, T, d, lengths, dtype):
    """hidden (B, T, d) drawn from ``rng`` and its mask; padding vectors are large, so leaking them shows."""
    h = _t(rng, B, T, d)
    m = _lengths_mask(lengths, T, dtype)
    h = torch.where(m.bool()[..., None], h, h * 50.0 + 20.0)
    return h, m


def mean_pool_cases_from(rng, more=None) -> list[Case]:
    """The mean_pool cases drawn from ``rng`` (three mask dtypes, a row of padding only, two leading axes), then
    ``more(rng)``'s."""
    cases = [
        Case("hidden (2, 5, 4), int mask, lengths 5 and 3", _padded(rng, 2, 5, 4, [5, 3], torch.int64)),
        Case("hidden (3, 4, 6), bool mask, lengths 4, 1 and 2", _padded(rng, 3, 4, 6, [4, 1, 2], torch.bool)),
        Case("hidden (2, 3, 2), float mask, second row all padding", _padded(rng, 2, 3, 2, [2, 0], torch.float64)),
    ]
    h, m = _padded(rng, 4, 5, 3, [5, 2, 3, 1], torch.int64)
    cases.append(Case("hidden (2, 2, 5, 3), two leading axes", (h.reshape(2, 2, 5, 3), m.reshape(2, 2, 5))))
    if more is not None:
        cases += more(rng)
    return cases


def _mp_cases() -> list[Case]:
    return mean_pool_cases_from(seeded(8))


def float32_case_from(rng) -> Case:
    """mean_pool's float32 case (the dtype promise), drawn from ``rng``."""
    h32 = torch.from_numpy(rng.normal(size=(2, 4, 3)).astype(np.float32))
    return Case("float32 hidden (2, 4, 3), int mask", (h32, _lengths_mask([4, 2], 4, torch.int64)))


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


@core.graded
def check_mean_pool(student, hidden: bool = False) -> None:
    """mean_pool equals the masked mean on several shapes and mask dtypes; dtype kept; inputs unchanged."""
    exercise = "mean_pool"
    cases = core.hidden_part(__name__).mean_pool_cases() if hidden else _mp_cases()
    compare_with_reference(student, ref.mean_pool, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "MEAN_POOL"), forbidden=FORBIDDEN_MEAN_POOL)
    case = core.hidden_part(__name__).float32_case() if hidden else float32_case_from(seeded(18))
    out = _check_unchanged(student, case, exercise, FORBIDDEN_MEAN_POOL)
    if not isinstance(out, torch.Tensor):
        raise AssertionError(f"{exercise}: expected a torch.Tensor on '{case.label}', got {type(out).__name__}")
    if out.dtype != torch.float32:
        raise AssertionError(f"{exercise}: on '{case.label}' the output is {out.dtype}, expected torch.float32 "
                             "(hidden's dtype): convert the mask to hidden's dtype, not the other way round.")


# ---------------------------------------------------------------- cosine_top_k
def _with_zero_row(x: np.ndarray, row: int) -> np.ndarray:
    x = x.copy()
    x[row] = 0.0
    return x


def scaled_from(rng, n, d):
    """(n, d) vectors drawn from ``rng``, rows of very different lengths."""
    return rng.normal(size=(n, d)) * rng.uniform(0.2, 5.0, size=(n, 1))


def cosine_cases_from(rng, more=None) -> list[Case]:
    """The cosine_top_k cases drawn from ``rng`` (lengths, ties, k = N, one query, zero vectors), then
    ``more(rng)``'s."""
    # integer-valued vectors: equal cosines are computed exactly equal, so ties are real ties
    base = rng.integers(-3, 4, size=(3, 4)).astype(float)
    base[np.all(base == 0, axis=1)] = 1.0
    tie_keys = np.concatenate([base[[0]], base[[1]], base[[0]], base[[2]], base[[1]], base[[0]]])
    tie_q = rng.integers(-3, 4, size=(3, 4)).astype(float)
    tie_q[np.all(tie_q == 0, axis=1)] = 1.0
    cases = [
        Case("4 queries, 6 keys of very different lengths, k=3", (scaled_from(rng, 4, 5), scaled_from(rng, 6, 5), 3)),
        Case("ties: 6 keys with repeated rows, k=4", (tie_q, tie_keys, 4)),
        Case("k = N = 5 (full ranking)", (scaled_from(rng, 2, 3), scaled_from(rng, 5, 3), 5)),
        Case("one query (1, 8), 7 keys, k=1", (scaled_from(rng, 1, 8), scaled_from(rng, 7, 8), 1)),
        Case("a zero key and a zero query (a zero vector has cosine 0 with everything), k=3",
             (_with_zero_row(scaled_from(rng, 3, 4), 1), _with_zero_row(scaled_from(rng, 5, 4), 2), 3)),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _ctk_cases() -> list[Case]:
    return cosine_cases_from(seeded(9))


def bad_k_cases_from(rng) -> list[Case]:
    """Two cases whose k is out of range (ValueError), drawn from ``rng``."""
    q, keys = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    return [Case("k = 5 with only 4 keys", (q, keys, 5)), Case("k = 0", (q, keys, 0))]


def _bad_k_cases() -> list[Case]:
    return bad_k_cases_from(seeded(19))


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


@core.graded
def check_cosine_top_k(student, hidden: bool = False) -> None:
    """cosine_top_k: scores and indices equal the reference (ties: smaller index first); bad k raises."""
    exercise = "cosine_top_k"
    cases = core.hidden_part(__name__).cosine_cases() if hidden else _ctk_cases()
    compare_with_reference(student, ref.cosine_top_k, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "COSINE_TOP_K"), forbidden=FORBIDDEN_COSINE,
                           output_names=("scores", "indices"))
    out = _check_unchanged(student, cases[0], exercise, FORBIDDEN_COSINE)
    idx = out[1] if isinstance(out, (tuple, list)) and len(out) == 2 else None
    kind = getattr(getattr(idx, "dtype", None), "kind", None)  # numpy dtypes; torch ones have no .kind
    if isinstance(idx, torch.Tensor):
        kind = "f" if idx.is_floating_point() or idx.dtype == torch.bool else "i"
    if kind not in ("i", "u"):
        raise AssertionError(f"{exercise}: return (scores, indices) with the indices as an integer array "
                             f"(got {getattr(idx, 'dtype', type(idx).__name__)}); they index rows of keys")
    for case in core.hidden_part(__name__).bad_k_cases() if hidden else _bad_k_cases():
        _expect_value_error(student, case, exercise, FORBIDDEN_COSINE)


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


def _fr_cases() -> list[Case]:
    return [Case("encoder 4 -> 8, head 'classifier' (8 -> 3)", (), {"seed": 8, "head": "classifier", "d_in": 4,
                                                                    "d": 8, "classes": 3}),
            Case("head called 'head' (5 -> 2)", (), {"seed": 9, "head": "head", "d_in": 3, "d": 5, "classes": 2})]


def _wrong_probe(wrong: core.Wrong, kw: dict):
    """A known wrong answer's (count, flags, names) on the probe model of ``kw`` (None when it raises), through
    ``transcript.wrong_value``: stored in the students' bundle, so stored mode names the same misconception."""
    try:
        return _transcript.wrong_value(wrong.name, lambda **k: _reference_probe(wrong.fn, **k), (), kw, key=wrong.key)
    except Exception:
        return None


@core.graded
def check_freeze_for_probe(student, hidden: bool = False) -> None:
    """Only the head's parameters require gradients; the count is right; 5 SGD steps lower the loss and leave
    the frozen parameters unchanged; a missing head raises ValueError.

    Which parameters are frozen is judged from what 5 SGD steps do to the parameter tensors the check took
    before the call, compared (by the verifier, when grading) with an untouched model it builds itself."""
    exercise = "freeze_for_probe"
    if student is ref.freeze_for_probe:
        raise AssertionError(f"{exercise}: your function is the reference implementation from course_lib itself")
    wrongs = core.wrongs(__name__, "FREEZE")
    for spec in core.hidden_part(__name__).freeze_cases() if hidden else _fr_cases():
        kw = spec.kwargs
        model = _ProbeModel(kw["seed"], kw["head"], kw["d_in"], kw["d"], kw["classes"])
        case = Case(spec.label, (model, kw["head"]))
        observed = call_student(student, case, exercise, FORBIDDEN_FREEZE, observe=_observe_probe(model, kw["seed"]))
        expected = reference(_reference_probe, ref.freeze_for_probe, **kw)
        if _transcript.mode() == "capture":  # the bundle stores every wrong answer's output too
            for wrong in wrongs:
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
            for wrong in wrongs:
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
def _attn(rng, L, H, T, scale=1.5):
    logits = rng.normal(size=(L, H, T, T)) * scale
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return torch.from_numpy(w / w.sum(-1, keepdims=True))


def rollout_cases_from(rng, more=None) -> list[Case]:
    """The attention_rollout cases drawn from ``rng``, then ``more(rng)``'s."""
    cases = [
        Case("3 layers, 4 heads, 5 tokens", (_attn(rng, 3, 4, 5),)),
        Case("2 layers, 2 heads, 4 tokens, residual=False", (_attn(rng, 2, 2, 4),), {"residual": False}),
        Case("4 layers, 3 heads, 3 tokens, near one-hot rows", (_attn(rng, 4, 3, 3, scale=6.0),)),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _ro_cases() -> list[Case]:
    return rollout_cases_from(seeded(10))


@core.graded
def check_attention_rollout(student, hidden: bool = False) -> None:
    """attention_rollout equals the reference (heads averaged, (A + I) / 2, layers composed first to last)."""
    exercise = "attention_rollout"
    cases = core.hidden_part(__name__).rollout_cases() if hidden else _ro_cases()
    compare_with_reference(student, ref.attention_rollout, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ROLLOUT"), forbidden=FORBIDDEN_ROLLOUT)
    out = _check_unchanged(student, cases[0], exercise, FORBIDDEN_ROLLOUT)
    if not hasattr(out, "sum") or getattr(out, "ndim", 0) != 2:
        raise AssertionError(f"{exercise}: expected a (T, T) tensor on '{cases[0].label}', got {type(out).__name__}")
    assert_close(out.sum(-1), np.ones(out.shape[0]),  # tolerance follows the answer's dtype
                 f"{exercise}: every row of the rollout sums to 1 ('{cases[0].label}')")
