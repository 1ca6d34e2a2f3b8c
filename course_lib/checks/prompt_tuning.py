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
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import prompt_tuning as ref
from course_lib.checks.transcript import is_pending, mode as transcript_mode, wrong_value
from course_lib.checks.core import (
    Case,
    Wrong,
    _is_close,
    call_student,
    compare_with_reference,
    reference,
    seeded,
)
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer  # noqa: F401

__all__ = ["check_prepend_soft_prompt", "check_answer_only_labels", "check_option_log_likelihood",
           "check_freeze_model", "WRONG_PREPEND", "WRONG_LABELS", "WRONG_LOGLIK", "WRONG_FREEZE", "tiny_llama"]

FORBIDDEN_PREPEND = ("course_lib.prompt_tuning.prepend_soft_prompt",)
FORBIDDEN_LABELS = ("course_lib.prompt_tuning.answer_only_labels",)
FORBIDDEN_LOGLIK = ("course_lib.prompt_tuning.option_log_likelihood", "course_lib.prompt_tuning.lm_loss")
FORBIDDEN_FREEZE = ("course_lib.prompt_tuning.freeze_model",)
IGNORE = -100


def _t(rng, *shape, dtype=torch.float64, scale=1.0):
    return torch.from_numpy(rng.normal(size=shape) * scale).to(dtype)


# ---------------------------------------------------------------- prepend_soft_prompt
def _ones_like_prompt(m, P, value=1):
    return torch.full((m.shape[0], P), value, dtype=m.dtype)


def _prepend_after(x, m, p):
    pb = p.to(x.dtype).unsqueeze(0).expand(x.shape[0], -1, -1)
    return torch.cat([x, pb], dim=1), torch.cat([m, _ones_like_prompt(m, p.shape[0])], dim=1)


def _prepend_mask_unchanged(x, m, p):
    pb = p.to(x.dtype).unsqueeze(0).expand(x.shape[0], -1, -1)
    return torch.cat([pb, x], dim=1), m


def _prepend_mask_zeros(x, m, p):
    pb = p.to(x.dtype).unsqueeze(0).expand(x.shape[0], -1, -1)
    return torch.cat([pb, x], dim=1), torch.cat([_ones_like_prompt(m, p.shape[0], 0), m], dim=1)


WRONG_PREPEND = [
    Wrong("prompt appended after the tokens", _prepend_after,
          "the soft prompt goes IN FRONT of the tokens, along the sequence axis: a causal "
          "model's tokens can only attend to what comes before them, so a prompt at the end reaches no token."),
    Wrong("attention mask not extended", _prepend_mask_unchanged,
          "the sequence is now P + T long, so the mask must be too: P ones for the prompt, then attention_mask."),
    Wrong("prompt positions masked out", _prepend_mask_zeros,
          "the prompt's mask entries must be 1 (attend to it); with 0 no token can see the soft prompt and it "
          "gets no gradient."),
]


def _prepend_cases(hidden: bool) -> list[Case]:
    rng = seeded(909 if hidden else 9)
    m1 = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    cases = [
        Case("B=2, T=4, d=3, P=2, right padding", (_t(rng, 2, 4, 3), m1, _t(rng, 2, 3))),
        Case("B=3, T=2, d=5, P=4, bool mask", (_t(rng, 3, 2, 5), torch.tensor([[True, True], [True, False],
                                                                                [True, True]]), _t(rng, 4, 5))),
        Case("B=1, T=3, d=2, P=1", (_t(rng, 1, 3, 2), torch.ones(1, 3, dtype=torch.long), _t(rng, 1, 2))),
    ]
    if hidden:
        cases += [
            Case("B=4, T=6, d=8, P=5, float32", (_t(rng, 4, 6, 8, dtype=torch.float32),
                                                 torch.from_numpy(rng.integers(0, 2, size=(4, 6))),
                                                 _t(rng, 5, 8, dtype=torch.float32))),
            Case("B=2, T=1, d=3, P=3", (_t(rng, 2, 1, 3), torch.ones(2, 1, dtype=torch.long), _t(rng, 3, 3))),
        ]
    return cases


