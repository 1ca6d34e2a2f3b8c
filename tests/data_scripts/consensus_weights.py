"""Train the lesson 11 consensus models offline: ``course_lib/data/consensus_transformer_folds.pt``.

Run once, by hand (never at test time), from the repository root:

    .venv/bin/python tests/data_scripts/consensus_weights.py            # writes the file
    .venv/bin/python tests/data_scripts/consensus_weights.py --check    # trains, prints, writes nothing
    .venv/bin/python tests/data_scripts/consensus_weights.py --final    # the model for the two test molecules

``--final`` (issue 59) trains ONE model, the configuration chosen on the three molecules below (which are
therefore validation molecules, not test data), on ALL molecules of the extract except the two that no
choice looked at, ZMWs 14743 and 39571, and tests it, majority vote and the homopolymer-median rule on
them: every set of 3 of their subreads cut to the reference span the three share (``spanning_read_sets``,
at least 96 bases). It writes ``course_lib/data/consensus_transformer_final.pt``
(``{"model": state dict, "info": settings and figures}``; ``course_lib.consensus.load_pretrained(which="final")``).

Leave-one-molecule-out over the three molecules of the extract with at least 6 full passes
(ZMWs 6251, 32861, 37134): for each, a ``VoteResidualTransformer`` (majority vote plus a learned
correction; untrained, it outputs the vote; ``base_blind``: the correction sees how each read relates
to the backbone, not which bases they are, so it cannot learn the training molecules' sequence by
heart) is trained with the alignment loss on real subreads of
ALL the other molecules of the extract (the other two of these three and the 8 molecules with 3-4
subreads), never on the left-out one, and is then evaluated on the left-out molecule, subsets of 3 full
passes, against majority vote on the same POA backbone. These three are lesson 11's VALIDATION
molecules: the configuration and the features were chosen by looking at them (course_lib/data/README.md).

Training examples use partial subreads too: for a set of 2-5 subreads of one molecule, the reference
span that all of them cover (their mapped spans, from the aligned BAM) is cut out of each subread (the
read bases aligned to that span, by ``edit_distance`` of the subread against its mapped reference
span); sets whose common span is shorter than ``MIN_SPAN`` are skipped. Per molecule and per number of
reads k, up to ``PER_K[k]`` such sets (all of them when there are fewer; else drawn by numpy seed
(SEED, ZMW)), each on both strands (the reverse complement of the reads and of the truth is a second,
equally real example; the reads' strands flip with it). Inputs: ``context_windows`` (each read's
symbol, the column fractions, the backbone base, each read's strand, the backbone's homopolymer run
length, the column's place in that run and each read's own length of that run).

The notebook reads the same test subsets (``pass_subsets``) and recomputes every figure; what this
script prints is stored in the file as ``info["measured"]``. Everything is seeded (numpy for the
read sets, ``TrainConfig.seed`` for shuffling and dropout, ``torch.manual_seed(SEED)`` for the
initialisation), one CPU thread, so a rerun gives the same weights up to float nondeterminism.
"""
from __future__ import annotations

import argparse
import itertools
import pathlib
import platform
import sys
import time

import numpy as np
import torch
from torch.utils.data import TensorDataset

from course_lib.bio import pacbio
from course_lib.consensus import (FINAL_FILE, PRETRAINED_FILE, UNTOUCHED, VoteResidualTransformer, decode,
                                  edit_distance, homopolymer_median_consensus, majority_consensus, molecule_windows,
                                  pass_subsets, read_rows, sign_test, soft_alignment_loss, spanning_read_sets,
                                  stitch, trimmed_error_rate)
from course_lib.training import TrainConfig, train

SEED = 0
FOLDS = (32861, 6251, 37134)           # validation molecule left out of each fold (32861: section 5's too)
WIDTH, MAX_LABEL, STRIDE = 32, 40, 8
GAMMA, DEL_COST = 0.1, 5.0
MAX_READS = 5                          # read slots of the input (training sets: 2-5 subreads)
IN_FEATURES = 7 * MAX_READS + 12       # context_windows
BLIND_FEATURES = 3 * MAX_READS + 2 + (IN_FEATURES - 5 * MAX_READS - 10)   # what the base-blind correction reads
MODEL = dict(frac_at=5 * MAX_READS, eps=0.05, vote_scale=2.0, base_blind=True,
             d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1, in_features=BLIND_FEATURES)
