"""Tests of course_lib.efficient: linear attention and Performer FAVOR+.

What is checked against what:
* elu+1 against torch's F.elu; linear attention (non-causal, prefix sums, recurrent step,
  numpy and torch) against the same similarity computed the quadratic way, with and
  without a causal mask, in float64 at atol 1e-10;
* the chunked causal form (torch) against the plain prefix sums: float32 at 1e-5 for several
  L and chunk sizes (L not a multiple of C, C = 1, C >= L), float64 at 1e-12 against the
  masked quadratic form, gradients equal, and the largest tensor any of its operations
  returns (a TorchDispatchMode) is never the (L, r, d_v) prefix sums;
* the projection draw: orthogonal blocks, chi-distributed row norms, zero mean and
  identity covariance of rows, reproducible from seed/generator;
* FAVOR+ against exact softmax attention (course_lib.attention) as m grows;
* the empirical MSE of the positive and the trigonometric estimators of exp(x . y)
  against their closed forms (Performer, Lemma 2), with a tolerance derived from the
  exact fourth moments of each estimator (not a fudge factor);
* orthogonal features beat iid ones at equal m;
* the numerical stabilisation: same output as without it, no overflow where the
  plain formula overflows, a per-key max would be wrong, eps adds a small bias;
* optional: the peer performer-pytorch on the same projection matrix.

Statistical tests use fixed seeds (deterministic) and a bound of Z_BOUND standard
errors; the standard errors are exact (from closed-form moments) where the
estimator allows it, else empirical from >= 10^4 independent draws.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import efficient as E
from course_lib.attention import scaled_dot_product_attention, scaled_dot_product_attention_torch

# Six standard errors: a normal deviation this large has probability 2e-9; even the
# distribution-free Chebyshev bound gives < 3% for one test. Seeds are fixed, so a
# pass is reproducible; the bound says a different seed would almost surely pass too.
Z_BOUND = 6.0


def _rand(rng, *shape, scale=1.0):
    return rng.normal(size=shape) * scale


# ---------------------------------------------------------------- feature map and linear attention
def test_elu_feature_map_equals_torch_elu_plus_one_and_is_positive():
    x = np.linspace(-30, 5, 201)
    ours = E.elu_feature_map(x)
    theirs = (torch.nn.functional.elu(torch.from_numpy(x)) + 1).numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-15, rtol=1e-12)
    assert (ours > 0).all()
    torch.testing.assert_close(E.elu_feature_map_torch(torch.from_numpy(x)), torch.from_numpy(theirs))


@pytest.mark.parametrize("shape", [((5, 3), (7, 3), (7, 2)), ((2, 4, 6, 5), (2, 4, 8, 5), (2, 4, 8, 3))])
def test_linear_attention_equals_quadratic_form(shape):
    rng = np.random.default_rng(0)
    qs, ks, vs = shape
    q, k, v = _rand(rng, *qs), _rand(rng, *ks), _rand(rng, *vs)
    fast = E.linear_attention(q, k, v)
    slow, weights = E.quadratic_linear_attention(q, k, v)
    np.testing.assert_allclose(fast, slow, atol=1e-10, rtol=1e-10)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-12)
    assert (weights > 0).all()
    out_t = E.linear_attention_torch(*(torch.from_numpy(a) for a in (q, k, v)))
    np.testing.assert_allclose(out_t.numpy(), fast, atol=1e-10, rtol=1e-10)


def test_linear_attention_uses_the_given_feature_map():
    rng = np.random.default_rng(1)
    q, k, v = _rand(rng, 4, 3), _rand(rng, 6, 3), _rand(rng, 6, 2)
    fast = E.linear_attention(q, k, v, feature_map=np.exp)
    slow, _ = E.quadratic_linear_attention(q, k, v, feature_map=np.exp)
    np.testing.assert_allclose(fast, slow, atol=1e-10)
    assert not np.allclose(fast, E.linear_attention(q, k, v))


def test_exp_feature_map_is_not_softmax_but_the_rff_of_the_softmax_kernel_converges():
    """elu+1 linear attention is a different model from softmax attention; FAVOR+ approximates softmax."""
    rng = np.random.default_rng(2)
    q, k, v = _rand(rng, 6, 4), _rand(rng, 6, 4), _rand(rng, 6, 3)
    exact, _ = scaled_dot_product_attention(q, k, v)
    assert np.abs(E.linear_attention(q, k, v) - exact).max() > 1e-2


@pytest.mark.parametrize("lead", [(), (3,), (2, 2)])
def test_causal_prefix_sums_and_recurrent_equal_masked_quadratic(lead):
    rng = np.random.default_rng(3)
    T, d, dv = 9, 4, 3
    q, k, v = _rand(rng, *lead, T, d), _rand(rng, *lead, T, d), _rand(rng, *lead, T, dv)
    causal = np.tril(np.ones((T, T), dtype=bool))
    slow, weights = E.quadratic_linear_attention(q, k, v, mask=causal)
    prefix = E.causal_linear_attention(q, k, v)
    recurrent = E.recurrent_linear_attention(q, k, v)
    torch_causal = E.linear_attention_torch(*(torch.from_numpy(a) for a in (q, k, v)), causal=True)
    np.testing.assert_allclose(prefix, slow, atol=1e-10, rtol=1e-10)
    np.testing.assert_allclose(recurrent, slow, atol=1e-10, rtol=1e-10)
    np.testing.assert_allclose(torch_causal.numpy(), slow, atol=1e-10, rtol=1e-10)
    assert (weights[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0).all()


def test_causal_output_does_not_depend_on_future_tokens():
    rng = np.random.default_rng(4)
    q, k, v = _rand(rng, 8, 4), _rand(rng, 8, 4), _rand(rng, 8, 2)
    out = E.causal_linear_attention(q, k, v)
    k2, v2 = k.copy(), v.copy()
    k2[5:] += 10 * rng.normal(size=k2[5:].shape)
    v2[5:] += 10
    out2 = E.causal_linear_attention(q, k2, v2)
    np.testing.assert_allclose(out[:5], out2[:5], atol=1e-12)
    assert not np.allclose(out[5:], out2[5:])


def test_recurrent_step_does_not_modify_its_state_and_matches_prefix_sums():
    rng = np.random.default_rng(5)
    q, k, v = _rand(rng, 5, 3), _rand(rng, 5, 3), _rand(rng, 5, 2)
    state = None
    outs = []
    for t in range(5):
        saved = None if state is None else tuple(a.copy() for a in state)
        out_t, new_state = E.linear_attention_step(state, q[t], k[t], v[t])
        if saved is not None:
            np.testing.assert_array_equal(state[0], saved[0])
            np.testing.assert_array_equal(state[1], saved[1])
        outs.append(out_t)
        state = new_state
    np.testing.assert_allclose(np.stack(outs), E.causal_linear_attention(q, k, v), atol=1e-12)
    phi_k = E.elu_feature_map(k)
    np.testing.assert_allclose(state[1], phi_k.sum(0), atol=1e-12)
    np.testing.assert_allclose(state[0], phi_k.T @ v, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 12), d=st.integers(1, 6), dv=st.integers(1, 4), seed=st.integers(0, 10_000),
       scale=st.floats(0.1, 5.0))
def test_property_causal_forms_agree(T, d, dv, seed, scale):
    rng = np.random.default_rng(seed)
    q, k, v = _rand(rng, T, d, scale=scale), _rand(rng, T, d, scale=scale), _rand(rng, T, dv)
    slow, _ = E.quadratic_linear_attention(q, k, v, mask=np.tril(np.ones((T, T), dtype=bool)))
    np.testing.assert_allclose(E.causal_linear_attention(q, k, v), slow, atol=1e-9, rtol=1e-9)
    np.testing.assert_allclose(E.recurrent_linear_attention(q, k, v), slow, atol=1e-9, rtol=1e-9)
    # the last causal row sees every key: it equals the non-causal output for that query
    np.testing.assert_allclose(E.causal_linear_attention(q, k, v)[-1], E.linear_attention(q, k, v)[-1],
                               atol=1e-9, rtol=1e-9)


def test_torch_linear_attention_is_differentiable():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    for causal in (False, True):
        assert torch.autograd.gradcheck(lambda a, b, c: E.linear_attention_torch(a, b, c, causal=causal),
                                        (q, k, v))




def test_favor_attention_mse_limit_equals_the_monte_carlo_moment_and_the_large_m_error():
    """The closed-form delta-method limit against (1) its own expectation estimated from 200,000
    single features, within Z_BOUND empirical standard errors, and (2) m x MSE of FAVOR+ (iid
    features) at m = 4096 over 200 draws, within 25% (the relative s.e. of that mean is about 10%)."""
    rng = np.random.default_rng(0)
    T, S, d, dv = 5, 6, 4, 2
    q, k, v = 0.5 * rng.normal(size=(T, d)), 0.5 * rng.normal(size=(S, d)), rng.normal(size=(S, dv))
    limit = E.favor_attention_mse_limit(q, k, v)
    exact, _ = scaled_dot_product_attention(q, k, v)
    x, y = q * d ** -0.25, k * d ** -0.25
    w = E.draw_projection(200_000, d, orthogonal=False, seed=1).numpy()
    a_q = np.exp(w @ x.T - 0.5 * (x * x).sum(-1))  # (n, T)
    a_k = np.exp(w @ y.T - 0.5 * (y * y).sum(-1))  # (n, S)
    resid = a_q[:, :, None] * ((a_k @ v)[:, None, :] - a_k.sum(-1)[:, None, None] * exact[None])  # (n, T, dv)
    samples = (resid ** 2 / (np.exp(x @ y.T).sum(-1) ** 2)[None, :, None]).mean(axis=(1, 2))
    se = samples.std(ddof=1) / math.sqrt(len(samples))
    assert abs(samples.mean() - limit) < Z_BOUND * se, (limit, samples.mean(), se)
    m = 4096
    out = E.favor_attention_torch(*(torch.from_numpy(a) for a in (q, k, v)),
                                  E.draw_projection(m, d, orthogonal=False, seed=2, batch_shape=(200,)), eps=0.0)
    assert abs(m * ((out.numpy() - exact) ** 2).mean() / limit - 1) < 0.25
    assert E.favor_attention_mse_limit(q, k, np.ones((S, dv))) == 0.0  # equal values: no error at all
    with pytest.raises(ValueError, match="one head"):
        E.favor_attention_mse_limit(q[None], k[None], v[None])


# ---------------------------------------------------------------- chunked causal form (torch)
def _causal_features(shape_q, shape_v, dtype, seed=0, feature_map=E.elu_feature_map_torch):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(*shape_q, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*shape_v, generator=g, dtype=torch.float64)
    return feature_map(q).to(dtype), feature_map(k).to(dtype), v.to(dtype)


@pytest.mark.parametrize("L", [1, 7, 128, 300, 520])
@pytest.mark.parametrize("C", [1, 3, 64, 128, 4096])
def test_chunked_causal_equals_prefix_sums_in_float32(L, C):
    """Batch and head dims, L a multiple of C or not, C = 1 (the RNN) and C >= L (one masked block)."""
    phi_q, phi_k, v = _causal_features((2, 3, L, 16), (2, 3, L, 8), torch.float32, seed=L)
    chunked = E.chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size=C)
    assert chunked.shape == (2, 3, L, 8) and chunked.dtype == torch.float32
    torch.testing.assert_close(chunked, E.prefix_sum_causal_attention_torch(phi_q, phi_k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("L, C", [(1, 1), (9, 4), (64, 64), (65, 8), (200, 512)])
def test_chunked_causal_equals_masked_quadratic_in_float64(L, C):
    phi_q, phi_k, v = _causal_features((3, L, 5), (3, L, 4), torch.float64, seed=L)
    chunked = E.chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size=C)
    assert chunked.dtype == torch.float64
    weights = (phi_q @ phi_k.transpose(-2, -1)).tril()  # (3, L, L), keys j <= i
    quadratic = (weights @ v) / weights.sum(-1, keepdim=True)
    torch.testing.assert_close(chunked, quadratic, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(chunked, E.prefix_sum_causal_attention_torch(phi_q, phi_k, v), atol=1e-12, rtol=1e-12)


def test_chunked_causal_with_favor_features_and_broadcast_leading_dims():
    """FAVOR+ features (m != d) and leading dims that broadcast like a matmul's, as the prefix form does."""
    g = torch.Generator().manual_seed(11)
    w = E.draw_projection(24, 8, seed=11, dtype=torch.float32)
    q = torch.randn(2, 1, 70, 8, generator=g)
    k = torch.randn(1, 4, 70, 8, generator=g)
    v = torch.randn(70, 5, generator=g)
    phi_q, phi_k = E.favor_features_torch(q, w, is_query=True), E.favor_features_torch(k, w, is_query=False)
    chunked = E.chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size=16)
    assert chunked.shape == (2, 4, 70, 5)
    torch.testing.assert_close(chunked, E.prefix_sum_causal_attention_torch(phi_q, phi_k, v), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(E.favor_attention_torch(q, k, v, w, causal=True),
                               E.favor_attention_torch(q, k, v, w, causal=True, chunk_size=1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("C", [1, 4, 6, 50])
def test_chunked_causal_gradients_equal_the_prefix_form(C):
    phi_q, phi_k, v = _causal_features((2, 2, 13, 4), (2, 2, 13, 3), torch.float64, seed=C)
    grads = []
    for fn in (lambda a, b, c: E.chunked_causal_attention_torch(a, b, c, chunk_size=C),
               E.prefix_sum_causal_attention_torch):
        inputs = [t.clone().requires_grad_(True) for t in (phi_q, phi_k, v)]
        out = fn(*inputs)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
        grads.append([t.grad for t in inputs])
    for chunked, prefix in zip(*grads):
        torch.testing.assert_close(chunked, prefix, atol=1e-12, rtol=1e-10)


def test_chunked_causal_passes_gradcheck():
    phi_q, phi_k, v = _causal_features((1, 5, 3), (1, 5, 2), torch.float64, seed=9)
    inputs = [t.clone().requires_grad_(True) for t in (phi_q, phi_k, v)]
    assert torch.autograd.gradcheck(lambda a, b, c: E.chunked_causal_attention_torch(a, b, c, chunk_size=2), inputs)


def test_causal_path_uses_the_chunked_form_by_default():
    phi_q, phi_k, v = _causal_features((2, 300, 6), (2, 300, 5), torch.float64, seed=3)
    default = E.attention_from_features_torch(phi_q, phi_k, v, causal=True)
    torch.testing.assert_close(default, E.chunked_causal_attention_torch(phi_q, phi_k, v, E.DEFAULT_CHUNK_SIZE),
                               atol=0, rtol=0)
    q, k = torch.randn(2, 300, 6, dtype=torch.float64), torch.randn(2, 300, 6, dtype=torch.float64)
    torch.testing.assert_close(E.linear_attention_torch(q, k, v, causal=True, chunk_size=7),
                               E.prefix_sum_causal_attention_torch(E.elu_feature_map_torch(q),
                                                                   E.elu_feature_map_torch(k), v),
                               atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("C", [32, 256])
def test_default_causal_path_never_builds_an_L_r_dv_or_L_L_tensor(C):
    """The largest tensor any operation of the causal path builds (E.measure_torch_call) is the output
    (or a chunk's C x C block / the (r, d_v) state, all smaller here); the prefix form's (L, r, d_v)
    sums are 32x the output."""
    L, r, dv = 1024, 32, 32
    phi_q, phi_k, v = _causal_features((L, r), (L, dv), torch.float32, seed=1)
    _, chunked = E.measure_torch_call(E.attention_from_features_torch, phi_q, phi_k, v, causal=True, chunk_size=C,
                                      repeats=1)
    assert chunked <= 4 * max(L * dv, C * C, r * dv), chunked
    _, prefix = E.measure_torch_call(E.prefix_sum_causal_attention_torch, phi_q, phi_k, v, repeats=1)
    assert prefix >= 4 * L * r * dv  # the measurement sees what the old form builds


def test_measure_torch_call_counts_new_tensors_not_views():
    x = torch.zeros(1000)
    seconds, largest = E.measure_torch_call(lambda a: (a[:10] + 1, a.view(10, 100)), x, repeats=2)
    assert largest == 10 * 4 and seconds >= 0  # the view of all 1000 floats allocates nothing
    assert E.measure_torch_call(lambda a: torch.outer(a, a), x, repeats=1)[1] == 1000 * 1000 * 4
    with pytest.raises(ValueError, match="repeats"):
        E.measure_torch_call(torch.sin, x, repeats=0)


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, None, "64"])
def test_chunk_size_must_be_a_positive_int(bad):
    phi_q, phi_k, v = _causal_features((5, 3), (5, 2), torch.float32)
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        E.chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size=bad)


def test_chunked_causal_needs_as_many_queries_as_keys():
    phi_q, phi_k, v = _causal_features((6, 3), (6, 2), torch.float32)
    with pytest.raises(ValueError, match="T == S"):
        E.chunked_causal_attention_torch(phi_q[:4], phi_k, v)


# ---------------------------------------------------------------- projection draw
def test_orthogonal_projection_blocks_are_orthogonal_and_reproducible():
    m, d = 10, 4
    w = E.draw_projection(m, d, seed=7)
    assert w.shape == (m, d) and w.dtype == torch.float64
    u = w / w.norm(dim=-1, keepdim=True)
    for start in range(0, m, d):
        block = u[start:start + d]
        torch.testing.assert_close(block @ block.T, torch.eye(len(block), dtype=w.dtype), atol=1e-12, rtol=0)
    # rows of different blocks are independent, not orthogonal
    assert (u[:4] @ u[4:8].T).abs().max() > 1e-3
    torch.testing.assert_close(w, E.draw_projection(m, d, seed=7))
    torch.testing.assert_close(w, E.draw_projection(m, d, generator=torch.Generator().manual_seed(7)))
    assert not torch.equal(w, E.draw_projection(m, d, seed=8))
    iid = E.draw_projection(m, d, orthogonal=False, seed=7, dtype=torch.float32)
    assert iid.shape == (m, d) and iid.dtype == torch.float32


def test_projection_rows_are_marginally_standard_gaussian():
    """Row norms follow chi_d, rows have mean 0 and covariance I (orthogonal and iid alike)."""
    d, n_rows = 8, 24_000
    chi_mean = math.sqrt(2) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    chi_sd = math.sqrt(d - chi_mean ** 2)
    for orthogonal in (True, False):
        w = E.draw_projection(d, d, orthogonal=orthogonal, seed=11, batch_shape=(n_rows // d,)).reshape(-1, d)
        norms = w.norm(dim=-1)
        se = chi_sd / math.sqrt(n_rows)
        assert abs(norms.mean().item() - chi_mean) < Z_BOUND * se
        # each coordinate has mean 0 and variance 1; se of a mean is 1/sqrt(n), of a variance sqrt(2/n)
        assert w.mean(0).abs().max().item() < Z_BOUND / math.sqrt(n_rows)
        cov = (w.T @ w / n_rows).numpy()
        assert np.abs(cov - np.eye(d)).max() < Z_BOUND * math.sqrt(2 / n_rows)


def test_draw_projection_rejects_ambiguous_random_state_and_bad_sizes():
    with pytest.raises(ValueError, match="exactly one of seed"):
        E.draw_projection(4, 4)
    with pytest.raises(ValueError, match="exactly one of seed"):
        E.draw_projection(4, 4, seed=0, generator=torch.Generator())
    with pytest.raises(ValueError, match="positive ints"):
        E.draw_projection(0, 4, seed=0)


# ---------------------------------------------------------------- FAVOR+ vs exact softmax attention
def test_favor_converges_to_exact_softmax_attention_as_m_grows():
    g = torch.Generator().manual_seed(0)
    T, d, dv = 32, 16, 4
    q = 0.5 * torch.randn(T, d, generator=g, dtype=torch.float64)
    k = 0.5 * torch.randn(T, d, generator=g, dtype=torch.float64)
    v = torch.randn(T, dv, generator=g, dtype=torch.float64)
    exact, _ = scaled_dot_product_attention_torch(q, k, v)
    ms = [16, 64, 256, 1024, 4096]
    errors = []
    for m in ms:  # mean squared error over 8 independent draws per m
        errs = [((E.favor_attention_torch(q, k, v, E.draw_projection(m, d, seed=s), eps=0.0) - exact) ** 2).mean()
                for s in range(8)]
        errors.append(torch.stack(errs).mean().item())
    assert all(a > b for a, b in zip(errors, errors[1:])), f"error must fall as m grows: {errors}"
    # the estimator's variance falls like 1/m: 256x more features -> error at least 50x lower
    assert errors[-1] < errors[0] / 50, errors
    assert errors[-1] < 1e-4, errors


def test_favor_causal_equals_masked_quadratic_with_the_same_features():
    g = torch.Generator().manual_seed(1)
    T, d = 12, 8
    q, k = torch.randn(2, T, d, generator=g, dtype=torch.float64), torch.randn(2, T, d, generator=g, dtype=torch.float64)
    v = torch.randn(2, T, 3, generator=g, dtype=torch.float64)
    w = E.draw_projection(32, d, seed=3)
    out = E.favor_attention_torch(q, k, v, w, causal=True)
    phi_q = E.favor_features_torch(q, w, is_query=True)
    phi_k = E.favor_features_torch(k, w, is_query=False)
    sims = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), 0.0)
    torch.testing.assert_close(out, (sims @ v) / sims.sum(-1, keepdim=True), atol=1e-10, rtol=1e-10)
    # the causal FAVOR+ approximates causal softmax attention
    wide = E.draw_projection(4096, d, seed=4)
    exact, _ = scaled_dot_product_attention_torch(0.5 * q, 0.5 * k, v,
                                                  mask=torch.ones(T, T, dtype=torch.bool).tril())
    approx = E.favor_attention_torch(0.5 * q, 0.5 * k, v, wide, causal=True, eps=0.0)
    assert (approx - exact).abs().max() < 0.05


# ---------------------------------------------------------------- estimator MSE against closed forms
def _raw_moments(x, y, kind):
    """E[Y^j], j = 1..4, of the one-projection estimator Y of exp(x . y)."""
    if kind == "positive":  # Y = exp(w.(x+y) - (|x|^2+|y|^2)/2), w.(x+y) ~ N(0, |x+y|^2)
        s2, c = float((x + y) @ (x + y)), float(x @ x + y @ y) / 2
        return [math.exp(-j * c + j * j * s2 / 2) for j in (1, 2, 3, 4)]
    # trig: Y = A cos(g), A = exp((|x|^2+|y|^2)/2), g ~ N(0, |x-y|^2), E cos(j g) = exp(-j^2 |x-y|^2 / 2)
    z2, a = float((x - y) @ (x - y)), math.exp(float(x @ x + y @ y) / 2)
    e = {j: math.exp(-j * j * z2 / 2) for j in (1, 2, 3, 4)}
    cos_moments = [e[1], (1 + e[2]) / 2, (3 * e[1] + e[3]) / 4, (3 + 4 * e[2] + e[4]) / 8]
    return [a ** j * mj for j, mj in zip((1, 2, 3, 4), cos_moments)]


def _mse_and_its_standard_error(x, y, kind, m, n_draws):
    """Exact MSE of the m-projection estimator and the exact sd of an n_draws empirical MSE."""
    r1, r2, r3, r4 = _raw_moments(x, y, kind)
    mu2 = r2 - r1 ** 2
    mu4 = r4 - 4 * r3 * r1 + 6 * r2 * r1 ** 2 - 3 * r1 ** 4
    var_m = mu2 / m  # the mean of m iid copies
    mu4_m = mu4 / m ** 3 + 3 * (m - 1) * mu2 ** 2 / m ** 3
    return var_m, math.sqrt((mu4_m - var_m ** 2) / n_draws), r1


def _pair(d, norm, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=d), rng.normal(size=d)
    return norm * x / np.linalg.norm(x), norm * y / np.linalg.norm(y)


@pytest.mark.parametrize("kind, m, norm, seed", [
    ("positive", 4, 0.5, 0), ("positive", 32, 0.5, 1), ("positive", 16, 0.3, 2),
    ("trig", 4, 0.5, 3), ("trig", 32, 0.5, 4), ("trig", 16, 0.8, 5),
])
def test_estimator_mse_matches_closed_form(kind, m, norm, seed):
    d, n_draws = 8, 20_000
    x, y = _pair(d, norm, seed)
    exact_mse, se, mean = _mse_and_its_standard_error(x, y, kind, m, n_draws)
    assert math.isclose(mean, math.exp(float(x @ y)), rel_tol=1e-12)  # both estimators are unbiased
    closed = E.positive_features_mse(x, y, m) if kind == "positive" else E.trig_features_mse(x, y, m)
    assert math.isclose(closed, exact_mse, rel_tol=1e-10), "Lemma 2's closed form must equal Var/m"
    w = E.draw_projection(m, d, orthogonal=False, seed=100 + seed, batch_shape=(n_draws,)).numpy()
    estimates = E.softmax_kernel_estimate(x, y, w, kind=kind)  # (n_draws,)
    empirical = float(np.mean((estimates - math.exp(float(x @ y))) ** 2))
    assert abs(empirical - closed) < Z_BOUND * se, (
        f"{kind}: empirical MSE {empirical:.5g} vs closed form {closed:.5g}, {abs(empirical - closed) / se:.1f} sd")
    assert abs(float(estimates.mean()) - math.exp(float(x @ y))) < Z_BOUND * math.sqrt(closed / n_draws)


def test_closed_forms_compare_as_the_paper_says():
    """Positive features are accurate where SM is small, trig ones are not (Performer, section 3)."""
    x, y = _pair(8, 1.0, 0)
    y_far = -x  # SM(x, -x) = exp(-1): a small softmax weight
    assert E.positive_features_mse(x, y_far, 16) == 0.0  # x + y = 0: the positive estimator is exact
    assert E.trig_features_mse(x, y_far, 16) > 0.05
    with pytest.raises(ValueError, match="kind"):
        E.softmax_kernel_estimate(x, y, np.ones((4, 8)), kind="relu")


def test_orthogonal_features_have_lower_mse_than_iid():
    d, m, n_draws = 16, 16, 20_000
    x, y = _pair(d, 0.6, 0)
    sm = math.exp(float(x @ y))
    squared_errors = {}
    for orthogonal in (False, True):
        w = E.draw_projection(m, d, orthogonal=orthogonal, seed=21, batch_shape=(n_draws,)).numpy()
        squared_errors[orthogonal] = (E.softmax_kernel_estimate(x, y, w) - sm) ** 2
    iid, ort = squared_errors[False], squared_errors[True]
    se_diff = math.sqrt(iid.var() / n_draws + ort.var() / n_draws)
    # measured (seed 21): iid 0.111, orthogonal 0.084, a difference of 10.7 standard errors
    assert iid.mean() - ort.mean() > Z_BOUND * se_diff / 2, (iid.mean(), ort.mean(), se_diff)
    assert ort.mean() < 0.9 * iid.mean()


# ---------------------------------------------------------------- numerical stabilisation
def _qkvw(seed, T=10, d=8, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(T, d, generator=g, dtype=torch.float64)
    k = scale * torch.randn(T, d, generator=g, dtype=torch.float64)
    v = torch.randn(T, 3, generator=g, dtype=torch.float64)
    return q, k, v, E.draw_projection(64, d, seed=seed)


def test_stabilisation_does_not_change_the_output_when_eps_is_zero():
    q, k, v, w = _qkvw(0)
    for causal in (False, True):
        plain = E.favor_attention_torch(q, k, v, w, causal=causal, eps=0.0, stabilize=False)
        stable = E.favor_attention_torch(q, k, v, w, causal=causal, eps=0.0, stabilize=True)
        torch.testing.assert_close(stable, plain, atol=1e-12, rtol=1e-10)


def test_stabilisation_prevents_overflow():
    q, k, v, w = _qkvw(1, scale=40.0)  # exponents of several hundred: exp overflows in float32
    q, k, v, w = q.float(), k.float(), v.float(), w.float()
    plain = E.favor_attention_torch(q, k, v, w, eps=0.0, stabilize=False)
    stable = E.favor_attention_torch(q, k, v, w)
    assert not torch.isfinite(plain).all()
    assert torch.isfinite(stable).all()


def test_a_per_key_max_would_bias_the_weights_but_the_shared_one_does_not():
    q, k, v, w = _qkvw(2)
    d = q.shape[-1]
    phi_q = E.favor_features_torch(q, w, is_query=True, eps=0.0)
    xk = k * d ** -0.25
    exponent = xk @ w.T - 0.5 * (xk * xk).sum(-1, keepdim=True)
    per_key = torch.exp(exponent - exponent.amax(dim=-1, keepdim=True)) / math.sqrt(w.shape[0])
    shared = torch.exp(exponent - exponent.amax()) / math.sqrt(w.shape[0])
    good = E.attention_from_features_torch(phi_q, shared, v)
    bad = E.attention_from_features_torch(phi_q, per_key, v)
    torch.testing.assert_close(good, E.favor_attention_torch(q, k, v, w, eps=0.0), atol=1e-12, rtol=1e-10)
    assert (bad - good).abs().max() > 1e-2


def test_eps_adds_a_small_positive_bias_toward_uniform_weights():
    q, k, v, w = _qkvw(3)
    no_eps = E.favor_attention_torch(q, k, v, w, eps=0.0)
    small = E.favor_attention_torch(q, k, v, w, eps=1e-6)
    huge = E.favor_attention_torch(q, k, v, w, eps=1e3)
    assert 0 < (small - no_eps).abs().max() < 1e-4
    # with eps dominating, every key gets the same weight: the output is the mean of v
    torch.testing.assert_close(huge, v.mean(0).expand_as(huge), atol=1e-2, rtol=0)


# ---------------------------------------------------------------- bad input
def test_bad_inputs_raise_value_errors_that_say_what_was_expected():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    with pytest.raises(ValueError, match="same feature size d_k"):
        E.linear_attention(q, k[:, :3], v)
    with pytest.raises(ValueError, match="same length S"):
        E.linear_attention(q, k, v[:4])
    with pytest.raises(ValueError, match="as many queries as keys"):
        E.causal_linear_attention(q, k, v)
    with pytest.raises(ValueError, match="T == S"):
        E.linear_attention_torch(*(torch.from_numpy(a) for a in (q, k, v)), causal=True)
    with pytest.raises(ValueError, match="torch.Tensor"):
        E.linear_attention_torch(q, k, v)
    with pytest.raises(ValueError, match="boolean"):
        E.quadratic_linear_attention(q, k, v, mask=np.ones((3, 5)))
    with pytest.raises(ValueError, match="same d"):
        E.positive_random_features(q, np.ones((6, 3)))
    with pytest.raises(ValueError, match=r"\(\.\.\., m, d\)"):
        E.positive_random_features(q, np.ones(4))
    with pytest.raises(ValueError, match="state"):
        E.linear_attention_step((np.zeros((3, 2)), np.zeros(3)), q[0], k[0], v[0])
    with pytest.raises(ValueError, match="same d"):
        E.favor_attention_torch(*(torch.from_numpy(a) for a in (q, k, v)), torch.ones(6, 3))


# ---------------------------------------------------------------- the peer implementation
def test_matches_performer_pytorch_on_the_same_projection():
    performer = pytest.importorskip("performer_pytorch.performer_pytorch")
    g = torch.Generator().manual_seed(5)
    B, H, T, d, m = 1, 2, 20, 16, 64
    q, k, v = (torch.randn(B, H, T, d, generator=g) for _ in range(3))
    w = E.draw_projection(m, d, seed=5, dtype=torch.float32)
    # their feature map and non-causal linear attention with eps = 0: equal up to float32 rounding
    phi_q = performer.softmax_kernel(q, projection_matrix=w, is_query=True, eps=0.0)
    phi_k = performer.softmax_kernel(k, projection_matrix=w, is_query=False, eps=0.0)
    theirs = performer.linear_attention(phi_q, phi_k, v)
    torch.testing.assert_close(E.favor_attention_torch(q, k, v, w, eps=0.0), theirs, atol=1e-5, rtol=1e-4)
    # Their FastAttention module uses eps = 1e-4 after subtracting the max of w.x alone (we subtract
    # the max of the whole exponent), so its eps bias differs from ours: compared at eps = 0 only.


# ---------------------------------------------------------------- multi-head module, model surgery, measuring
def _mha_pair(kind, num_features=None, d_model=16, heads=2, seed=0):
    from course_lib.multihead import MultiHeadAttention

    torch.manual_seed(seed)
    exact = MultiHeadAttention(d_model, heads, dtype=torch.float64).eval()
    holder = torch.nn.Sequential(exact)
    E.swap_attention(holder, kind, num_features=num_features, seed=seed)
    return exact, holder[0]


def test_efficient_mha_linear_equals_per_head_linear_attention():
    from course_lib.multihead import merge_heads, split_heads

    exact, lin = _mha_pair("linear")
    assert isinstance(lin, E.EfficientMultiHeadAttention) and lin.kind == "linear"
    for name, p in exact.state_dict().items():
        torch.testing.assert_close(lin.state_dict()[name], p)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 7, 16, generator=g, dtype=torch.float64)
    out, weights = lin(x, x, x)
    assert weights is None
    q, k, v = (split_heads(proj(x), 2) for proj in (lin.q_proj, lin.k_proj, lin.v_proj))
    expected = lin.out_proj(merge_heads(E.linear_attention_torch(q, k, v)))
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("kind", ["linear", "favor"])
def test_efficient_mha_ignores_padded_keys(kind):
    _, mha = _mha_pair(kind, num_features=32)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 9, 16, generator=g, dtype=torch.float64)
    keep = torch.ones(2, 9, dtype=torch.bool)
    keep[0, 6:] = False
    out, _ = mha(x, x, x, mask=keep[:, None, None, :])
    # row 0 with its padded keys cut off entirely gives the same outputs for its real positions
    short, _ = mha(x[:1, :6], x[:1, :6], x[:1, :6])
    torch.testing.assert_close(out[0, :6], short[0], atol=1e-10, rtol=1e-8)
    # changing the padded positions' content changes nothing for anyone
    x2 = x.clone()
    x2[0, 6:] = 100.0
    torch.testing.assert_close(mha(x2, x2, x2, mask=keep[:, None, None, :])[0][:, :6], out[:, :6],
                               atol=1e-10, rtol=1e-8)
    with pytest.raises(ValueError, match="key padding masks only"):
        mha(x, x, x, mask=torch.ones(9, 9, dtype=torch.bool).tril())


