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
from course_lib import dna
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
            rev = C.edit_distance(dna.reverse_complement(sub.seq), mol.reference)[0]
            assert fwd < rev, (mol.zmw, sub.name)


def test_model_shapes():
    model = C.ConsensusTransformer(d_model=16, num_heads=2, num_layers=1, d_ff=32)
    assert model(torch.zeros(3, 32, 10)).shape == (3, 32, 5)


# ---------------------------------------------------------------- held-out evaluation helpers
def test_read_rows_are_the_pileup_read_by_read():
    rng = np.random.default_rng(3)
    backbone = rand_seq(rng, 60)
    reads = []
    for _ in range(4):
        read = list(backbone)
        for _ in range(6):  # random edits
            k = int(rng.integers(len(read)))
            op = rng.integers(3)
            if op == 0:
                read[k] = "ACGT"[int(rng.integers(4))]
            elif op == 1:
                del read[k]
            else:
                read.insert(k, "ACGT"[int(rng.integers(4))])
        reads.append("".join(read))
    alignments = [C.edit_distance(r, backbone)[1] for r in reads]
    rows = C.read_rows(reads, alignments, len(backbone))
    assert rows.shape == (4, 60) and rows.dtype == np.int64
    counts = np.eye(5, dtype=np.int64)[rows].sum(0)
    assert (counts == C.pileup(reads, alignments, len(backbone))).all()
    for read, row in zip(reads, rows):  # each row, gaps removed, is the read minus its inserted bases
        assert len(C.decode(row)) <= len(read)
    with pytest.raises(ValueError):
        C.read_rows(["AC"], ["=D=D"], 3)


def test_row_windows_keep_reads_in_their_slots():
    rows = np.array([[1, 0, 2, 3], [1, 2, 2, 3]])
    feats, starts = C.row_windows(rows, "ACCG", width=3, stride=2, max_reads=3)
    assert starts == [0, 1] and feats.shape == (2, 3, 3 * 5 + 10) and feats.dtype == np.float32
    assert feats[0, 1, :5].tolist() == [1, 0, 0, 0, 0]          # read 0 shows a gap at column 1
    assert feats[0, 1, 5:10].tolist() == [0, 0, 1, 0, 0]        # read 1 shows C there
    assert not feats[..., 10:15].any()                           # the third slot is empty
    assert feats[0, 1, 15:20].tolist() == [0.5, 0, 0.5, 0, 0]   # then the pileup fractions
    assert feats[0, 1, 20:25].tolist() == [0, 0, 1, 0, 0]       # and the backbone base
    with pytest.raises(ValueError, match="read slots"):
        C.row_windows(rows, "ACCG", 3, 2, max_reads=1)


def test_context_windows_add_strands_and_run_lengths():
    rows = np.array([[1, 1, 1, 2], [1, 0, 1, 2], [0, 1, 0, 2]])          # backbone AAAC; reads show 3, 2, 1 A's
    feats, starts = C.context_windows(rows, ["+", "-", "+"], "AAAC", width=4, stride=4, max_reads=4, max_run=4)
    base, _ = C.row_windows(rows, "AAAC", 4, 4, max_reads=4)
    assert starts == [0] and feats.shape == (1, 4, 7 * 4 + 12) and feats.dtype == np.float32
    assert np.array_equal(feats[..., :30], base)                          # row_windows' features come first
    assert (feats[0, :, 30:34] == [1, -1, 1, 0]).all()                    # strands, the empty slot 0
    assert feats[0, :, 34].tolist() == [0.75, 0.75, 0.75, 0.25]          # backbone runs AAA and C, / max_run
    assert feats[0, :, 35].tolist() == [0.0, 0.25, 0.5, 0.0]             # each column's place in its run
    assert feats[0, 0, 36:].tolist() == [0.75, 0.5, 0.25, 0.0]            # each read's own length of the A run
    assert feats[0, 3, 36:].tolist() == [0.25, 0.25, 0.25, 0.0]
    long_run, _ = C.context_windows(np.ones((1, 12), dtype=np.int64), "+", "A" * 12, 12, 12)
    assert (long_run[0, :, -7] == 1.0).all() and (long_run[0, :, -5] == 1.0).all()   # capped at max_run (8)
    assert long_run[0, :, -6].tolist() == [k / 8 for k in range(8)] + [1.0] * 4
    with pytest.raises(ValueError, match="strand"):
        C.context_windows(rows, ["+", "-"], "AAAC", 4, 4)
    with pytest.raises(ValueError, match="strand"):
        C.context_windows(rows, ["+", "-", "x"], "AAAC", 4, 4)


