"""The judge's material of ``course_lib.checks.prompt_tuning`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.prompt_tuning import (
    IGNORE,
    _freeze_cases,
    _t,
    check_answer_only_labels,
    check_freeze_model,
    check_option_log_likelihood,
    check_prepend_soft_prompt,
    label_batch,
    label_cases_from,
    ll_case,
    ll_cases_from,
    prepend_cases_from,
)


_MODEL_SPECS = {
    "buffers": "a module with buffers, dropout and a tied output layer",
    "llama": "tiny LlamaForCausalLM",
}


# ---------------------------------------------------------------- freeze_model
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
          "the input embedding and the output layer share ONE tensor (tied weights), and your count has it twice: "
          "a listing that keeps duplicates (named_parameters(remove_duplicate=False), or every module's own "
          "parameters added up) meets the shared tensor once per owner. Count each tensor once; the model's own "
          "listing of its parameters already yields a shared tensor a single time."),
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
          "assigning requires_grad = False to the MODULE only adds an attribute to that Python object: autograd "
          "reads the flag of each parameter tensor, so every weight is still trainable. Switch the flag off on "
          "the parameters themselves (each tensor has an in-place method for it, and so has a module, for all "
          "of its parameters at once)."),
]


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


def _breaks_freeze_no_count(model):
    _right_freeze_ok(model)
    return None


def freeze_cases() -> list[Case]:
    """The hidden cases of ``check_freeze_model``: the visible models and two more."""
    return _freeze_cases() + [
        Case(
            "tiny LlamaForCausalLM, 3 layers, width 24, tied",
            (),
            {"kind": "llama", "seed": 3, "tied": True, "layers": 3, "width": 24},
        ),
        Case("tiny LlamaForCausalLM, 1 layer, untied", (), {"kind": "llama", "seed": 4, "tied": False, "layers": 1}),
    ]


FREEZE_MODEL = declare("09_prompt_tuning", "freeze_model", check_freeze_model,
            misconceptions=WRONG_FREEZE,
            promises=(
                Breaks("eval mode", wrong_answer(WRONG_FREEZE, "left in training mode"), "left in training mode"),
                Breaks("tied weight counted once", wrong_answer(WRONG_FREEZE, "tied weights counted twice"),
                       "tied weights counted twice"),
                Breaks("buffers are not parameters", wrong_answer(WRONG_FREEZE, "buffers counted as parameters"),
                       "buffers"),
                Breaks("returns the number of parameters", _breaks_freeze_no_count, "expected"),
            ),
            right=(Right(_right_freeze_ok), Right(_right_freeze_ptrs), Right(_right_freeze_modules)))


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


def _more_prepend_cases(rng) -> list[Case]:
    return [
        Case(
            "B=4, T=6, d=8, P=5, float32",
            (
                _t(rng, 4, 6, 8, dtype=torch.float32),
                torch.from_numpy(rng.integers(0, 2, size=(4, 6))),
                _t(rng, 5, 8, dtype=torch.float32),
            ),
        ),
        Case("B=2, T=1, d=3, P=3", (_t(rng, 2, 1, 3), torch.ones(2, 1, dtype=torch.long), _t(rng, 3, 3))),
    ]


def prepend_cases() -> list[Case]:
    """The hidden cases of ``check_prepend_soft_prompt``: the visible builder's, with the judge's seed, and more."""
    return prepend_cases_from(seeded(909), _more_prepend_cases)


PREPEND_SOFT_PROMPT = declare("09_prompt_tuning", "prepend_soft_prompt", check_prepend_soft_prompt,
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
            right=(Right(_right_prepend_ok), Right(_right_prepend_loop), Right(_right_prepend_float32)))


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


def _breaks_labels_int32(i, m, P, s):
    return _right_labels_ok(i, m, P, s).int()


def _breaks_labels_in_place(i, m, P, s):
    i[m == 0] = -100
    return _right_labels_ok(i, m, P, s)


def _more_label_cases(rng) -> list[Case]:
    return [
        label_batch(rng, 4, 9, [9, 7, 5, 8], [4, 3, 1, 6], 5, "B=4, T=9, P=5"),
        label_batch(rng, 2, 3, [3, 2], [0, 1], 1, "answer from the first token"),
    ]


def label_cases() -> list[Case]:
    """The hidden cases of ``check_answer_only_labels``: the visible builder's, with the judge's seed, and more."""
    return label_cases_from(seeded(919), _more_label_cases)


ANSWER_ONLY_LABELS = declare("09_prompt_tuning", "answer_only_labels", check_answer_only_labels,
            misconceptions=WRONG_LABELS,
            promises=(
                Breaks("(B, P + T) aligned with the prompted sequence",
                       wrong_answer(WRONG_LABELS, "soft-prompt positions left out"), "soft-prompt positions left out"),
                Breaks("not shifted", wrong_answer(WRONG_LABELS, "labels shifted here"), "labels shifted here"),
                Breaks("-100 on padding", wrong_answer(WRONG_LABELS, "padding trained on"), "padding trained on"),
                Breaks("int64", _breaks_labels_int32, "int64"),
                Breaks("inputs not modified", _breaks_labels_in_place, "in place"),
            ),
            right=(Right(_right_labels_ok), Right(_right_labels_where), Right(_right_labels_python)))


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


def _breaks_loglik_float64(lg, lb, normalise=False):
    return _right_loglik_ce(lg.double(), lb, normalise)


def _breaks_loglik_keepdim(lg, lb, normalise=False):
    return _right_loglik_ce(lg, lb, normalise).unsqueeze(-1)


def _more_ll_cases(rng) -> list[Case]:
    more = [
        ll_case(rng, 4, 8, 11, [(3, 8), (5, 6), (2, 4), (6, 8)], "B=4, L=8, V=11, float32", dtype=torch.float32),
        ll_case(
            rng,
            4,
            8,
            11,
            [(3, 8), (5, 6), (2, 4), (6, 8)],
            "B=4, L=8, V=11, float32, normalise=True",
            dtype=torch.float32,
            normalise=True,
        ),
        ll_case(rng, 2, 6, 9, [(2, 3), (1, 6)], "a label at position 0 is not scored", normalise=True),
    ]
    lg, lab = more[-1].args
    lab[:, 0] = 3
    return more


def ll_cases() -> list[Case]:
    """The hidden cases of ``check_option_log_likelihood``: the visible builder's, with the judge's seed, and more."""
    return ll_cases_from(seeded(929), _more_ll_cases)


OPTION_LOG_LIKELIHOOD = declare("09_prompt_tuning", "option_log_likelihood", check_option_log_likelihood,
            misconceptions=WRONG_LOGLIK,
            promises=(
                Breaks("(B,) in the logits' dtype", _breaks_loglik_float64, "float32"),
                Breaks("(B,) shape", _breaks_loglik_keepdim, "shape"),
                Breaks("normalise divides by the scored tokens",
                       wrong_answer(WRONG_LOGLIK, "mean over all positions"), "mean over all positions"),
                Breaks("shift by one", wrong_answer(WRONG_LOGLIK, "no shift by one"), "no shift by one"),
            ),
            right=(Right(_right_loglik_ce), Right(_right_loglik_loop), Right(_right_loglik_float32)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (FREEZE_MODEL, PREPEND_SOFT_PROMPT, ANSWER_ONLY_LABELS, OPTION_LOG_LIKELIHOOD)
