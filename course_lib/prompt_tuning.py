"""Instruction prompt tuning of a frozen causal language model (Lester et al. 2021; Med-PaLM, Singhal et al. 2023).

Covers
    * ``prepend_soft_prompt``: put P trainable vectors in front of a batch of token
      embeddings and extend the attention mask (the soft prompt is always attended to).
    * ``answer_only_labels``: labels for the causal-LM loss that count only the answer's
      tokens: -100 (ignored) on the soft prompt, on the question and on padding. The
      labels are NOT shifted: as in ``transformers``, position t's label is the token AT t
      and the loss (``lm_loss``, ``option_log_likelihood``) does the shift by one, once.
    * ``option_log_likelihood``: a multiple-choice option's log-likelihood, summed over its
      tokens, or divided by the number of tokens (``normalise=True``, length-normalised).
    * ``freeze_model``: every weight of the language model frozen, eval mode, and the number
      of its parameters (a tied weight counted once).
    * Around them: :class:`SoftPrompt`, :class:`PromptedLM` (a frozen LM with a soft prompt,
      for ``course_lib.training.train``), ``lm_loss``, ``encode_examples`` (and ``trim_padding``,
      its batches without the padding columns no example of the batch needs),
      ``option_scores`` (scores every option of many questions, reusing the shared prefix
      and each question's key/value cache), ``wilson_interval``.
    * Med-PaLM's *instruction* prompt tuning (Singhal et al., Nature 620:172-180, 2023): the
      learned soft prompt is put in front of a hard prompt (instruction and solved
      exemplars) that stays text: :class:`InstructionPrompt`.
    * A step budget (``step_budget``: exactly ``steps`` optimiser steps with the course's
      ``train``, whatever the machine), a paired test of two conditions on the same questions
      (``mcnemar_exact``: McNemar's exact binomial test on the discordant pairs), and the
      shipped soft prompts' file format (``save_soft_prompt`` / ``load_soft_prompt``:
      safetensors, float16, with the settings that made them as metadata).
    * Contextual calibration (Zhao et al. 2021, "Calibrate before use"), a training-free baseline:
      ``content_free_scores`` (each option's score after a content-free input such as "N/A", the
      model's prior for that answer text) and ``calibrate`` (the scores minus that prior); and
      ``pick_rule`` (the scoring rule, summed or length-normalised, that VALIDATION accuracy picks).
    * Chain-of-thought prompting (Wei et al. 2022) and self-consistency (Wang et al. 2023):
      ``cot_prompt`` (solved training questions with the worked rationales of ``COT_RATIONALES``),
      ``rationale_option_scores`` (greedy or seeded sampled rationales, batched with the key/value
      cache, then the options scored after each rationale), ``majority_vote`` (the vote over paths,
      with a stated tie rule), ``stop_token_ids`` (the tokens that end a rationale).

Does NOT cover
    * prefix tuning (vectors in every layer), LoRA or any change of the model's weights;
    * free-text answers: even after a generated rationale the answer is read by scoring the options;
    * the paper's scale: Med-PaLM tunes a soft prompt for a 540-billion-parameter model.
"""
from __future__ import annotations

import copy
import pathlib
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from course_lib.stats import paired_sign_p, wilson_interval  # noqa: F401 - wilson_interval: lesson 09 uses PT.wilson_interval
from torch import nn
from torch.utils.data import Dataset, Subset, TensorDataset

from course_lib import solutions

_solution = solutions.of("course_lib.prompt_tuning")  # the exercises' bodies: course_lib/solutions/prompt_tuning.py

__all__ = ["prepend_soft_prompt", "answer_only_labels", "option_log_likelihood", "freeze_model", "SoftPrompt",
           "PromptedLM", "lm_loss", "encode_examples", "trim_padding", "option_scores", "text_embeds", "wilson_interval",
           "IGNORE", "InstructionPrompt", "step_budget", "mcnemar_exact", "save_soft_prompt", "load_soft_prompt",
           "SHIPPED_PROMPTS", "SHIPPED_SEEDS", "SHIPPED_FIGURES", "COT_RATIONALES", "cot_prompt", "stop_token_ids", "rationale_option_scores",
           "majority_vote", "CONTENT_FREE", "content_free_scores", "calibrate", "pick_rule"]

IGNORE = -100  # the label torch's cross_entropy skips (ignore_index)