PER_K = {2: 15, 3: 40, 4: 15, 5: 10}   # read sets per molecule and number of reads (x2 strands)
MIN_SPAN = 96                          # shortest common reference span of a read set (3 windows)
EPOCHS = 10
BATCH, LR = 64, 3e-3
N_TEST = 20                            # test subsets of 3 passes per left-out molecule
_FLIP = str.maketrans("ACGT", "TGCA")


def _reverse_complement(seq: str) -> str:
    # written out here (a data script, not course_lib): lesson 12 asks students to write reverse_complement
    return seq.translate(_FLIP)[::-1]


def _read_offsets(read: str, ops: str) -> np.ndarray:
    """offsets[j] = how many read bases come before reference column j (j = 0 .. n_ref), from read -> reference ops."""
    offsets, i = [], 0
    for op in ops:
        if op == "I":
            i += 1
            continue
        offsets.append(i)
        if op in "=X":
            i += 1
    offsets.append(len(read))
    return np.array(offsets)


def molecule_examples(molecule: pacbio.Molecule):
    """Training windows of one molecule: read sets of 2-5 subreads cut to their common reference span."""
    rng = np.random.default_rng([SEED, molecule.zmw])
    subs = []
    for s in molecule.subreads:
        a, b = s.ref_start - molecule.ref_start, s.ref_end - molecule.ref_start
        subs.append((a, b, s.seq, _read_offsets(s.seq, edit_distance(s.seq, molecule.reference[a:b])[1]), s.strand))
    X, Y, n_sets = [], [], 0
    for k, n in PER_K.items():
        sets = []
        for combo in itertools.combinations(range(len(subs)), k):
            lo, hi = max(subs[i][0] for i in combo), min(subs[i][1] for i in combo)
            if hi - lo >= MIN_SPAN:
                sets.append((combo, lo, hi))
        if len(sets) > n:
            sets = [sets[i] for i in sorted(rng.choice(len(sets), n, replace=False))]
        for combo, lo, hi in sets:
            reads = [subs[i][2][subs[i][3][lo - subs[i][0]]:subs[i][3][hi - subs[i][0]]] for i in combo]
            strands = [subs[i][4] for i in combo]
            truth = molecule.reference[lo:hi]
            flipped = ([_reverse_complement(r) for r in reads], ["-" if s == "+" else "+" for s in strands])
            for t, (rr, st) in ((truth, (reads, strands)), (_reverse_complement(truth), flipped)):
                feats, labels, *_ = molecule_windows(t, rr, WIDTH, MAX_LABEL, STRIDE, MAX_READS, st)
                X.append(feats)
                Y.append(labels)
            n_sets += 1
    return torch.from_numpy(np.concatenate(X)), torch.from_numpy(np.concatenate(Y)), n_sets


def evaluate(model, molecule) -> dict:
    full = molecule.passes()
    passes = [s.seq for s in full]
    out = {"POA": [], "majority vote (POA backbone)": [], "model": []}
    for subset in pass_subsets(len(passes), N_TEST):
        reads = [passes[i] for i in subset]
        feats, _, backbone, counts, starts = molecule_windows(molecule.reference, reads, WIDTH, MAX_LABEL, WIDTH,
                                                              MAX_READS, [full[i].strand for i in subset])
        with torch.no_grad():
            pred = model(torch.from_numpy(feats)).argmax(-1).numpy()
        out["POA"].append(trimmed_error_rate(backbone, molecule.reference))
        out["majority vote (POA backbone)"].append(trimmed_error_rate(majority_consensus(counts), molecule.reference))
        out["model"].append(trimmed_error_rate(decode(stitch(pred, starts, len(backbone))), molecule.reference))
    return out


