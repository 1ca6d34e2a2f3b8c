"""Checks for lesson 09 (instruction prompt tuning of a frozen LM), with the misconceptions they name.

    check_prepend_soft_prompt(prepend_soft_prompt)      # (input_embeds, attention_mask, prompt) -> (embeds, mask)
    check_answer_only_labels(answer_only_labels)        # (input_ids, attention_mask, prompt_len, answer_start)
    check_option_log_likelihood(option_log_likelihood)  # (logits, labels, normalise=False) -> (B,)
    check_freeze_model(freeze_model)                    # (model) -> number of parameters

Named misconceptions
    prepend_soft_prompt: prompt appended after the tokens; attention mask not extended;
    prompt positions masked out.
    answer_only_labels: labels shifted here (the loss shifts them again); soft-prompt positions
    left out; question tokens trained on; padding trained on; answer start off by one;
    0 instead of -100 for ignored positions.
    option_log_likelihood: no shift by one; raw logits instead of log-probabilities;
    probabilities instead of log-probabilities; ignored (-100) positions scored; mean over all
    positions instead of the scored ones; normalise ignored; softmax over the wrong axis.
    freeze_model: tied weights counted twice; buffers counted as parameters; left in training
    mode; output layer left trainable; ``model.requires_grad = False`` (sets an attribute, freezes nothing).

Everything runs on small tensors and on tiny randomly initialised ``LlamaForCausalLM`` models
(the class of the lesson's SmolLM2), never on the 135M-parameter model, so a check takes
well under a second.

freeze_model's "frozen" is never read from the model object the student's function was given
(it can be shadowed). The check takes the parameter tensors and modules before the call (with
torch's own ``nn.Module.named_parameters``), and after it records each parameter's value after
one probe step (autograd gives a frozen tensor no gradient) and the modules' ``training`` flags
read from their instance dictionaries; the verifier compares the values with an untouched model
it builds itself from the same seed.

The hidden cases, the known wrong answers behind these names and the exercises' declarations are the judge's
(``course_lib/judge/prompt_tuning.py``), which the students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from course_lib import prompt_tuning as ref
from course_lib.checks.transcript import is_pending, mode as transcript_mode, wrong_value
from course_lib.checks import core
from course_lib.checks.core import (
    Case,
    Wrong,
    _is_close,
    call_student,
    compare_with_reference,
    reference,
    seeded,
)

__all__ = ["check_prepend_soft_prompt", "check_answer_only_labels", "check_option_log_likelihood",
           "check_freeze_model", "tiny_llama"]


FORBIDDEN_PREPEND = ("course_lib.prompt_tuning.prepend_soft_prompt",)

FORBIDDEN_LABELS = ("course_lib.prompt_tuning.answer_only_labels",)

FORBIDDEN_LOGLIK = ("course_lib.prompt_tuning.option_log_likelihood", "course_lib.prompt_tuning.lm_loss")

FORBIDDEN_FREEZE = ("course_lib.prompt_tuning.freeze_model",)

IGNORE = -100


def _t(rng, *shape, dtype=torch.float64, scale=1.0):
    return torch.from_numpy(rng.normal(size=shape) * scale).to(dtype)


# ---------------------------------------------------------------- prepend_soft_prompt
def prepend_cases_from(rng, more=None) -> list[Case]:
    """The prepend_soft_prompt cases drawn from ``rng``, then ``more(rng)``'s."""
    m1 = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    cases = [
        Case("B=2, T=4, d=3, P=2, right padding", (_t(rng, 2, 4, 3), m1, _t(rng, 2, 3))),
        Case(
            "B=3, T=2, d=5, P=4, bool mask",
            (_t(rng, 3, 2, 5), torch.tensor([[True, True], [True, False], [True, True]]), _t(rng, 4, 5)),
        ),
        Case("B=1, T=3, d=2, P=1", (_t(rng, 1, 3, 2), torch.ones(1, 3, dtype=torch.long), _t(rng, 1, 2))),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _prepend_cases() -> list[Case]:
    return prepend_cases_from(seeded(9))


@core.graded
def check_prepend_soft_prompt(student, hidden: bool = False) -> None:
    """Student ``prepend_soft_prompt(input_embeds, attention_mask, prompt) -> (embeds, mask)``."""
    exercise = "prepend_soft_prompt"
    cases = core.hidden_part(__name__).prepend_cases() if hidden else _prepend_cases()
    compare_with_reference(student, ref.prepend_soft_prompt, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "PREPEND"), forbidden=FORBIDDEN_PREPEND, output_names=("embeds", "mask"))
    # promises: mask dtype kept, gradient reaches the prompt (inputs unchanged: checked by core on every call)
    x, m, p = cases[1].args
    prompt = p.clone().requires_grad_()
    mask_dtype, needs_grad, grad = call_student(
        student, Case(cases[1].label + ", prompt requires grad", (x, m, prompt)), exercise, FORBIDDEN_PREPEND,
        observe=_observe_prompt_grad(prompt))
    if mask_dtype != str(m.dtype):
        raise AssertionError(f"{exercise}: the mask must keep attention_mask's dtype ({m.dtype}), got {mask_dtype}; "
                             "build the prompt's ones with dtype=attention_mask.dtype")
    if not needs_grad:
        raise AssertionError(f"{exercise}: the output must depend on the prompt with gradients (no .detach(), "
                             "no torch.no_grad(), no copying values into a new tensor); the soft prompt would never learn")
    want = torch.full(tuple(p.shape), float(x.shape[0]), dtype=p.dtype)
    if not isinstance(grad, torch.Tensor) or tuple(grad.shape) != tuple(p.shape) or not torch.allclose(grad, want):
        raise AssertionError(f"{exercise}: each prompt vector appears once in every one of the B sequences, so the "
                             f"gradient of embeds.sum() with respect to the prompt must be B = {x.shape[0]} everywhere")


