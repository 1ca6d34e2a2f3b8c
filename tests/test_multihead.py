"""course_lib.multihead against torch.nn.MultiheadAttention with the same weights (float64, 1e-10),
split/merge heads properties, the numpy teaching version, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import masking
from course_lib.multihead import (
    MultiHeadAttention,
    head_weights,
    merge_heads,
    multi_head_attention,
    numpy_params_from_torch,
    split_heads,
)

TOL = 1e-10
D, H = 12, 3


def _torch_mha(batch_first=True, bias=True, dropout=0.0, seed=0, D=D, H=H):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(D, H, dropout=dropout, bias=bias, batch_first=batch_first,
                                    dtype=torch.float64)
    if bias:  # torch initialises biases to 0; make them non-zero so they are tested
        with torch.no_grad():
            m.in_proj_bias.normal_()
            m.out_proj.bias.normal_()
    return m.eval()


def _inputs(B, T, S, seed=1, D=D):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, D, generator=g, dtype=torch.float64),
            torch.randn(B, S, D, generator=g, dtype=torch.float64),
            torch.randn(B, S, D, generator=g, dtype=torch.float64))


# ------------------------------------------------------------------ split / merge
@settings(max_examples=30, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 5), H=st.integers(1, 4), d=st.integers(1, 4))
def test_split_merge_round_trip_and_feature_slices(B, T, H, d):
    x = np.random.default_rng(B * 100 + T).normal(size=(B, T, H * d))
    s = split_heads(x, H)
    assert s.shape == (B, H, T, d)
    for h in range(H):  # head h owns features h*d .. (h+1)*d - 1 of every token
        np.testing.assert_array_equal(s[:, h], x[:, :, h * d:(h + 1) * d])
    np.testing.assert_array_equal(merge_heads(s), x)
    xt = torch.as_tensor(x)
    assert torch.equal(split_heads(xt, H), torch.as_tensor(s))
    assert torch.equal(merge_heads(split_heads(xt, H)), xt)


def test_split_heads_example_and_any_leading_dims():
    x = np.arange(8).reshape(1, 2, 4)
    np.testing.assert_array_equal(split_heads(x, 2)[0], [[[0, 1], [4, 5]], [[2, 3], [6, 7]]])
    y = np.zeros((2, 3, 5, 6))
    assert split_heads(y, 3).shape == (2, 3, 3, 5, 2)
    assert split_heads(np.zeros((5, 6)), 2).shape == (2, 5, 3)


@pytest.mark.parametrize("shape,heads", [((2, 3, 10), 3), ((2, 3, 6), 0), ((6,), 2), ((2, 3, 6), 2.0)])
def test_split_heads_bad_input(shape, heads):
    with pytest.raises(ValueError):
        split_heads(np.zeros(shape), heads)


def test_merge_heads_bad_input():
    with pytest.raises(ValueError):
        merge_heads(np.zeros((3, 4)))


def test_one_big_projection_equals_per_head_projections():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 5, D)), rng.normal(size=(D, D))
    big = split_heads(x @ w, H)  # (B, H, T, d_head)
    small = head_weights(w, H)  # (H, D, d_head)
    for h in range(H):
        np.testing.assert_allclose(big[:, h], x @ small[h], atol=1e-12)
    with pytest.raises(ValueError):
        head_weights(np.zeros((D,)), H)


# ------------------------------------------------------------------ torch module vs nn.MultiheadAttention
MASKS = ["none", "key_padding", "causal", "both", "per_sequence", "additive"]


def _masks(kind, B, T, S):
    """(ours, kwargs for nn.MultiheadAttention) for one mask scenario; no row is fully masked."""
    causal = torch.as_tensor(masking.causal_mask(T, S))
    pad = torch.as_tensor(masking.padding_mask([S] + [max(S - 2 - b, S - T + 1) for b in range(B - 1)],
                                               max_len=S))
    if kind == "none":
        return None, {}
    if kind == "key_padding":
        return pad[:, None, None, :], dict(key_padding_mask=masking.to_mha_key_padding_mask(pad))
    if kind == "causal":
        return causal, dict(attn_mask=masking.to_mha_attn_mask(causal))
    if kind == "both":
        ours = masking.combine_masks(causal, pad)[:, None]  # (B, 1, T, S)
        kw = dict(attn_mask=masking.to_mha_attn_mask(causal),
                  key_padding_mask=masking.to_mha_key_padding_mask(pad))
        return ours, kw
    if kind == "per_sequence":  # a different random mask per sequence AND head: tests the (B*H) layout
        g = torch.Generator().manual_seed(7)
        ours = torch.rand(B, H, T, S, generator=g) > 0.5
        ours[..., 0] = True
        return ours, dict(attn_mask=masking.to_mha_attn_mask(ours, num_heads=H))
    if kind == "additive":  # nn.MultiheadAttention's float masks, converted with from_mha_masks
        kw = dict(attn_mask=masking.to_additive(causal, torch.float64),
                  key_padding_mask=masking.to_additive(pad, torch.float64))
        return masking.from_mha_masks(**kw), kw
    raise KeyError(kind)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("mask_kind", MASKS)
def test_from_torch_equals_nn_multihead_attention(batch_first, cross, mask_kind):
    B, T = 3, 5
    S = 7 if cross else T
    ref = _torch_mha(batch_first=batch_first)
    mine = MultiHeadAttention.from_torch(ref)
    assert mine.batch_first == batch_first and mine.num_heads == H and mine.d_model == D
    q, k, v = _inputs(B, T, S)
    if not cross:
        k = v = q
    ours_mask, kw = _masks(mask_kind, B, T, S)
    if not batch_first:
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    for avg in (True, False):
        out_ref, w_ref = ref(q, k, v, average_attn_weights=avg, **kw)
        out, w = mine(q, k, v, mask=ours_mask, average_attn_weights=avg)
        assert out.shape == out_ref.shape == ((B, T, D) if batch_first else (T, B, D))
        assert w.shape == ((B, T, S) if avg else (B, H, T, S))
        torch.testing.assert_close(out, out_ref, atol=TOL, rtol=0)
        torch.testing.assert_close(w, w_ref, atol=TOL, rtol=0)
    out_nw, w_nw = mine(q, k, v, mask=ours_mask, need_weights=False)
    assert w_nw is None
    torch.testing.assert_close(out_nw, out_ref, atol=TOL, rtol=0)


def test_from_torch_without_bias_and_with_training_mode():
    ref = _torch_mha(bias=False).train()
    mine = MultiHeadAttention.from_torch(ref)
    assert mine.training and mine.q_proj.bias is None and mine.out_proj.bias is None
    q, k, v = _inputs(2, 4, 6)
    torch.testing.assert_close(mine(q, k, v)[0], ref(q, k, v)[0], atol=TOL, rtol=0)


def test_from_torch_copies_are_independent():
    ref = _torch_mha()
    mine = MultiHeadAttention.from_torch(ref)
    with torch.no_grad():
        mine.q_proj.weight.add_(1.0)
    assert not torch.allclose(mine.q_proj.weight, ref.in_proj_weight[:D])


def test_from_torch_refuses_unsupported_modules():
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="MultiheadAttention"):
        MultiHeadAttention.from_torch(torch.nn.Linear(8, 8))


def test_dropout_same_rng_equals_nn_multihead_attention_in_training():
    """With dropout on the weights and the same RNG state, both drop the same weights."""
    ref = _torch_mha(dropout=0.3).train()
    mine = MultiHeadAttention.from_torch(ref)
    q, k, v = _inputs(2, 4, 6)
    torch.manual_seed(11)
    out_ref, w_ref = ref(q, k, v, average_attn_weights=False)
    torch.manual_seed(11)
    out, w = mine(q, k, v, average_attn_weights=False)
    torch.testing.assert_close(out, out_ref, atol=TOL, rtol=0)
    torch.testing.assert_close(w, w_ref, atol=TOL, rtol=0)


def test_dropout_only_in_training_mode():
    torch.manual_seed(0)
    m = MultiHeadAttention(D, H, dropout=0.5, dtype=torch.float64)
    q, _, _ = _inputs(2, 6, 6)
    m.eval()
    out1, w1 = m(q, q, q, average_attn_weights=False)
    out2, _ = m(q, q, q)
    torch.testing.assert_close(out1, out2, atol=0, rtol=0)
    torch.testing.assert_close(w1.sum(-1), torch.ones(2, H, 6, dtype=torch.float64), atol=1e-12, rtol=0)
    m.train()
    out3, w3 = m(q, q, q, average_attn_weights=False)
    assert (w3 == 0).sum() > 0 and not torch.allclose(out3, out1)
    kept = w3 != 0  # kept weights are rescaled by 1 / (1 - p)
    torch.testing.assert_close(w3[kept], (w1 * 2.0)[kept], atol=1e-12, rtol=0)


def test_fully_masked_query_gives_finite_output():
    """nn.MultiheadAttention returns NaN for a query with every key masked; ours zero weights."""
    mine = MultiHeadAttention.from_torch(_torch_mha())
    q, k, v = _inputs(1, 3, 4)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    out, w = mine(q, k, v, mask=mask)
    assert torch.isfinite(out).all()
    assert (w[0, 1] == 0).all()
    torch.testing.assert_close(out[0, 1], mine.out_proj.bias, atol=TOL, rtol=0)


@pytest.mark.parametrize("need_weights", [True, False])
def test_a_query_that_sees_no_key_has_finite_gradients_on_both_paths(need_weights):
    """Without weights (and without dropout) the module calls torch's fused kernel; with them it computes
    softmax(q k^T / sqrt(d)) itself. Both: the same output, a dead query's output is the output bias, and no
    NaN in any gradient (a dead query attends to every key inside and is zeroed afterwards)."""
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4, dtype=torch.float64).eval()
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    mask = torch.as_tensor(masking.padding_mask([5, 0]))[:, None, None, :]  # sequence 1: all padding
    out, w = m(x, x, x, mask=mask, need_weights=need_weights)
    out_ref, _ = _former_forward(m, x, x, x, mask)
    torch.testing.assert_close(out, out_ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(out[1], m.out_proj.bias.expand(5, 16), atol=1e-12, rtol=0)
    assert (w is None) != need_weights
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in m.parameters())


def test_gradients_flow_and_float32_works():
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16, requires_grad=True)
    out, w = m(x, x, x, mask=torch.as_tensor(masking.causal_mask(5)))
    assert out.dtype == torch.float32 and w.shape == (2, 5, 5)
    out.sum().backward()
    assert x.grad is not None and m.q_proj.weight.grad is not None
    assert torch.isfinite(x.grad).all()


def test_fresh_module_initialisation_matches_torch_scheme():
    torch.manual_seed(0)
    m = MultiHeadAttention(D, H)
    assert torch.count_nonzero(m.q_proj.bias) == 0 and torch.count_nonzero(m.out_proj.bias) == 0
    bound = (6 / (2 * D)) ** 0.5  # xavier uniform on a (D, D) matrix
    assert m.q_proj.weight.abs().max() <= bound
    assert "num_heads=3" in repr(m)


@pytest.mark.parametrize("kwargs", [dict(d_model=10, num_heads=3), dict(d_model=12, num_heads=0),
                                    dict(d_model=0, num_heads=1), dict(d_model=12, num_heads=3, dropout=1.0)])
def test_constructor_bad_input(kwargs):
    with pytest.raises(ValueError):
        MultiHeadAttention(**kwargs)


def test_forward_bad_input():
    m = MultiHeadAttention(D, H, dtype=torch.float64)
    q, k, v = _inputs(2, 4, 5)
    with pytest.raises(ValueError, match="3-D"):
        m(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="D=12"):
        m(q[..., :6], k, v)
    with pytest.raises(ValueError, match="bool"):
        m(q, k, v, mask=torch.ones(4, 5))  # float mask
    with pytest.raises(ValueError, match="HEAD axis"):
        m(q, k, v, mask=torch.ones(2, 4, 5, dtype=torch.bool))  # (B, T, S) is ambiguous
    with pytest.raises(ValueError, match="same"):
        m(q, k, v[:, :3])
    with pytest.raises(ValueError, match="batch"):
        m(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="broadcast"):
        m(q, k, v, mask=torch.ones(4, 4, dtype=torch.bool))


# ------------------------------------------------------------------ numpy teaching version
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("bias", [True, False])
def test_numpy_version_equals_nn_multihead_attention(cross, bias):
    ref = _torch_mha(bias=bias)
    params = numpy_params_from_torch(ref)
    assert params["w_q"].shape == (D, D) and (params["b_q"] is None) == (not bias)
    B, T = 2, 4
    S = 6 if cross else T
    q, k, v = _inputs(B, T, S, seed=3)
    if not cross:
        k = v = q
    causal = masking.causal_mask(T, S)
    out_ref, w_ref = ref(q, k, v, attn_mask=masking.to_mha_attn_mask(torch.as_tensor(causal)),
                         average_attn_weights=False)
    out, w = multi_head_attention(q.numpy(), k.numpy(), v.numpy(), mask=causal, **params)
    assert out.shape == (B, T, D) and w.shape == (B, H, T, S)
    np.testing.assert_allclose(out, out_ref.detach().numpy(), atol=TOL, rtol=0)
    np.testing.assert_allclose(w, w_ref.detach().numpy(), atol=TOL, rtol=0)


def test_numpy_and_torch_versions_share_results():
    torch.manual_seed(4)
    m = MultiHeadAttention(D, H, dtype=torch.float64)
    lin = {n: getattr(m, f"{n}_proj") for n in "qkvo" if n != "o"} | {"o": m.out_proj}
    params = {f"w_{n}": l.weight.detach().numpy().T for n, l in lin.items()}
    params |= {f"b_{n}": l.bias.detach().numpy() for n, l in lin.items()}
    q, k, v = _inputs(2, 3, 5, seed=5)
    pad = masking.padding_mask([5, 2])[:, None, None, :]
    out_t, w_t = m(q, k, v, mask=torch.as_tensor(pad), average_attn_weights=False)
    out_n, w_n = multi_head_attention(q.numpy(), k.numpy(), v.numpy(), num_heads=H, mask=pad, **params)
    np.testing.assert_allclose(out_n, out_t.detach().numpy(), atol=TOL, rtol=0)
    np.testing.assert_allclose(w_n, w_t.detach().numpy(), atol=TOL, rtol=0)


def test_numpy_version_bad_input():
    eye = np.eye(4)
    x = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="w_k"):
        multi_head_attention(x, x, x, eye, np.eye(3), eye, eye, num_heads=2)
    with pytest.raises(ValueError, match="divisible"):
        multi_head_attention(x, x, x, eye, eye, eye, eye, num_heads=3)
    with pytest.raises(ValueError, match="key"):
        multi_head_attention(x, np.zeros((2, 3, 5)), x, eye, eye, eye, eye, num_heads=2)


# ------------------------------------------------------------------ picture (smoke test)
def test_head_heatmaps_one_panel_per_head():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import plotting

    m = MultiHeadAttention(D, H, dtype=torch.float64).eval()
    x, _, _ = _inputs(1, 4, 4)
    _, w = m(x, x, x, average_attn_weights=False)
    fig, axes = plotting.head_heatmaps(w[0], list("abcd"), ncols=2)
    titles = [ax.get_title() for ax in axes.flat]
    assert titles[:3] == ["head 0", "head 1", "head 2"] and not axes.flat[3].axison
    with pytest.raises(ValueError, match="H, T, S"):
        plotting.head_heatmaps(w, list("abcd"))
    plt.close("all")


def _former_forward(m: MultiHeadAttention, query, key, value, mask=None):
    """MultiHeadAttention.forward as it was written before it moved to torch's own pieces: the references
    split_heads / merge_heads (lesson 03) and scaled_dot_product_attention_torch (lesson 01)."""
    from course_lib.attention import scaled_dot_product_attention_torch

    H = m.num_heads
    q, k, v = (split_heads(proj(t), H) for proj, t in ((m.q_proj, query), (m.k_proj, key), (m.v_proj, value)))
    heads, weights = scaled_dot_product_attention_torch(q, k, v, mask)
    if m.training and m.dropout > 0.0:
        weights = torch.nn.functional.dropout(weights, p=m.dropout, training=True)
        heads = weights @ v
    return m.out_proj(merge_heads(heads)), weights


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_equals_the_former_version_on_the_references(dtype, tol, seed):
    """The module no longer calls lesson 01's and lesson 03's graded references (so it works in the
    students' bundle); on the same seed it gives the former outputs and weights, with causal, padding
    and fully masked rows, in eval mode and with dropout in training mode (same random stream)."""
    g = torch.Generator().manual_seed(seed)
    m = MultiHeadAttention(16, 4, dropout=0.25, dtype=dtype)
    x = torch.randn(3, 7, 16, generator=g, dtype=dtype)
    mem = torch.randn(3, 9, 16, generator=g, dtype=dtype)
    causal = torch.as_tensor(masking.causal_mask(7))
    pad = torch.as_tensor(masking.padding_mask([9, 4, 1]))[:, None, None, :]  # (B, 1, 1, S)
    dead = torch.ones(3, 1, 7, 9, dtype=torch.bool)
    dead[1, :, 2] = False  # query 2 of sequence 1 sees no key at all
    for train in (False, True):
        m.train(train)
        for q, kv, mask in ((x, x, None), (x, x, causal), (x, mem, pad), (x, mem, dead)):
            torch.manual_seed(seed)
            out, w = m(q, kv, kv, mask=mask, average_attn_weights=False)
            torch.manual_seed(seed)
            out_old, w_old = _former_forward(m, q, kv, kv, mask)
            torch.testing.assert_close(w, w_old, atol=tol, rtol=0)
            torch.testing.assert_close(out, out_old, atol=tol, rtol=0)
            assert torch.isfinite(out).all()
            if not train:  # no weights asked for: torch's fused kernel, the same output
                torch.testing.assert_close(m(q, kv, kv, mask=mask, need_weights=False)[0], out_old, atol=tol, rtol=0)
