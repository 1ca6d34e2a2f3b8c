"""Transformer blocks against PyTorch's own modules with the same weights (float64, eval, 1e-10)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from course_lib import blocks as B
from course_lib import masking
from course_lib.multihead import MultiHeadAttention

TOL = dict(rtol=0.0, atol=1e-10)
D, H, D_FF = 12, 3, 20


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=gen(seed), dtype=torch.float64)


def randomise(module, seed):
    """Non-trivial weights everywhere (LayerNorm starts at 1/0, biases at 0)."""
    g = gen(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return module


# ---------------------------------------------------------------- LayerNorm
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 7), (1, 1, 2)])
def test_layer_norm_matches_torch(shape):
    x = randn(*shape, seed=1) * 3 + 2
    w, b = randn(shape[-1], seed=2), randn(shape[-1], seed=3)
    torch.testing.assert_close(B.layer_norm(x, w, b, eps=1e-5), F.layer_norm(x, shape[-1:], w, b, eps=1e-5), **TOL)
    ref = nn.LayerNorm(shape[-1], eps=1e-3, dtype=torch.float64)
    randomise(ref, 4)
    torch.testing.assert_close(B.LayerNorm.from_torch(ref)(x), ref(x), **TOL)


def test_layer_norm_uses_biased_variance():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    y = B.layer_norm(x, eps=0.0)
    assert y.var(dim=-1, unbiased=False).item() == pytest.approx(1.0, abs=1e-12), "biased variance 1, as nn.LayerNorm"
    assert y.mean().item() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="weight must have shape \\(4,\\)"):
        B.layer_norm(x, torch.ones(3))


def test_layer_norm_is_per_token():
    x = randn(2, 5, 6, seed=5)
    y = B.layer_norm(x)
    y2 = B.layer_norm(x[:, :2])
    torch.testing.assert_close(y[:, :2], y2, **TOL)  # other tokens do not influence a token


# ---------------------------------------------------------------- feed-forward
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_matches_torch(activation):
    x = randn(2, 4, D, seed=1)
    l1, l2 = nn.Linear(D, D_FF, dtype=torch.float64), nn.Linear(D_FF, D, dtype=torch.float64)
    act = F.relu if activation == "relu" else F.gelu
    expected = l2(act(l1(x)))
    got = B.feed_forward(x, l1.weight, l1.bias, l2.weight, l2.bias, activation)
    torch.testing.assert_close(got, expected, **TOL)
    ff = B.FeedForward(D, D_FF, dropout=0.5, activation=activation, dtype=torch.float64).eval()
    ff.linear1.load_state_dict(l1.state_dict())
    ff.linear2.load_state_dict(l2.state_dict())
    torch.testing.assert_close(ff(x), expected, **TOL)


def test_gelu_is_exact_not_tanh():
    x = torch.linspace(-5, 5, 101, dtype=torch.float64)
    torch.testing.assert_close(B.gelu(x), F.gelu(x), **TOL)
    assert (B.gelu(x) - F.gelu(x, approximate="tanh")).abs().max() > 1e-5


def test_feed_forward_bad_input():
    with pytest.raises(ValueError, match="activation must be one of"):
        B.feed_forward(randn(2, 3), torch.eye(3, dtype=torch.float64), None, torch.eye(3, dtype=torch.float64),
                       None, "tanh")
    with pytest.raises(ValueError, match="shapes do not chain"):
        B.feed_forward(randn(2, 3), randn(4, 5), None, randn(3, 4), None)


# ---------------------------------------------------------------- encoder layer
def torch_encoder_layer(norm_first, activation, seed=0, dropout=0.1):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, D_FF, dropout=dropout, activation=activation, batch_first=True,
                                       norm_first=norm_first, dtype=torch.float64)
    return randomise(layer, seed + 100).eval()


def masks_for(T, lengths):
    """(name, torch attn_mask, torch key_padding_mask) in torch's convention (True = masked)."""
    causal = ~torch.from_numpy(masking.causal_mask(T))
    kpm = ~torch.from_numpy(masking.padding_mask(lengths, T))
    return [("none", None, None), ("causal", causal, None), ("padding", None, kpm), ("causal+padding", causal, kpm)]


CONFIGS = list(itertools.product([False, True], ["relu", "gelu"]))


@pytest.mark.parametrize("norm_first, activation", CONFIGS)
def test_encoder_layer_matches_torch(norm_first, activation):
    ref = torch_encoder_layer(norm_first, activation)
    ours = B.EncoderLayer.from_torch(ref)
    assert not ours.training and ours.norm_first == norm_first
    T, lengths = 6, [6, 4]
    x = randn(2, T, D, seed=7)
    for name, attn_mask, kpm in masks_for(T, lengths):
        expected = ref(x, src_mask=attn_mask, src_key_padding_mask=kpm)
        mask = masking.from_mha_masks(attn_mask, kpm)
        got = ours(x, mask)
        torch.testing.assert_close(got, expected, **TOL, msg=lambda m: f"mask {name}: {m}")