def _observe_prompt_grad(prompt):
    """observe=: (mask dtype, whether embeds requires grad, d embeds.sum() / d prompt or "none")."""
    def observe(out):
        embeds, mask = out
        needs = bool(getattr(embeds, "requires_grad", False))
        grad = "none"
        if needs:
            embeds.sum().backward()
            grad = prompt.grad.detach().clone() if prompt.grad is not None else "none"
        return str(getattr(mask, "dtype", type(mask).__name__)), needs, grad
    return observe


# ---------------------------------------------------------------- answer_only_labels
def label_batch(rng, B, T, lengths, starts, P, label) -> Case:
    """A batch of B rows of T ids drawn from ``rng`` (row b: ``lengths[b]`` real tokens, its answer from
    ``starts[b]``), with a soft prompt of P positions."""
    ids = torch.from_numpy(rng.integers(1, 50, size=(B, T)))
    m = torch.zeros(B, T, dtype=torch.long)
    for b, n in enumerate(lengths):
        m[b, :n] = 1
        ids[b, n:] = 0
    return Case(label, (ids, m, P, torch.tensor(starts)))


def label_cases_from(rng, more=None) -> list[Case]:
    """The answer_only_labels cases drawn from ``rng``, then ``more(rng)``'s."""
    cases = [
        label_batch(rng, 2, 6, [6, 4], [3, 2], 2, "B=2, T=6, P=2, second row padded"),
        label_batch(rng, 3, 5, [5, 5, 3], [1, 4, 2], 3, "B=3, T=5, P=3, one-token answer"),
        label_batch(rng, 1, 4, [4], [2], 0, "B=1, T=4, no soft prompt (P=0)"),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _label_cases() -> list[Case]:
    return label_cases_from(seeded(19))


@core.graded
def check_answer_only_labels(student, hidden: bool = False) -> None:
    """Student ``answer_only_labels(input_ids, attention_mask, prompt_len, answer_start) -> (B, P + T)``."""
    exercise = "answer_only_labels"
    cases = core.hidden_part(__name__).label_cases() if hidden else _label_cases()
    compare_with_reference(student, ref.answer_only_labels, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "LABELS"), forbidden=FORBIDDEN_LABELS)
    out = call_student(student, cases[0], exercise, FORBIDDEN_LABELS)
    if not isinstance(out, torch.Tensor) or out.dtype != torch.long:
        raise AssertionError(f"{exercise}: return an int64 (torch.long) tensor, as cross_entropy needs; got "
                             f"{getattr(out, 'dtype', type(out).__name__)}")


