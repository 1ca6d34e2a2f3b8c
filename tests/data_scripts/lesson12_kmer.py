"""Lesson 12's bag-of-k-mers baseline: k and the L2 weight chosen on VALIDATION windows (issue 59).

The baseline itself (``kmer_ids``, ``kmer_scores``, ``fit_kmer_logreg``) is written in the lesson's notebook,
where students read it; this script executes that one notebook cell (the code cell that defines
``fit_kmer_logreg``), so the search below fits exactly the notebook's baseline. For every k in 3..8 and every
L2 weight in ``L2S`` it fits the logistic regression on the notebook's training sequences
(``regulatory_dataset(7200, seed=1, region="train")``) and scores it on the 2,000 validation sequences of the
recipe search (``regulatory_dataset(2000, seed=3, region="validation")``, a stretch of the genome that no
training or test window touches). No test sequence is built. Choice: the highest validation accuracy; ties
(within 0.001) go to the smaller k, then to the larger L2 weight (the simpler model). Writes
``course_lib/data/lesson12_kmer.json`` (every score, the choice, the machine, the wall time);
``course_lib.dna.LESSON12_KMER`` must equal the choice (tests/test_dna.py checks it).

    OMP_NUM_THREADS=1 .venv/bin/python tests/data_scripts/lesson12_kmer.py     # a few minutes on one core
"""
from __future__ import annotations

import datetime
import itertools
import json
import pathlib
import platform
import subprocess
import sys
import time

import nbformat
import numpy as np
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from course_lib import dna  # noqa: E402
from course_lib.bio import regulatory as R  # noqa: E402

OUT = REPO / "course_lib" / "data" / "lesson12_kmer.json"
NOTEBOOK = REPO / "notebooks" / "12_long_range_dna" / "long_range_dna.ipynb"
KS = (3, 4, 5, 6, 7, 8)
L2S = (0.1, 0.03, 0.01, 0.003)


def notebook_baseline() -> dict:
    """The namespace after executing the notebook's cell that defines the baseline."""
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells
             if c.cell_type == "code" and "def fit_kmer_logreg(" in c.source]
    if len(cells) != 1:
        raise SystemExit(f"expected one cell defining fit_kmer_logreg in {NOTEBOOK}, found {len(cells)}")
    namespace = {"np": np, "torch": torch}
    exec(compile(cells[0].source, f"{NOTEBOOK.name}: the baseline's cell", "exec"), namespace)
    return namespace


def main() -> int:
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    nb = notebook_baseline()
    train_data = R.regulatory_dataset(dna.LESSON12_RUN["n_train"], seed=1, region="train")  # the notebook's
    val_data = R.regulatory_dataset(2000, seed=3, region="validation")                        # never tested on
    one_hot = lambda d: torch.from_numpy(np.stack([dna.one_hot_dna(s) for s in d.sequences]))
    x_train, x_val = one_hot(train_data), one_hot(val_data)
    results = []
    for k in KS:
        ids_train, ids_val = nb["kmer_ids"](x_train, k), nb["kmer_ids"](x_val, k)
        for l2 in L2S:
            t0 = time.perf_counter()
            w, b = nb["fit_kmer_logreg"](ids_train, train_data.labels, k, l2)
            val_acc = float(((nb["kmer_scores"](ids_val, w, b) > 0).numpy() == val_data.labels).mean())
            train_acc = float(((nb["kmer_scores"](ids_train, w, b) > 0).numpy() == train_data.labels).mean())
            results.append({"k": k, "l2": l2, "validation_accuracy": round(val_acc, 4),
                            "training_accuracy": round(train_acc, 4)})
            print(f"k {k} l2 {l2:g}: validation accuracy {val_acc:.4f} (training {train_acc:.4f}) "
                  f"[{time.perf_counter() - t0:.1f} s]", flush=True)
    best = max(r["validation_accuracy"] for r in results)
    tied = [r for r in results if r["validation_accuracy"] >= best - 0.001]
    choice = sorted(tied, key=lambda r: (r["k"], -r["l2"]))[0]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    out = {"what": "lesson 12's bag-of-k-mers logistic regression, k and L2 chosen on validation windows "
                   "(tests/data_scripts/lesson12_kmer.py; the baseline's code is the notebook's)",
           "data": {"train": f"regulatory_dataset({dna.LESSON12_RUN['n_train']}, seed=1, region='train')",
                    "validation": "regulatory_dataset(2000, seed=3, region='validation')", "test": "not built"},
           "fit": "full-batch L-BFGS (max_iter 100, strong Wolfe line search), loss: mean binary cross-entropy "
                  "+ l2 * sum of squared k-mer weights; deterministic",
           "rule": "highest validation accuracy; within 0.001 of it, the smaller k, then the larger l2",
           "results": results, "choice": {"k": choice["k"], "l2": choice["l2"],
                                          "validation_accuracy": choice["validation_accuracy"]},
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "commit": commit, "torch": torch.__version__, "python": platform.python_version(), "threads": 1,
           "wall_seconds": round(time.perf_counter() - t_start, 1)}
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("choice:", out["choice"], f"-> {OUT.relative_to(REPO)} ({out['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