def test_encoder_layer_float_additive_mask():
    ref = torch_encoder_layer(False, "relu")
    ours = B.EncoderLayer.from_torch(ref)
    x = randn(2, 5, D, seed=8)
    additive = torch.zeros(5, 5, dtype=torch.float64).masked_fill(~torch.from_numpy(masking.causal_mask(5)),
                                                                  float("-inf"))
    torch.testing.assert_close(ours(x, masking.from_mha_masks(additive)), ref(x, src_mask=additive), **TOL)


def test_encoder_layer_returns_attention_weights():
    ours = B.EncoderLayer.from_torch(torch_encoder_layer(True, "gelu"))
    x = randn(2, 5, D, seed=9)
    mask = torch.from_numpy(masking.causal_mask(5))
    out, w = B.encoder_layer_forward(ours, x, mask)
    assert out.shape == (2, 5, D) and w.shape == (2, 5, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 5, dtype=torch.float64), **TOL)
    assert torch.all(w[:, ~mask] == 0), "masked (future) keys get zero weight"


def test_encoder_layer_dropout_only_in_training():
    ours = B.EncoderLayer.from_torch(torch_encoder_layer(False, "relu", dropout=0.5))
    x = randn(2, 5, D, seed=10)
    torch.testing.assert_close(ours(x), ours(x), rtol=0, atol=0)
    ours.train()
    torch.manual_seed(0)
    a = ours(x)
    b = ours(x)
    assert not torch.allclose(a, b), "dropout must change the output in training mode"


def test_encoder_layer_gradients_match_torch():
    ref = torch_encoder_layer(True, "gelu")
    ours = B.EncoderLayer.from_torch(ref)
    x1 = randn(2, 4, D, seed=11).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    ref(x1).pow(2).sum().backward()
    ours(x2).pow(2).sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad, rtol=0, atol=1e-9)
    torch.testing.assert_close(ours.ff.linear1.weight.grad, ref.linear1.weight.grad, rtol=0, atol=1e-9)


def test_from_torch_refuses_unsupported_layers():
    with pytest.raises(ValueError, match="batch_first=True"):
        B.EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, D_FF))
    with pytest.raises(ValueError, match="only relu and exact gelu"):
        B.EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, D_FF, activation=torch.tanh, batch_first=True))


# ---------------------------------------------------------------- decoder layer
def torch_decoder_layer(norm_first, activation, seed=0, dropout=0.1):
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(D, H, D_FF, dropout=dropout, activation=activation, batch_first=True,
                                       norm_first=norm_first, dtype=torch.float64)
    return randomise(layer, seed + 200).eval()


@pytest.mark.parametrize("norm_first, activation", CONFIGS)
def test_decoder_layer_matches_torch(norm_first, activation):
    ref = torch_decoder_layer(norm_first, activation)
    ours = B.DecoderLayer.from_torch(ref)
    T, S = 5, 7
    x, memory = randn(2, T, D, seed=12), randn(2, S, D, seed=13)
    causal = ~torch.from_numpy(masking.causal_mask(T))
    tgt_kpm = ~torch.from_numpy(masking.padding_mask([5, 3], T))
    mem_kpm = ~torch.from_numpy(masking.padding_mask([7, 4], S))
    for tm, tk, mk in [(None, None, None), (causal, None, None), (causal, tgt_kpm, mem_kpm), (None, None, mem_kpm)]:
        expected = ref(x, memory, tgt_mask=tm, tgt_key_padding_mask=tk, memory_key_padding_mask=mk)
        got = ours(x, memory, masking.from_mha_masks(tm, tk), masking.from_mha_masks(None, mk))
        torch.testing.assert_close(got, expected, **TOL)


def test_decoder_is_causal_and_reads_memory():
    ours = B.DecoderLayer.from_torch(torch_decoder_layer(True, "relu"))
    x, memory = randn(1, 5, D, seed=14), randn(1, 6, D, seed=15)
    causal = torch.from_numpy(masking.causal_mask(5))
    out, self_w, cross_w = B.decoder_layer_forward(ours, x, memory, causal)
    assert self_w.shape == (1, 5, 5) and cross_w.shape == (1, 5, 6)
    # the module asks for no weights (torch's fused attention): the same output, and no weights
    out_nw, *weights_nw = B.decoder_layer_forward(ours, x, memory, causal, need_weights=False)
    assert weights_nw == [None, None]
    torch.testing.assert_close(out_nw, out, **TOL)
    torch.testing.assert_close(ours(x, memory, causal), out, **TOL)
    x2 = x.clone()
    x2[:, 3:] += 10.0  # change the future
    out2 = ours(x2, memory, causal)
    torch.testing.assert_close(out2[:, :3], out[:, :3], **TOL)  # the past does not see it
    memory2 = memory.clone()
    memory2[:, 0] += 1.0
    assert not torch.allclose(ours(x, memory2, causal), out), "cross-attention must read the memory"