def evaluate_sets(model, molecule) -> dict:
    """Errors per set of 3 subreads cut to their shared span (``spanning_read_sets``): vote, rule, model."""
    out = {"POA": [], "majority vote (POA backbone)": [], "homopolymer-median rule (POA backbone)": [], "model": [],
           "reference_bases": []}
    for s in spanning_read_sets(molecule, edit_distance, k=3, min_span=MIN_SPAN):
        feats, _, backbone, counts, starts = molecule_windows(s["truth"], s["reads"], WIDTH, MAX_LABEL, WIDTH,
                                                              MAX_READS, s["strands"])
        alignments = [edit_distance(r, backbone)[1] for r in s["reads"]]
        rows = read_rows(s["reads"], alignments, len(backbone))
        with torch.no_grad():
            pred = model(torch.from_numpy(feats)).argmax(-1).numpy()
        out["POA"].append(trimmed_error_rate(backbone, s["truth"]))
        out["majority vote (POA backbone)"].append(trimmed_error_rate(majority_consensus(counts), s["truth"]))
        out["homopolymer-median rule (POA backbone)"].append(
            trimmed_error_rate(homopolymer_median_consensus(rows, backbone), s["truth"]))
        out["model"].append(trimmed_error_rate(decode(stitch(pred, starts, len(backbone))), s["truth"]))
        out["reference_bases"].append(len(s["truth"]))
    return out


def train_one(examples: dict, train_zmws: list, epochs: int):
    data = TensorDataset(torch.cat([examples[z][0] for z in train_zmws]), torch.cat([examples[z][1] for z in train_zmws]))
    torch.manual_seed(SEED)
    model = VoteResidualTransformer(**MODEL)
    config = TrainConfig(epochs=epochs, batch_size=BATCH, lr=LR, seed=SEED, device="cpu", progress=False)
    history = train(model, data, config,
                    loss_fn=lambda out, y: soft_alignment_loss(out, y, GAMMA, DEL_COST).mean() / WIDTH)
    model.eval()
    return model, history, len(data)


