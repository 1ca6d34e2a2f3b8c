"""Choose lesson 10's naming settings on validation folds of the TRAINING clusters; the test proteins are never read.

Not run at test time (about 3 minutes of CPU on one thread; 10 minutes of wall time on 2 shared cores). Command:

    OMP_NUM_THREADS=1 nice -n 15 .venv/bin/python tests/data_scripts/protein_naming_settings.py [--embeddings] [--fold-seed N]

The training clusters are cut into 5 folds (numpy seed 0; ``--fold-seed N`` draws other folds, a check of the
choice, not a choice); each fold in turn is the validation queries and the other training proteins the database
(cross-validation over clusters, so a query never has a member of its own 50 %-identity cluster in the
database, as on the test side). Every choice below is made by the primary score, EXACT MATCH, averaged over
the 5 folds (token F1 is printed beside it):

* the similarity: cosine of 3-mer vectors (``kmer_vectors``), TF-IDF weighted 3-mers (``kmer_idf`` of the
  database, ``tfidf_weight`` with tf "raw" or "binary"), and the hubness correction CSLS (``csls_scores``)
  of either, with its neighbourhood size k_csls in (5, 10, 20, 50);
* the naming rule: the nearest neighbour's name, or retrieval + consensus (``consensus_names``) with
  k in (10, 20, 50) neighbours and a softmax temperature in (0.01, 0.02, 0.05, 0.1).

It prints the best nearest-neighbour setting (the strongest simple baseline), the best consensus setting
(the technique) and both floors (the majority name; the commonest word alone, ``commonest_word``). With
``--embeddings`` it also tries adding the shipped model's mean embeddings (``load_protein_mlm`` +
``mean_embeddings``, first 128 residues) to the cosine similarity with weight 0.25 or 0.5 (about a minute
more). The notebook's constants (section 4 and section 6) are the settings this script prints.
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

FOLDS = 5
CSLS_K = (5, 10, 20, 50)
CONSENSUS_K = (10, 20, 50)
TEMPERATURES = (0.01, 0.02, 0.05, 0.1)


def similarities(db, queries, embeddings=None):
    """{label: (Q, N) scores} for every similarity tried (the database alone sets idf and CSLS's r_x)."""
    v_db, v_q = P.kmer_vectors([p.sequence for p in db]), P.kmer_vectors([p.sequence for p in queries])
    idf = P.kmer_idf(v_db)
    base = {"cosine": (v_q @ v_db.T, v_db @ v_db.T)}
    for tf in P.TF_VARIANTS:
        t_db, t_q = P.tfidf_weight(v_db, idf, tf), P.tfidf_weight(v_q, idf, tf)
        base[f"tfidf-{tf}"] = (t_q @ t_db.T, t_db @ t_db.T)
    if embeddings is not None:
        e_db, e_q = (P.mean_embeddings(embeddings, *P.encode_proteins([p.sequence for p in s], 130)) for s in (db, queries))
        for w in (0.25, 0.5):
            base[f"cosine+{w}emb"] = (base["cosine"][0] + w * e_q @ e_db.T, base["cosine"][1] + w * e_db @ e_db.T)
    out = {}
    for label, (sim, db_sim) in base.items():
        out[label] = sim
        for k in CSLS_K:
            out[f"csls{k}({label})"] = P.csls_scores(sim, db_sim, k)
    return out


def main() -> int:
    torch.set_num_threads(1)
    argv = sys.argv[1:]
    use_embeddings = "--embeddings" in argv
    fold_seed = int(argv[argv.index("--fold-seed") + 1]) if "--fold-seed" in argv else 0
    mlm = P.load_protein_mlm() if use_embeddings else None
    train = uniprot.load_proteins("train")
    clusters = sorted({p.cluster for p in train})
    fold_of = {c: i % FOLDS for i, c in enumerate(np.asarray(clusters)[np.random.default_rng(fold_seed).permutation(len(clusters))])}
    scores = collections.defaultdict(list)  # setting -> [(exact, f1) per fold]
    for fold in range(FOLDS):
        db = [p for p in train if fold_of[p.cluster] != fold]
        queries = [p for p in train if fold_of[p.cluster] == fold]
        names, true = [p.name for p in db], [p.name for p in queries]
        majority = collections.Counter(names).most_common(1)[0][0]
        word = P.commonest_word(names)
        for label, predicted in ((f"majority name", [majority] * len(true)), ("commonest word", [word] * len(true))):
            s = P.naming_scores(predicted, true)
            scores[("floor", label)].append((s["exact"], s["token_f1"]))
        for label, sim in similarities(db, queries, mlm).items():
            s = P.naming_scores([names[i] for i in sim.argmax(1).tolist()], true)
            scores[("nearest", label)].append((s["exact"], s["token_f1"]))
            for k in CONSENSUS_K:
                for temperature in TEMPERATURES:
                    s = P.naming_scores(P.consensus_names(sim, names, k, temperature), true)
                    scores[("consensus", label, k, temperature)].append((s["exact"], s["token_f1"]))
        print(f"fold {fold}: {len(db)} database and {len(queries)} validation proteins", flush=True)
    mean = {key: np.mean(v, axis=0) for key, v in scores.items()}
    for kind in ("floor", "nearest", "consensus"):
        ranked = sorted((key for key in mean if key[0] == kind), key=lambda key: -mean[key][0])
        print(f"\n{kind}: mean over {FOLDS} folds, best exact match first")
        shown = ranked[: 12 if kind != "floor" else 2]
        if kind == "nearest":  # and the similarities without the hubness correction
            shown += [key for key in ranked if "csls" not in key[1] and key not in shown]
        for key in shown:
            print(f"  {' '.join(map(str, key[1:])):40s} exact {mean[key][0]:.4f}  token F1 {mean[key][1]:.4f}")
        if kind != "floor":
            print(f"  best {kind}: {ranked[0][1:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
