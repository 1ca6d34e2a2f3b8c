"""course_lib.consensus against edlib and finite differences; the PacBio extract's provenance."""
from __future__ import annotations

import gzip
import json
import pathlib

import edlib
import numpy as np
import pytest
import torch

from course_lib import consensus as C
from course_lib.bio import pacbio

ROOT = pathlib.Path(__file__).resolve().parents[1]


def rand_seq(rng, n):
    return "".join(rng.choice(list("ACGT"), size=n))


def ops_cost_and_use(ops, a, b):
    i = j = 0
    for op in ops:
        if op in "=X":
            assert (a[i] == b[j]) == (op == "=")
            i, j = i + 1, j + 1
        elif op == "I":
            i += 1
        else:
            j += 1
    assert (i, j) == (len(a), len(b))
    return sum(op != "=" for op in ops)


@pytest.mark.parametrize("seed", range(20))
def test_edit_distance_matches_edlib_on_random_sequences(seed):
    rng = np.random.default_rng(seed)
    a, b = rand_seq(rng, int(rng.integers(1, 120))), rand_seq(rng, int(rng.integers(1, 120)))
    d, ops = C.edit_distance(a, b)
    assert d == edlib.align(a, b, mode="NW")["editDistance"]
    assert ops_cost_and_use(ops, a, b) == d


def test_edit_distance_matches_edlib_on_real_subreads():
    for mol in pacbio.load_molecules()[:4]:
        for sub in mol.passes()[:2]:
            d, ops = C.edit_distance(sub.seq, mol.reference)
            assert d == edlib.align(sub.seq, mol.reference, mode="NW")["editDistance"]
            assert ops_cost_and_use(ops, sub.seq, mol.reference) == d


def test_edit_distance_edges():
    assert C.edit_distance("", "") == (0, "")
    assert C.edit_distance("ACG", "") == (3, "III")
    assert C.edit_distance("", "AC") == (2, "DD")
    assert C.edit_distance("ACGT", "AGT") == (1, "=I==")


@pytest.mark.parametrize("seed", range(6))
def test_soft_edit_distance_tends_to_edit_distance(seed):
    rng = np.random.default_rng(100 + seed)
    a, b = rand_seq(rng, int(rng.integers(1, 30))), rand_seq(rng, int(rng.integers(1, 30)))
    d = C.edit_distance(a, b)[0]
    gaps = [d - C.soft_edit_distance(a, b, g) for g in (1.0, 0.1, 0.01, 0.001)]
    assert all(g >= -1e-9 for g in gaps), "a soft-min is never above the min"
    assert gaps[0] > gaps[1] > gaps[2] > gaps[3] >= 0
    assert gaps[3] < 0.01 and C.soft_edit_distance(a, b, 0) == d


def _hard_numpy(logits, target, del_cost=1.0):
    """The hard alignment loss with plain loops (min, no temperature)."""
    logp = torch.log_softmax(logits, -1).numpy()
    out = []
    for b in range(logp.shape[0]):
        y = [int(t) for t in target[b] if int(t)]
        N = logp.shape[1]
        V = np.zeros((len(y) + 1, N + 1))
        V[0, 1:] = np.cumsum(-logp[b, :, 0])
        V[1:, 0] = del_cost * np.arange(1, len(y) + 1)
        for i in range(1, len(y) + 1):
            for j in range(1, N + 1):
                V[i, j] = min(V[i - 1, j - 1] - logp[b, j - 1, y[i - 1]], V[i, j - 1] - logp[b, j - 1, 0],
                              V[i - 1, j] + del_cost)
        out.append(V[-1, -1])
    return np.array(out)


def test_soft_alignment_loss_tends_to_the_hard_loss():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 9, 5, generator=g, dtype=torch.float64) * 2
    target = torch.randint(1, 5, (3, 7), generator=g)
    target[1, 5:] = 0
    hard = _hard_numpy(logits, target, 2.0)
    np.testing.assert_allclose(C.hard_alignment_loss(logits, target, 2.0).numpy(), hard, rtol=1e-12)
    errs = [np.abs(C.soft_alignment_loss(logits, target, gm, 2.0).numpy() - hard).max() for gm in (1, 0.1, 0.01, 1e-3)]
    assert errs[0] > errs[1] > errs[2] > errs[3] and errs[3] < 0.01


