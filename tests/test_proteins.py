"""Lesson 10: the UniProt extract (size, licence note, identity split), the residue tokenizer,
k-mer vectors, FAVOR+ on padded batches, name scores, and greedy decoding against a step-by-step reference."""
from __future__ import annotations

import os

import pytest
import torch

from course_lib import proteins as P
from course_lib.bio import uniprot
from course_lib.efficient import draw_projection

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- the extract
def test_extract_is_small_and_has_a_few_thousand_entries():
    size = os.path.getsize(uniprot.data_file())
    assert size < 2_000_000, f"the extract is {size} bytes; keep it well under 2 MB"
    proteins = uniprot.load_proteins()
    assert 2000 <= len(proteins) <= 5000
    assert len({p.accession for p in proteins}) == len(proteins)
    assert all(p.name and p.sequence and p.split in uniprot.SPLITS for p in proteins)
    assert all(set(p.sequence) <= set(P.AMINO_ACIDS + "XBZUO") for p in proteins)
    assert not any("(Fragment)" in p.name or p.name.lower().startswith("uncharacterized") for p in proteins)


def test_licence_and_provenance_are_documented():
    with open(os.path.join(REPO, "course_lib", "data", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "uniprot_sprot_names.tsv.gz" in readme
    section = readme[readme.index("uniprot_sprot_names.tsv.gz") - 2000:]
    assert "CC BY 4.0" in section and "mmseqs2-examples" in section
    assert "tests/data_scripts/uniprot_names.py" in section
    assert os.path.isfile(os.path.join(REPO, "tests", "data_scripts", "uniprot_names.py"))


def test_split_keeps_test_proteins_away_from_training_proteins():
    train, test = uniprot.load_proteins("train"), uniprot.load_proteins("test")
    assert len(train) + len(test) == len(uniprot.load_proteins())
    assert 0.15 <= len(test) / (len(train) + len(test)) <= 0.25
    train_seqs = {p.sequence for p in train}
    assert not any(p.sequence in train_seqs for p in test), "a test sequence is identical to a training sequence"
    assert not ({p.cluster for p in train} & {p.cluster for p in test}), "a cluster is on both sides"
    # no long exact substring shared either (a weak, alignment-free near-copy check): 30-mers
    train_30 = {p.sequence[i:i + 30] for p in train for i in range(0, len(p.sequence) - 29, 10)}
    shared = sum(any(p.sequence[i:i + 30] in train_30 for i in range(len(p.sequence) - 29)) for p in test)
    assert shared / len(test) < 0.05, f"{shared} test proteins share a 30-residue stretch with training"


def test_load_proteins_rejects_unknown_split():
    with pytest.raises(ValueError):
        uniprot.load_proteins("valid")


# ---------------------------------------------------------------- tokenizer
def test_tokenizer_round_trips_the_real_sequences():
    seqs = [p.sequence for p in uniprot.load_proteins("test")[:200]]
    ids, keep = P.encode_proteins(seqs)
    assert ids.dtype == torch.int64 and keep.dtype == torch.bool
    assert P.decode_proteins(ids) == ["".join(a if a in P.AMINO_ACIDS else "X" for a in s) for s in seqs]
    assert (ids[:, 0] == P.CLS).all()
    lengths = keep.sum(1)
    assert (ids[torch.arange(len(seqs)), lengths - 1] == P.EOS).all()
    assert ((ids == P.PAD) == ~keep).all()


def test_tokenizer_truncates_residues_and_keeps_eos():
    ids, keep = P.encode_proteins(["MKVLA", "mk"], max_len=4)
    assert ids.tolist() == [[1, 15, 13, 2], [1, 15, 13, 2]]
    ids, _ = P.encode_proteins(["MK", "W"], max_len=10)
    assert ids.shape == (2, 4)
    with pytest.raises(ValueError):
        P.encode_proteins(["M"], max_len=1)


# ---------------------------------------------------------------- k-mers and names
def test_kmer_vectors_are_unit_length_counts():
    v = P.kmer_vectors(["AACAAC", "XX", "ac"], k=2)
    assert v.shape == (3, 400) and v.dtype == torch.float32
    assert torch.allclose(v[0].norm(), torch.tensor(1.0))
    assert float(v[1].abs().sum()) == 0.0
    counts = {0: 2, 1: 2, 20: 1}  # AA twice, AC twice, CA once
    norm = sum(c * c for c in counts.values()) ** 0.5
    for idx, c in counts.items():
        assert abs(float(v[0, idx]) - c / norm) < 1e-6
    assert torch.allclose(v[2], P.kmer_vectors(["AC"], k=2)[0])


def test_name_scores():
    assert P.token_f1("50S ribosomal protein L2", "50s Ribosomal protein L2") == 1.0
    assert P.token_f1("", "Elongation factor P") == 0.0
    s = P.naming_scores(["Elongation factor P", "Elongation factor"], ["Elongation factor P", "Elongation factor P"])
    assert s["exact"] == 0.5 and abs(s["token_f1"] - (1 + 0.8) / 2) < 1e-12


def test_token_f1_counts_words_not_punctuation():
    """Issue 42: with '-' counted as a word, '- - - -' for every protein beat the majority name."""
    assert P.name_words("DNA-directed RNA polymerase subunit beta'") == ["dna", "directed", "rna", "polymerase",
                                                                        "subunit", "beta"]
    assert P.token_f1("- - - -", "DNA-directed RNA polymerase") == 0.0
    assert P.token_f1("dna directed rna polymerase", "DNA-directed RNA polymerase") == 1.0
    truth = ["DNA-directed RNA polymerase subunit beta", "Pre-mRNA-splicing factor", "Elongation factor P"]
    dashes = P.naming_scores(["- - - -"] * 3, truth)
    assert dashes == {"exact": 0.0, "token_f1": 0.0}, dashes
    # exact match still compares the token lists, punctuation included
    assert P.naming_scores(["DNA directed RNA polymerase subunit beta"], truth[:1])["exact"] == 0.0


def test_name_tokenizer_round_trip():
    tok = P.NameTokenizer.fit(["Elongation factor P", "Elongation factor Tu"], min_freq=1)
    assert tok.decode(tok.encode("Elongation factor P")) == "elongation factor p"
    tin, tout = tok.encode_batch(["Elongation factor P"], 6)
    assert tin[0, 0] == tok.BOS and tout[0].tolist()[:4] == tin[0].tolist()[1:5]


# ---------------------------------------------------------------- FAVOR+ with padding
def test_favor_padded_attention_matches_exact_attention_on_real_positions():
    g = torch.Generator().manual_seed(0)
    B, H, L, d = 2, 2, 40, 8
    q, k, v = (torch.randn(B, H, L, d, generator=g, dtype=torch.float64) * 0.5 for _ in range(3))
    keep = torch.arange(L)[None] < torch.tensor([40, 25])[:, None]
    w = draw_projection(4096, d, seed=0, dtype=torch.float64)
    out = P.favor_padded_attention(q, k, v, w, keep)
    scores = (q @ k.transpose(-2, -1)) / d**0.5
    exact = torch.softmax(scores.masked_fill(~keep[:, None, None, :], float("-inf")), -1) @ v
    assert (out[1, :, 25:] == 0).all()
    err = (out - exact)[keep[:, None, :, None].expand_as(out)].abs().max()
    assert err < 0.05, err


def test_favor_padded_attention_memory_grows_linearly():
    g = torch.Generator().manual_seed(1)
    w = draw_projection(32, 16, seed=0)
    peaks = []
    for L in (1000, 2000):
        q, k, v = (torch.randn(1, 2, L, 16, generator=g) for _ in range(3))
        keep = torch.ones(1, L, dtype=torch.bool)
        _, favor = P.peak_tensor_memory(P.favor_padded_attention, q, k, v, w, keep)
        _, exact = P.peak_tensor_memory(lambda: torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
        assert exact >= 2 * L * L * 4  # the (1, 2, L, L) float32 weights
        peaks.append(favor)
        assert favor < exact / 10
    assert peaks[1] < 2.5 * peaks[0]


# ---------------------------------------------------------------- the encoder-decoder and greedy decoding
def _model(seed=0, vocab=15, **kw):
    torch.manual_seed(seed)
    return P.ProteinNamer(vocab, d_model=16, num_heads=2, d_ff=32, max_src_len=64, max_tgt_len=20, **kw).double().eval()


@torch.no_grad()
def _step_by_step(model, src_ids, src_keep, max_len):
    """One protein at a time, no padding, the whole model called with teacher forcing on the prefix."""
    rows = []
    for b in range(len(src_ids)):
        n = int(src_keep[b].sum())
        ids, keep = src_ids[b:b + 1, :n], src_keep[b:b + 1, :n]
        seq = [model.bos_id]
        while len(seq) <= max_len:
            logits = model(ids, keep, torch.tensor([seq]))  # (1, T, V)
            seq.append(int(logits[0, -1].argmax()))
            if seq[-1] == model.eos_id:
                break
        rows.append(seq[1:])
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_decode_equals_a_step_by_step_reference(seed):
    model = _model(seed)
    with torch.no_grad():
        model.generator.bias[model.eos_id] += 1.5
    seqs = ["MKVLAAGIVALLLAAGCSSSK", "MSTNPKPQRKTKRNTNRRPQDVKFPGG", "MAL"]
    src, keep = P.encode_proteins(seqs)
    for max_len in (1, 4, 12):
        out = P.greedy_decode(model, src, keep, max_len)
        assert out.dtype == torch.int64 and out.shape[1] <= max_len
        expected = _step_by_step(model, src, keep, max_len)
        assert out.shape[1] == max(len(r) for r in expected)
        for row, exp in zip(out.tolist(), expected):
            assert row[:len(exp)] == exp and all(t == model.pad_id for t in row[len(exp):])


def test_greedy_decode_rejects_max_len_zero():
    model = _model()
    src, keep = P.encode_proteins(["MK"])
    with pytest.raises(ValueError):
        P.greedy_decode(model, src, keep, 0)


def test_namer_trains_a_little_with_the_course_trainer():
    from torch.utils.data import TensorDataset

    from course_lib.training import TrainConfig, train

    proteins = uniprot.load_proteins("train")[:32]
    tok = P.NameTokenizer.fit([p.name for p in proteins], min_freq=1)
    src, keep = P.encode_proteins([p.sequence for p in proteins], 24)
    tin, tout = tok.encode_batch([p.name for p in proteins], 10)
    torch.manual_seed(0)
    model = P.ProteinNamer(len(tok), d_model=32, num_heads=2, d_ff=64, max_src_len=24, max_tgt_len=10)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny model: one thread is faster, above all on a busy machine
    try:
        hist = train(model, TensorDataset(src, keep, tin, tout), TrainConfig(epochs=8, batch_size=16, lr=3e-3,
                                                                             progress=False), loss_fn=P.seq2seq_loss)
    finally:
        torch.set_num_threads(threads)
    assert hist.train_loss[-1] < hist.train_loss[0] - 0.5


def test_favor_namer_runs_on_long_sequences():
    model = P.ProteinNamer(10, d_model=16, num_heads=2, d_ff=32, attention="favor", num_features=16,
                           max_src_len=4096).eval()
    src, keep = P.encode_proteins(["M" + "A" * 3000, "MK"])
    with torch.no_grad():
        logits = model(src, keep, torch.ones(2, 3, dtype=torch.long))
    assert logits.shape == (2, 3, 10) and torch.isfinite(logits).all()


def test_mlm_masking_and_model():
    ids, keep = P.encode_proteins(["MKVLAAGIVALLLAAG" * 4, "MK"])
    g = torch.Generator().manual_seed(0)
    corrupted, targets = P.mask_residues(ids, keep, 0.5, generator=g)
    chosen = targets != -100
    assert chosen.any() and (corrupted[chosen] == P.MASK).all() and (ids[chosen] == targets[chosen]).all()
    assert not chosen[:, 0].any() and not chosen[~keep].any()
    model = P.ProteinMLM(d_model=16, num_heads=2, d_ff=32)
    assert model(corrupted, keep).shape == (2, ids.shape[1], len(P.AA_VOCAB))
    maps = model.attention_maps(ids, keep)
    assert len(maps) == 2 and maps[0].shape == (2, ids.shape[1], ids.shape[1])
    assert torch.isfinite(P.mlm_loss(model(corrupted, keep), targets))


def test_lesson_10_trains_by_epochs_not_seconds():
    """Issue 42: lesson 10's two trainings (masked residues, the namer) are bounded by epochs, so a fixed seed
    gives the same printed results on every machine; no max_seconds anywhere."""
    import ast
    import pathlib

    import nbformat

    (path,) = pathlib.Path(__file__).resolve().parent.parent.glob("notebooks/10_*/*.ipynb")
    sources = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    configs = 0
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.keyword):
                assert node.arg != "max_seconds", f"lesson 10 bounds a run by seconds:\n{source[:300]}"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "TrainConfig":
                configs += 1
                assert any(k.arg == "epochs" for k in node.keywords), source[:300]
    assert configs == 2, f"expected the two TrainConfig(epochs=...) of lesson 10, found {configs}"