def check_prepend_soft_prompt(student, hidden: bool = False) -> None:
    """Student ``prepend_soft_prompt(input_embeds, attention_mask, prompt) -> (embeds, mask)``."""
    exercise = "prepend_soft_prompt"
    cases = _prepend_cases(hidden)
    compare_with_reference(student, ref.prepend_soft_prompt, cases, exercise=exercise, wrongs=WRONG_PREPEND,
                           forbidden=FORBIDDEN_PREPEND, output_names=("embeds", "mask"))
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
def _labels(ids, m, P, start, *, shift=False, with_prompt=True, question=True, padding=True, off=0, fill=IGNORE):
    B, T = ids.shape
    pos = torch.arange(T).unsqueeze(0)
    keep = torch.ones(B, T, dtype=torch.bool)
    if question:
        keep &= pos >= start.view(B, 1) + off
    if padding:
        keep &= m.bool()
    lab = torch.where(keep, ids.long(), torch.full((B, T), fill, dtype=torch.long))
    if with_prompt:
        lab = torch.cat([torch.full((B, P), fill, dtype=torch.long), lab], dim=1)
    if shift:
        lab = torch.cat([lab[:, 1:], torch.full((B, 1), fill, dtype=torch.long)], dim=1)
    return lab


WRONG_LABELS = [
    Wrong("labels shifted here", lambda i, m, P, s: _labels(i, m, P, s, shift=True),
          "do not shift the labels: label t is the token AT position t; the loss (and option_log_likelihood) "
          "compares the prediction at t - 1 with it. Shifting here too makes the model learn to predict the "
          "token two steps ahead."),
    Wrong("soft-prompt positions left out", lambda i, m, P, s: _labels(i, m, P, s, with_prompt=False),
          "the labels must line up with the PROMPTED sequence, length P + T: start with prompt_len -100s."),
    Wrong("question tokens trained on", lambda i, m, P, s: _labels(i, m, P, s, question=False),
          "tokens before answer_start are the question: label them -100, so the loss counts only the answer."),
    Wrong("padding trained on", lambda i, m, P, s: _labels(i, m, P, s, padding=False),
          "padding (attention_mask == 0) must be -100 too, or the model learns to predict pad tokens."),
    Wrong("answer start off by one", lambda i, m, P, s: _labels(i, m, P, s, off=1),
          "answer_start is the index of the FIRST answer token; keep positions t >= answer_start."),
    Wrong("0 instead of -100", lambda i, m, P, s: _labels(i, m, P, s, fill=0),
          "ignored positions get -100 (cross_entropy's ignore_index), not 0: 0 is a real token id."),
]


def _label_cases(hidden: bool) -> list[Case]:
    rng = seeded(919 if hidden else 19)

    def batch(B, T, lengths, starts, P, label):
        ids = torch.from_numpy(rng.integers(1, 50, size=(B, T)))
        m = torch.zeros(B, T, dtype=torch.long)
        for b, n in enumerate(lengths):
            m[b, :n] = 1
            ids[b, n:] = 0
        return Case(label, (ids, m, P, torch.tensor(starts)))

    cases = [
        batch(2, 6, [6, 4], [3, 2], 2, "B=2, T=6, P=2, second row padded"),
        batch(3, 5, [5, 5, 3], [1, 4, 2], 3, "B=3, T=5, P=3, one-token answer"),
        batch(1, 4, [4], [2], 0, "B=1, T=4, no soft prompt (P=0)"),
    ]
    if hidden:
        cases += [
            batch(4, 9, [9, 7, 5, 8], [4, 3, 1, 6], 5, "B=4, T=9, P=5"),
            batch(2, 3, [3, 2], [0, 1], 1, "answer from the first token"),
        ]
    return cases


def check_answer_only_labels(student, hidden: bool = False) -> None:
    """Student ``answer_only_labels(input_ids, attention_mask, prompt_len, answer_start) -> (B, P + T)``."""
    exercise = "answer_only_labels"
    cases = _label_cases(hidden)
    compare_with_reference(student, ref.answer_only_labels, cases, exercise=exercise, wrongs=WRONG_LABELS,
                           forbidden=FORBIDDEN_LABELS)
    out = call_student(student, cases[0], exercise, FORBIDDEN_LABELS)
    if not isinstance(out, torch.Tensor) or out.dtype != torch.long:
        raise AssertionError(f"{exercise}: return an int64 (torch.long) tensor, as cross_entropy needs; got "
                             f"{getattr(out, 'dtype', type(out).__name__)}")


