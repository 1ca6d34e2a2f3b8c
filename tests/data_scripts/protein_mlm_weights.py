"""Train the shipped protein masked-residue model of lesson 10: course_lib/data/protein_mlm_10.pt.

NOT run at test or run time (it needs the Debian package mmseqs2-examples and about an hour of
one CPU thread: 3,567 s on 2 shared cores at load average 4-6, 2026-11-26). To rebuild:

    apt-get install -y mmseqs2-examples          # the source FASTA and the mmseqs2 tool
    OMP_NUM_THREADS=1 nice -n 15 .venv/bin/python tests/data_scripts/protein_mlm_weights.py

Pretraining proteins (unlabelled: only sequences are used, never names): every entry of
/usr/share/doc/mmseqs2/example-data/DB.fasta.gz (20,000 UniProtKB entries, 3,183 Swiss-Prot and
16,817 TrEMBL; UniProt, CC BY 4.0) that is
  * not one of the lesson's 575 test proteins, and
  * has no ``mmseqs easy-search`` hit among the test proteins at >= 50 % identity over >= 80 %
    coverage (the same thresholds that separate the lesson's train and test clusters), and
  * has at least 30 residues.
So the pretraining set relates to the test proteins as the lesson's training proteins do.
Those proteins are clustered (``mmseqs easy-cluster``, same thresholds) and 5 % of the clusters
(numpy seed 0) are a validation set: the checkpoint kept is the one with the best validation
masked accuracy (evaluated every EVAL_EVERY steps); the test proteins are never looked at.

Model: ``course_lib.proteins.ProteinMLM(d_model=128, num_heads=4, num_layers=4, d_ff=256)``.
Training: random windows of at most CROP residues (``<cls>`` and ``<eos>`` around every window),
15 % of the residues replaced by ``<mask>`` (a fresh mask every batch), AdamW lr 1e-3 with
linear warm-up (WARMUP steps) and cosine decay to 0 at STEPS, batch BATCH, torch seed SEED,
one thread. A step budget (STEPS), not a time budget: the same run on every machine.

Output: a float32 state dict saved with ``torch.save`` (load with ``weights_only=True``) plus
``protein_mlm_10.json`` (settings, data counts, validation curve).
"""
from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from course_lib import proteins as P  # noqa: E402
from course_lib.bio import uniprot  # noqa: E402

SOURCE = "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz"
OUT = os.path.join(REPO, "course_lib", "data", "protein_mlm_10.pt")
CONFIG = dict(d_model=128, num_heads=4, num_layers=4, d_ff=256, dropout=0.1, max_len=1024)
# STOP_AT: stop after that many steps of the STEPS-step schedule (the shipped file: see its .json)
STOP_AT = int(os.environ.get("MLM_STOP_AT", 0)) or None
SEED, STEPS, BATCH, CROP, LR, WARMUP, EVAL_EVERY, RATE = 0, int(os.environ.get("MLM_STEPS", 2600)), 16, 254, 1e-3, 200, 250, 0.15
MIN_ID, COVERAGE = 0.5, 0.8


from uniprot_names import read_fasta  # noqa: E402 - the lesson's extract script, beside this one


def mmseqs(*args, cwd):
    subprocess.run(["mmseqs", *args, "-v", "1", "--threads", "1"], check=True, cwd=cwd)