# ---------------------------------------------------------------- stacks
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_matches_torch(norm_first):
    layer = torch_encoder_layer(norm_first, "gelu")
    norm = nn.LayerNorm(D, dtype=torch.float64) if norm_first else None
    ref = nn.TransformerEncoder(layer, num_layers=3, norm=norm, enable_nested_tensor=False)
    randomise(ref, 300).eval()
    ours = B.Encoder.from_torch(ref)
    assert len(ours.layers) == 3 and (ours.norm is not None) == norm_first
    x = randn(2, 6, D, seed=16)
    kpm = ~torch.from_numpy(masking.padding_mask([6, 3], 6))
    expected = ref(x, src_key_padding_mask=kpm)
    torch.testing.assert_close(ours(x, masking.from_mha_masks(None, kpm)), expected, **TOL)
    out, maps = ours.forward_with_weights(x, masking.from_mha_masks(None, kpm))
    torch.testing.assert_close(out, expected, **TOL)
    assert len(maps) == 3 and maps[0].shape == (2, 6, 6)
    assert torch.all(maps[1][1, :, 3:] == 0), "padded keys get zero weight"


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_matches_torch(norm_first):
    norm = nn.LayerNorm(D, dtype=torch.float64) if norm_first else None
    ref = nn.TransformerDecoder(torch_decoder_layer(norm_first, "relu"), num_layers=2, norm=norm)
    randomise(ref, 400).eval()
    ours = B.Decoder.from_torch(ref)
    x, memory = randn(2, 4, D, seed=17), randn(2, 5, D, seed=18)
    causal = ~torch.from_numpy(masking.causal_mask(4))
    expected = ref(x, memory, tgt_mask=causal)
    torch.testing.assert_close(ours(x, memory, ~causal), expected, **TOL)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_full_encoder_decoder_matches_nn_transformer():
    torch.manual_seed(1)
    ref = nn.Transformer(D, H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=D_FF, batch_first=True,
                         dtype=torch.float64)
    randomise(ref, 500).eval()
    enc, dec = B.Encoder.from_torch(ref.encoder), B.Decoder.from_torch(ref.decoder)
    src, tgt = randn(2, 7, D, seed=19), randn(2, 4, D, seed=20)
    causal = torch.from_numpy(masking.causal_mask(4))
    expected = ref(src, tgt, tgt_mask=~causal)
    torch.testing.assert_close(dec(tgt, enc(src), causal), expected, **TOL)


def test_stacks_have_independent_layers():
    enc = B.Encoder(2, D, H, D_FF)
    assert enc.layers[0].ff.linear1.weight.data_ptr() != enc.layers[1].ff.linear1.weight.data_ptr()
    assert B.Encoder(1, D, H, norm_first=True).norm is not None and B.Encoder(1, D, H).norm is None
    with pytest.raises(ValueError, match="num_layers"):
        B.Decoder(0, D, H)


# ---------------------------------------------------------------- classifier
def test_masked_mean():
    x = randn(2, 4, 3, seed=21)
    keep = torch.tensor([[True, True, False, False], [True, True, True, True]])
    torch.testing.assert_close(B.masked_mean(x, keep)[0], x[0, :2].mean(0), **TOL)
    torch.testing.assert_close(B.masked_mean(x, keep)[1], x[1].mean(0), **TOL)
    assert torch.all(B.masked_mean(x, torch.zeros(2, 4, dtype=torch.bool)) == 0)
    with pytest.raises(ValueError, match="keep must be a bool"):
        B.masked_mean(x, keep.float())


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "none"])
def test_classifier_shapes_padding_invariance(positions):
    torch.manual_seed(0)
    model = B.TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, num_heads=2, num_layers=2, d_ff=32,
                                    positions=positions, max_len=20).eval()
    ids = torch.tensor([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12]])
    logits = model(ids)
    assert logits.shape == (2, 3)
    # extra padding must not change the prediction
    padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(padded), logits, rtol=0, atol=1e-5)
    maps = model.attention_maps(ids)
    assert len(maps) == 2 and maps[0].shape == (2, 5, 5)
    assert torch.all(maps[0][0, :, 3:] == 0)
    swapped = torch.tensor([[7, 6, 5, 0, 0], [8, 9, 10, 11, 12]])
    order_matters = not torch.allclose(model(swapped)[0], logits[0], atol=1e-6)
    assert order_matters == (positions != "none"), "without positions the classifier is a bag of tokens"


