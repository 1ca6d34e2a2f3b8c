"""Positional encodings: closed forms, the shift property, torch modules, Enformer's basis functions."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import positional as P

ATOL = 1e-12


# ---------------------------------------------------------------- sinusoidal
def test_matches_the_closed_form_elementwise():
    T, d = 7, 10
    pe = P.sinusoidal_encoding(T, d)
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=ATOL)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=ATOL)


def test_position_zero_and_range():
    pe = P.sinusoidal_encoding(200, 64)
    np.testing.assert_allclose(pe[0], np.tile([0.0, 1.0], 32), atol=ATOL)
    assert pe.min() >= -1.0 and pe.max() <= 1.0
    assert pe.shape == (200, 64) and pe.dtype == np.float64
    # each (sin, cos) pair lies on the unit circle: every row has squared norm d/2
    np.testing.assert_allclose((pe**2).sum(-1), np.full(200, 32.0), atol=1e-10)


def test_frequencies_are_geometric():
    w = P.sinusoidal_frequencies(16)
    assert w[0] == 1.0
    np.testing.assert_allclose(w[1:] / w[:-1], np.full(7, 10000 ** (-2 / 16)), rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(-40, 40), d_half=st.integers(1, 24), base=st.sampled_from([100.0, 10000.0]))
def test_shift_is_one_linear_map_for_all_positions(k, d_half, base):
    d = 2 * d_half
    pe = P.sinusoidal_encoding(120, d, base)
    m = P.shift_matrix(k, d, base)
    lo, hi = max(0, -k), min(120, 120 - k)
    # PE(pos + k) = M_k @ PE(pos) for every pos where both exist
    np.testing.assert_allclose(pe[lo + k:hi + k], pe[lo:hi] @ m.T, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(k=st.floats(-50, 50, allow_nan=False), j=st.floats(-50, 50, allow_nan=False), d_half=st.integers(1, 16))
def test_shift_matrices_are_rotations_that_compose(k, j, d_half):
    d = 2 * d_half
    mk, mj = P.shift_matrix(k, d), P.shift_matrix(j, d)
    np.testing.assert_allclose(mk @ mk.T, np.eye(d), atol=1e-12)  # orthogonal
    np.testing.assert_allclose(mk @ mj, P.shift_matrix(k + j, d), atol=1e-9)  # M_k M_j = M_{k+j}
    np.testing.assert_allclose(P.shift_matrix(-k, d), mk.T, atol=1e-12)  # inverse = transpose


def test_dot_product_depends_only_on_offset():
    pe = P.sinusoidal_encoding(100, 32)
    for k in (1, 5, 17):
        dots = np.einsum("td,td->t", pe[:-k], pe[k:])
        np.testing.assert_allclose(dots, np.full_like(dots, dots[0]), atol=1e-10)


@pytest.mark.parametrize("args, match", [
    ((5, 7), "positive even integer"),
    ((5, 0), "positive even integer"),
    ((0, 4), "num_positions must be a positive integer"),
])
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        P.sinusoidal_encoding(*args)
    with pytest.raises(ValueError, match="base must be > 1"):
        P.sinusoidal_frequencies(4, base=1.0)


# ---------------------------------------------------------------- torch modules
def test_sinusoidal_module_adds_the_table():
    mod = P.SinusoidalPositionalEncoding(d_model=8, max_len=20)
    x = torch.randn(3, 11, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = mod(x)
    np.testing.assert_allclose((out - x).numpy(), np.broadcast_to(P.sinusoidal_encoding(11, 8), (3, 11, 8)),
                               atol=1e-6)  # the buffer is float32
    assert not list(mod.parameters()), "the sinusoidal encoding has no trainable parameters"
    with pytest.raises(ValueError, match="exceeds max_len=20"):
        mod(torch.zeros(1, 21, 8))
    with pytest.raises(ValueError, match="built for d_model=8"):
        mod(torch.zeros(1, 5, 6))


def test_learned_module_trains_and_cannot_extrapolate():
    g = torch.Generator().manual_seed(0)
    mod = P.LearnedPositionalEmbedding(max_len=6, d_model=4, generator=g)
    assert mod.weight.std() < 0.05, "learned positions start small, N(0, 0.02^2)"
    x = torch.zeros(2, 5, 4)
    out = mod(x)
    torch.testing.assert_close(out[0], mod.weight[:5])
    out.sum().backward()
    assert torch.all(mod.weight.grad[:5] == 2.0) and torch.all(mod.weight.grad[5] == 0.0), \
        "only the positions used get a gradient"
    with pytest.raises(ValueError, match="cannot extrapolate"):
        mod(torch.zeros(1, 7, 4))
    a = P.LearnedPositionalEmbedding(6, 4, generator=torch.Generator().manual_seed(1))
    b = P.LearnedPositionalEmbedding(6, 4, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(a.weight, b.weight, rtol=0, atol=0)  # the generator decides the start


# ---------------------------------------------------------------- relative (Enformer)
def test_relative_positions():
    r = P.relative_positions(3, 5)
    assert r.shape == (3, 5)
    assert r[0, 4] == 4 and r[2, 0] == -2
    np.testing.assert_array_equal(P.relative_positions(4), -P.relative_positions(4).T)
    with pytest.raises(ValueError, match="S must be a positive integer"):
        P.relative_positions(3, 0)


R = np.arange(-60, 61)


@pytest.mark.parametrize("name, fn", [
    ("exponential", lambda r, n: P.exponential_basis(r, n, seq_len=60)),
    ("central mask", lambda r, n: P.central_mask_basis(r, n)),
    ("gamma", lambda r, n: P.gamma_basis(r, n, seq_len=60)),
])
def test_basis_shapes_symmetry_range(name, fn):
    f = fn(R, 5)
    assert f.shape == (R.size, 5), name
    np.testing.assert_array_equal(f, f[::-1], err_msg=f"{name}: f(r) must equal f(-r)")
    assert f.min() >= 0.0 and f.max() <= 1.0, f"{name}: values must lie in [0, 1]"
    assert fn(np.zeros((2, 3)), 4).shape == (2, 3, 4), f"{name}: any distance shape, features last"


def test_exponential_half_lives():
    f = P.exponential_basis(R, 4, seq_len=60, min_half_life=3.0)
    half = 2.0 ** np.linspace(3.0, np.log2(60.0), 4)  # Enformer: 2^3 = 8 up to seq_len
    at_h = P.exponential_basis(half, 4, seq_len=60)
    np.testing.assert_allclose(np.diag(at_h), 0.5, atol=1e-12)  # f_i(h_i) = 1/2
    assert P.exponential_basis(np.array([8]), 3, seq_len=100)[0, 0] == pytest.approx(0.5, abs=1e-12), \
        "the default min_half_life=3.0 means a shortest half-life of 2^3 = 8 positions"
    assert np.all(f[R == 0] == 1.0)
    pos = f[R >= 0]
    assert np.all(np.diff(pos, axis=0) < 0), "decays strictly with distance"
    assert np.all(np.diff(pos[1:], axis=1) > 0), "later functions decay more slowly"


def test_central_mask_windows_nest():
    f = P.central_mask_basis(R, 5)
    assert set(np.unique(f)) == {0.0, 1.0}
    for i in range(1, 6):
        inside = np.abs(R) < 2 ** i - 1
        np.testing.assert_array_equal(f[:, i - 1], inside.astype(float))
    assert np.all(f[:, 1:] >= f[:, :-1]), "each window contains the previous one"


def test_gamma_bumps_peak_in_order():
    f = P.gamma_basis(np.arange(0, 121), 4, seq_len=120)
    assert np.all(f[0] < 1e-6), "a gamma density is 0 at distance 0 (plus Enformer's 1e-8)"
    peaks = f.argmax(axis=0)
    assert np.all(np.diff(peaks) > 0), "bumps sit at increasing distances"
    assert f.max() == 1.0, "one global maximum scales the whole array"
    assert np.all(np.diff(f.max(axis=0)) < 0), "wider densities (later bumps) peak lower"
    # mode of basis i: (alpha - 1) / beta with alpha = 4 i^2, beta = mu_i / sigma^2
    i = np.arange(1, 5)
    mu, sigma = i * 120 / 4, 120 / 8
    modes = (4 * i**2 - 1) / (mu / sigma**2)
    assert np.all(np.abs(peaks - modes) <= 1)
    # the scale depends on the distances passed: a grid that includes basis 1's mode
    with_mode = P.gamma_basis(np.append(np.arange(0, 121), modes[0]), 4, 120)
    assert with_mode[-1, 0] == 1.0


# ---------------------------------------------------------------- pinned against Enformer's formulas
# Written out from the formulas of Enformer's public code (google-deepmind/deepmind-research,
# enformer/enformer.py: positional_features_exponential / _central_mask / _gamma; Avsec et al.
# 2021, Nature Methods 18:1196, Methods), one scalar at a time with the math module,
# independently of course_lib.positional.
def _enformer_exponential(d, i, n, seq_len, min_half_life=3.0):
    # half_life = 2 ** linspace(min_half_life, log2(seq_len), n); out = exp(-ln2 / half_life * |d|)
    x = min_half_life + i * (math.log(seq_len) / math.log(2.0) - min_half_life) / (n - 1)
    return math.exp(-math.log(2.0) / 2.0 ** x * abs(d))


def _enformer_central(d, i):
    # center_widths = 2 ** range(1, n + 1) - 1; out = center_widths > |d|
    return float(2.0 ** (i + 1) - 1 > abs(d))


def _enformer_gamma_unscaled(d, i, n, seq_len):
    # mean = linspace(seq_len / n, seq_len, n); stddev = seq_len / (2 n); gamma pdf + 1e-8
    mean = seq_len / n + i * (seq_len - seq_len / n) / (n - 1)
    std = seq_len / (2 * n)
    shape, scale = (mean / std) ** 2, std**2 / mean  # concentration, 1 / rate
    x = abs(d)
    pdf = 0.0 if x == 0 else math.exp((shape - 1) * math.log(x) - x / scale - math.lgamma(shape) - shape * math.log(scale))
    return pdf + 1e-8


DIST = np.array([0, 1, 2, 3, 7, 8, -8, 15, 100, -700, 1535])  # Enformer scale: 1536 bins


def test_exponential_basis_equals_enformer_at_pinned_distances():
    n, L = 6, 1536
    want = np.array([[_enformer_exponential(d, i, n, L) for i in range(n)] for d in DIST])
    np.testing.assert_allclose(P.exponential_basis(DIST, n, L), want, rtol=1e-12)
    assert want[DIST == 8][0, 0] == pytest.approx(0.5), "shortest half-life 2^3 = 8"
    # two literal values: 2^(-1/8) at distance 1, and half-life 1536 at distance 1535
    assert P.exponential_basis(np.array([1]), n, L)[0, 0] == pytest.approx(0.9170040432046712, rel=1e-12)
    assert P.exponential_basis(np.array([1535]), n, L)[0, -1] == pytest.approx(0.5 ** (1535 / 1536), rel=1e-12)


def test_central_mask_equals_enformer_at_pinned_distances():
    n = 8
    want = np.array([[_enformer_central(d, i) for i in range(n)] for d in DIST])
    np.testing.assert_array_equal(P.central_mask_basis(DIST, n), want)
    np.testing.assert_array_equal(P.central_mask_basis(np.array([0, 1, 3, 7]), 4),
                                  [[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]])


def test_gamma_basis_equals_enformer_at_pinned_distances():
    n, L = 4, 1536
    positions = np.arange(-L + 1, L)  # what Enformer's attention passes: every relative offset
    raw = np.array([[_enformer_gamma_unscaled(d, i, n, L) for i in range(n)] for d in positions])
    want = raw / raw.max()  # one maximum over all positions and basis functions
    got = P.gamma_basis(positions, n, L)
    idx = np.searchsorted(positions, [0, 100, -384, 500, 1000, -1535])
    np.testing.assert_allclose(got[idx], want[idx], rtol=1e-9, atol=1e-15)


def test_enformer_features_layout_and_antisymmetry():
    r = P.relative_positions(9)
    f = P.enformer_relative_features(r, 12, seq_len=9)
    assert f.shape == (9, 9, 12)
    sym, asym = f[..., :6], f[..., 6:]
    np.testing.assert_allclose(sym, sym.transpose(1, 0, 2), atol=0)  # depends on |j - i|
    np.testing.assert_allclose(asym, -asym.transpose(1, 0, 2), atol=0)  # flips sign with direction
    np.testing.assert_allclose(sym[..., :2], P.exponential_basis(r, 2, 9))
    np.testing.assert_allclose(sym[..., 2:4], P.central_mask_basis(r, 2))
    np.testing.assert_allclose(sym[..., 4:], P.gamma_basis(r, 2, 9))
    assert P.enformer_relative_features(r, 9, 9, symmetric=True).shape == (9, 9, 9)
    with pytest.raises(ValueError, match="multiple of 6"):
        P.enformer_relative_features(r, 9, 9)


def test_relative_logits_equal_a_loop():
    rng = np.random.default_rng(0)
    T, S, F, d = 4, 5, 6, 3
    q, w = rng.normal(size=(2, T, d)), rng.normal(size=(F, d))
    feats = P.enformer_relative_features(P.relative_positions(T, S), F, seq_len=8)
    out = P.relative_position_logits(q, feats, w)
    assert out.shape == (2, T, S)
    for b in range(2):
        for i in range(T):
            for j in range(S):
                assert out[b, i, j] == pytest.approx(q[b, i] @ (w.T @ feats[i, j]), abs=1e-12)
    # the same offset gives the same relative key: translation invariance along diagonals
    q1 = np.ones((T, d))
    lg = P.relative_position_logits(q1, feats, w)
    np.testing.assert_allclose(np.diag(lg), lg[0, 0])
    with pytest.raises(ValueError, match="w_r must be"):
        P.relative_position_logits(q, feats, w[:, :2])


def test_basis_bad_input():
    with pytest.raises(ValueError, match="num_basis must be a positive integer"):
        P.central_mask_basis(R, 0)
    with pytest.raises(ValueError, match="seq_len"):
        P.gamma_basis(R, 2, seq_len=1)
    with pytest.raises(ValueError, match="min_half_life"):
        P.exponential_basis(R, 2, seq_len=10, min_half_life=20)
    with pytest.raises(ValueError, match="empty"):
        P.gamma_basis(np.array([]), 2, seq_len=10)


def test_plots_smoke():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import plotting

    ax = plotting.encoding_heatmap(P.sinusoidal_encoding(20, 8))
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    r = np.arange(-10, 11)
    ax = plotting.basis_plot(r, P.exponential_basis(r, 3, seq_len=10))
    assert len(ax.get_lines()) == 3
    with pytest.raises(ValueError, match="2-D"):
        plotting.encoding_heatmap(np.zeros(3))
    with pytest.raises(ValueError, match="features \\(N, n\\)"):
        plotting.basis_plot(r, np.zeros((3, 2)))
    plt.close("all")


@pytest.mark.parametrize("d_model,max_len,base", [(8, 20, 10000.0), (32, 512, 10000.0), (6, 7, 100.0)])
def test_sinusoidal_module_table_is_the_reference_rounded_to_float32(d_model, max_len, base):
    """The module builds its table without calling the exercise (it must work in the students' bundle
    before lesson 04's solution is out); the table is bit for bit the reference's, rounded to float32."""
    mod = P.SinusoidalPositionalEncoding(d_model, max_len=max_len, base=base)
    expected = torch.from_numpy(P.sinusoidal_encoding(max_len, d_model, base)).float()
    assert mod.pe.dtype == torch.float32 and torch.equal(mod.pe, expected)
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        P.SinusoidalPositionalEncoding(d_model, max_len=0)
    with pytest.raises(ValueError, match="d_model must be a positive even integer"):
        P.SinusoidalPositionalEncoding(7, max_len=4)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_enformer_features_equal_the_three_basis_functions(symmetric, seed):
    """enformer_relative_features writes out the exponential family instead of calling lesson 04's graded
    exponential_basis (it must work in the students' bundle, lesson 12 uses it); its features are the
    former ones, the concatenation of the three basis functions, bit for bit."""
    rng = np.random.default_rng(seed)
    r = np.concatenate([P.relative_positions(17).ravel(), rng.uniform(-300, 300, size=40)])
    groups, n, seq_len = (3 if symmetric else 6), 4, 256.0
    for min_half_life in (3.0, 1.5):
        feats = P.enformer_relative_features(r, groups * n, seq_len, symmetric=symmetric, min_half_life=min_half_life)
        sym = np.concatenate([P.exponential_basis(r, n, seq_len, min_half_life), P.central_mask_basis(r, n),
                              P.gamma_basis(r, n, seq_len)], axis=-1)
        expected = sym if symmetric else np.concatenate([sym, np.sign(r)[..., None] * sym], axis=-1)
        assert np.array_equal(feats, expected)
    with pytest.raises(ValueError, match="min_half_life"):
        P.enformer_relative_features(r, 6, seq_len=4.0)