def test_vote_residual_model_starts_at_the_vote():
    """Untrained, VoteResidualTransformer's argmax is majority_consensus's column symbol (ties included)."""
    mol = [m for m in pacbio.load_molecules() if m.zmw == 37134][0]
    full = mol.passes()
    for subset in [(0, 1, 2), (3, 4, 5, 6), (1, 2)]:
        reads, strands = [full[i].seq for i in subset], [full[i].strand for i in subset]
        feats, _, backbone, counts, starts = C.molecule_windows(mol.reference, reads, 32, 40, 32, 5, strands)
        assert feats.shape[-1] == 47
        torch.manual_seed(0)
        model = C.VoteResidualTransformer(frac_at=25, in_features=47, d_model=16, num_heads=2, d_ff=32).eval()
        with torch.no_grad():
            pred = model(torch.from_numpy(feats)).argmax(-1).numpy()
        columns = C.stitch(pred, starts, len(backbone))
        assert (columns == counts.argmax(-1)).all()
        assert C.decode(columns) == C.majority_consensus(counts)
    # the correction is a ConsensusTransformer whose output starts at zero; it trains
    assert not model.net.head.weight.any() and not model.net.head.bias.any()
    model.train()
    model(torch.from_numpy(feats)).logsumexp(-1).sum().backward()
    assert model.net.head.weight.grad.abs().sum() > 0


def test_base_blind_correction_sees_no_base_identities():
    mol = [m for m in pacbio.load_molecules() if m.zmw == 37134][0]
    full = mol.passes()[:3]
    feats, *_ = C.molecule_windows(mol.reference, [s.seq for s in full], 32, 40, 32, 5, [s.strand for s in full])
    x = torch.from_numpy(feats)
    model = C.VoteResidualTransformer(frac_at=25, base_blind=True, in_features=29, d_model=16, num_heads=2, d_ff=32)
    seen = model.blind(x)
    assert seen.shape == (*x.shape[:-1], 29)
    rows = x[..., :25].unflatten(-1, (5, 5))
    backbone = x[..., 30:35]
    assert torch.equal(seen[..., :5], rows[..., 0])                                  # read shows a gap
    assert torch.equal(seen[..., 5:10], (rows * backbone.unsqueeze(-2)).sum(-1))     # the backbone's base
    assert torch.equal(seen[..., 15:17], torch.stack([x[..., 25], (x[..., 25:30] * backbone).sum(-1)], -1))
    assert torch.equal(seen[..., 17:], x[..., 35:])                                  # strands, run lengths
    # swap the names of the bases (A <-> T, C <-> G) in reads, fractions and backbone: the blind view is the same
    swap = torch.tensor([0, 4, 3, 2, 1])
    swapped = torch.cat([rows[..., swap].flatten(-2), x[..., 25:30][..., swap], backbone[..., swap], x[..., 35:]], -1)
    assert not torch.equal(swapped, x) and torch.equal(model.blind(swapped), seen)
    # and it still starts at the vote
    frac = x[..., 25:30]
    assert torch.equal(model.eval()(x).argmax(-1), (2.0 * torch.log(frac + 0.05)).argmax(-1))


def test_stitch_phred_and_pass_subsets():
    assert C.stitch(np.array([[1, 2], [3, 4]]), [0, 1], 3).tolist() == [1, 3, 4]
    with pytest.raises(ValueError, match="covered by no window"):
        C.stitch(np.array([[1, 2]]), [0], 3)
    assert C.phred_qv(0.01) == pytest.approx(20) and C.phred_qv(0.5) == pytest.approx(3.0103, abs=1e-4)
    assert C.phred_qv(0.0) == float("inf")
    with pytest.raises(ValueError):
        C.phred_qv(1.5)
    assert C.pass_subsets(13) == C.pass_subsets(13) and len(set(C.pass_subsets(13))) == 20
    assert len(C.pass_subsets(6)) == 20 and len(C.pass_subsets(5, n=100)) == 10
    with pytest.raises(ValueError):
        C.pass_subsets(2)