def order_task(n, seed):
    """Token 3 before token 4 (label 1) or after it (label 0), among random filler tokens."""
    g = gen(seed)
    ids = torch.randint(5, 12, (n, 6), generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    i, j = torch.randint(0, 3, (n,), generator=g), torch.randint(3, 6, (n,), generator=g)
    a = torch.where(y == 1, 3, 4)
    ids[torch.arange(n), i] = a
    ids[torch.arange(n), j] = 7 - a
    return TensorDataset(ids, y)


def test_classifier_learns_word_order():
    """A task only positions can solve (the two classes hold the same tokens); held-out accuracy."""
    from course_lib.training import TrainConfig, evaluate, train

    torch.manual_seed(0)
    model = B.TransformerClassifier(12, 2, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0)
    train(model, order_task(128, seed=0), TrainConfig(epochs=12, lr=1e-2, progress=False, device="cpu"))
    acc = evaluate(model, order_task(200, seed=1))["accuracy"]
    assert acc > 0.9, f"with sinusoidal positions the order task should be learned, got held-out accuracy {acc}"


def test_classifier_bad_input():
    with pytest.raises(ValueError, match="positions must be"):
        B.TransformerClassifier(10, 2, positions="rotary")
    with pytest.raises(ValueError, match="ids must be \\(B, T\\)"):
        B.TransformerClassifier(10, 2)(torch.zeros(5, dtype=torch.long))


def test_built_on_course_multihead():
    layer = B.EncoderLayer(D, H, D_FF)
    assert isinstance(layer.self_attn, MultiHeadAttention)
    assert isinstance(B.DecoderLayer(D, H).cross_attn, MultiHeadAttention)
    assert np.isclose(sum(p.numel() for p in layer.parameters()),
                      sum(p.numel() for p in nn.TransformerEncoderLayer(D, H, D_FF).parameters()))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_encoder_layer_forward_method_equals_the_reference_function(norm_first, seed):
    """EncoderLayer.forward no longer calls lesson 05's graded encoder_layer_forward (so the module works
    in the students' bundle); it gives the same outputs and weights bit for bit, with dropout in training
    mode too (same random stream), and Encoder's layer_forward runs a given function instead. Without
    weights and without dropout the attention is torch's fused kernel (it never stores the weights): the
    same outputs to float64 rounding; with dropout in training it keeps the weights' path, bit for bit."""
    from course_lib.blocks import encoder_layer_forward

    g = torch.Generator().manual_seed(seed)
    layer = B.EncoderLayer(16, 4, 32, dropout=0.2, activation="gelu", norm_first=norm_first, dtype=torch.float64)
    x = torch.randn(3, 6, 16, generator=g, dtype=torch.float64)
    mask = torch.as_tensor(masking.padding_mask([6, 3, 1]))[:, None, None, :]
    for train in (False, True):
        layer.train(train)
        torch.manual_seed(seed)
        out, w = layer(x, mask, need_weights=True)
        torch.manual_seed(seed)
        out_ref, w_ref = encoder_layer_forward(layer, x, mask)
        assert torch.equal(out, out_ref) and torch.equal(w, w_ref)
        torch.manual_seed(seed)
        if train:  # dropout needs the weights: the same path and random stream
            assert torch.equal(layer(x, mask), out_ref)
        else:
            torch.testing.assert_close(layer(x, mask), out_ref, rtol=0, atol=1e-12)

    calls = []

    def spy(layer, x, mask):
        calls.append(layer)
        return encoder_layer_forward(layer, x, mask)

    torch.manual_seed(seed)
    enc = B.Encoder(2, 16, 4, 32, dropout=0.0, dtype=torch.float64).eval()
    plain, maps = enc.forward_with_weights(x, mask)
    enc.layer_forward = spy
    hooked, maps_hooked = enc.forward_with_weights(x, mask)
    torch.testing.assert_close(enc(x, mask), plain, rtol=0, atol=1e-12)  # fused kernel, no weights kept
    assert torch.equal(hooked, plain)
    assert all(torch.equal(a, b) for a, b in zip(maps, maps_hooked))
    assert calls == list(enc.layers) * 2
    with pytest.raises(ValueError, match="layer_forward must be a function"):
        B.Encoder(1, 16, 4, layer_forward="encoder_layer_forward")
