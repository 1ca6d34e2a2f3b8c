"""course_lib.masking: the mask convention (True = may attend) and its converters,
checked against torch's own SDPA (bool mask, float mask, is_causal) and nn.MultiheadAttention."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from course_lib import masking as M
from course_lib.attention import scaled_dot_product_attention, scaled_dot_product_attention_torch

ATOL = 1e-12  # float64 throughout


def _qkv(B, H, T, S, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, n, d, generator=g, dtype=torch.float64) for n in (T, S, S))


# ------------------------------------------------------------------ the convention itself
def test_convention_true_means_may_attend():
    """A key whose mask entry is True gets weight; False gets exactly 0 (ours and SDPA agree)."""
    q, k, v = _qkv(1, 1, 1, 3)
    mask = torch.tensor([[True, False, True]])
    _, w = scaled_dot_product_attention_torch(q, k, v, mask)
    assert w[0, 0, 0, 1] == 0 and w[0, 0, 0, 0] > 0 and w[0, 0, 0, 2] > 0
    ours, _ = scaled_dot_product_attention_torch(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


# ------------------------------------------------------------------ causal
@pytest.mark.parametrize("T,S", [(1, 1), (4, 4), (2, 5), (3, 7), (5, 6)])
def test_causal_mask_is_lower_triangle_aligned_to_the_end(T, S):
    m = M.causal_mask(T, S)
    assert m.dtype == np.bool_ and m.shape == (T, S)
    np.testing.assert_array_equal(m, np.tril(np.ones((T, S), dtype=bool), k=S - T))
    # torch's own end-aligned causal bias materialises to the same boolean matrix
    np.testing.assert_array_equal(m, causal_lower_right(T, S)._materialize().numpy())
    # the last query sees every key; query i sees exactly S - T + i + 1 keys
    np.testing.assert_array_equal(m.sum(-1), np.arange(T) + S - T + 1)


def test_causal_mask_default_S_and_example():
    np.testing.assert_array_equal(M.causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_array_equal(M.causal_mask(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])


@pytest.mark.parametrize("T", [1, 3, 6])
def test_causal_mask_equals_sdpa_is_causal_when_square(T):
    q, k, v = _qkv(2, 3, T, T, seed=T)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    via_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.as_tensor(M.causal_mask(T)))
    ours, _ = scaled_dot_product_attention_torch(q, k, v, torch.as_tensor(M.causal_mask(T)))
    torch.testing.assert_close(via_bool, theirs, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_causal_mask_differs_from_is_causal_when_S_greater_than_T():
    """is_causal aligns to the START (upper-left); ours aligns to the END (lower-right)."""
    T, S = 2, 5
    q, k, v = _qkv(1, 1, T, S, seed=3)
    ours, _ = scaled_dot_product_attention_torch(q, k, v, torch.as_tensor(M.causal_mask(T, S)))
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (ours - top_left).abs().max() > 1e-3
    np.testing.assert_array_equal(causal_upper_left(T, S)._materialize().numpy(), np.tril(np.ones((T, S)), 0))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(T, S)),
                               atol=ATOL, rtol=0)


@pytest.mark.parametrize("args", [(0,), (3, 2), (2.0,), (True,), (-1, 4)])
def test_causal_mask_bad_input(args):
    with pytest.raises(ValueError):
        M.causal_mask(*args)


# ------------------------------------------------------------------ padding
def test_padding_mask_from_lengths():
    m = M.padding_mask([3, 1, 4])
    np.testing.assert_array_equal(m, [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    assert m.dtype == np.bool_
    assert M.padding_mask([2], max_len=5).shape == (1, 5)
    np.testing.assert_array_equal(M.padding_mask(torch.tensor([2, 0]), max_len=3), [[1, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize("lengths,max_len", [([], None), ([[1, 2]], None), ([1.5, 2], None), ([-1, 2], None),
                                             ([5, 2], 3), ([2], 0)])
def test_padding_mask_bad_input(lengths, max_len):
    with pytest.raises(ValueError):
        M.padding_mask(lengths, max_len=max_len)


def test_padding_mask_from_ids_numpy_and_torch_agree_with_lengths():
    ids = np.array([[4, 8, 2, 0, 0], [7, 0, 0, 0, 0], [1, 2, 3, 4, 5]])
    expected = M.padding_mask([3, 1, 5])
    np.testing.assert_array_equal(M.padding_mask_from_ids(ids, pad_id=0), expected)
    t = M.padding_mask_from_ids(torch.as_tensor(ids), pad_id=0)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.bool
    np.testing.assert_array_equal(t.numpy(), expected)
    with pytest.raises(ValueError):
        M.padding_mask_from_ids(ids[0], pad_id=0)
    with pytest.raises(ValueError):
        M.padding_mask_from_ids(ids, pad_id="<pad>")


def test_padding_mask_keeps_real_tokens_unchanged():
    """Appending padding to a sequence and masking it leaves the outputs of the real tokens unchanged."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 3, 4, generator=g, dtype=torch.float64)
    padded = torch.cat([x, torch.randn(1, 2, 4, generator=g, dtype=torch.float64) * 100], dim=1)
    mask = M.combine_masks(M.causal_mask(5), M.padding_mask([3], max_len=5))  # (1, 5, 5)
    out_short, _ = scaled_dot_product_attention_torch(x, x, x)
    out_pad, w = scaled_dot_product_attention_torch(padded, padded, padded, torch.as_tensor(mask[:, :, :]))
    out_short_causal, _ = scaled_dot_product_attention_torch(x, x, x, torch.as_tensor(M.causal_mask(3)))
    torch.testing.assert_close(out_pad[:, :3], out_short_causal, atol=ATOL, rtol=0)
    assert (w[..., 3:] == 0).all()
    assert not torch.allclose(out_short, out_short_causal)  # the causal mask did something