@pytest.mark.parametrize("seed", range(5))
def test_sign_test_is_the_exact_binomial(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 4, size=15), rng.integers(0, 4, size=15)
    wins, losses, ties, p = C.sign_test(a, b)
    assert wins + losses + ties == 15 and ties == int((a == b).sum())
    n, k = wins + losses, min(wins, losses)
    # brute force: every sign pattern of the n untied pairs is equally likely under the null
    extreme = sum(1 for m in range(2 ** n) if min(bin(m).count("1"), n - bin(m).count("1")) <= k)
    assert p == pytest.approx(min(1.0, extreme / 2 ** n))
    assert C.sign_test(b, a)[3] == pytest.approx(p)
    assert C.sign_test([1.0] * 3, [1.0] * 3) == (0, 0, 3, 1.0)


def test_molecule_windows_labels_cover_the_truth():
    mol = [m for m in pacbio.load_molecules() if m.zmw == 37134][0]
    reads = [s.seq for s in mol.passes()[:3]]
    feats, labels, backbone, counts, starts = C.molecule_windows(mol.reference, reads, 32, 40, 32, max_reads=5)
    assert feats.shape == (len(starts), 32, 35) and labels.shape == (len(starts), 40)
    assert (counts.sum(1) == 3).all() and len(backbone) == len(counts)
    # non-overlapping windows (all but the last, which ends at the end) hold the truth in order
    joined = "".join(C.decode(row) for row in labels[:-1])
    assert mol.reference.startswith(joined) and len(joined) > 0.8 * len(mol.reference)
    f10, *_ = C.molecule_windows(mol.reference, reads, 32, 40, 32)
    assert f10.shape[-1] == 10 and np.allclose(f10, feats[..., 25:])