# ---------------------------------------------------------------- option_log_likelihood
def _ll(logits, labels, normalise=False, *, shift=True, kind="log_softmax", mask_ignored=True, denom="scored",
        dim=-1):
    if shift:
        lg, tg = logits[:, :-1], labels[:, 1:]
    else:
        lg, tg = logits, labels
    if kind == "log_softmax":
        v = torch.log_softmax(lg, dim=dim)
    elif kind == "softmax":
        v = torch.softmax(lg, dim=-1)
    else:
        v = lg
    scored = tg != IGNORE
    picked = v.gather(-1, tg.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    total = (picked * scored).sum(-1) if mask_ignored else picked.sum(-1)
    if normalise and denom == "scored":
        total = total / scored.sum(-1).clamp(min=1)
    elif normalise and denom == "all":
        total = total / tg.shape[1]
    return total


WRONG_LOGLIK = [
    Wrong("no shift by one", lambda lg, lb, normalise=False: _ll(lg, lb, normalise, shift=False),
          "logits[:, t] predict the token at t + 1: score label t with logits[:, t - 1] "
          "(drop the last position's logits and the first label)."),
    Wrong("raw logits instead of log-probabilities", lambda lg, lb, normalise=False: _ll(lg, lb, normalise, kind="raw"),
          "take log_softmax over the vocabulary first: raw logits are not log-probabilities (each row has its "
          "own additive constant)."),
    Wrong("probabilities instead of log-probabilities",
          lambda lg, lb, normalise=False: _ll(lg, lb, normalise, kind="softmax"),
          "sum LOG-probabilities (log_softmax); a sequence's probability is the product of its tokens' "
          "probabilities, so its log is the sum of their logs."),
    Wrong("ignored positions scored", lambda lg, lb, normalise=False: _ll(lg, lb, normalise, mask_ignored=False),
          "positions whose label is -100 are not part of the option: leave them out of the sum."),
    Wrong("mean over all positions", lambda lg, lb, normalise=False: _ll(lg, lb, normalise, denom="all"),
          "normalise=True divides by the number of SCORED tokens (labels != -100), not by the sequence length."),
    Wrong("normalise ignored", lambda lg, lb, normalise=False: _ll(lg, lb, False),
          "with normalise=True return the mean log-probability per scored token (sum / number of scored tokens)."),
    Wrong("softmax over the wrong axis", lambda lg, lb, normalise=False: _ll(lg, lb, normalise, dim=1),
          "log_softmax goes over the VOCABULARY axis (dim=-1), not over positions."),
]


def _ll_cases(hidden: bool) -> list[Case]:
    rng = seeded(929 if hidden else 29)

    def case(B, L, V, scored, label, dtype=torch.float64, **kw):
        lg = _t(rng, B, L, V, dtype=dtype, scale=2.0)
        lab = torch.full((B, L), IGNORE, dtype=torch.long)
        for b, (lo, hi) in enumerate(scored):
            lab[b, lo:hi] = torch.from_numpy(rng.integers(0, V, size=hi - lo))
        return Case(label, (lg, lab), kw)

    cases = [
        case(2, 5, 7, [(2, 5), (3, 4)], "B=2, L=5, V=7, summed"),
        case(2, 5, 7, [(2, 5), (3, 4)], "B=2, L=5, V=7, normalise=True", normalise=True),
        case(3, 4, 6, [(1, 4), (2, 3), (1, 3)], "B=3, L=4, V=6, options of 3, 1 and 2 tokens, normalise=True",
             normalise=True),
        case(1, 3, 5, [(1, 3)], "B=1, L=3, V=5, normalise=False", normalise=False),
    ]
    if hidden:
        cases += [
            case(4, 8, 11, [(3, 8), (5, 6), (2, 4), (6, 8)], "B=4, L=8, V=11, float32", dtype=torch.float32),
            case(4, 8, 11, [(3, 8), (5, 6), (2, 4), (6, 8)], "B=4, L=8, V=11, float32, normalise=True",
                 dtype=torch.float32, normalise=True),
            case(2, 6, 9, [(2, 3), (1, 6)], "a label at position 0 is not scored", normalise=True),
        ]
        lg, lab = cases[-1].args
        lab[:, 0] = 3
    return cases


def check_option_log_likelihood(student, hidden: bool = False) -> None:
    """Student ``option_log_likelihood(logits, labels, normalise=False) -> (B,)``."""
    exercise = "option_log_likelihood"
    cases = _ll_cases(hidden)
    compare_with_reference(student, ref.option_log_likelihood, cases, exercise=exercise, wrongs=WRONG_LOGLIK,
                           forbidden=FORBIDDEN_LOGLIK)
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


def _wrong_count_state_dict(model):
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    return sum(v.numel() for v in model.state_dict().values())


def _wrong_count_duplicates(model):
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))