def test_efficient_mha_favor_approximates_exact_mha_with_many_features():
    exact, favor = _mha_pair("favor", num_features=8192)
    with torch.no_grad():
        for lin in (exact.q_proj, exact.k_proj, favor.q_proj, favor.k_proj):
            lin.weight.mul_(0.5)  # moderate scores, so 8192 features estimate well
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 10, 16, generator=g, dtype=torch.float64)
    want, _ = exact(x, x, x)
    got, _ = favor(x, x, x)
    assert (got - want).abs().max() < 0.05
    assert favor.projection.shape == (8192, 8)


def test_swap_attention_in_a_classifier_and_errors():
    from course_lib.blocks import TransformerClassifier

    torch.manual_seed(0)
    model = TransformerClassifier(50, 3, d_model=16, num_heads=2, num_layers=2, d_ff=32).eval()
    E.swap_attention(model, "linear")
    kinds = [type(m).__name__ for m in model.modules() if "MultiHeadAttention" in type(m).__name__]
    assert kinds == ["EfficientMultiHeadAttention"] * 2
    ids = torch.randint(2, 50, (3, 12))
    logits = model(ids)
    assert logits.shape == (3, 3) and torch.isfinite(logits).all()
    logits.sum().backward()  # trainable
    with pytest.raises(ValueError, match="no course_lib.multihead.MultiHeadAttention"):
        E.swap_attention(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="kind"):
        E.EfficientMultiHeadAttention(16, 2, kind="softmax")


