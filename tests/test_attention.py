"""course_lib.attention against PyTorch's own scaled_dot_product_attention, and its properties."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib import attention as A


def _qkv(shape_q, shape_k, d_v, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_q, generator=g, dtype=torch.float64)
    k = torch.randn(*shape_k, generator=g, dtype=torch.float64)
    v = torch.randn(*shape_k[:-1], d_v, generator=g, dtype=torch.float64)
    return q, k, v


@pytest.mark.parametrize("shape_q,shape_k", [((4, 8), (6, 8)), ((2, 5, 8), (2, 7, 8)), ((2, 3, 5, 16), (2, 3, 9, 16))])
def test_torch_equals_sdpa_without_mask(shape_q, shape_k):
    q, k, v = _qkv(shape_q, shape_k, 5)
    out, w = A.scaled_dot_product_attention_torch(q, k, v)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1], dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", range(3))
def test_torch_equals_sdpa_with_masks(seed):
    q, k, v = _qkv((2, 3, 5, 8), (2, 3, 7, 8), 4, seed)
    g = torch.Generator().manual_seed(100 + seed)
    mask = torch.rand(2, 1, 5, 7, generator=g) > 0.4
    mask[..., 0] = True  # every row keeps one key, so SDPA is defined everywhere
    out, _ = A.scaled_dot_product_attention_torch(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
    causal = torch.ones(5, 7, dtype=torch.bool).tril(diagonal=2)
    out, _ = A.scaled_dot_product_attention_torch(q, k, v, causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=causal), atol=1e-10, rtol=0)


def test_torch_causal_equals_is_causal():
    q, k, v = _qkv((2, 6, 8), (2, 6, 8), 3)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    out, _ = A.scaled_dot_product_attention_torch(q, k, v, causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-10, rtol=0)


def test_numpy_equals_torch():
    q, k, v = _qkv((2, 5, 8), (2, 7, 8), 3)
    mask = np.tril(np.ones((5, 7), dtype=bool), 1)
    out_np, w_np = A.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask)
    out_t, w_t = A.scaled_dot_product_attention_torch(q, k, v, torch.from_numpy(mask))
    np.testing.assert_allclose(out_np, out_t.numpy(), atol=1e-12)
    np.testing.assert_allclose(w_np, w_t.numpy(), atol=1e-12)


def test_fully_masked_rows_are_zero_not_nan():
    q, k, v = _qkv((3, 4), (5, 4), 2)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out, w = A.scaled_dot_product_attention_torch(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert torch.equal(w[1], torch.zeros(5, dtype=torch.float64)) and torch.equal(out[1], torch.zeros(2, dtype=torch.float64))
    out_np, w_np = A.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy())
    assert np.all(w_np[1] == 0) and np.all(out_np[1] == 0) and np.isfinite(out_np).all()


def test_softmax_is_stable_and_normalised():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0], [-np.inf, 0.0, 0.0]])
    s = A.softmax(x)
    assert np.isfinite(s).all()
    np.testing.assert_allclose(s.sum(-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(s[0], A.softmax(np.array([0.0, 1.0, 2.0])), atol=1e-15)
    assert s[2, 0] == 0.0
    np.testing.assert_array_equal(A.softmax(np.full((2, 3), -np.inf)), np.zeros((2, 3)))
    np.testing.assert_allclose(A.softmax(x, axis=0).sum(0), 1.0, atol=1e-15)


def test_softmax_matches_torch():
    x = np.random.default_rng(0).normal(size=(4, 6, 5)) * 30
    for axis in (0, 1, -1):
        np.testing.assert_allclose(A.softmax(x, axis=axis), torch.softmax(torch.from_numpy(x), dim=axis).numpy(), atol=1e-14)


def test_scaling_by_sqrt_dk():
    q = np.array([[1.0, 1.0, 1.0, 1.0]])
    k = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    v = np.array([[1.0], [0.0]])
    _, w = A.scaled_dot_product_attention(q, k, v)
    # scores are [4/2, 0] = [2, 0] after dividing by sqrt(4)
    np.testing.assert_allclose(w[0, 0], math.exp(2) / (math.exp(2) + 1), atol=1e-15)


@pytest.mark.parametrize("fn", [A.scaled_dot_product_attention, A.scaled_dot_product_attention_torch])
def test_shape_errors_name_both_shapes(fn):
    conv = (lambda a: a) if fn is A.scaled_dot_product_attention else torch.from_numpy
    q, k, v = conv(np.zeros((3, 4))), conv(np.zeros((5, 6))), conv(np.zeros((5, 2)))
    with pytest.raises(ValueError, match=r"q \(3, 4\).*k \(5, 6\)"):
        fn(q, k, v)
    with pytest.raises(ValueError, match=r"k \(5, 4\).*v \(6, 2\)"):
        fn(conv(np.zeros((3, 4))), conv(np.zeros((5, 4))), conv(np.zeros((6, 2))))
    bad_mask = conv(np.ones((4, 5), dtype=bool))
    with pytest.raises(ValueError, match=r"mask \(4, 5\).*\(3, 5\)"):
        fn(conv(np.zeros((3, 4))), conv(np.zeros((5, 4))), conv(np.zeros((5, 2))), bad_mask)


def test_non_bool_mask_is_rejected():
    q = np.zeros((2, 3))
    with pytest.raises(ValueError, match="boolean"):
        A.scaled_dot_product_attention(q, q, q, np.zeros((2, 2)))
    t = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="bool"):
        A.scaled_dot_product_attention_torch(t, t, t, torch.zeros(2, 2))


def test_gradients_flow():
    q, k, v = _qkv((2, 4, 8), (2, 6, 8), 3)
    q.requires_grad_(True)
    out, _ = A.scaled_dot_product_attention_torch(q, k, v)
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    assert torch.autograd.gradcheck(lambda a: A.scaled_dot_product_attention_torch(a, k, v)[0],
                                    (q.detach().clone().requires_grad_(True),))
