"""Train the lesson 11 consensus models offline: ``course_lib/data/consensus_transformer_folds.pt``.

Run once, by hand (never at test time), from the repository root:

    .venv/bin/python tests/data_scripts/consensus_weights.py            # writes the file
    .venv/bin/python tests/data_scripts/consensus_weights.py --check    # trains, prints, writes nothing

Leave-one-molecule-out over the three molecules of the extract with at least 6 full passes
(ZMWs 6251, 32861, 37134): for each, a ``ConsensusTransformer`` is trained with the alignment
loss on windows of the OTHER two molecules (POA backbone of a random 2-5 passes, both strands:
the reverse complement of the passes and of the truth is a second, equally real example), and
is then tested on the held-out molecule, subsets of 3 passes, against majority vote on the
same POA backbone. The notebook reads the same test subsets (``pass_subsets``) and recomputes
every figure; what this script prints is stored in the file as ``info["measured"]``.

Everything is seeded (numpy ``SEED`` for the pass subsets, ``TrainConfig.seed`` for shuffling
and dropout), one CPU thread, so a rerun gives the same weights up to float nondeterminism.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
import torch
from torch.utils.data import TensorDataset

from course_lib.bio import pacbio
from course_lib.consensus import (PRETRAINED_FILE, ConsensusTransformer, decode, majority_consensus,
                                  molecule_windows, pass_subsets, reverse_complement, soft_alignment_loss, stitch,
                                  trimmed_error_rate)
from course_lib.training import TrainConfig, train

SEED = 0
FOLDS = (32861, 6251, 37134)           # held-out molecule of each fold (32861: the notebook's test molecule)
WIDTH, MAX_LABEL, STRIDE = 32, 40, 8
GAMMA, DEL_COST = 0.1, 5.0
MAX_READS = 5                          # read slots of the input (training subsets: 2-5 passes)
MODEL = dict(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1, in_features=5 * MAX_READS + 10)
N_SUBSETS = 30                         # random pass subsets per training molecule (x2 strands)
EPOCHS = 10
BATCH, LR = 64, 3e-3
N_TEST = 20                            # test subsets of 3 passes per held-out molecule


def training_set(zmws, rng) -> TensorDataset:
    molecules = {m.zmw: m for m in pacbio.load_molecules()}
    X, Y = [], []
    for zmw in zmws:
        passes = [s.seq for s in molecules[zmw].passes()]
        truth = molecules[zmw].reference
        for _ in range(N_SUBSETS):
            pick = rng.choice(len(passes), size=int(rng.integers(2, 6)), replace=False)
            reads = [passes[i] for i in pick]
            for t, rr in ((truth, reads), (reverse_complement(truth), [reverse_complement(r) for r in reads])):
                feats, labels, *_ = molecule_windows(t, rr, WIDTH, MAX_LABEL, STRIDE, MAX_READS)
                X.append(feats)
                Y.append(labels)
    return TensorDataset(torch.from_numpy(np.concatenate(X)), torch.from_numpy(np.concatenate(Y)))


def evaluate(model, molecule) -> dict:
    passes = [s.seq for s in molecule.passes()]
    out = {"POA": [], "majority vote (POA backbone)": [], "model": []}
    for subset in pass_subsets(len(passes), N_TEST):
        reads = [passes[i] for i in subset]
        feats, _, backbone, counts, starts = molecule_windows(molecule.reference, reads, WIDTH, MAX_LABEL, WIDTH, MAX_READS)
        with torch.no_grad():
            pred = model(torch.from_numpy(feats)).argmax(-1).numpy()
        out["POA"].append(trimmed_error_rate(backbone, molecule.reference))
        out["majority vote (POA backbone)"].append(trimmed_error_rate(majority_consensus(counts), molecule.reference))
        out["model"].append(trimmed_error_rate(decode(stitch(pred, starts, len(backbone))), molecule.reference))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="train and print, do not write the file")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    molecules = {m.zmw: m for m in pacbio.load_molecules()}
    folds, measured = {}, {}
    start = time.perf_counter()
    cpu_start = time.process_time()
    for held_out in FOLDS:
        rng = np.random.default_rng(SEED)
        data = training_set([z for z in FOLDS if z != held_out], rng)
        torch.manual_seed(SEED)
        model = ConsensusTransformer(**MODEL)
        config = TrainConfig(epochs=args.epochs, batch_size=BATCH, lr=LR, seed=SEED, device="cpu", progress=False)
        history = train(model, data, config,
                        loss_fn=lambda out, y: soft_alignment_loss(out, y, GAMMA, DEL_COST).mean() / WIDTH)
        errors = evaluate(model, molecules[held_out])
        means = {k: float(np.mean(v)) for k, v in errors.items()}
        measured[held_out] = dict(windows=len(data), steps=history.steps,
                                  final_train_loss=round(history.train_loss[-1], 4),
                                  mean_error={k: round(v, 5) for k, v in means.items()})
        print(f"held out {held_out}: {len(data)} windows, {history.steps} steps, loss {history.train_loss[-1]:.3f}; "
              + ", ".join(f"{k} {v:.2%}" for k, v in means.items())
              + f"  [{time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu_start:.0f} s CPU]",
              flush=True)
        folds[held_out] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    info = dict(model=MODEL, max_reads=MAX_READS, width=WIDTH, max_label=MAX_LABEL, stride=STRIDE, gamma=GAMMA, del_cost=DEL_COST,
                n_subsets=N_SUBSETS, epochs=args.epochs, batch_size=BATCH, lr=LR, seed=SEED, n_test=N_TEST,
                measured=measured, cpu_seconds=round(time.process_time() - cpu_start),
                wall_seconds=round(time.perf_counter() - start),
                machine=f"{platform.machine()} {platform.processor() or platform.platform()}, 1 torch thread",
                torch=str(torch.__version__), python=sys.version.split()[0])
    print(info)
    if not args.check:
        torch.save({"folds": folds, "info": info}, PRETRAINED_FILE)
        print("wrote", PRETRAINED_FILE, PRETRAINED_FILE.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