def _wrong_no_eval(model):
    for p in model.parameters():
        p.requires_grad_(False)
    return sum(p.numel() for p in model.parameters())


def _wrong_body_only(model):
    body = getattr(model, "model", None) or getattr(model, "embed", model)
    for p in body.parameters():
        p.requires_grad_(False)
    model.eval()
    return sum(p.numel() for p in model.parameters())


def _wrong_attribute(model):
    model.requires_grad = False
    model.eval()
    return sum(p.numel() for p in model.parameters())


WRONG_FREEZE = [
    Wrong("tied weights counted twice", _wrong_count_duplicates,
          "the input embedding and the output layer share ONE tensor (tied weights); count each parameter "
          "tensor once: sum(p.numel() for p in model.parameters()) skips the duplicate."),
    Wrong("buffers counted as parameters", _wrong_count_state_dict,
          "state_dict() also holds buffers (running statistics, rotary tables) and lists tied weights twice; "
          "count model.parameters() only."),
    Wrong("left in training mode", _wrong_no_eval,
          "also call model.eval(): a frozen model in training mode still applies dropout, so the same prompt "
          "gives different scores on every call."),
    Wrong("output layer left trainable", _wrong_body_only,
          "freeze EVERY parameter of the model (model.parameters()), including the output layer, not only the "
          "transformer body."),
    Wrong("requires_grad set on the module", _wrong_attribute,
          "model.requires_grad = False only sets an attribute on the module object; set it on each parameter: "
          "p.requires_grad_(False) for p in model.parameters() (or model.requires_grad_(False))."),
]


_MODEL_SPECS = {
    "buffers": "a module with buffers, dropout and a tied output layer",
    "llama": "tiny LlamaForCausalLM",
}


def _make(kind: str, seed: int, tied: bool = True, layers: int = 2, width: int = 16):
    if kind == "buffers":
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return _WithBuffer().train()
    return tiny_llama(seed, tied=tied, layers=layers, width=width)


def _freeze_cases(hidden: bool) -> list[Case]:
    out = [Case("a module with buffers, dropout and a tied output layer", (), {"kind": "buffers", "seed": 0}),
           Case("tiny LlamaForCausalLM, tied embeddings", (), {"kind": "llama", "seed": 1, "tied": True}),
           Case("tiny LlamaForCausalLM, untied output layer", (), {"kind": "llama", "seed": 2, "tied": False})]
    if hidden:
        out += [Case("tiny LlamaForCausalLM, 3 layers, width 24, tied", (),
                     {"kind": "llama", "seed": 3, "tied": True, "layers": 3, "width": 24}),
                Case("tiny LlamaForCausalLM, 1 layer, untied", (), {"kind": "llama", "seed": 4, "tied": False,
                                                                     "layers": 1})]
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