def pretraining_sets():
    test = uniprot.load_proteins("test")
    test_acc = {p.accession for p in test}
    pool = {}
    for header, seq in read_fasta(SOURCE):
        acc = header[1:].split()[0].split("|")[1] if "|" in header else header[1:].split()[0]
        if acc not in test_acc and len(seq) >= 30:
            pool[acc] = seq.upper()
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "pool.fasta"), "w") as f:
            f.writelines(f">{a}\n{s}\n" for a, s in pool.items())
        with open(os.path.join(tmp, "test.fasta"), "w") as f:
            f.writelines(f">{p.accession}\n{p.sequence}\n" for p in test)
        mmseqs("easy-search", "test.fasta", "pool.fasta", "hits.m8", "w1", "--min-seq-id", str(MIN_ID),
               "-c", str(COVERAGE), "--cov-mode", "0", cwd=tmp)
        with open(os.path.join(tmp, "hits.m8")) as f:
            near_test = {line.split()[1] for line in f}
        kept = {a: s for a, s in pool.items() if a not in near_test}
        with open(os.path.join(tmp, "kept.fasta"), "w") as f:
            f.writelines(f">{a}\n{s}\n" for a, s in kept.items())
        mmseqs("easy-cluster", "kept.fasta", "clu", "w2", "--min-seq-id", str(MIN_ID), "-c", str(COVERAGE),
               "--cov-mode", "0", cwd=tmp)
        cluster_of = {}
        with open(os.path.join(tmp, "clu_cluster.tsv")) as f:
            for line in f:
                rep, member = line.split()
                cluster_of[member] = rep
    reps = sorted(set(cluster_of.values()))
    rng = np.random.default_rng(SEED)
    val_reps = {reps[i] for i in rng.permutation(len(reps))[: int(0.05 * len(reps))]}
    accs = sorted(kept)
    train = [kept[a] for a in accs if cluster_of[a] not in val_reps]
    val = [kept[a] for a in accs if cluster_of[a] in val_reps]
    info = {"source_entries": len(pool) + len(test_acc & set(pool)), "pool_without_test": len(pool),
            "removed_near_test": len(near_test), "clusters": len(reps), "train_sequences": len(train),
            "validation_sequences": len(val), "train_residues": sum(map(len, train))}
    return train, val, info


def batch_of(seqs, rng):
    """Random windows of at most CROP residues, encoded with <cls>/<eos>."""
    out = []
    for s in seqs:
        start = int(rng.integers(0, max(1, len(s) - CROP + 1)))
        out.append(s[start:start + CROP])
    return P.encode_proteins(out)


@torch.no_grad()
def masked_accuracy(model, seqs, seed=1):
    """Accuracy on 15 % masked residues of the first CROP residues of each sequence (fixed masks)."""
    model.eval()
    g = torch.Generator().manual_seed(seed)
    right = total = 0
    for i in range(0, len(seqs), 64):
        ids, keep = P.encode_proteins(seqs[i:i + 64], CROP + 2)
        corrupted, targets = P.mask_residues(ids, keep, RATE, generator=g)
        pred = model(corrupted, keep).argmax(-1)
        chosen = targets != -100
        right += int((pred[chosen] == targets[chosen]).sum())
        total += int(chosen.sum())
    model.train()
    return right / total


def main() -> int:
    torch.set_num_threads(1)
    t_start = time.time()
    train_seqs, val_seqs, info = pretraining_sets()
    print(json.dumps(info), flush=True)
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = P.ProteinMLM(**CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / WARMUP) * 0.5 * (1 + math.cos(math.pi * min(s, STEPS) / STEPS)))
    g = torch.Generator().manual_seed(SEED)
    best, curve, losses = -1.0, [], []
    for step in range(1, STEPS + 1):
        idx = rng.integers(0, len(train_seqs), BATCH)
        ids, keep = batch_of([train_seqs[i] for i in idx], rng)
        corrupted, targets = P.mask_residues(ids, keep, RATE, generator=g)
        loss = P.mlm_loss(model(corrupted, keep), targets)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % EVAL_EVERY == 0 or step == STEPS or step == STOP_AT:
            acc = masked_accuracy(model, val_seqs)
            curve.append({"step": step, "train_loss": float(np.mean(losses[-EVAL_EVERY:])), "val_accuracy": acc})
            print(f"step {step}: loss {curve[-1]['train_loss']:.3f}, validation masked accuracy {acc:.4f}, "
                  f"{time.time() - t_start:.0f} s", flush=True)
            if acc > best:
                best = acc
                torch.save({k: v.detach().float().clone() for k, v in model.state_dict().items()}, OUT)
                best_step = step
            if step == STOP_AT:
                break
    meta = {"config": CONFIG, "seed": SEED, "steps": STEPS, "stopped_at": step, "batch": BATCH, "crop": CROP, "lr": LR,
            "warmup": WARMUP, "mask_rate": RATE, "best_step": best_step, "best_val_accuracy": best,
            "data": info, "curve": curve, "seconds": round(time.time() - t_start),
            "torch": torch.__version__}
    with open(OUT.replace(".pt", ".json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"saved {OUT} (step {best_step}, validation accuracy {best:.4f}), {os.path.getsize(OUT) / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
