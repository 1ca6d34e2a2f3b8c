"""Lesson 12's DNA pieces: one-hot and reverse-complement properties, receptive field vs a measured one,
attention pooling, in-silico mutagenesis, the two models; the simulated data set is deterministic."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import dna
from course_lib.bio import regulatory as R

DNA = st.text(alphabet="ACGTNacgtn", max_size=60)


# ---------------------------------------------------------------- one-hot and reverse complement
def test_one_hot_example_and_n():
    x = dna.one_hot_dna("ACGTN")
    assert x.dtype == np.float32 and x.shape == (5, 4)
    np.testing.assert_array_equal(x[:4], np.eye(4))
    np.testing.assert_array_equal(x[4], 0.0)
    assert dna.one_hot_dna("").shape == (0, 4)


@settings(max_examples=60, deadline=None)
@given(DNA)
def test_one_hot_properties(seq):
    x = dna.one_hot_dna(seq)
    assert x.shape == (len(seq), 4)
    is_n = np.array([c in "Nn" for c in seq], dtype=bool)
    np.testing.assert_array_equal(x.sum(1), (~is_n).astype(np.float32))  # one 1 per known base, 0 for N
    np.testing.assert_array_equal(x, dna.one_hot_dna(seq.upper()))  # case does not matter
    decoded = "".join("ACGT"[row.argmax()] if row.any() else "N" for row in x)
    assert decoded == seq.upper()


@settings(max_examples=60, deadline=None)
@given(DNA)
def test_reverse_complement_properties(seq):
    rc = dna.reverse_complement(seq)
    assert len(rc) == len(seq)
    assert dna.reverse_complement(rc) == seq  # an involution
    np.testing.assert_array_equal(dna.one_hot_dna(rc), dna.one_hot_dna(seq)[::-1, ::-1])  # ACGT: flip both axes
    assert rc.upper().count("A") == seq.upper().count("T") and rc.upper().count("G") == seq.upper().count("C")


def test_bad_letters_raise():
    for fn in (dna.one_hot_dna, dna.reverse_complement):
        with pytest.raises(ValueError, match="not a DNA letter"):
            fn("ACGU")
        with pytest.raises(TypeError):
            fn(b"ACGT")


# ---------------------------------------------------------------- receptive field: formula vs impulse
class _LinearStack(torch.nn.Module):
    """Convs with positive weights, average pools, no nonlinearity: the gradient is nonzero exactly on the field."""

    def __init__(self, kernels, dilations, pools):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for i, (k, d, p) in enumerate(zip(kernels, dilations, pools)):
            conv = torch.nn.Conv1d(4 if i == 0 else 3, 3, k, dilation=d, padding=d * (k - 1) // 2)
            torch.nn.init.uniform_(conv.weight, 0.5, 1.0)
            self.layers.append(conv)
            self.layers.append(torch.nn.AvgPool1d(p) if p > 1 else torch.nn.Identity())

    def forward(self, x):  # (B, L, 4) -> (B, L', 3)
        h = x.transpose(1, 2)
        for layer in self.layers:
            h = layer(h)
        return h.transpose(1, 2)


@pytest.mark.parametrize("kernels, dilations, pools", [
    ([15], [1], [1]),
    ([15, 5], [1, 1], [2, 2]),
    ([3, 3, 3], [1, 2, 4], [1, 1, 1]),
    ([15, 5, 5, 5], [1, 1, 2, 1], [4, 4, 1, 1]),
    ([7, 5, 3], [1, 1, 1], [2, 2, 2]),
])
def test_receptive_field_matches_an_impulse_probe(kernels, dilations, pools):
    torch.manual_seed(0)
    model = _LinearStack(kernels, dilations, pools)
    want = dna.receptive_field(kernels, dilations, pools)
    assert dna.measured_receptive_field(model, length=1024) == want


def test_receptive_field_of_the_lesson_cnn_is_measured_too():
    torch.manual_seed(0)
    net = dna.DNAConvNet(channels=8, dilations=(1, 2)).eval()  # eval: batch norm is a fixed affine map
    got = dna.measured_receptive_field(net.features, length=1024)
    assert net.receptive_field_bases == dna.receptive_field([15, 5, 5, 5], [1, 1, 1, 2], [4, 4, 1, 1]) == 238
    assert net.receptive_field_bases - 16 < got <= net.receptive_field_bases  # GELU / softmax weights never exactly 0
    wider = dna.DNAConvNet(channels=8, dilations=(1, 2, 4))
    assert wider.receptive_field_bases == dna.receptive_field([15, 5, 5, 5, 5], [1, 1, 1, 2, 4], [4, 4, 1, 1, 1])


def test_receptive_field_bad_input():
    with pytest.raises(ValueError, match="same length"):
        dna.receptive_field([3, 3], pools=[2])
    with pytest.raises(ValueError, match=">= 1"):
        dna.receptive_field([0])


# ---------------------------------------------------------------- attention pooling
def test_softmax_pool_limits_and_loop():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 12, 3, generator=g)
    np.testing.assert_allclose(dna.softmax_pool(x, torch.zeros(3, 3), 4), x.reshape(2, 3, 4, 3).mean(2), atol=1e-6)
    np.testing.assert_allclose(dna.softmax_pool(x, 1e4 * torch.eye(3), 4), x.reshape(2, 3, 4, 3).amax(2), atol=1e-5)
    w = torch.randn(3, 3, generator=g)
    out = dna.softmax_pool(x, w, 3)
    for b in range(2):
        for j in range(4):
            win = x[b, 3 * j:3 * j + 3]  # (3 positions, C)
            a = torch.softmax(win @ w, dim=0)
            np.testing.assert_allclose(out[b, j], (a * win).sum(0), atol=1e-6)
    with pytest.raises(ValueError, match="divisible"):
        dna.softmax_pool(x, w, 5)


# ---------------------------------------------------------------- in-silico mutagenesis
def test_ism_of_an_additive_model_is_its_weight_differences():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(10, 4, generator=g)
    x = dna.one_hot_dna("ACGTNACGTA")
    before = x.copy()
    eff = dna.in_silico_mutagenesis(lambda s: (s * w).sum((1, 2)), x)
    np.testing.assert_array_equal(x, before)  # input untouched
    ref_base = (torch.from_numpy(x) * w).sum(1)  # weight of the present base (0 for N)
    np.testing.assert_allclose(eff, (w - ref_base[:, None]).numpy(), atol=1e-6)
    assert np.all(eff[np.arange(4), [0, 1, 2, 3]] == 0.0)


# ---------------------------------------------------------------- the models and the simulated data
def test_models_shapes_and_relative_attention_uses_lesson_04():
    x = torch.from_numpy(np.stack([dna.one_hot_dna(s) for s in R.regulatory_dataset(3, seed=5).sequences]))
    for m in (dna.DNAConvNet(channels=8).eval(), dna.DNATransformer(512, channels=8, num_heads=2)):
        assert m(x).shape == (3, 2)
    attn = dna.DNATransformer(512, channels=8, num_heads=2).attn[0]
    from course_lib import positional as P
    np.testing.assert_allclose(attn.rel_features.numpy(), P.enformer_relative_features(
        P.relative_positions(32), 12, seq_len=32), atol=1e-6)


def test_simulated_data_is_deterministic_and_follows_the_rule():
    a, b = R.regulatory_dataset(40, seed=3), R.regulatory_dataset(40, seed=3)
    assert a.sequences == b.sequences and np.array_equal(a.labels, b.labels)
    assert R.regulatory_dataset(40, seed=4).sequences != a.sequences
    motifs = R.load_motifs()
    sp1 = motifs["SP1"].consensus
    assert [m.matrix_id for m in motifs.values()] == ["MA0079.5", "MA1494.2", "MA0139.2"]
    assert sp1 == "GGGGCGGGG"
    for s, fwd, name, d, y in zip(a.sequences, a.promoter_forward, a.distal_motif, a.distance, a.labels):
        assert len(s) == 512 and set(s) <= set("ACGT")
        site = s[a.tss - R.PROMOTER_END_UPSTREAM - len(sp1):a.tss - R.PROMOTER_END_UPSTREAM]
        assert site == (sp1 if fwd else dna.reverse_complement(sp1))
        element = s[a.tss + d:a.tss + d + len(motifs[name].consensus)]
        assert element in (motifs[name].consensus, dna.reverse_complement(motifs[name].consensus))
        assert 48 <= abs(d) <= 256 - 15 - 1  # the 15-base CTCF element must fit
        assert y == int(fwd and name == "HNF4A")
    assert R.simulated_label(True, "HNF4A", 200, max_effect_distance=100) == 0
    assert R.regulatory_dataset(20, seed=3, max_effect_distance=100).labels.tolist() == [
        int(f and n == "HNF4A" and abs(d) <= 100) for f, n, d in zip(a.promoter_forward[:20], a.distal_motif[:20],
                                                                      a.distance[:20])]
