"""Lesson 10: the shipped pretrained protein MLM (file, shapes, held-out masked accuracy against the
frequency baselines, as documented) and naming by retrieval + consensus (unit behaviour and its
held-out token F1 against the k-mer nearest neighbour and the majority name, paired)."""
from __future__ import annotations

import collections
import json
import os

import numpy as np
import pytest
import torch

from course_lib import proteins as P
from course_lib import stats
from course_lib.bio import uniprot

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEIGHTS = os.path.join(REPO, "course_lib", "data", P.MLM_WEIGHTS)
# measured on the 575 test proteins by test_shipped_mlm_beats_the_frequency_baselines_on_held_out_clusters
# (first 254 residues, 15 % masked with torch seed 0, as the notebook's section 3b); in course_lib/data/README.md
DOCUMENTED_TEST_ACCURACY = 0.1093


def test_shipped_mlm_file_loads_with_the_documented_shapes():
    size = os.path.getsize(WEIGHTS)
    assert size < 5_000_000, f"{WEIGHTS} is {size} bytes; keep it a few MB"
    state = torch.load(WEIGHTS, map_location="cpu", weights_only=True)
    expected = P.ProteinMLM(**P.MLM_CONFIG).state_dict()
    assert list(state) == list(expected)
    for name, tensor in state.items():
        assert tensor.dtype == torch.float32 and tensor.shape == expected[name].shape, name
        assert torch.isfinite(tensor).all(), name
    assert state["embedding.weight"].shape == (len(P.AA_VOCAB), 128)
    assert state["head.weight"].shape == (len(P.AA_VOCAB), 128)
    assert sum(t.numel() for t in state.values()) == 536_601
    model = P.load_protein_mlm()
    assert not model.training
    meta = json.load(open(WEIGHTS.replace(".pt", ".json")))
    assert meta["config"] == P.MLM_CONFIG and meta["seed"] == 0
    readme = open(os.path.join(REPO, "course_lib", "data", "README.md"), encoding="utf-8").read()
    assert P.MLM_WEIGHTS in readme and "tests/data_scripts/protein_mlm_weights.py" in readme


def test_shipped_mlm_beats_the_frequency_baselines_on_held_out_clusters():
    train, test = uniprot.load_proteins("train"), uniprot.load_proteins("test")
    torch.set_num_threads(1)
    model = P.load_protein_mlm()
    ids, keep = P.encode_proteins([p.sequence for p in test], 256)
    corrupted, targets = P.mask_residues(ids, keep, 0.15, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        pred = torch.cat([model(corrupted[i:i + 64], keep[i:i + 64]).argmax(-1) for i in range(0, len(test), 64)])
    chosen = targets != -100
    truth, right = targets[chosen], pred[chosen] == targets[chosen]
    freq = collections.Counter(a for p in train for a in p.sequence)
    top = P.AA_VOCAB.index(max(P.AMINO_ACIDS, key=freq.__getitem__))
    right_top = truth == top
    share = torch.tensor([freq[a] for a in P.AMINO_ACIDS], dtype=torch.float64)
    unigram_acc = float((share / share.sum())[truth - len(P.SPECIALS)].mean())
    acc, top_acc = float(right.float().mean()), float(right_top.float().mean())
    wins, losses = int((right & ~right_top).sum()), int((~right & right_top).sum())
    p = stats.paired_sign_p(wins, losses)
    assert acc == pytest.approx(DOCUMENTED_TEST_ACCURACY, abs=5e-4), acc
    assert wins > losses and p < 0.05, (acc, top_acc, wins, losses, p)
    lo, _ = stats.wilson_interval(int(right.sum()), len(truth))
    assert lo > unigram_acc, (lo, unigram_acc)


def test_consensus_names_copies_a_dominant_neighbour_and_hedges_otherwise():
    names = ["30S ribosomal protein S6", "50S ribosomal protein L2", "50S ribosomal protein L3",
             "DNA polymerase I"]
    dominant = torch.tensor([[0.9, 0.2, 0.2, 0.1]])
    assert P.consensus_names(dominant, names, k=4, temperature=0.02) == ["30S ribosomal protein S6"]
    spread = torch.tensor([[0.30, 0.30, 0.30, 0.29]])
    answer = P.consensus_names(spread, names, k=3, temperature=1.0)[0]
    assert P.name_words(answer) == ["50s", "ribosomal", "protein"], answer  # the words most neighbours share
    with pytest.raises(ValueError, match="similarity must be"):
        P.consensus_names(torch.zeros(2, 3), names)
    with pytest.raises(ValueError, match="k <="):
        P.consensus_names(dominant, names, k=5)


def test_paired_bootstrap():
    a = np.array([1.0, 0.0, 1.0, 1.0])
    assert P.paired_bootstrap(a, a) == (0.0, 0.0, 0.0, 1.0)
    diff, lo, hi, p = P.paired_bootstrap(a + 1, a)
    assert (diff, lo, hi, p) == (1.0, 1.0, 1.0, 0.0)
    diff, lo, hi, _ = P.paired_bootstrap([0.0, 1.0] * 50, [0.0] * 100)
    assert diff == 0.5 and lo < 0.5 < hi
    with pytest.raises(ValueError, match="same, non-zero length"):
        P.paired_bootstrap([1.0], [1.0, 2.0])


def test_mean_embeddings_ignore_padding_and_specials():
    torch.manual_seed(0)
    model = P.ProteinMLM(d_model=16, num_heads=2, num_layers=1, d_ff=32).eval()
    alone = P.mean_embeddings(model, *P.encode_proteins(["MKV"]))
    batch = P.mean_embeddings(model, *P.encode_proteins(["MKV", "ACDEFGHIKL"]), batch_size=2)
    assert batch.shape == (2, 16) and torch.allclose(batch[0], alone[0], atol=1e-5)
    assert torch.allclose(batch.norm(dim=1), torch.ones(2), atol=1e-5)


def test_consensus_naming_beats_the_baselines_on_held_out_clusters():
    """The notebook's default route (k-mers only, k = 50, temperature 0.02, chosen on validation)."""
    train, test = uniprot.load_proteins("train"), uniprot.load_proteins("test")
    sim = P.kmer_vectors([p.sequence for p in test]) @ P.kmer_vectors([p.sequence for p in train]).T
    names, true = [p.name for p in train], [p.name for p in test]
    nearest = [names[i] for i in sim.argmax(1).tolist()]
    majority = collections.Counter(names).most_common(1)[0][0]
    consensus = P.consensus_names(sim, names, k=50, temperature=0.02)

    def f1(predicted):
        return np.array([P.token_f1(a, b) for a, b in zip(predicted, true)])

    for baseline in (nearest, [majority] * len(true)):
        diff, lo, _, _ = P.paired_bootstrap(f1(consensus), f1(baseline))
        assert lo > 0, (diff, lo)
    assert f1(consensus).mean() == pytest.approx(0.1419, abs=5e-4)