def check_freeze_model(student, hidden: bool = False) -> None:
    """Student ``freeze_model(model) -> int``: all parameters frozen, eval mode, each tensor counted once.

    Frozen is judged from what a training step does to the parameter tensors the check took before
    the call, compared (by the verifier, when grading) with an untouched model it builds itself."""
    exercise = "freeze_model"
    if student is ref.freeze_model:
        raise AssertionError(f"{exercise}: your function is the reference implementation from course_lib itself")
    for spec in _freeze_cases(hidden):
        seed = spec.kwargs["seed"]
        model = _make(**spec.kwargs)
        case = Case(spec.label, (model,))
        if transcript_mode() == "capture":  # the bundle stores every wrong answer's output too
            for wrong in WRONG_FREEZE:
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
        for wrong in WRONG_FREEZE:
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


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
# written independently of course_lib.prompt_tuning; the students' and the kernel's editions replace each by a stub
def _right_prepend_ok(input_embeds, attention_mask, prompt):
    B, T, d = input_embeds.shape
    P = prompt.shape[0]
    embeds = torch.cat([prompt.unsqueeze(0).repeat(B, 1, 1).to(input_embeds.dtype), input_embeds], dim=1)
    return embeds, torch.cat([attention_mask.new_ones(B, P), attention_mask], dim=1)


def _right_prepend_loop(input_embeds, attention_mask, prompt):
    rows = [torch.cat([prompt.to(x.dtype), x]) for x in input_embeds]
    masks = [torch.cat([torch.ones(prompt.shape[0], dtype=m.dtype), m]) for m in attention_mask]
    return torch.stack(rows), torch.stack(masks)


def _right_prepend_float32(input_embeds, attention_mask, prompt):
    e, m = _right_prepend_ok(input_embeds.float(), attention_mask, prompt.float())
    return e, m


def _right_labels_ok(input_ids, attention_mask, prompt_len, answer_start):
    lab = input_ids.clone().long()
    for b in range(lab.shape[0]):
        lab[b, : int(answer_start[b])] = -100
    lab[attention_mask == 0] = -100
    return F.pad(lab, (prompt_len, 0), value=-100)


def _right_labels_where(input_ids, attention_mask, prompt_len, answer_start):
    B, T = input_ids.shape
    idx = torch.arange(T).expand(B, T)
    keep = (idx >= answer_start[:, None]) & (attention_mask > 0)
    lab = input_ids.long().masked_fill(~keep, -100)
    return torch.cat([torch.full((B, prompt_len), -100), lab], 1)


def _right_labels_python(input_ids, attention_mask, prompt_len, answer_start):
    out = []
    for ids, m, s in zip(input_ids.tolist(), attention_mask.tolist(), answer_start.tolist()):
        out.append([-100] * prompt_len + [t if (i >= s and mk) else -100 for i, (t, mk) in enumerate(zip(ids, m))])
    return torch.tensor(out, dtype=torch.long)


def _right_loglik_ce(logits, labels, normalise=False):
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], ignore_index=-100, reduction="none")
    total = -ce.sum(1)
    if normalise:
        total = total / (labels[:, 1:] != -100).sum(1)
    return total


def _right_loglik_loop(logits, labels, normalise=False):
    out = []
    for lg, lb in zip(logits, labels):
        s, n = lg.new_zeros(()), 0
        for t in range(1, lb.shape[0]):
            if lb[t] != -100:
                s = s + (lg[t - 1, lb[t]] - torch.logsumexp(lg[t - 1], 0))
                n += 1
        out.append(s / n if normalise and n else s)
    return torch.stack(out)


def _right_loglik_float32(logits, labels, normalise=False):
    return _right_loglik_ce(logits.float(), labels, normalise)  # float32 whatever the input


def _right_freeze_ok(model):
    model.requires_grad_(False)
    model.eval()
    return sum(p.numel() for p in model.parameters())


def _right_freeze_ptrs(model):
    seen, n = set(), 0
    for _, p in model.named_parameters(remove_duplicate=False):
        p.requires_grad = False
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    model.train(False)
    return n


def _right_freeze_modules(model):
    for m in model.modules():
        m.eval()
        for p in m.parameters(recurse=False):
            p.requires_grad_(False)
    return int(sum(p.numel() for p in set(model.parameters())))


# ---------------------------------------------------------------- answers that break one promise each
def _breaks_prepend_in_place(x, m, p):
    m.fill_(1) if m.dtype != torch.bool else m.fill_(True)
    return _right_prepend_ok(x, m, p)


def _breaks_prepend_float_mask(x, m, p):
    e, mask = _right_prepend_ok(x, m, p)
    return e, mask.float()


