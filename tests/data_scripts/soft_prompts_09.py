"""Train the two soft prompts that lesson 09 ships (course_lib/data/soft_prompt_09_*.safetensors).

    .venv/bin/python tests/data_scripts/soft_prompts_09.py plain --steps 216 --baseline zero-shot
    .venv/bin/python tests/data_scripts/soft_prompts_09.py instruction --steps 72 --baseline few-shot

What it does, with fixed seeds (the same steps on every machine, up to float rounding):
  * loads the frozen SmolLM2-135M-Instruct (course_lib.bio.smollm2) and the HPO organ-system
    questions (course_lib.bio.hpo_questions: 288 train / 96 validation / 96 test);
  * "plain": prompt tuning (Lester et al. 2021): P = 8 vectors, initialised from the first 8
    token embeddings of the lesson's instruction, in front of "Phenotype: ...\\nSystem:";
  * "instruction": instruction prompt tuning as in Med-PaLM (Singhal et al. 2023): the same
    P = 8 trainable vectors in front of the lesson's hard prompt (the instruction and three
    solved training questions), which stays fixed text;
  * each: AdamW (lr 0.3, no weight decay, gradient norm clipped to 1), batches of 4, answer-only
    labels, --steps optimiser steps (a step budget: the same steps on any machine), a checkpoint
    written every --save-every steps (so an interrupted run leaves a usable, labelled prompt);
  * then the prompt AS SAVED (float16) is scored once on the 96 validation questions and once on
    the 96 test questions (reported, nothing is selected on test), and --baseline scores a
    prompt-free baseline on the same test questions; McNemar's exact test compares the conditions
    whose per-question answers the figures file holds;
  * writes the prompt as float16 safetensors with its settings and figures as metadata, and the
    figures to course_lib/data/soft_prompt_09_figures.json (updated, one condition at a time).
The two prompts are trained by two processes of one torch thread each (on a busy shared 2-core CPU
one thread per process is several times faster than two threads).
"""
from __future__ import annotations

import argparse
import fcntl
import json
import pathlib
import platform
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from course_lib import prompt_tuning as PT  # noqa: E402
from course_lib.bio import hpo_questions, smollm2  # noqa: E402
from course_lib.training import TrainConfig, train  # noqa: E402

# the lesson's texts (notebooks/09_prompt_tuning: the same strings)
INSTRUCTION = "Which organ system does each abnormal phenotype affect?\n\n"
SHOT_INDICES = (0, 120, 240)  # three solved training questions (eye, genitourinary, blood)
P, BATCH, LR, SEED = 8, 4, 0.3, 0


def hard_prompt(train_qs) -> str:
    return INSTRUCTION + "".join(f"Phenotype: {train_qs[i].phenotype}\nSystem: {train_qs[i].answer_text}\n\n"
                                 for i in SHOT_INDICES)


def question_text(q) -> str:
    return f"Phenotype: {q.phenotype}\nSystem:"


def accuracy(lm, tok, prefix, qs):
    """(correct summed, correct normalised) as boolean tensors over ``qs``."""
    gold = torch.tensor([q.answer for q in qs])
    summed, normed = PT.option_scores(lm, tok, prefix, [question_text(q) for q in qs],
                                      [[" " + o for o in q.options] for q in qs], normalise=(False, True))
    return summed.argmax(1) == gold, normed.argmax(1) == gold


