"""Choose lesson 10's naming settings (retrieval + consensus) on a validation split of the TRAINING clusters.

Not run at test time (a few minutes on one CPU thread). Command:

    OMP_NUM_THREADS=1 nice -n 15 .venv/bin/python tests/data_scripts/protein_naming_settings.py

20 % of the training clusters (numpy seed 0) are validation queries, the other training proteins the
database; the test proteins are never read. For each k (neighbours), temperature (softmax of the
similarities) and weight of the pretrained model's embedding similarity (``course_lib.proteins.
load_protein_mlm`` + ``mean_embeddings`` on the first 128 residues; weight 0 = k-mers only), it prints
the validation token F1 of ``consensus_names``, next to the k-mer nearest neighbour and the majority
name. The notebook uses the best (k, temperature) at weight 0 in its default run (no embeddings: they
take about a minute on 2 CPU cores) and the best weight under FULL_RUN.
"""
from __future__ import annotations

import collections
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from course_lib import proteins as P  # noqa: E402
from course_lib.bio import uniprot  # noqa: E402


def main() -> int:
    torch.set_num_threads(1)
    train = uniprot.load_proteins("train")
    clusters = sorted({p.cluster for p in train})
    rng = np.random.default_rng(0)
    val_clusters = {clusters[i] for i in rng.permutation(len(clusters))[: len(clusters) // 5]}
    db = [p for p in train if p.cluster not in val_clusters]
    queries = [p for p in train if p.cluster in val_clusters]
    names, true = [p.name for p in db], [p.name for p in queries]
    kmer_sim = P.kmer_vectors([p.sequence for p in queries]) @ P.kmer_vectors([p.sequence for p in db]).T
    mlm = P.load_protein_mlm()
    emb_db = P.mean_embeddings(mlm, *P.encode_proteins([p.sequence for p in db], 130))
    emb_q = P.mean_embeddings(mlm, *P.encode_proteins([p.sequence for p in queries], 130))
    emb_sim = emb_q @ emb_db.T
    majority = collections.Counter(names).most_common(1)[0][0]
    print(f"{len(db)} database and {len(queries)} validation proteins")
    print(f"k-mer nearest neighbour: token F1 {P.naming_scores([names[i] for i in kmer_sim.argmax(1)], true)['token_f1']:.4f}")
    print(f"embedding nearest neighbour: token F1 {P.naming_scores([names[i] for i in emb_sim.argmax(1)], true)['token_f1']:.4f}")
    print(f"majority name {majority!r}: token F1 {P.naming_scores([majority] * len(true), true)['token_f1']:.4f}")
    best = {}
    for weight in (0.0, 0.25, 0.5):
        sim = kmer_sim + weight * emb_sim
        for k in (10, 20, 50):
            for temperature in (0.01, 0.02, 0.05):
                f1 = P.naming_scores(P.consensus_names(sim, names, k, temperature), true)["token_f1"]
                print(f"embedding weight {weight}, k {k}, temperature {temperature}: token F1 {f1:.4f}", flush=True)
                if f1 > best.get(weight, (-1,))[0]:
                    best[weight] = (f1, k, temperature)
    for weight, (f1, k, temperature) in best.items():
        print(f"best at embedding weight {weight}: k {k}, temperature {temperature}, validation token F1 {f1:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