# ---------------------------------------------------------------- option_log_likelihood
def ll_case(rng, B, L, V, scored, label, dtype=torch.float64, **kw) -> Case:
    """Logits (B, L, V) drawn from ``rng`` and labels scored on ``scored[b]`` = (lo, hi) of row b (IGNORE
    elsewhere); ``kw``: the call's keyword arguments (normalise)."""
    lg = _t(rng, B, L, V, dtype=dtype, scale=2.0)
    lab = torch.full((B, L), IGNORE, dtype=torch.long)
    for b, (lo, hi) in enumerate(scored):
        lab[b, lo:hi] = torch.from_numpy(rng.integers(0, V, size=hi - lo))
    return Case(label, (lg, lab), kw)


def ll_cases_from(rng, more=None) -> list[Case]:
    """The option_log_likelihood cases drawn from ``rng``, then ``more(rng)``'s."""
    cases = [
        ll_case(rng, 2, 5, 7, [(2, 5), (3, 4)], "B=2, L=5, V=7, summed"),
        ll_case(rng, 2, 5, 7, [(2, 5), (3, 4)], "B=2, L=5, V=7, normalise=True", normalise=True),
        ll_case(
            rng,
            3,
            4,
            6,
            [(1, 4), (2, 3), (1, 3)],
            "B=3, L=4, V=6, options of 3, 1 and 2 tokens, normalise=True",
            normalise=True,
        ),
        ll_case(rng, 1, 3, 5, [(1, 3)], "B=1, L=3, V=5, normalise=False", normalise=False),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _ll_cases() -> list[Case]:
    return ll_cases_from(seeded(29))


@core.graded
def check_option_log_likelihood(student, hidden: bool = False) -> None:
    """Student ``option_log_likelihood(logits, labels, normalise=False) -> (B,)``."""
    exercise = "option_log_likelihood"
    cases = core.hidden_part(__name__).ll_cases() if hidden else _ll_cases()
    compare_with_reference(student, ref.option_log_likelihood, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "LOGLIK"), forbidden=FORBIDDEN_LOGLIK)
    lg, lab = cases[0].args
    out = call_student(student, Case("float32 logits", (lg.float(), lab)), exercise, FORBIDDEN_LOGLIK)
    if not isinstance(out, torch.Tensor) or out.shape != (lg.shape[0],) or out.dtype != torch.float32:
        raise AssertionError(f"{exercise}: return a (B,) tensor in the logits' dtype: for float32 logits of "
                             f"batch {lg.shape[0]} expected float32 of shape ({lg.shape[0]},), got "
                             f"{getattr(out, 'dtype', type(out).__name__)} of shape {tuple(getattr(out, 'shape', ()))}")
    # adding a constant to every logit of a position changes no log-probability
    shifted = lg + torch.from_numpy(seeded(39).normal(size=lg.shape[:2] + (1,)) * 5.0)
    out2 = call_student(student, Case("logits plus a constant per position", (shifted, lab)), exercise,
                        FORBIDDEN_LOGLIK)
    expected = reference(ref.option_log_likelihood, lg, lab)
    if not is_pending(expected) and not _is_close(out2, expected, 1e-9, 1e-7):
        raise AssertionError(f"{exercise}: adding the same constant to all logits of a position must not change the "
                             "score (softmax is shift-invariant); take log_softmax over the vocabulary axis")