def prepend_soft_prompt(input_embeds: torch.Tensor, attention_mask: torch.Tensor,
                        prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prepend the soft prompt to every sequence of the batch and extend the mask.

    Args:
        input_embeds: (B, T, d) token embeddings.
        attention_mask: (B, T), 1 (or True) = a real token, 0 = padding; any dtype.
        prompt: (P, d) the soft prompt, shared by the whole batch.

    Returns:
        (embeds, mask): embeds (B, P + T, d) = [prompt; input_embeds] for each sequence,
        mask (B, P + T) with the dtype of ``attention_mask``: ones for the P prompt
        positions, then ``attention_mask``. The inputs are not modified; gradients flow
        back to ``prompt``.

    >>> e, m = prepend_soft_prompt(torch.zeros(2, 3, 4), torch.tensor([[1, 1, 0], [1, 1, 1]]), torch.ones(2, 4))
    >>> e.shape, m
    (torch.Size([2, 5, 4]), tensor([[1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1]]))
    """
    return _solution.prepend_soft_prompt(input_embeds, attention_mask, prompt)


def answer_only_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int,
                       answer_start: torch.Tensor) -> torch.Tensor:
    """Causal-LM labels that train only on the answer tokens, for a sequence with a soft prompt in front.

    Args:
        input_ids: (B, T) token ids (question then answer, right-padded).
        attention_mask: (B, T), 1 = real token, 0 = padding.
        prompt_len: P, the number of soft-prompt vectors that will be prepended.
        answer_start: (B,) int, index in ``input_ids`` of each sequence's first answer token.

    Returns:
        (B, P + T) int64 labels aligned with the prompted sequence: -100 on the P prompt
        positions, on question tokens (index < answer_start) and on padding; the token id
        elsewhere. NOT shifted: the loss compares the prediction at position t - 1 with
        label t. The inputs are not modified.

    >>> answer_only_labels(torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 1, 1, 0]]), 2, torch.tensor([1]))
    tensor([[-100, -100, -100,    6,    7, -100]])
    """
    return _solution.answer_only_labels(input_ids, attention_mask, prompt_len, answer_start)


def option_log_likelihood(logits: torch.Tensor, labels: torch.Tensor, normalise: bool = False) -> torch.Tensor:
    """Log-likelihood of each sequence's labelled tokens under next-token logits.

    Args:
        logits: (B, L, V) the model's outputs; position t predicts the token at t + 1.
        labels: (B, L) token ids, -100 where a token is not scored (unshifted, as
            ``answer_only_labels`` makes them). A label at position 0 cannot be predicted.
        normalise: False: the SUM over the scored tokens; True: the MEAN per scored token
            (length-normalised, so long options are not penalised for their length).

    Returns:
        (B,) float in the logits' dtype: sum_t log softmax(logits[:, t - 1])[labels[:, t]]
        over the scored t (divided by their number when ``normalise``).

    >>> logits = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]]))
    >>> option_log_likelihood(logits, torch.tensor([[-100, 1, 0]]))  # log 0.5 + log 0.9
    tensor([-0.7985])
    """
    return _solution.option_log_likelihood(logits, labels, normalise)


def freeze_model(model: nn.Module) -> int:
    """Freeze every parameter of ``model`` (requires_grad False), switch it to eval mode, count its parameters.

    Returns the number of parameter ELEMENTS, each tensor counted once even when it is
    shared (a tied input/output embedding is one tensor). Buffers are not parameters.

    >>> freeze_model(nn.Linear(3, 2))   # 3 * 2 weights + 2 biases
    8
    """
    return _solution.freeze_model(model)


# ---------------------------------------------------------------- the pieces around the exercises
class SoftPrompt(nn.Module):
    """P trainable vectors of the model's width, initialised from the embeddings of real tokens."""

    def __init__(self, init: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(init.detach().clone())  # (P, d)

    @classmethod
    def from_token_ids(cls, embedding: nn.Embedding, token_ids: Sequence[int]) -> "SoftPrompt":
        ids = torch.as_tensor(list(token_ids), device=embedding.weight.device)
        return cls(embedding(ids))

    def forward(self) -> torch.Tensor:
        return self.weight


class InstructionPrompt(SoftPrompt):
    """Instruction prompt tuning (Med-PaLM): P trainable vectors followed by a FIXED hard prompt.

    ``forward()`` returns ``[soft; hard]`` (P + H, d): the soft prompt ``weight`` (trained) in
    front of the token embeddings ``hard`` of a text prompt (a buffer: instructions and
    exemplars written by people, never trained). Only ``weight`` is a parameter.
    """

    def __init__(self, init: torch.Tensor, hard: torch.Tensor):
        super().__init__(init)
        if hard.dim() != 2 or hard.shape[1] != init.shape[1]:
            raise ValueError(f"hard prompt embeddings must be (H, {init.shape[1]}), got {tuple(hard.shape)}")
        self.register_buffer("hard", hard.detach().clone())

    @classmethod
    def from_token_ids(cls, embedding: nn.Embedding, token_ids: Sequence[int],
                       hard_ids: Sequence[int] = ()) -> "InstructionPrompt":
        dev = embedding.weight.device
        with torch.no_grad():
            hard = embedding(torch.as_tensor(list(hard_ids), dtype=torch.long, device=dev))
        return cls(embedding(torch.as_tensor(list(token_ids), device=dev)), hard)

    def forward(self) -> torch.Tensor:
        return torch.cat([self.weight, self.hard.to(self.weight.dtype)], dim=0)


class PromptedLM(nn.Module):
    """A frozen causal LM with a soft prompt: ``forward(input_ids, attention_mask) -> logits (B, P + T, V)``.

    ``prepend`` is the function that puts the prompt in front (the lesson passes the
    student's ``prepend_soft_prompt``).
    """

    def __init__(self, lm: nn.Module, prompt: SoftPrompt, prepend: Callable = prepend_soft_prompt):
        super().__init__()
        self.lm, self.prompt, self.prepend = lm, prompt, prepend

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        embeds = self.lm.get_input_embeddings()(input_ids)  # (B, T, d)
        embeds, mask = self.prepend(embeds, attention_mask, self.prompt())
        return self.lm(inputs_embeds=embeds, attention_mask=mask).logits  # (B, P + T, V)


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the labelled positions (the shift by one happens here)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE)