def test_favor_features_keep_leaves_hidden_keys_out_of_the_max():
    g = torch.Generator().manual_seed(4)
    k = torch.randn(6, 4, generator=g, dtype=torch.float64)
    k[4:] = 50.0  # huge hidden keys would dominate a shared max and underflow the real ones
    w = E.draw_projection(16, 4, seed=4)
    keep = torch.tensor([True] * 4 + [False] * 2)[:, None]
    feats = E.favor_features_torch(k, w, is_query=False, keep=keep, eps=0.0)
    assert (feats[4:] == 0).all()
    assert feats[:4].max() == pytest.approx(1 / math.sqrt(16))  # the real keys' max is exp(0)
    torch.testing.assert_close(feats[:4], E.favor_features_torch(k[:4], w, is_query=False, eps=0.0))


def test_measure_numpy_call_sees_the_largest_array():
    seconds, peak = E.measure_numpy_call(np.ones, (500, 500), repeats=2)
    assert seconds > 0 and peak >= 500 * 500 * 8
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(1024, 8)), rng.normal(size=(1024, 8)), rng.normal(size=(1024, 8))
    _, exact_peak = E.measure_numpy_call(scaled_dot_product_attention, q, k, v, repeats=1)
    _, linear_peak = E.measure_numpy_call(E.linear_attention, q, k, v, repeats=1)
    assert exact_peak >= 1024 * 1024 * 8 > 10 * linear_peak
    with pytest.raises(ValueError, match="repeats"):
        E.measure_numpy_call(np.ones, 3, repeats=0)