def main_final(args) -> None:
    """One model on every molecule but the untouched ones; tested on those (see the module docstring)."""
    molecules = {m.zmw: m for m in pacbio.load_molecules()}
    start, cpu_start = time.perf_counter(), time.process_time()
    train_zmws = [z for z in molecules if z not in UNTOUCHED]
    examples = {zmw: molecule_examples(molecules[zmw]) for zmw in train_zmws}
    print("training windows (read sets) per molecule:", {z: f"{len(x)} ({n})" for z, (x, _, n) in examples.items()},
          f"[{time.perf_counter() - start:.0f} s]", flush=True)
    model, history, n_windows = train_one(examples, train_zmws, args.epochs)
    print(f"trained on {train_zmws}: {n_windows} windows, {history.steps} steps, loss {history.train_loss[0]:.4f} -> "
          f"{history.train_loss[-1]:.4f} [{time.perf_counter() - start:.0f} s wall, "
          f"{time.process_time() - cpu_start:.0f} s CPU]", flush=True)
    measured = {}
    for zmw in UNTOUCHED:
        errors = evaluate_sets(model, molecules[zmw])
        measured[zmw] = {k: [round(v, 6) for v in vs] if k != "reference_bases" else vs for k, vs in errors.items()}
        print(f"untouched ZMW {zmw}, {len(errors['model'])} set(s) of 3 subreads: "
              + ", ".join(f"{k} {np.mean(v):.2%}" for k, v in errors.items() if k != "reference_bases"), flush=True)
    info = dict(architecture="VoteResidualTransformer", features="context_windows", model=MODEL, max_reads=MAX_READS,
                width=WIDTH, max_label=MAX_LABEL, stride=STRIDE, gamma=GAMMA, del_cost=DEL_COST,
                per_k=PER_K, min_span=MIN_SPAN, epochs=args.epochs, batch_size=BATCH, lr=LR, seed=SEED,
                train_molecules=train_zmws, test_molecules=list(UNTOUCHED), windows=n_windows, steps=history.steps,
                final_train_loss=round(history.train_loss[-1], 4), measured=measured,
                cpu_seconds=round(time.process_time() - cpu_start), wall_seconds=round(time.perf_counter() - start),
                machine=f"{platform.machine()} {platform.processor() or platform.platform()}, 1 torch thread",
                torch=str(torch.__version__), python=sys.version.split()[0])
    print(info)
    if not args.check:
        out = args.out or FINAL_FILE
        torch.save({"model": {k: v.detach().clone() for k, v in model.state_dict().items()}, "info": info}, out)
        print("wrote", out, out.stat().st_size, "bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="train and print, do not write the file")
    parser.add_argument("--final", action="store_true",
                        help="one model on every molecule but the two untouched ones, tested on those")
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="where to write (default: the shipped file of the mode)")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.final:
        return main_final(args)
    args.out = args.out or PRETRAINED_FILE
    molecules = {m.zmw: m for m in pacbio.load_molecules()}
    folds, measured = {}, {}
    start = time.perf_counter()
    cpu_start = time.process_time()
    examples = {zmw: molecule_examples(m) for zmw, m in molecules.items()}
    print("training windows (read sets) per molecule:", {z: f"{len(x)} ({n})" for z, (x, _, n) in examples.items()},
          f"[{time.perf_counter() - start:.0f} s]", flush=True)
    pooled = {"model": [], "vote": []}
    for held_out in FOLDS:
        train_zmws = [z for z in molecules if z != held_out]
        data = TensorDataset(torch.cat([examples[z][0] for z in train_zmws]), torch.cat([examples[z][1] for z in train_zmws]))
        torch.manual_seed(SEED)
        model = VoteResidualTransformer(**MODEL)
        config = TrainConfig(epochs=args.epochs, batch_size=BATCH, lr=LR, seed=SEED, device="cpu", progress=False)
        history = train(model, data, config,
                        loss_fn=lambda out, y: soft_alignment_loss(out, y, GAMMA, DEL_COST).mean() / WIDTH)
        model.eval()
        errors = evaluate(model, molecules[held_out])
        pooled["model"] += errors["model"]
        pooled["vote"] += errors["majority vote (POA backbone)"]
        means = {k: float(np.mean(v)) for k, v in errors.items()}
        wins, losses, ties, p = sign_test(errors["model"], errors["majority vote (POA backbone)"])
        measured[held_out] = dict(windows=len(data), steps=history.steps, train_molecules=train_zmws,
                                  final_train_loss=round(history.train_loss[-1], 4),
                                  mean_error={k: round(v, 5) for k, v in means.items()},
                                  model_vs_vote=dict(fewer=wins, more=losses, same=ties, p=round(p, 6)))
        print(f"held out {held_out}: {len(data)} windows, {history.steps} steps, loss {history.train_loss[0]:.4f} -> "
              f"{history.train_loss[-1]:.4f}; " + ", ".join(f"{k} {v:.2%}" for k, v in means.items())
              + f"; model vs vote: fewer errors {wins}, more {losses}, same {ties}, sign test p {p:.2g}"
              + f"  [{time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu_start:.0f} s CPU]",
              flush=True)
        folds[held_out] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    diff = np.array([measured[z]["mean_error"]["model"] - measured[z]["mean_error"]["majority vote (POA backbone)"]
                     for z in FOLDS])
    wins, losses, ties, p = sign_test(pooled["model"], pooled["vote"])
    print(f"model minus vote per molecule {np.round(100 * diff, 3).tolist()} points; mean {100 * diff.mean():+.3f} "
          f"+- {100 * diff.std(ddof=1) / np.sqrt(len(diff)):.3f} (SE); pooled sign test: fewer {wins}, more {losses}, "
          f"same {ties}, p {p:.2g}", flush=True)
    info = dict(architecture="VoteResidualTransformer", features="context_windows", model=MODEL, max_reads=MAX_READS,
                width=WIDTH, max_label=MAX_LABEL, stride=STRIDE, gamma=GAMMA, del_cost=DEL_COST,
                per_k=PER_K, min_span=MIN_SPAN, epochs=args.epochs, batch_size=BATCH, lr=LR, seed=SEED, n_test=N_TEST,
                measured=measured, cpu_seconds=round(time.process_time() - cpu_start),
                wall_seconds=round(time.perf_counter() - start),
                machine=f"{platform.machine()} {platform.processor() or platform.platform()}, 1 torch thread",
                torch=str(torch.__version__), python=sys.version.split()[0])
    print(info)
    if not args.check:
        torch.save({"folds": folds, "info": info}, args.out)
        print("wrote", args.out, args.out.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