# ---------------------------------------------------------------- freeze_model
def tiny_llama(seed: int, *, tied: bool = True, layers: int = 2, width: int = 16, vocab: int = 40):
    """A randomly initialised LlamaForCausalLM a few thousand parameters big, in training mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         tie_word_embeddings=tied, attention_dropout=0.1)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.train()


class _WithBuffer(nn.Module):
    """Embedding, a BatchNorm (buffers: running mean/var) and an output layer tied to the embedding."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight


def _make(kind: str, seed: int, tied: bool = True, layers: int = 2, width: int = 16):
    if kind == "buffers":
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return _WithBuffer().train()
    return tiny_llama(seed, tied=tied, layers=layers, width=width)


def _freeze_cases() -> list[Case]:
    out = [
        Case("a module with buffers, dropout and a tied output layer", (), {"kind": "buffers", "seed": 0}),
        Case("tiny LlamaForCausalLM, tied embeddings", (), {"kind": "llama", "seed": 1, "tied": True}),
        Case("tiny LlamaForCausalLM, untied output layer", (), {"kind": "llama", "seed": 2, "tied": False}),
    ]
    return out


# torch's own functions, bound when this module is imported (before any student cell runs): what the
# check reads of a model goes through them, never through attributes of the model object, which the
# student's function receives and can shadow (``model.named_parameters = ...``, a new ``__class__``)
_NAMED_PARAMETERS = nn.Module.named_parameters

_NAMED_MODULES = nn.Module.named_modules

_INSTANCE_DICT = object.__getattribute__

PROBE_LR = 0.5


def _probe_direction(seed: int, index: int, shape) -> torch.Tensor:
    """The fixed direction a probe step moves parameter ``index`` along (float64, seeded): the verifier
    recomputes it."""
    g = torch.Generator().manual_seed(10_000 * seed + index)
    return torch.randn(tuple(shape), generator=g, dtype=torch.float64)


def _capture(model: nn.Module, seed: int):
    """observe=: taken BEFORE the student's call (the check's own references to the model's parameter
    tensors and modules), read AFTER it, as plain data the verifier judges with its own model:

    (count returned, parameter names, names of modules still in training mode, each parameter's value
    after one probe step).

    The probe step: loss = sum_i <p_i, r_i> with a fixed seeded direction r_i per parameter, one
    backward pass, p_i - lr * grad_i. Autograd itself decides which tensors get a gradient (a frozen
    one gets none and keeps its value), so what is recorded is what training would do, not a flag the
    model reports. The model is left as it was (no value changes, gradients cleared).
    """
    params = list(_NAMED_PARAMETERS(model))  # each shared (tied) tensor once, as model.parameters()
    modules = list(_NAMED_MODULES(model))

    def look(count):
        count_out = count if isinstance(count, (int, np.integer)) and not isinstance(count, bool) \
            else f"<{type(count).__name__}>"
        training = ",".join(sorted(n or "<model>" for n, m in modules
                                   if _INSTANCE_DICT(m, "__dict__").get("training", True)))
        tensors = [p for _, p in params]
        saved_grads = [p.grad for p in tensors]
        for p in tensors:
            p.grad = None
        try:
            with torch.enable_grad():
                loss = sum((p * _probe_direction(seed, i, p.shape).to(p.dtype)).sum() for i, p in enumerate(tensors))
                if isinstance(loss, torch.Tensor) and loss.requires_grad:
                    loss.backward()
            after = [(p.detach() - PROBE_LR * p.grad) if p.grad is not None else p.detach().clone()
                     for p in tensors]
        finally:
            for p, g in zip(tensors, saved_grads):
                p.grad = g
        return count_out, ",".join(n for n, _ in params), training, after
    return look


def _reference_freeze(fn, **spec):
    model = _make(**spec)
    return _capture(model, spec["seed"])(fn(model))


def _wrong_freeze(wrong: Wrong, spec: Case):
    """What a known wrong answer does to the case's model (captured for the students' bundle, read back there)."""
    def run(**kwargs):
        return _reference_freeze(wrong.fn, **kwargs)

    return wrong_value(wrong.name, run, (), dict(spec.kwargs), key=wrong.key)