def test_lesson_plots_draw_what_they_are_given():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib.plotting import attention_scaling_plot, feature_mse_plot

    rows = [{"method": meth, "L": L, "time_ms": t * L ** p, "peak_mib": (L ** p) / 1e3 if meth != "exact" or L > 64 else None}
            for meth, p, t in (("exact", 2, 1e-4), ("linear", 1, 1e-3)) for L in (64, 128, 256)]
    fig, axes = attention_scaling_plot(rows, title="t")
    assert len(axes) == 2 and axes[0].get_xlabel().startswith("sequence length")
    assert len(axes[1].get_lines()) == 2 + 2  # two methods + two guides
    plt.close(fig)
    mse_rows = [{"pair": "p", "kind": kind, "m": m, "mse": 1 / m, "mse_se": 0.01 / m, "closed_form": c and 1 / m}
                for kind, c in (("positive iid", True), ("positive orthogonal", None)) for m in (16, 32)]
    fig, axes = feature_mse_plot(mse_rows)
    assert axes[0].get_title() == "p" and axes[0].get_yscale() == "log"
    plt.close(fig)
    with pytest.raises(ValueError):
        attention_scaling_plot([])


# ---------------------------------------------------------------- building blocks off the withheld names (issue 41)
def _old_efficient_mha_forward(mha, query, key, value, mask=None):
    """EfficientMultiHeadAttention.forward as it was before issue 41: lesson 03's split_heads /
    merge_heads, elu_feature_map_torch and attention_from_features_torch (all withheld in the
    students' edition until their solutions are released)."""
    from course_lib.multihead import merge_heads, split_heads

    keep = None if mask is None else mask[..., 0, :].unsqueeze(-1)
    H = mha.num_heads
    q, k, v = (split_heads(p(x), H) for p, x in ((mha.q_proj, query), (mha.k_proj, key), (mha.v_proj, value)))
    if mha.kind == "linear":
        phi_q, phi_k = E.elu_feature_map_torch(q), E.elu_feature_map_torch(k)
        if keep is not None:
            phi_k = phi_k * keep.to(phi_k.dtype)
    else:
        phi_q = E.favor_features_torch(q, mha.projection, is_query=True)
        phi_k = E.favor_features_torch(k, mha.projection, is_query=False, keep=keep)
    return mha.out_proj(merge_heads(E.attention_from_features_torch(phi_q, phi_k, v)))