def test_training_with_a_step_budget_is_reproducible():
    """The notebook's budget is in epochs (steps), not seconds: the same seed gives the same run."""
    from course_lib.training import TrainConfig, train

    mol = [m for m in pacbio.load_molecules() if m.zmw == 37134][0]
    feats, labels, *_ = C.molecule_windows(mol.reference, [s.seq for s in mol.passes()[:3]], 32, 40, 8)
    data = torch.utils.data.TensorDataset(torch.from_numpy(feats), torch.from_numpy(labels))
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = C.ConsensusTransformer(d_model=16, num_heads=2, num_layers=1, d_ff=32)
        history = train(model, data, TrainConfig(epochs=2, batch_size=16, seed=0, device="cpu", progress=False),
                        loss_fn=lambda out, y: C.soft_alignment_loss(out, y, 0.1, 5.0).mean())
        runs.append((history.steps, history.train_loss, model.head.weight.detach().clone()))
    assert runs[0][0] == runs[1][0] == 2 * -(-len(data) // 16)
    assert runs[0][1] == pytest.approx(runs[1][1], rel=1e-5)
    assert torch.allclose(runs[0][2], runs[1][2], atol=1e-6)


# ---------------------------------------------------------------- the shipped weights (lesson 11, section 6)
def test_shipped_weights_are_small_documented_and_held_out():
    models, info = C.load_pretrained()
    assert C.PRETRAINED_FILE.stat().st_size < 1_000_000
    assert sorted(models) == [6251, 32861, 37134] and sorted(info["measured"]) == sorted(models)
    assert info["architecture"] == "VoteResidualTransformer" and info["features"] == "context_windows"
    n_context = 7 * info["max_reads"] + 12                   # context_windows' features per column
    assert info["model"]["base_blind"] and info["model"]["in_features"] == n_context - 2 * info["max_reads"] - 8
    for zmw, model in models.items():
        assert not model.training and isinstance(model, C.VoteResidualTransformer)
        assert model(torch.zeros(2, info["width"], n_context)).shape == (2, info["width"], 5)
        # held out: the molecule was not among the ones it was trained on
        assert zmw not in info["measured"][zmw]["train_molecules"]
        assert len(info["measured"][zmw]["train_molecules"]) == len(pacbio.load_molecules()) - 1
    assert info["seed"] == 0 and info["machine"] and info["cpu_seconds"] > 0
    readme = (ROOT / "course_lib" / "data" / "README.md").read_text()
    assert "consensus_transformer_folds.pt" in readme and "tests/data_scripts/consensus_weights.py" in readme
    assert "PLACEHOLDER" not in readme
    script = (ROOT / "tests" / "data_scripts" / "consensus_weights.py").read_text()
    assert "FOLDS = (32861, 6251, 37134)" in script  # each fold trains on every molecule but its held-out one


def test_the_final_model_never_saw_the_test_molecules_and_reproduces_its_stored_figures():
    """Issue 59: the final model (the configuration chosen on the validation molecules) is trained on every molecule
    but the two untouched ones and tested there; its stored per read set errors come back with the reference
    functions, and the validation / test molecules are disjoint."""
    models, info = C.load_pretrained(which="final")
    assert C.FINAL_FILE.stat().st_size < 200_000
    assert sorted(models) == sorted(C.UNTOUCHED) == sorted(info["test_molecules"]) == [14743, 39571]
    assert models[14743] is models[39571] and not models[14743].training
    assert not set(C.UNTOUCHED) & set(info["train_molecules"]) and not set(C.UNTOUCHED) & set(C.VALIDATION)
    assert sorted(info["train_molecules"]) == sorted(m.zmw for m in pacbio.load_molecules() if m.zmw not in C.UNTOUCHED)
    folds, folds_info = C.load_pretrained()
    assert info["model"] == folds_info["model"] and info["epochs"] == folds_info["epochs"] and info["seed"] == 0
    mols = {m.zmw: m for m in pacbio.load_molecules()}
    for zmw in C.UNTOUCHED:
        got = []
        for s in C.spanning_read_sets(mols[zmw], C.edit_distance, k=3, min_span=info["min_span"]):
            feats, _, backbone, _, starts = C.molecule_windows(s["truth"], s["reads"], info["width"], info["max_label"],
                                                               info["width"], info["max_reads"], s["strands"])
            with torch.no_grad():
                pred = models[zmw](torch.from_numpy(feats)).argmax(-1).numpy()
            got.append(C.trimmed_error_rate(C.decode(C.stitch(pred, starts, len(backbone))), s["truth"]))
        assert got == pytest.approx(info["measured"][zmw]["model"], abs=1e-5)
    with pytest.raises(ValueError, match="which must be"):
        C.load_pretrained(which="test")
    readme = (ROOT / "course_lib" / "data" / "README.md").read_text()
    assert "consensus_transformer_final.pt" in readme and "--final" in readme


def test_shipped_weights_reproduce_their_stored_figures_on_a_held_out_molecule():
    """The notebook recomputes these; here the smallest held-out molecule, with the reference functions."""
    models, info = C.load_pretrained()
    zmw = 37134
    mol = [m for m in pacbio.load_molecules() if m.zmw == zmw][0]
    full = mol.passes()
    passes = [s.seq for s in full]
    model_err, vote_err = [], []
    for subset in C.pass_subsets(len(passes), info["n_test"]):
        reads = [passes[i] for i in subset]
        feats, _, backbone, counts, starts = C.molecule_windows(mol.reference, reads, info["width"],
                                                                info["max_label"], info["width"], info["max_reads"],
                                                                [full[i].strand for i in subset])
        with torch.no_grad():
            pred = models[zmw](torch.from_numpy(feats)).argmax(-1).numpy()
        model_err.append(C.trimmed_error_rate(C.decode(C.stitch(pred, starts, len(backbone))), mol.reference))
        vote_err.append(C.trimmed_error_rate(C.majority_consensus(counts), mol.reference))
    stored = info["measured"][zmw]["mean_error"]
    assert np.mean(vote_err) == pytest.approx(stored["majority vote (POA backbone)"], abs=1e-5)
    assert np.mean(model_err) == pytest.approx(stored["model"], abs=2e-3)  # float rounding may flip a rare argmax


def test_read_rows_needs_no_pileup(monkeypatch):
    """read_rows is a building block of lesson 11's notebook; pileup is its exercise, withheld from the students'
    bundle: read_rows must not call it, and it keeps pileup's checks and messages (issue 41)."""
    reads, alignments = ["AC", "AGC"], ["=D=", "=X="]
    expected = C.read_rows(reads, alignments, 3)
    errors = {}
    for bad in ([["AC"], ["=D=D"], 3], [["AC", "A"], ["=D="], 3], [["AC"], ["=D"], 3]):
        with pytest.raises(ValueError) as err:
            C.pileup(*bad)
        errors[str(bad)] = str(err.value)

    def withheld(*args, **kwargs):
        raise NotImplementedError("withheld in the students' bundle")

    monkeypatch.setattr(C, "pileup", withheld)
    assert (C.read_rows(reads, alignments, 3) == expected).all()
    for bad in ([["AC"], ["=D=D"], 3], [["AC", "A"], ["=D="], 3], [["AC"], ["=D"], 3]):
        with pytest.raises(ValueError) as err:
            C.read_rows(*bad)
        assert str(err.value) == errors[str(bad)]


def _encoder_by_the_references(model, features):
    """ConsensusTransformer's forward as it was computed before issue 41: lesson 05's encoder_layer_forward
    (pre-norm), lesson 03's split_heads / merge_heads and lesson 01's scaled_dot_product_attention_torch."""
    import torch.nn.functional as F

    from course_lib.attention import scaled_dot_product_attention_torch
    from course_lib.multihead import merge_heads, split_heads

    x = model.positions(model.embed(features))
    for layer in model.encoder.layers:
        attn = layer.self_attn
        h = layer.norm1(x)
        q, k, v = (split_heads(p(h), attn.num_heads) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        heads, weights = scaled_dot_product_attention_torch(q, k, v, None)
        if attn.training and attn.dropout > 0.0:
            weights = F.dropout(weights, p=attn.dropout, training=True)
            heads = weights @ v
        x = x + layer.dropout1(attn.out_proj(merge_heads(heads)))
        x = x + layer.dropout2(layer.ff(layer.norm2(x)))
    return model.head(model.encoder.norm(x))


@pytest.mark.parametrize("train_mode", [True, False])
def test_model_forward_equals_the_references_bit_for_bit(train_mode):
    """The written-out forward pass gives the same logits, the same dropout draws and the same gradients as the
    references of lessons 01, 03 and 05 (so lesson 11's trained numbers do not move), on a seed."""
    torch.manual_seed(0)
    model = C.ConsensusTransformer(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1).train(train_mode)
    features = torch.rand(8, 32, 10)
    torch.manual_seed(1)
    ours = model(features)
    grads_ours = torch.autograd.grad(ours.square().sum(), list(model.parameters()))
    torch.manual_seed(1)
    theirs = _encoder_by_the_references(model, features)
    grads_theirs = torch.autograd.grad(theirs.square().sum(), list(model.parameters()))
    assert torch.equal(ours, theirs)
    assert all(torch.equal(a, b) for a, b in zip(grads_ours, grads_theirs))


def test_shipped_models_forward_equals_the_references_bit_for_bit():
    models, info = C.load_pretrained()
    features = torch.rand(4, 32, 7 * info["max_reads"] + 12, generator=torch.Generator().manual_seed(2))
    for model in models.values():
        with torch.no_grad():
            seen = model.blind(features)
            assert torch.equal(model.net(seen), _encoder_by_the_references(model.net, seen))
            frac = features[..., model.frac_at:model.frac_at + 5]
            assert torch.equal(model(features), model.vote_scale * torch.log(frac + model.eps) + model.net(seen))


def test_model_calls_no_graded_reference(monkeypatch):
    """In the students' bundle lessons 01, 03 and 05's references raise until released: the model must not need them."""
    from course_lib import attention, blocks, multihead

    def withheld(*args, **kwargs):
        raise NotImplementedError("withheld in the students' bundle")

    torch.manual_seed(0)
    model = C.ConsensusTransformer(d_model=16, num_heads=2, num_layers=2, d_ff=32)
    features = torch.rand(2, 32, 10)
    expected = model.eval()(features)
    for module, name in ((attention, "scaled_dot_product_attention_torch"), (attention, "softmax_torch"),
                         (multihead, "split_heads"), (multihead, "merge_heads"),
                         (blocks, "encoder_layer_forward"), (blocks, "layer_norm"), (blocks, "feed_forward")):
        monkeypatch.setattr(module, name, withheld)
    monkeypatch.setattr(multihead.MultiHeadAttention, "forward", withheld)
    monkeypatch.setattr(blocks.Encoder, "forward", withheld)
    assert torch.equal(model(features), expected)
    model.train()(features).sum().backward()


# ---------------------------------------------------------------- the strongest simple baseline (issue 59)
def _median_rule_by_hand(rows, backbone):
    """The homopolymer-median rule written another way: itertools.groupby over the backbone's runs."""
    import itertools

    out, start = [], 0
    for base, run in itertools.groupby(backbone):
        n = len(list(run))
        lengths = sorted(int(sum(C.VOCAB[x] == base for x in row[start:start + n])) for row in rows)
        out.append(base * lengths[(len(lengths) - 1) // 2])
        start += n
    return "".join(out)


def test_homopolymer_median_rule_sets_each_run_to_the_reads_median():
    # run AAA: the reads show 2, 2, 3 A's (gaps in different columns): the vote keeps 3, the rule writes 2
    rows = np.array([[1, 0, 1, 2], [1, 1, 0, 2], [1, 1, 1, 2]])
    assert C.majority_consensus(np.stack([np.bincount(c, minlength=5) for c in rows.T])) == "AAAC"
    assert C.homopolymer_median_consensus(rows, "AAAC") == "AAC"
    # even number of reads: the lower median; a lone base shown by no read vanishes; another base is not counted
    assert C.homopolymer_median_consensus(np.array([[3, 3, 1], [3, 0, 1], [3, 3, 0], [0, 0, 1]]), "GGA") == "GA"
    assert C.homopolymer_median_consensus(np.array([[2, 4], [2, 0], [2, 0]]), "CT") == "C"
    assert C.homopolymer_median_consensus(np.array([[4, 4], [2, 2], [4, 4]]), "TT") == "TT"
    assert C.homopolymer_median_consensus(np.array([[4, 4], [2, 2], [2, 2]]), "TT") == ""
    rng = np.random.default_rng(5)
    for _ in range(50):
        backbone = "".join(rng.choice(list("ACGT"), size=int(rng.integers(1, 30)), p=[0.4, 0.2, 0.2, 0.2]))
        rows = rng.integers(0, 5, size=(int(rng.integers(1, 6)), len(backbone)))
        out = C.homopolymer_median_consensus(rows, backbone)
        assert out == _median_rule_by_hand(rows, backbone)
        assert len(out) <= len(backbone)          # a run never grows
    with pytest.raises(ValueError, match="rows must be"):
        C.homopolymer_median_consensus(np.zeros((3, 4), dtype=int), "ACG")
    with pytest.raises(ValueError, match="rows must be"):
        C.homopolymer_median_consensus(np.zeros((0, 3), dtype=int), "ACG")


def test_spanning_read_sets_cut_every_read_to_the_shared_span():
    mols = {m.zmw: m for m in pacbio.load_molecules()}
    for zmw, n_sets in ((14743, 4), (39571, 1), (13473, 0)):
        sets = C.spanning_read_sets(mols[zmw], C.edit_distance)
        assert len(sets) == n_sets
        for s in sets:
            subs = [mols[zmw].subreads[i] for i in s["subreads"]]
            lo = max(x.ref_start for x in subs) - mols[zmw].ref_start
            assert s["truth"] == mols[zmw].reference[lo:lo + len(s["truth"])] and len(s["truth"]) >= 96
            assert s["strands"] == [x.strand for x in subs]
            for read, sub in zip(s["reads"], subs):
                assert read in sub.seq                                  # a piece of the subread, not edited
                assert C.trimmed_error_rate(read, s["truth"]) < 0.2     # and it covers the truth span
    # the molecules' passes give many sets; the span rule drops sets that share too little
    assert len(C.spanning_read_sets(mols[14743], C.edit_distance, min_span=500)) == 1