def update_figures(out: pathlib.Path, change) -> dict:
    """Read course_lib/data/soft_prompt_09_figures.json, apply ``change(figures)``, write it back, under a lock
    (several runs of this script may finish at once)."""
    path = out / "soft_prompt_09_figures.json"
    with open(pathlib.Path(tempfile.gettempdir()) / "soft_prompt_09_figures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        figures = json.loads(path.read_text()) if path.is_file() else {}
        change(figures)
        path.write_text(json.dumps(figures, indent=1) + "\n")
    return figures


def baselines(lm, tok, questions, out: pathlib.Path, command: str, log) -> None:
    """The prompt-free baselines on the validation AND the test questions: zero-shot, few-shot (the hard
    prompt) and zero-shot with contextual calibration (Zhao et al. 2021). Their validation answers are what
    the lesson picks each condition's scoring rule with (``PT.pick_rule``); nothing is trained."""
    hard = hard_prompt(questions["train"])
    zero = PT.text_embeds(lm, tok, INSTRUCTION)
    labels = [" " + name for name in hpo_questions.SYSTEMS.values()]
    priors = PT.content_free_scores(lm, tok, zero, labels, normalise=(False, True))
    entries = {}
    for name, prefix in (("zero-shot", zero), ("few-shot", PT.text_embeds(lm, tok, hard))):
        cal = {}
        for split in ("val", "test"):
            qs = questions[split]
            gold = torch.tensor([q.answer for q in qs])
            opts = [[" " + o for o in q.options] for q in qs]
            scores = PT.option_scores(lm, tok, prefix, [question_text(q) for q in qs], opts, normalise=(False, True))
            entries.setdefault(name, {})[split] = [s.argmax(1) == gold for s in scores]
            if name == "zero-shot":
                cal[split] = [PT.calibrate(s, opts, prior).argmax(1) == gold for s, prior in zip(scores, priors)]
        if cal:
            entries["calibrated zero-shot"] = cal
    def change(figures):
        for name, parts in entries.items():
            (vs, vn), (ts, tn) = parts["val"], parts["test"]
            entry = figures.setdefault(name, {})
            entry.update({"test_summed": int(ts.sum()), "test_normalised": int(tn.sum()), "n": len(ts),
                          "correct_summed": ts.int().tolist(), "correct_normalised": tn.int().tolist(),
                          "val_summed": f"{int(vs.sum())}/{len(vs)}", "val_normalised": f"{int(vn.sum())}/{len(vn)}",
                          "correct_val_summed": vs.int().tolist(), "correct_val_normalised": vn.int().tolist(),
                          "baseline_command": command})
            if name == "calibrated zero-shot":
                entry["content_free"] = list(PT.CONTENT_FREE)
                entry["priors_summed"], entry["priors_normalised"] = ({k: round(v, 4) for k, v in pr.items()}
                                                                      for pr in priors)
            log(f"[{name}] validation {int(vs.sum())} / {int(vn.sum())}, test {int(ts.sum())} / {int(tn.sum())} "
                f"of {len(ts)} (summed / normalised)")
    update_figures(out, change)


def make_prompt(which, lm, tok, train_qs):
    init_ids = tok(INSTRUCTION)["input_ids"][:P]
    if which == "plain":
        return PT.SoftPrompt.from_token_ids(lm.get_input_embeddings(), init_ids)
    return PT.InstructionPrompt.from_token_ids(lm.get_input_embeddings(), init_ids,
                                               tok(hard_prompt(train_qs))["input_ids"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", choices=["plain", "instruction", "baselines"],
                    help="the soft prompt to train, or 'baselines': score the prompt-free baselines on validation and test")
    ap.add_argument("--steps", type=int, default=216, help="optimiser steps (216 = 3 epochs of 288 questions)")
    ap.add_argument("--save-every", type=int, default=24, help="steps between checkpoints written to the file")
    ap.add_argument("--baseline", choices=["zero-shot", "few-shot"], default=None,
                    help="also score this prompt-free baseline on the test questions")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "course_lib" / "data")
    ap.add_argument("--threads", type=int, default=1, help="1 is fastest on a busy shared CPU")
    ap.add_argument("--seed", type=int, default=SEED,
                    help="training seed (the order of the training batches); 0 is the shipped prompt, another "
                         "seed writes soft_prompt_09_<which>_seed<N>.safetensors and its own figures entry")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    seed = args.seed
    if seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {seed}")
    torch.manual_seed(seed)
    which = args.which
    key = which if seed == SEED else f"{which} seed {seed}"  # the figures entry of this run

    def log(msg):
        print(time.strftime("%H:%M:%S"), msg, flush=True)

    lm, tok = smollm2.load_frozen_lm("cpu", progress=False)
    PT.freeze_model(lm)
    questions = {s: hpo_questions.load_questions(s) for s in hpo_questions.SPLITS}
    hard = hard_prompt(questions["train"])
    machine = (f"{platform.machine()} CPU ({platform.processor() or 'unknown'}), {torch.get_num_threads()} torch "
               f"thread(s) on a shared 2-core machine, torch {torch.__version__}")
    command = ".venv/bin/python tests/data_scripts/soft_prompts_09.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    if which == "baselines":
        baselines(lm, tok, questions, args.out, command, log)
        return
    prompt = make_prompt(which, lm, tok, questions["train"])
    model = PT.PromptedLM(lm, prompt)
    train_qs = questions["train"]
    data = PT.encode_examples(tok, [question_text(q) for q in train_qs], [" " + q.answer_text for q in train_qs],
                              prompt().shape[0])
    opt = torch.optim.AdamW([prompt.weight], lr=LR, weight_decay=0.0)
    meta = {"which": which, "P": P, "batch_size": BATCH, "lr": LR, "optimizer": "AdamW, no weight decay, grad clip 1",
            "seed": seed, "init": "first 8 token embeddings of the instruction",
            "hard_prompt": hard if which == "instruction" else "", "command": command, "machine": machine}
    path = args.out / (PT.SHIPPED_PROMPTS[which].name if seed == SEED else f"soft_prompt_09_{which}_seed{seed}.safetensors")
    start, done, losses = time.perf_counter(), 0, []
    while done < args.steps:
        chunk = min(args.save_every, args.steps - done)
        cfg = TrainConfig(epochs=1, batch_size=BATCH, lr=LR, weight_decay=0.0, seed=seed + done, grad_clip=1.0,
                          device="cpu", progress=False)
        hist = train(model, PT.step_budget(data, chunk, BATCH, seed=seed + done), cfg, loss_fn=PT.lm_loss,
                     optimizer=opt)
        done += hist.steps
        losses.append(round(hist.train_loss[-1], 4))
        PT.save_soft_prompt(path, prompt.weight, {**meta, "steps": done, "train_loss_per_chunk": json.dumps(losses),
                                                  "train_seconds": f"{time.perf_counter() - start:.0f}"})
        log(f"[{which}] step {done}/{args.steps}: mean loss of the last {chunk} steps {hist.train_loss[-1]:.3f} "
            f"({time.perf_counter() - start:.0f} s); checkpoint written")
    seconds = time.perf_counter() - start
    saved, meta_saved = PT.load_soft_prompt(path)  # the figures are those of the float16 file as shipped
    prefix = saved if which == "plain" else torch.cat([saved, PT.text_embeds(lm, tok, hard)])
    vs, vn = accuracy(lm, tok, prefix, questions["val"])
    ts, tn = accuracy(lm, tok, prefix, questions["test"])
    meta_saved.update({"val_summed": f"{int(vs.sum())}/{len(vs)}", "val_normalised": f"{int(vn.sum())}/{len(vn)}",
                       "test_summed": f"{int(ts.sum())}/{len(ts)}", "test_normalised": f"{int(tn.sum())}/{len(tn)}",
                       "train_seconds": f"{seconds:.0f}"})
    PT.save_soft_prompt(path, saved, meta_saved)
    log(f"[{which}] {done} steps in {seconds:.0f} s; validation {int(vs.sum())} / {int(vn.sum())} of {len(vs)}, "
        f"test {int(ts.sum())} / {int(tn.sum())} of {len(ts)} (summed / normalised); {path.stat().st_size} bytes")
    parts = {key: (ts, tn)}
    if args.baseline:
        text = INSTRUCTION if args.baseline == "zero-shot" else hard
        parts[args.baseline] = accuracy(lm, tok, PT.text_embeds(lm, tok, text), questions["test"])
    def change(figures):
        for name, (s_, n_) in parts.items():
            figures[name] = {**figures.get(name, {}), "test_summed": int(s_.sum()), "test_normalised": int(n_.sum()),
                             "n": len(s_), "correct_summed": s_.int().tolist(), "correct_normalised": n_.int().tolist()}
            if name == key:
                figures[name].update({"correct_val_summed": vs.int().tolist(), "correct_val_normalised": vn.int().tolist(),
                                      **{k: meta_saved[k] for k in ("steps", "val_summed", "val_normalised",
                                                                    "train_seconds", "command", "machine", "seed")}})
        for a in ("plain", "instruction"):
            for b in ("zero-shot", "few-shot"):
                if a in figures and b in figures:
                    for how in ("summed", "normalised"):
                        r = PT.mcnemar_exact(figures[a][f"correct_{how}"], figures[b][f"correct_{how}"])
                        figures[f"{a} vs {b} ({how})"] = r
                        log(f"test {how}: {a} {figures[a][f'test_{how}']} vs {b} {figures[b][f'test_{how}']} of "
                            f"{r['n']}: discordant {r['a_only']} vs {r['b_only']}, McNemar exact p = {r['p']:.4g}")
    update_figures(args.out, change)
    log(f"wrote {args.out / 'soft_prompt_09_figures.json'}")


if __name__ == "__main__":
    main()