@pytest.mark.parametrize("kind", ["linear", "favor"])
@pytest.mark.parametrize("masked", [False, True])
def test_efficient_mha_gives_exactly_what_it_gave_before_issue_41(kind, masked):
    torch.manual_seed(41)
    mha = E.EfficientMultiHeadAttention(16, 4, kind, num_features=24, seed=3)
    x, mem = torch.randn(3, 7, 16), torch.randn(3, 9, 16)
    mask = None
    if masked:
        mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
        mask[0, ..., 6:] = False
        mask[2, ..., 1:] = False
    new, _ = mha(x, mem, mem, mask)
    assert torch.equal(new, _old_efficient_mha_forward(mha, x, mem, mem, mask))


def test_favor_attention_non_causal_gives_exactly_what_it_gave_before_issue_41():
    g = torch.Generator().manual_seed(41)
    q, k, v = (torch.randn(2, 3, 11, 8, generator=g, dtype=torch.float64) for _ in range(3))
    w = E.draw_projection(32, 8, seed=41)
    for eps, stabilize in ((1e-6, True), (0.0, False)):
        old = E.attention_from_features_torch(E.favor_features_torch(q, w, is_query=True, eps=eps, stabilize=stabilize),
                                              E.favor_features_torch(k, w, is_query=False, eps=eps, stabilize=stabilize), v)
        assert torch.equal(E.favor_attention_torch(q, k, v, w, eps=eps, stabilize=stabilize), old)


def test_softmax_kernel_estimate_takes_the_students_feature_map():
    rng = np.random.default_rng(41)
    x, y = 0.3 * rng.normal(size=8), 0.3 * rng.normal(size=8)
    w = E.draw_projection(16, 8, seed=41, batch_shape=(5,)).numpy()
    assert np.array_equal(E.softmax_kernel_estimate(x, y, w, feature_map=E.positive_random_features),
                          E.softmax_kernel_estimate(x, y, w, kind="positive"))
    assert np.array_equal(E.softmax_kernel_estimate(x, y, w, feature_map=E.trig_random_features),
                          E.softmax_kernel_estimate(x, y, w, kind="trig"))
    with pytest.raises(ValueError, match="feature_map must be a callable"):
        E.softmax_kernel_estimate(x, y, w, feature_map="positive")