# ------------------------------------------------------------------ combine
def test_combine_masks_is_and_over_keys():
    c = M.causal_mask(3)
    p = M.padding_mask([3, 2])
    m = M.combine_masks(c, p)
    assert m.shape == (2, 3, 3)
    for b in range(2):
        for t in range(3):
            for s in range(3):
                assert m[b, t, s] == (c[t, s] and p[b, s])
    # one of the two
    assert M.combine_masks(c, None) is c
    assert M.combine_masks(None, p).shape == (2, 1, 3)
    assert M.combine_masks(None, None) is None
    # torch in, torch out
    mt = M.combine_masks(torch.as_tensor(c), torch.as_tensor(p))
    assert isinstance(mt, torch.Tensor)
    np.testing.assert_array_equal(mt.numpy(), m)
    # a per-sequence (B, T, S) attention mask
    np.testing.assert_array_equal(M.combine_masks(np.stack([c, c]), p), m)


@pytest.mark.parametrize("attn,pad", [
    (np.ones((3, 4), bool), np.ones((2, 3), bool)),          # S disagrees
    (np.ones((3, 3, 3), bool), np.ones((2, 3), bool)),       # B disagrees
    (np.ones((3, 3)), np.ones((2, 3), bool)),                # float attention mask
    (np.ones((3, 3), bool), np.ones((2, 1, 3), bool)),       # padding not (B, S)
    (np.ones((3,), bool), np.ones((2, 3), bool)),            # attention mask 1-D
    (np.ones((3, 3), bool), torch.ones(2, 3, dtype=torch.bool)),  # numpy and torch mixed
])
def test_combine_masks_bad_input(attn, pad):
    with pytest.raises(ValueError):
        M.combine_masks(attn, pad)


# ------------------------------------------------------------------ masked softmax and fully masked rows
def test_masked_softmax_properties():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 4, 5)) * 5
    mask = rng.random((2, 4, 5)) > 0.4
    mask[0, 1] = False  # one fully masked row
    w = M.masked_softmax(scores, mask)
    assert np.all(w[~mask] == 0)
    assert np.all(np.isfinite(w))
    np.testing.assert_array_equal(w[0, 1], np.zeros(5))
    row_has_key = mask.any(-1)
    np.testing.assert_allclose(w.sum(-1)[row_has_key], 1.0, atol=ATOL)
    # equals the torch reference softmax with the same mask
    from course_lib.attention import softmax_torch

    wt = softmax_torch(torch.as_tensor(scores), torch.as_tensor(mask)).numpy()
    np.testing.assert_allclose(w, wt, atol=ATOL)
    np.testing.assert_allclose(M.masked_softmax(scores), M.masked_softmax(scores, np.ones((5,), bool)), atol=0)