def _untouched(**spec):
    """The verifier's own model, never given to anyone: (parameter names, their values)."""
    params = list(_NAMED_PARAMETERS(_make(**spec)))
    return ",".join(n for n, _ in params), [p.detach().clone() for _, p in params]


def _summary(observed, untouched, seed: int) -> tuple:
    """(count, still-trainable names, modules in training, names changed otherwise), derived from recorded
    values and the verifier's untouched model: a parameter whose probe step left it as the untouched
    model has it is frozen; one that moved by exactly -lr * r is trainable; anything else was changed."""
    count, names, training, after = observed
    u_names, initial = untouched
    if names != u_names or len(after) != len(initial):
        return count, "", training, "<the recorded parameters are not the model's>"
    trainable, changed = [], []
    for i, (name, a, x) in enumerate(zip(names.split(","), after, initial)):
        a = torch.as_tensor(a)
        if a.shape != x.shape:
            changed.append(name)
        elif torch.equal(a.to(x.dtype), x):
            continue
        elif torch.allclose(a.double(), x.double() - PROBE_LR * _probe_direction(seed, i, x.shape), rtol=1e-5,
                            atol=1e-6):
            trainable.append(name)
        else:
            changed.append(name)
    return count, ",".join(sorted(trainable)), training, ",".join(changed)


@core.graded
def check_freeze_model(student, hidden: bool = False) -> None:
    """Student ``freeze_model(model) -> int``: all parameters frozen, eval mode, each tensor counted once.

    Frozen is judged from what a training step does to the parameter tensors the check took before
    the call, compared (by the verifier, when grading) with an untouched model it builds itself."""
    exercise = "freeze_model"
    if student is ref.freeze_model:
        raise AssertionError(f"{exercise}: your function is the reference implementation from course_lib itself")
    for spec in (core.hidden_part(__name__).freeze_cases() if hidden else _freeze_cases()):
        seed = spec.kwargs["seed"]
        model = _make(**spec.kwargs)
        case = Case(spec.label, (model,))
        if transcript_mode() == "capture":  # the bundle stores every wrong answer's output too
            for wrong in core.wrongs(__name__, "FREEZE"):
                try:
                    _wrong_freeze(wrong, spec)
                except Exception:
                    pass
        observed = call_student(student, case, exercise, FORBIDDEN_FREEZE, observe=_capture(model, seed))
        expected = reference(_reference_freeze, ref.freeze_model, **spec.kwargs)
        if is_pending(expected):
            continue  # record mode: the verifier compares, outside the kernel
        untouched = reference(_untouched, **spec.kwargs)
        got = _summary(observed, untouched, seed)
        expected = _summary(expected, untouched, seed)
        if _same(got, expected):
            continue
        count, trainable, training, changed = got
        if changed:
            raise AssertionError(f"{exercise} on '{spec.label}': the values of these parameters are not the model's "
                                 f"any more: {changed.split(',')[:4]}; freezing changes requires_grad, never the "
                                 "weights")
        for wrong in core.wrongs(__name__, "FREEZE"):
            try:
                w_out = _summary(_wrong_freeze(wrong, spec), untouched, seed)
            except Exception:
                continue
            if not _same(w_out, expected) and _same(got, w_out):
                raise AssertionError(f"{exercise}: likely misconception '{wrong.name}': {wrong.message} "
                                     f"(input: {spec.label})")
        if trainable:
            names = trainable.split(",")
            raise AssertionError(f"{exercise} on '{spec.label}': these parameters still have requires_grad=True "
                                 f"(a training step changed them): {names[:4]}{' ...' if len(names) > 4 else ''}")
        if training:
            raise AssertionError(f"{exercise} on '{spec.label}': these modules are still in training mode: "
                                 f"{training.split(',')[:4]}; call model.eval()")
        raise AssertionError(f"{exercise} on '{spec.label}': you returned {count!r}, expected "
                             f"{expected[0]} parameters (each tensor counted once, buffers excluded)")


def _same(a, b) -> bool:
    return tuple(a) == tuple(b)
