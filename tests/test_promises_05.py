"""Lesson 05: docstring promises, the wrong answer that breaks each, and the words of its message."""
import pytest
import torch

from course_lib.checks import blocks as C
from test_checks_blocks import encoder_layer_ok, feed_forward_ok, layer_norm_ok
from named import assert_promise_broken, wrong


def _ln_2d_only(x, weight=None, bias=None, eps=1e-5):
    if x.dim() != 2:
        raise ValueError("expected (T, d)")
    return layer_norm_ok(x, weight, bias, eps)


def _ln_in_place(x, weight=None, bias=None, eps=1e-5):
    y = layer_norm_ok(x, weight, bias, eps)
    if not x.requires_grad:
        x.zero_()
    return y


def _ln_detached(x, weight=None, bias=None, eps=1e-5):
    return layer_norm_ok(x.detach(), weight, bias, eps)


def _ff_2d_only(x, w1, b1, w2, b2, activation="relu"):
    if x.dim() > 3:
        raise ValueError("expected (B, T, d)")
    return feed_forward_ok(x, w1, b1, w2, b2, activation)


def _enc_half(layer, x, mask=None):
    out, w = encoder_layer_ok(layer, x, mask)
    return out.to(torch.float16), w


PROMISES = [
    (C.check_layer_norm, "any leading dims (..., d)", _ln_2d_only, "ValueError"),
    (C.check_layer_norm, "inputs unchanged", _ln_in_place, "input modified in place"),
    (C.check_layer_norm, "differentiable", _ln_detached, "gradients"),
    (C.check_layer_norm, "biased variance", wrong(C.WRONG_LAYER_NORM, "<lambda>", 'unbiased variance').fn, "unbiased variance"),
    (C.check_feed_forward, "any leading dims (..., d_model)", _ff_2d_only, "ValueError"),
    (C.check_feed_forward, "exact erf GELU", wrong(C.WRONG_FEED_FORWARD, "<lambda>", 'tanh approximation of GELU').fn, "tanh approximation of GELU"),
    (C.check_encoder_layer_forward, "float answer in at least float32", _enc_half, "half precision"),
    (C.check_encoder_layer_forward, "mask applied", wrong(C.WRONG_ENCODER_LAYER, "<lambda>", 'mask ignored').fn, "mask ignored"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