def test_soft_alignment_loss_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[1, 2, 3, 0], [4, 4, 1, 2]])
    assert torch.autograd.gradcheck(lambda x: C.soft_alignment_loss(x, target, 0.3, 1.5), (logits,), eps=1e-6,
                                    atol=1e-7)


def test_soft_alignment_loss_equals_a_one_hot_edit_distance_in_the_limit():
    """With near one-hot predictions of a sequence, the best alignment cost counts the edits (del_cost = 1)."""
    pred, truth = "ACGTTA", "ACTTA"   # one extra G predicted: one insertion
    logits = torch.full((1, len(pred), 5), -30.0, dtype=torch.float64)
    for j, c in enumerate(pred):
        logits[0, j, C.VOCAB.index(c)] = 30.0
    loss = C.soft_alignment_loss(logits, torch.from_numpy(C.encode(truth))[None], 1e-4)
    assert 55 < float(loss) < 65  # the extra G must become a gap: -log p(gap) ~ 60
    logits[0, 2] = torch.tensor([30.0, -30, -30, -30, -30])       # predict a gap there instead
    loss = C.soft_alignment_loss(logits, torch.from_numpy(C.encode(truth))[None], 1e-4)
    assert float(loss) < 1e-3


def test_shifted_prediction_costs_cross_entropy_but_not_alignment():
    truth = "ACGTACGTTGCA"
    shifted = "T" + truth[:-1]
    logits = torch.full((1, len(truth), 5), -4.0, dtype=torch.float64)
    for j, c in enumerate(shifted):
        logits[0, j, C.VOCAB.index(c)] = 4.0
    target = torch.from_numpy(C.encode(truth))[None]
    ce = float(C.positionwise_cross_entropy(logits, target)[0])
    al = float(C.soft_alignment_loss(logits, target, 0.01, 1.0)[0])
    assert al < ce / 3


def test_pileup_and_majority():
    counts = C.pileup(["AC", "AGC"], ["=D=", "=X="], 3)
    assert counts.tolist() == [[0, 2, 0, 0, 0], [1, 0, 0, 1, 0], [0, 0, 2, 0, 0]]
    assert C.majority_consensus(counts) == "AC"
    with pytest.raises(ValueError):
        C.pileup(["AC"], ["=D=D"], 3)


def test_poa_consensus_of_real_passes_beats_one_subread():
    mol = [m for m in pacbio.load_molecules() if m.zmw == 32861][0]
    reads = [s.seq for s in mol.passes()]
    poa = C.poa_consensus(reads)
    assert C.error_rate(poa, mol.reference) < C.error_rate(reads[0], mol.reference) / 3


def test_extract_provenance_is_documented():
    with gzip.open(C.__file__.replace("consensus.py", "data/pacbio_lambda_subreads.json.gz"), "rt") as fh:
        doc = json.load(fh)
    assert "python3-pbcore" in doc["source"] and "PacBio-BSD-3-Clause" in doc["licence"]
    assert doc["reference_name"] == "lambda_NEB3011" and doc["reference_length"] == 48502
    readme = (ROOT / "course_lib" / "data" / "README.md").read_text()
    assert "pacbio_lambda_subreads.json.gz" in readme and "PacBio-BSD-3-Clause" in readme
    assert "tests/data_scripts/pacbio_lambda_subreads.py" in readme
    assert (ROOT / "tests" / "data_scripts" / "pacbio_lambda_subreads.py").is_file()


def test_loader_orients_subreads_to_the_forward_strand():
    mols = pacbio.load_molecules()
    assert len(mols) == 11
    for mol in mols:
        assert len(mol.reference) == mol.ref_end - mol.ref_start
        for sub in mol.passes():
            fwd = C.edit_distance(sub.seq, mol.reference)[0]
            rev = C.edit_distance(C.reverse_complement(sub.seq), mol.reference)[0]
            assert fwd < rev, (mol.zmw, sub.name)


def test_model_shapes():
    model = C.ConsensusTransformer(d_model=16, num_heads=2, num_layers=1, d_ff=32)
    assert model(torch.zeros(3, 32, 10)).shape == (3, 32, 5)