def _breaks_prepend_detached(x, m, p):
    return _right_prepend_ok(x, m, p.detach())


def _breaks_prepend_first_row_only(x, m, p):
    e, mask = _right_prepend_ok(x, m, p)
    e = e.clone()
    e[1:, : p.shape[0]] = 0.0
    return e, mask


def _breaks_labels_int32(i, m, P, s):
    return _right_labels_ok(i, m, P, s).int()


def _breaks_labels_in_place(i, m, P, s):
    i[m == 0] = -100
    return _right_labels_ok(i, m, P, s)


def _breaks_loglik_float64(lg, lb, normalise=False):
    return _right_loglik_ce(lg.double(), lb, normalise)


def _breaks_loglik_keepdim(lg, lb, normalise=False):
    return _right_loglik_ce(lg, lb, normalise).unsqueeze(-1)


def _breaks_freeze_no_count(model):
    _right_freeze_ok(model)
    return None


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("09_prompt_tuning", "freeze_model", check_freeze_model,
            misconceptions=WRONG_FREEZE,
            promises=(
                Breaks("eval mode", wrong_answer(WRONG_FREEZE, "left in training mode"), "left in training mode"),
                Breaks("tied weight counted once", wrong_answer(WRONG_FREEZE, "tied weights counted twice"),
                       "tied weights counted twice"),
                Breaks("buffers are not parameters", wrong_answer(WRONG_FREEZE, "buffers counted as parameters"),
                       "buffers"),
                Breaks("returns the number of parameters", _breaks_freeze_no_count, "expected"),
            ),
            right=(Right(_right_freeze_ok), Right(_right_freeze_ptrs), Right(_right_freeze_modules))),
    declare("09_prompt_tuning", "prepend_soft_prompt", check_prepend_soft_prompt,
            misconceptions=WRONG_PREPEND,
            promises=(
                Breaks("P + T positions with the prompt in front",
                       wrong_answer(WRONG_PREPEND, "prompt appended after the tokens"),
                       "prompt appended after the tokens"),
                Breaks("mask extended with ones", wrong_answer(WRONG_PREPEND, "attention mask not extended"),
                       "attention mask not extended"),
                Breaks("mask keeps attention_mask's dtype", _breaks_prepend_float_mask, "dtype"),
                Breaks("inputs not modified", _breaks_prepend_in_place, "in place"),
                Breaks("gradients flow back to prompt", _breaks_prepend_detached, "gradient"),
                Breaks("prompt shared by the whole batch", _breaks_prepend_first_row_only, "embeds"),
            ),
            right=(Right(_right_prepend_ok), Right(_right_prepend_loop), Right(_right_prepend_float32))),
    declare("09_prompt_tuning", "answer_only_labels", check_answer_only_labels,
            misconceptions=WRONG_LABELS,
            promises=(
                Breaks("(B, P + T) aligned with the prompted sequence",
                       wrong_answer(WRONG_LABELS, "soft-prompt positions left out"), "soft-prompt positions left out"),
                Breaks("not shifted", wrong_answer(WRONG_LABELS, "labels shifted here"), "labels shifted here"),
                Breaks("-100 on padding", wrong_answer(WRONG_LABELS, "padding trained on"), "padding trained on"),
                Breaks("int64", _breaks_labels_int32, "int64"),
                Breaks("inputs not modified", _breaks_labels_in_place, "in place"),
            ),
            right=(Right(_right_labels_ok), Right(_right_labels_where), Right(_right_labels_python))),
    declare("09_prompt_tuning", "option_log_likelihood", check_option_log_likelihood,
            misconceptions=WRONG_LOGLIK,
            promises=(
                Breaks("(B,) in the logits' dtype", _breaks_loglik_float64, "float32"),
                Breaks("(B,) shape", _breaks_loglik_keepdim, "shape"),
                Breaks("normalise divides by the scored tokens",
                       wrong_answer(WRONG_LOGLIK, "mean over all positions"), "mean over all positions"),
                Breaks("shift by one", wrong_answer(WRONG_LOGLIK, "no shift by one"), "no shift by one"),
            ),
            right=(Right(_right_loglik_ce), Right(_right_loglik_loop), Right(_right_loglik_float32))),
)