def test_fully_masked_row_gives_zero_output_not_nan():
    """ours: zeros; the naive softmax of an all -inf row: NaN; a -1e9 fill: uniform weights."""
    q, k, v = _qkv(1, 1, 2, 3, seed=5)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out, w = scaled_dot_product_attention_torch(q, k, v, mask)
    assert torch.isfinite(out).all() and (out[0, 0, 1] == 0).all() and (w[0, 0, 1] == 0).all()
    out_np, w_np = scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy())
    np.testing.assert_array_equal(out_np[0, 0, 1], 0.0)
    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
    assert torch.isnan(torch.softmax(scores, -1)[0, 0, 1]).all()
    w_big = torch.softmax((q @ k.transpose(-2, -1) / 2.0).masked_fill(~mask, -1e9), -1)  # d_k = 4
    torch.testing.assert_close(w_big[0, 0, 1], torch.full((3,), 1 / 3, dtype=torch.float64))
    # a partially masked row is identical either way
    torch.testing.assert_close(w_big[0, 0, 0], w[0, 0, 0], atol=ATOL, rtol=0)


def test_masked_softmax_bad_input():
    with pytest.raises(ValueError):
        M.masked_softmax(np.zeros((2, 3)), np.ones((2, 3)))  # float mask
    with pytest.raises(ValueError):
        M.masked_softmax(np.zeros((2, 3)), np.ones((4,), bool))


# ------------------------------------------------------------------ additive (float) masks
def test_to_additive_and_back():
    m = np.array([[True, False], [False, True]])
    a = M.to_additive(m)
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a, [[0, -np.inf], [-np.inf, 0]])
    np.testing.assert_array_equal(M.from_additive(a), m)
    t = M.to_additive(torch.as_tensor(m), dtype=torch.float16)
    assert t.dtype == torch.float16 and torch.isneginf(t).sum() == 2
    assert (M.from_additive(t) == torch.as_tensor(m)).all()
    assert M.to_additive(torch.as_tensor(m)).dtype == torch.get_default_dtype()
    assert M.to_additive(m, dtype=np.float32).dtype == np.float32


def test_from_additive_refuses_non_masks():
    with pytest.raises(ValueError, match="only 0 and -inf"):
        M.from_additive(np.array([0.0, -1e9]))
    with pytest.raises(ValueError, match="only 0 and -inf"):
        M.from_additive(torch.tensor([0.0, 0.5]))
    with pytest.raises(ValueError, match="boolean"):
        M.from_additive(np.array([True]))
    with pytest.raises(ValueError, match="boolean"):
        M.to_additive(np.array([0.0, 1.0]))


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 5), S=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_sdpa_bool_and_float_masks_equal_ours(T, S, seed):
    """SDPA with our bool mask == SDPA with to_additive(mask) == course attention, any random mask."""
    rng = np.random.default_rng(seed)
    mask = rng.random((2, 1, T, S)) > 0.5
    mask[..., rng.integers(S)] = True  # at least one visible key per row
    q, k, v = _qkv(2, 3, T, S, seed=seed)
    mb = torch.as_tensor(mask)
    ours, _ = scaled_dot_product_attention_torch(q, k, v, mb)
    via_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=mb)
    via_float = F.scaled_dot_product_attention(q, k, v, attn_mask=M.to_additive(mb, dtype=torch.float64))
    torch.testing.assert_close(via_bool, ours, atol=ATOL, rtol=0)
    torch.testing.assert_close(via_float, ours, atol=ATOL, rtol=0)