def encode_examples(tokenizer, prompts: Sequence[str], answers: Sequence[str], prompt_len: int,
                    labels_fn: Callable = answer_only_labels) -> TensorDataset:
    """``TensorDataset(input_ids, attention_mask, labels)`` of prompt + answer texts, right-padded.

    Prompt and answer are tokenised separately and concatenated, so the answer's tokens
    are exactly the ones ``option_scores`` scores. ``labels_fn`` builds the labels.
    """
    seqs, starts = [], []
    for p, a in zip(prompts, answers):
        q, r = tokenizer(p)["input_ids"], tokenizer(a)["input_ids"]
        seqs.append(q + r)
        starts.append(len(q))
    T = max(len(s) for s in seqs)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(seqs), T), pad, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    labels = labels_fn(ids, mask, prompt_len, torch.tensor(starts))
    return TensorDataset(ids, mask, labels)


def trim_padding(batch: Sequence[tuple]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A ``collate_fn`` for :func:`encode_examples`' data: stack ``(input_ids, attention_mask, labels)`` examples
    and drop the last columns that are padding in every example of the batch.

    ``encode_examples`` pads every example to the longest of the WHOLE data set; a batch of four
    short questions then runs mostly padding. A column is dropped only when its mask is 0 and
    its label -100 in every row, and only at the end: in a causal model a position never sees
    the ones after it, so the logits and the loss of the kept positions are the same (up to
    float rounding), at less cost.

    >>> ex = [(torch.tensor([5, 6, 0, 0]), torch.tensor([1, 1, 0, 0]), torch.tensor([-100, -100, 6, -100, -100])),
    ...       (torch.tensor([7, 0, 0, 0]), torch.tensor([1, 0, 0, 0]), torch.tensor([-100, 7, -100, -100, -100]))]
    >>> [tuple(t.shape) for t in trim_padding(ex)]
    [(2, 2), (2, 2), (2, 3)]
    """
    ids, mask, labels = (torch.stack(t) for t in zip(*batch))
    P = labels.shape[1] - ids.shape[1]
    used = mask.bool().any(dim=0) | (labels[:, P:] != IGNORE).any(dim=0)  # (T,) columns some row needs
    keep = int(used.nonzero().max()) + 1 if used.any() else 1
    return ids[:, :keep], mask[:, :keep], labels[:, :P + keep]


@torch.no_grad()
def text_embeds(lm: nn.Module, tokenizer, text: str) -> torch.Tensor:
    """(P, d) the input embeddings of ``text``'s tokens (a hard prompt as a prefix)."""
    ids = torch.tensor(tokenizer(text)["input_ids"], device=lm.get_input_embeddings().weight.device)
    return lm.get_input_embeddings()(ids)


@torch.no_grad()
def option_scores(lm: nn.Module, tokenizer, prefix: torch.Tensor | None, prompts: Sequence[str],
                  options: Sequence[Sequence[str]], *, scorer: Callable = option_log_likelihood,
                  normalise: bool | tuple = False, batch_size: int = 48, progress: bool = False):
    """(N, K) score of each of the K options of N questions: ``scorer`` on [prefix; prompt; option].

    ``normalise`` is passed to ``scorer``; a tuple such as ``(False, True)`` returns a tuple of
    (N, K) tensors, one per value, from the same forward passes.

    ``prefix``: (P, d) embeddings shared by every question (a soft prompt, or a hard prompt's
    token embeddings from :func:`text_embeds`), or None.

    What is computed is exactly the model on each [prefix; prompt; option] sequence; what is
    never computed twice or at all:

    * the prefix, and the tokens every prompt starts with (``Phenotype:``), run once; their
      key/value cache is copied for each batch of questions;
    * the questions run in batches of ``batch_size`` sorted by token count (little padding;
      few large batches: on a CPU each forward pass costs a near-fixed time for reading the
      model's weights, measured on 2 busy cores: 96 questions took 21 s of CPU in one batch,
      25 s in batches of 48, 39 s in batches of 32),
      each keeping only its last position's logits (the prediction of every option's first
      token);
    * an option's tokens after the first continue from its question's cache (rows picked with
      ``Cache.reorder_cache``), options of equal length together, so nothing is padded; an
      option's last token is never run (its prediction scores nothing), so a one-token option
      costs no forward pass at all.

    ``scorer(logits, labels, normalise)`` gets logits (B, L+1, V) whose position 0 is the
    prediction after the prompt's last token, position t that after the option's t-th token,
    and zeros where nothing is predicted (after an option's last token and on padding), and
    labels (B, L+1) = [-100, option ids, -100 padding], so it is exactly
    ``option_log_likelihood``'s convention.
    """
    from tqdm.auto import tqdm

    emb = lm.get_input_embeddings()
    device = emb.weight.device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    K = len(options[0])
    if any(len(row) != K for row in options):
        raise ValueError(f"every question needs the same number of options, got {sorted({len(r) for r in options})}")
    if prefix is None:
        prefix = torch.zeros(0, emb.weight.shape[1], device=device, dtype=emb.weight.dtype)
    flags = normalise if isinstance(normalise, tuple) else (normalise,)
    outs = [torch.empty(len(prompts), K, dtype=torch.float32) for _ in flags]
    qs_all = [tokenizer(p)["input_ids"] for p in prompts]
    opts_all = [[tokenizer(o)["input_ids"] for o in row] for row in options]
    if any(len(q) == 0 for q in qs_all) or any(len(o) == 0 for row in opts_all for o in row):
        raise ValueError("every prompt and every option must have at least one token")
    # the tokens every prompt starts with join the shared prefix (each prompt keeps >= 1 token of its own)
    common = 0
    while common < min(len(q) for q in qs_all) - 1 and len({q[common] for q in qs_all}) == 1:
        common += 1
    head = torch.cat([prefix.to(emb.weight.dtype),
                      emb(torch.tensor(qs_all[0][:common], dtype=torch.long, device=device))])  # (P', d)
    P = head.shape[0]
    # transformers >= 5.24 names the key/value cache ``cache`` (argument and output); the old name
    # ``past_key_values`` is deprecated there and removed in 5.40 (Makefile pins >=5.24,<6)
    head_cache = lm(inputs_embeds=head.unsqueeze(0), use_cache=True).cache if P else None
    order = sorted(range(len(prompts)), key=lambda i: (len(qs_all[i]), i))  # by length: little padding
    batches = [order[lo:lo + batch_size] for lo in range(0, len(order), batch_size)]
    for rows in tqdm(batches, disable=not progress, desc="scoring", unit="batch"):
        qs = [qs_all[i][common:] for i in rows]
        b, Lq = len(qs), max(len(q) for q in qs)
        # 1) each question after the (cached) prefix, LEFT-padded so every question ends in the last column
        ids = torch.full((b, Lq), pad, dtype=torch.long, device=device)
        mask = torch.zeros(b, P + Lq, dtype=torch.long, device=device)
        for i, q in enumerate(qs):
            ids[i, Lq - len(q):] = torch.tensor(q, device=device)
            mask[i, :P] = 1
            mask[i, P + Lq - len(q):] = 1
        # the padding sits between prefix and question: real tokens get consecutive positions 0, 1, ...
        pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
        cache = None
        if head_cache is not None:
            cache = copy.deepcopy(head_cache)
            cache.batch_repeat_interleave(b)
        first = lm(input_ids=ids, attention_mask=mask, position_ids=pos[:, P:], cache=cache,
                   use_cache=True, logits_to_keep=1)
        flat = [o for i in rows for o in opts_all[i]]  # b*K options, question-major
        Lo = max(len(o) for o in flat)
        logits = torch.zeros(b * K, Lo + 1, first.logits.shape[-1], dtype=first.logits.dtype, device=device)
        logits[:, 0] = first.logits[:, -1].repeat_interleave(K, dim=0)  # predicts each option's 1st token
        # 2) an option's later tokens continue from its question's cache; options of one length together
        for n in sorted({len(o) for o in flat} - {1}):
            which = [j for j, o in enumerate(flat) if len(o) == n]
            src = torch.tensor([j // K for j in which], dtype=torch.long, device=device)  # their questions
            sub = copy.deepcopy(first.cache) if n != max(len(o) for o in flat) else first.cache
            sub.reorder_cache(src)
            oid = torch.tensor([flat[j][:-1] for j in which], dtype=torch.long, device=device)  # (m, n-1)
            opos = pos[src, -1:] + 1 + torch.arange(n - 1, device=device).unsqueeze(0)
            omask = torch.cat([mask[src], torch.ones_like(oid)], dim=1)
            out = lm(input_ids=oid, attention_mask=omask, position_ids=opos, cache=sub)
            logits[torch.tensor(which, device=device), 1:n] = out.logits
        labels = torch.full((b * K, Lo + 1), IGNORE, dtype=torch.long, device=device)
        for j, o in enumerate(flat):
            labels[j, 1:1 + len(o)] = torch.tensor(o, device=device)
        idx = torch.tensor(rows)
        for res, flag in zip(outs, flags):
            res[idx] = scorer(logits, labels, flag).float().view(b, K).cpu()
    return tuple(outs) if isinstance(normalise, tuple) else outs[0]


def step_budget(data: Dataset, steps: int, batch_size: int, seed: int = 0) -> Subset:
    """The ``steps * batch_size`` examples of ``data`` that ``train(..., epochs=1)`` turns into exactly ``steps`` steps.

    Drawn without replacement from a permutation seeded by ``seed`` (another permutation
    is appended when more examples are needed than ``data`` has), so the budget is a number
    of optimiser steps, the same on every machine, never a number of seconds.

    >>> len(step_budget(TensorDataset(torch.arange(10)), steps=3, batch_size=4))
    12
    """
    if not isinstance(steps, int) or steps < 1 or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"steps and batch_size must be positive integers, got {steps!r}, {batch_size!r}")
    gen = torch.Generator().manual_seed(seed)
    need, idx = steps * batch_size, []
    while len(idx) < need:
        idx += torch.randperm(len(data), generator=gen).tolist()
    return Subset(data, idx[:need])


def mcnemar_exact(correct_a: Sequence[bool] | torch.Tensor, correct_b: Sequence[bool] | torch.Tensor) -> dict:
    """McNemar's exact test of two conditions answering the SAME questions.

    Only the discordant questions carry information: ``a_only`` (A right, B wrong) and
    ``b_only``. Under the null hypothesis (A and B equally accurate) each discordant
    question is a fair coin, so the two-sided p-value is
    ``min(1, 2 * P[Binomial(a_only + b_only, 1/2) <= min(a_only, b_only)])`` (1 when there
    is no discordant question).

    Returns {"a_only", "b_only", "both", "neither", "n", "p"}.

    >>> r = mcnemar_exact([1] * 10 + [0] * 2, [0] * 10 + [0] * 2)
    >>> r["a_only"], r["b_only"], round(r["p"], 4)
    (10, 0, 0.002)
    """
    a = torch.as_tensor(correct_a).bool().flatten()
    b = torch.as_tensor(correct_b).bool().flatten()
    if a.shape != b.shape:
        raise ValueError(f"the two conditions must answer the same questions: {a.numel()} vs {b.numel()} answers")
    a_only, b_only = int((a & ~b).sum()), int((~a & b).sum())
    return {"a_only": a_only, "b_only": b_only, "both": int((a & b).sum()), "neither": int((~a & ~b).sum()),
            "n": int(a.numel()), "p": paired_sign_p(a_only, b_only)}


# the soft prompts trained offline with tests/data_scripts/soft_prompts_09.py (course_lib/data/README.md)
SHIPPED_PROMPTS = {
    "plain": pathlib.Path(__file__).resolve().parent / "data" / "soft_prompt_09_plain.safetensors",
    "instruction": pathlib.Path(__file__).resolve().parent / "data" / "soft_prompt_09_instruction.safetensors",
}
# the same plain prompt trained with other training seeds (the order of the batches), for the spread over seeds
SHIPPED_SEEDS = {seed: SHIPPED_PROMPTS["plain"].parent / f"soft_prompt_09_plain_seed{seed}.safetensors" for seed in (1, 2)}
# what the script measured offline: per condition, which validation and test questions it got right
SHIPPED_FIGURES = SHIPPED_PROMPTS["plain"].parent / "soft_prompt_09_figures.json"


def save_soft_prompt(path, weight: torch.Tensor, metadata: dict | None = None) -> pathlib.Path:
    """Write a (P, d) soft prompt as float16 safetensors, with string ``metadata`` (how it was made)."""
    from safetensors.torch import save_file

    path = pathlib.Path(path)
    if weight.dim() != 2:
        raise ValueError(f"a soft prompt is (P, d), got shape {tuple(weight.shape)}")
    save_file({"soft_prompt": weight.detach().to("cpu", torch.float16).contiguous()}, str(path),
              metadata={str(k): str(v) for k, v in (metadata or {}).items()})
    return path


def load_soft_prompt(path, device=None) -> tuple[torch.Tensor, dict]:
    """``(weight (P, d) float32, metadata)`` of a soft prompt written by :func:`save_soft_prompt`."""
    from safetensors import safe_open

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no soft prompt at {path}; train one with tests/data_scripts/soft_prompts_09.py")
    with safe_open(str(path), framework="pt") as fh:
        meta = dict(fh.metadata() or {})
        weight = fh.get_tensor("soft_prompt").float()
    return weight.to(device or "cpu"), meta


# ---------------------------------------------------------------- contextual calibration and the scoring rule
CONTENT_FREE = ("N/A", "", "[MASK]")  # the content-free inputs of Zhao et al. (2021)


@torch.no_grad()
def content_free_scores(lm: nn.Module, tokenizer, prefix: torch.Tensor | None, labels: Sequence[str], *,
                        template: str = "Phenotype: {}\nSystem:", content_free: Sequence[str] = CONTENT_FREE,
                        scorer: Callable = option_log_likelihood, normalise: bool | tuple = False) -> dict:
    """{label text: its log prior} for contextual calibration (Zhao et al. 2021, "Calibrate before use").

    Every answer text in ``labels`` (e.g. the twelve organ systems, each with its leading space) is scored
    by :func:`option_scores` after ``prefix`` and ``template`` filled with each content-free input (a
    question that asks nothing: "N/A", the empty string, "[MASK]"). The prior of a label is the log of
    its probability averaged over the content-free inputs, ``log mean_c exp(score_c)``, with the score
    summed or length-normalised as ``normalise`` says (a tuple gives a tuple of dicts, as in
    :func:`option_scores`). What the model gives an answer with no question in front is its bias towards
    that answer's text; :func:`calibrate` takes it off.
    """
    if not labels or not content_free:
        raise ValueError("content_free_scores needs at least one label and one content-free input")
    prompts = [template.format(c) for c in content_free]
    scores = option_scores(lm, tokenizer, prefix, prompts, [list(labels)] * len(prompts), scorer=scorer,
                           normalise=normalise)
    n = torch.tensor(float(len(prompts)))
    to_dict = lambda s: {lab: float(v) for lab, v in zip(labels, torch.logsumexp(s.double(), dim=0) - n.log())}
    return tuple(to_dict(s) for s in scores) if isinstance(normalise, tuple) else to_dict(scores)


def calibrate(scores: torch.Tensor, options: Sequence[Sequence[str]], prior: dict) -> torch.Tensor:
    """(N, K) the option scores minus each option's log prior from :func:`content_free_scores`.

    Zhao et al. divide each answer's probability by its content-free probability and renormalise; in
    log space that is a subtraction, and the renormalisation is one constant per question, which does
    not change which option scores highest. Raises ValueError for an option without a prior.

    >>> calibrate(torch.tensor([[-1.0, -2.0]]), [[" eye", " ear"]], {" eye": -0.5, " ear": -3.0})
    tensor([[-0.5000,  1.0000]])
    """
    missing = sorted({o for row in options for o in row} - set(prior))
    if missing:
        raise ValueError(f"no content-free prior for the options {missing}; known: {sorted(prior)}")
    if scores.shape != (len(options), len(options[0])):
        raise ValueError(f"scores {tuple(scores.shape)} do not match {len(options)} questions x {len(options[0])} options")
    offset = torch.tensor([[prior[o] for o in row] for row in options], dtype=scores.dtype, device=scores.device)
    return scores - offset


def pick_rule(val_right_summed: int, val_right_normalised: int) -> int:
    """0 (summed) or 1 (length-normalised): the scoring rule with more VALIDATION questions right.

    A tie goes to the summed log-likelihood, the plain rule (stated before any number was seen). The
    rule is chosen per condition from its validation counts only; the test questions are then scored
    with it, so no choice depends on the test set.

    >>> pick_rule(63, 71), pick_rule(53, 52), pick_rule(60, 60)
    (1, 0, 0)
    """
    if min(val_right_summed, val_right_normalised) < 0:
        raise ValueError(f"validation counts must be >= 0, got {val_right_summed}, {val_right_normalised}")
    return int(val_right_normalised > val_right_summed)


# ---------------------------------------------------------------- chain of thought and self-consistency
# Worked rationales for the lesson's task, written for the course: a short reason, then the organ system.
# Keyed by HPO id; every one is a TRAINING question (the three solved examples of the few-shot prompt), so the
# chain-of-thought prompt differs from the few-shot prompt only by the rationales (tests/test_chain_of_thought.py).
COT_RATIONALES = {
    "HP:0031775": "Strabismus means the two eyes do not point the same way.",  # Neurogenic strabismus -> eye
    "HP:0030437": "The anal canal is the last part of the gut.",  # Anal canal neoplasm -> digestive system
    "HP:6000882": "Antibodies are made by the body's defence against infection.",  # Anti-recoverin antibody -> immune
}


def cot_prompt(instruction: str, examples: Sequence, rationales: dict | None = None) -> str:
    """A few-shot chain-of-thought prompt: the instruction, then each solved example with its worked rationale.

    ``examples``: questions (``course_lib.bio.hpo_questions.Question``) of the TRAINING split, each with a
    rationale in ``rationales`` (default :data:`COT_RATIONALES`), keyed by HPO id. Each example reads
    ``Phenotype: <name>\\nReasoning: <rationale>\\nSystem: <answer>\\n\\n``, so the prompt ends where the next
    ``Phenotype: ...\\nReasoning:`` begins. Raises ValueError for an example outside the training split (a
    held-out question in the prompt would leak its answer) or without a rationale.

    >>> from course_lib.bio.hpo_questions import Question
    >>> q = Question("HP:0031775", "Neurogenic strabismus", ("blood", "eye", "ear", "immune system"), 1, "train")
    >>> cot_prompt("Which organ system?\\n\\n", [q])
    'Which organ system?\\n\\nPhenotype: Neurogenic strabismus\\nReasoning: Strabismus means the two eyes do not point the same way.\\nSystem: eye\\n\\n'
    """
    rationales = COT_RATIONALES if rationales is None else rationales
    parts = [instruction]
    for q in examples:
        if q.split != "train":
            raise ValueError(f"chain-of-thought examples must come from the training split; {q.phenotype!r} "
                             f"({q.hpo_id}) is a {q.split!r} question")
        if q.hpo_id not in rationales:
            raise ValueError(f"no rationale for {q.phenotype!r} ({q.hpo_id}); known: {sorted(rationales)}")
        parts.append(f"Phenotype: {q.phenotype}\nReasoning: {rationales[q.hpo_id]}\nSystem: {q.answer_text}\n\n")
    return "".join(parts)


def stop_token_ids(tokenizer, stop: str = "\n") -> torch.Tensor:
    """(S,) the ids of every vocabulary token whose text contains ``stop``, and the end-of-sequence token.

    A generated rationale ends at its first line break; BPE vocabularies have many tokens that
    contain one (``"\\n"``, ``"\\n\\n"``, ``".\\n"``), so all of them stop it.
    """
    vocab = len(tokenizer)
    texts = tokenizer.batch_decode([[i] for i in range(vocab)])
    ids = [i for i, t in enumerate(texts) if stop in t]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return torch.tensor(sorted(ids), dtype=torch.long)


def _select_rows(cache, rows: torch.Tensor):
    """A new cache with the given batch rows of ``cache`` (the original is not modified)."""
    from transformers import DynamicCache

    return DynamicCache([(layer.keys[rows], layer.values[rows]) for layer in cache.layers])


@torch.no_grad()
def rationale_option_scores(lm: nn.Module, tokenizer, prefix: str, prompts: Sequence[str],
                            options: Sequence[Sequence[str]], *, scorer: Callable, paths: int = 1,
                            temperature: float = 0.0, generator: torch.Generator | None = None,
                            max_new_tokens: int = 16, cue: str = "\nSystem:", normalise: bool | tuple = False,
                            batch_size: int = 24, option_batch: int = 128, stop_ids: torch.Tensor | None = None,
                            progress: bool = False):
    """Generate ``paths`` rationales per question, then score every option after [prefix; prompt; rationale; cue].

    For each of the N ``prompts`` (``"Phenotype: ...\\nReasoning:"``) the model continues the text after
    ``prefix`` (a chain-of-thought prompt, :func:`cot_prompt`) for at most ``max_new_tokens`` tokens, up to
    the first token in ``stop_ids`` (default :func:`stop_token_ids`: a line break or the end of sequence;
    the stop token itself is not kept). ``temperature`` 0 takes the most likely token at every step
    (greedy: every path the same); above 0 it samples from softmax(logits / temperature) with
    ``generator`` (required then: the same seed gives the same paths). Then ``cue`` is appended and the K
    options of each question are scored by ``scorer(logits, labels, normalise)`` with the labels'
    convention of :func:`option_scores` (the lesson passes the student's ``option_log_likelihood``).

    The answer is read off by scores, never parsed from free text: a 135M model rarely finishes a
    rationale with an answer in a parseable form, so, as for every other condition of the lesson, the
    options are scored, here conditioned on the question AND the generated rationale.

    Nothing is computed twice: the prefix runs once (its key/value cache is copied for each batch of
    ``batch_size`` questions), each question once (its cache is repeated for its ``paths``), every
    generated token once, and the cue and the options continue from that cache (options in chunks of
    ``option_batch`` rows, to bound memory), exactly as a forward pass over the whole text would score
    them (tests/test_chain_of_thought.py checks this against one uncached forward pass).

    ``progress`` True shows a progress bar over the batches of questions (tqdm).

    Returns ``(rationales, scores)``: ``rationales[i][p]`` the text of question i's path p (stripped),
    ``scores`` (N, paths, K) float32 on the CPU (a tuple of them when ``normalise`` is a tuple).
    """
    emb = lm.get_input_embeddings()
    device = emb.weight.device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if not isinstance(paths, int) or paths < 1 or max_new_tokens < 1:
        raise ValueError(f"paths and max_new_tokens must be positive integers, got {paths!r}, {max_new_tokens!r}")
    if temperature < 0 or (temperature > 0 and generator is None):
        raise ValueError("temperature must be >= 0, and sampling (temperature > 0) needs a torch.Generator "
                         f"so that the same seed gives the same paths; got temperature={temperature!r}, "
                         f"generator={generator!r}")
    K = len(options[0])
    if len(options) != len(prompts) or any(len(row) != K for row in options):
        raise ValueError(f"every question needs the same number of options and one row of options per prompt, "
                         f"got {len(prompts)} prompts and option rows of lengths {sorted({len(r) for r in options})}")
    stops = (stop_token_ids(tokenizer) if stop_ids is None else stop_ids).to(device)
    flags = normalise if isinstance(normalise, tuple) else (normalise,)
    N = len(prompts)
    outs = [torch.empty(N, paths, K, dtype=torch.float32) for _ in flags]
    rationales: list[list[str]] = [[""] * paths for _ in range(N)]
    head_ids = tokenizer(prefix)["input_ids"]
    cue_ids = tokenizer(cue)["input_ids"]
    qs_all = [tokenizer(p)["input_ids"] for p in prompts]
    opts_all = [[tokenizer(o)["input_ids"] for o in row] for row in options]
    if not head_ids or not cue_ids or any(not q for q in qs_all) or any(not o for row in opts_all for o in row):
        raise ValueError("the prefix, the cue, every prompt and every option must have at least one token")
    P = len(head_ids)
    head_cache = lm(input_ids=torch.tensor([head_ids], device=device), use_cache=True).cache
    from tqdm.auto import tqdm

    for lo in tqdm(range(0, N, batch_size), disable=not progress, desc=f"{paths} path(s) per question",
                   unit="batch"):
        rows = list(range(lo, min(lo + batch_size, N)))
        b, Lq = len(rows), max(len(qs_all[i]) for i in rows)
        # 1) the questions after the cached prefix, LEFT-padded (padding between prefix and question)
        ids = torch.full((b, Lq), pad, dtype=torch.long, device=device)
        mask = torch.zeros(b, P + Lq, dtype=torch.long, device=device)
        mask[:, :P] = 1
        for r, i in enumerate(rows):
            ids[r, Lq - len(qs_all[i]):] = torch.tensor(qs_all[i], device=device)
            mask[r, P + Lq - len(qs_all[i]):] = 1
        pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
        cache = copy.deepcopy(head_cache)
        cache.batch_repeat_interleave(b)
        out = lm(input_ids=ids, attention_mask=mask, position_ids=pos[:, P:], cache=cache, use_cache=True,
                 logits_to_keep=1)
        # 2) each question's cache repeated for its paths; then one token per step for every path
        cache = out.cache
        cache.batch_repeat_interleave(paths)
        logits = out.logits[:, -1].repeat_interleave(paths, dim=0)  # (B, V), B = b * paths
        mask = mask.repeat_interleave(paths, dim=0)  # (B, P + Lq)
        B = b * paths
        n_real = mask.sum(dim=1)  # (B,) real tokens so far = the next position
        done = torch.zeros(B, dtype=torch.bool, device=device)
        gen = torch.zeros(B, 0, dtype=torch.long, device=device)
        for _ in range(max_new_tokens):
            if temperature > 0:
                # inverse-CDF sampling (as torch.multinomial, several times faster over a 49k vocabulary)
                cdf = torch.softmax(logits.float() / temperature, dim=-1).cumsum(dim=-1).to(generator.device)
                u = torch.rand(cdf.shape[0], 1, generator=generator, device=generator.device) * cdf[:, -1:]
                nxt = torch.searchsorted(cdf, u, right=True).squeeze(1).clamp(max=cdf.shape[1] - 1).to(device)
            else:
                nxt = logits.argmax(dim=-1)
            done = done | torch.isin(nxt, stops)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            if bool(done.all()):
                break
            gen = torch.cat([gen, nxt[:, None]], dim=1)
            keep = (~done).long()
            mask = torch.cat([mask, keep[:, None]], dim=1)
            out = lm(input_ids=nxt[:, None], attention_mask=mask, position_ids=n_real[:, None], cache=cache,
                     use_cache=True)
            cache, logits = out.cache, out.logits[:, -1]
            n_real = n_real + keep
        for r in range(B):
            toks = gen[r][mask[r, P + Lq:].bool()].tolist()
            rationales[rows[r // paths]][r % paths] = tokenizer.decode(toks).strip()
        # 3) the cue after every rationale; its last position predicts each option's first token
        cue_t = torch.tensor(cue_ids, device=device).expand(B, len(cue_ids))
        mask = torch.cat([mask, torch.ones_like(cue_t)], dim=1)
        cpos = n_real[:, None] + torch.arange(len(cue_ids), device=device)
        first = lm(input_ids=cue_t, attention_mask=mask, position_ids=cpos, cache=cache, use_cache=True,
                   logits_to_keep=1)
        last_pos = cpos[:, -1]
        # 4) the options, continuing from each path's cache (as in option_scores)
        flat = [o for r in range(B) for o in opts_all[rows[r // paths]]]  # B*K options, path-major
        Lo = max(len(o) for o in flat)
        ologits = torch.zeros(B * K, Lo + 1, first.logits.shape[-1], dtype=first.logits.dtype, device=device)
        ologits[:, 0] = first.logits[:, -1].repeat_interleave(K, dim=0)
        for n in sorted({len(o) for o in flat} - {1}):
            which = [j for j, o in enumerate(flat) if len(o) == n]
            for c in range(0, len(which), option_batch):
                part = which[c:c + option_batch]
                src = torch.tensor([j // K for j in part], dtype=torch.long, device=device)  # their paths
                oid = torch.tensor([flat[j][:-1] for j in part], dtype=torch.long, device=device)  # (m, n-1)
                opos = last_pos[src, None] + 1 + torch.arange(n - 1, device=device)
                omask = torch.cat([mask[src], torch.ones_like(oid)], dim=1)
                o = lm(input_ids=oid, attention_mask=omask, position_ids=opos, cache=_select_rows(first.cache, src))
                ologits[torch.tensor(part, device=device), 1:n] = o.logits
        labels = torch.full((B * K, Lo + 1), IGNORE, dtype=torch.long, device=device)
        for j, o in enumerate(flat):
            labels[j, 1:1 + len(o)] = torch.tensor(o, device=device)
        for res, flag in zip(outs, flags):
            res[lo:lo + b] = scorer(ologits, labels, flag).float().view(b, paths, K).cpu()
    return rationales, (tuple(outs) if isinstance(normalise, tuple) else outs[0])


def majority_vote(answers: torch.Tensor, scores: torch.Tensor | None = None) -> torch.Tensor:
    """(N,) the answer most of each question's k paths gave (self-consistency, Wang et al. 2023).

    ``answers``: (N, k) int, the option each path chose. A tie between options with the same number of
    votes goes to the tied option with the highest score summed over the k paths (``scores``: (N, k, K),
    the scores the paths' answers were read from: the option the paths find most likely together);
    without ``scores``, or when those sums tie too, to the lowest option index.

    >>> majority_vote(torch.tensor([[2, 0, 2], [1, 3, 0]]))  # 2 wins 2:1; 1-1-1 tie -> lowest index
    tensor([2, 0])
    >>> s = torch.tensor([[[0., -1., -5.], [0., -1., -5.], [-9., 0., -5.]]])  # (1, 3 paths, 3 options)
    >>> majority_vote(torch.tensor([[0, 0, 1]]), s), majority_vote(torch.tensor([[0, 1, 2]]), s)
    (tensor([0]), tensor([1]))
    """
    answers = torch.as_tensor(answers).long()
    if answers.dim() != 2:
        raise ValueError(f"answers must be (N questions, k paths), got shape {tuple(answers.shape)}")
    K = int(answers.max()) + 1 if scores is None else scores.shape[-1]
    votes = F.one_hot(answers, K).sum(dim=1)  # (N, K)
    best = votes == votes.max(dim=1, keepdim=True).values  # (N, K) the options with the most votes
    if scores is not None:
        if scores.shape[:2] != answers.shape:
            raise ValueError(f"scores must be (N, k, K) for answers {tuple(answers.shape)}, got {tuple(scores.shape)}")
        total = scores.double().sum(dim=1).masked_fill(~best, float("-inf"))  # (N, K), only the tied options
        best = best & (total == total.max(dim=1, keepdim=True).values)
    return best.long().argmax(dim=1)  # argmax returns the first maximum: the lowest index among exact ties