# ------------------------------------------------------------------ nn.MultiheadAttention's inverted masks
def _mha(D=8, H=2, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        m.in_proj_bias.normal_()
    return m


def test_mha_masks_bool_inverted_equals_additive():
    """nn.MultiheadAttention given our masks via to_mha_* equals it given the additive float masks."""
    m = _mha()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    causal = torch.as_tensor(M.causal_mask(4))
    pad = torch.as_tensor(M.padding_mask([4, 2]))
    out_bool, w_bool = m(x, x, x, attn_mask=M.to_mha_attn_mask(causal),
                         key_padding_mask=M.to_mha_key_padding_mask(pad))
    out_add, w_add = m(x, x, x, attn_mask=M.to_additive(causal, torch.float64),
                       key_padding_mask=M.to_additive(pad, torch.float64))
    torch.testing.assert_close(out_bool, out_add, atol=ATOL, rtol=0)
    assert (w_bool[1][:, 2:] == 0).all()  # padded keys of sequence 1 get no weight
    assert (w_bool[0].triu(1) == 0).all()  # no weight on the future


def test_to_mha_attn_mask_per_sequence_layout():
    """A (B, 1, T, S) mask becomes (B * H, T, S) with row b * H + h = sequence b."""
    rng = np.random.default_rng(2)
    mask = rng.random((3, 1, 4, 5)) > 0.5
    out = M.to_mha_attn_mask(mask, num_heads=2)
    assert out.shape == (6, 4, 5)
    for b in range(3):
        for h in range(2):
            np.testing.assert_array_equal(out[b * 2 + h], ~mask[b, 0])
    per_head = rng.random((3, 2, 4, 5)) > 0.5
    np.testing.assert_array_equal(M.to_mha_attn_mask(torch.as_tensor(per_head), 2).numpy(),
                                  ~per_head.reshape(6, 4, 5))
    np.testing.assert_array_equal(M.to_mha_attn_mask(M.causal_mask(3)), ~M.causal_mask(3))


@pytest.mark.parametrize("mask,heads", [(np.ones((2, 3, 3), bool), 2), (np.ones((2, 3, 1, 3, 3), bool), 2),
                                        (np.ones((2, 3, 3, 3), bool), 2), (np.ones((2, 1, 3, 3), bool), None),
                                        (np.ones((3, 3)), None)])
def test_to_mha_attn_mask_bad_input(mask, heads):
    with pytest.raises(ValueError):
        M.to_mha_attn_mask(mask, heads)


def test_from_mha_masks_round_trip():
    rng = np.random.default_rng(3)
    B, H, T, S = 2, 3, 4, 5
    attn = torch.as_tensor(rng.random((B, H, T, S)) > 0.3)
    pad = torch.as_tensor(M.padding_mask([5, 3]))
    back = M.from_mha_masks(M.to_mha_attn_mask(attn, H), M.to_mha_key_padding_mask(pad), num_heads=H)
    assert back.shape == (B, H, T, S)
    assert torch.equal(back, attn & pad[:, None, None, :])
    # additive float masks as nn.MultiheadAttention also accepts them
    causal = torch.as_tensor(M.causal_mask(T, S))
    back2 = M.from_mha_masks(M.to_additive(causal), M.to_additive(pad))
    assert back2.shape == (B, 1, T, S) and torch.equal(back2, causal & pad[:, None, None, :])
    assert torch.equal(M.from_mha_masks(~causal), causal)
    assert torch.equal(M.from_mha_masks(None, ~pad), pad[:, None, None, :])
    assert M.from_mha_masks() is None
    with pytest.raises(ValueError):
        M.from_mha_masks(torch.zeros(7, T, S, dtype=torch.bool), num_heads=H)
    with pytest.raises(ValueError):
        M.from_mha_masks(torch.zeros(6, T, S, dtype=torch.bool))  # num_heads missing
    with pytest.raises(ValueError):
        M.from_mha_masks(None, torch.zeros(2, 1, 5, dtype=torch.bool))
    with pytest.raises(ValueError):
        M.to_mha_key_padding_mask(np.ones((2, 1, 5), bool))


# ------------------------------------------------------------------ picture (smoke test)
def test_mask_heatmap_draws_and_refuses_float_masks():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import plotting

    ax = plotting.mask_heatmap(M.causal_mask(3, 4), ["a", "b", "c"], ["w", "x", "y", "z"], title="t")
    assert ax.get_title() == "t" and ax.get_xlabel().startswith("key")
    with pytest.raises(ValueError, match="boolean"):
        plotting.mask_heatmap(M.to_additive(M.causal_mask(3)), ["a", "b", "c"])
    with pytest.raises(ValueError, match="labels"):
        plotting.mask_heatmap(M.causal_mask(3), ["a", "b"])
    plt.close("all")
