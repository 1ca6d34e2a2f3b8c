"""The lesson 05 checks: every known wrong answer is named, correct answers pass, the reference is refused."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib import blocks as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import blocks as chk
from named import assert_named_alone, wrong_answer_params


# ---------------------------------------------------------------- independent correct answers
def layer_norm_ok(x, weight=None, bias=None, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(var + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


def feed_forward_ok(x, w1, b1, w2, b2, activation="relu"):
    h = torch.einsum("...i,fi->...f", x, w1)
    if b1 is not None:
        h = h + b1
    h = h.clamp(min=0) if activation == "relu" else h * 0.5 * torch.erfc(-h / math.sqrt(2))
    out = torch.einsum("...f,of->...o", h, w2)
    return out if b2 is None else out + b2


def encoder_layer_ok(layer, x, mask=None):
    def sa(h):
        return layer.self_attn(h, h, h, mask=mask)

    if layer.norm_first:
        a, w = sa(layer.norm1(x))
        x = x + layer.dropout1(a)
        return x + layer.dropout2(layer.ff(layer.norm2(x))), w
    a, w = sa(x)
    x = layer.norm1(x + layer.dropout1(a))
    return layer.norm2(x + layer.dropout2(layer.ff(x))), w


def layer_norm_two_pass(x, weight=None, bias=None, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def layer_norm_float32(x, weight=None, bias=None, eps=1e-5):
    f = (lambda t: None if t is None else t.float())
    return layer_norm_two_pass(x.float(), f(weight), f(bias), eps)


def feed_forward_matmul(x, w1, b1, w2, b2, activation="relu"):
    h = x @ w1.T + (0 if b1 is None else b1)
    h = torch.relu(h) if activation == "relu" else 0.5 * h * (1 + torch.erf(h / 2 ** 0.5))
    return h @ w2.T + (0 if b2 is None else b2)


def feed_forward_float32(x, w1, b1, w2, b2, activation="relu"):
    f = (lambda t: None if t is None else t.float())
    return feed_forward_matmul(x.float(), f(w1), f(b1), f(w2), f(b2), activation)


def encoder_layer_sublayers(layer, x, mask=None):
    def attn(h):
        return layer.self_attn(h, h, h, mask=mask)

    def ff(h):
        return layer.dropout2(layer.ff(h))

    if not layer.norm_first:
        a, w = attn(x)
        h = layer.norm1(x + layer.dropout1(a))
        return layer.norm2(h + ff(h)), w
    a, w = attn(layer.norm1(x))
    h = layer.dropout1(a) + x
    return ff(layer.norm2(h)) + h, w


def encoder_layer_explicit_branches(layer, x, mask=None):
    residual = x
    h = layer.norm1(x) if layer.norm_first else x
    a, w = layer.self_attn(h, h, h, mask=mask)
    x = residual + layer.dropout1(a)
    if not layer.norm_first:
        x = layer.norm1(x)
    residual = x
    h = layer.norm2(x) if layer.norm_first else x
    x = residual + layer.dropout2(layer.ff(h))
    return (x if layer.norm_first else layer.norm2(x)), w


def encoder_layer_float32(layer, x, mask=None):
    """The whole layer run in float32, the layer itself unchanged: torch.func.functional_call swaps in
    float32 copies of its parameters (the casts are differentiable: gradients still reach them)."""
    params = {f"layer.{name}": t.float() for name, t in list(layer.named_parameters()) + list(layer.named_buffers())
              if t.is_floating_point()}

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, h, m):
            return encoder_layer_ok(self.layer, h, m)

    return torch.func.functional_call(Holder(), params, (x.float(), mask))


CORRECT = [(chk.check_layer_norm, layer_norm_ok), (chk.check_layer_norm, layer_norm_two_pass),
           (chk.check_layer_norm, layer_norm_float32),
           (chk.check_feed_forward, feed_forward_ok), (chk.check_feed_forward, feed_forward_matmul),
           (chk.check_feed_forward, feed_forward_float32),
           (chk.check_encoder_layer_forward, encoder_layer_ok),
           (chk.check_encoder_layer_forward, encoder_layer_sublayers),
           (chk.check_encoder_layer_forward, encoder_layer_explicit_branches),
           (chk.check_encoder_layer_forward, encoder_layer_float32)]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=[f.__name__ for _, f in CORRECT])
def test_correct_independent_answers_pass(check, fn, hidden):
    check(fn, hidden=hidden)


def test_checks_leave_global_rng_alone():
    state = torch.get_rng_state()
    chk.check_encoder_layer_forward(encoder_layer_ok)
    assert torch.equal(torch.get_rng_state(), state)


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = wrong_answer_params((chk.check_layer_norm, chk.WRONG_LAYER_NORM),
                                   (chk.check_feed_forward, chk.WRONG_FEED_FORWARD),
                                   (chk.check_encoder_layer_forward, chk.WRONG_ENCODER_LAYER))


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


def test_required_misconceptions_are_named():
    ln = {w.name for w in chk.WRONG_LAYER_NORM}
    assert {"LayerNorm over the wrong axis", "unbiased variance"} <= ln
    assert "residual added after the norm in a pre-norm block" in {w.name for w in chk.WRONG_ENCODER_LAYER}


def test_unbiased_variance_from_torch_var_is_named():
    """What students actually write: x.var(dim=-1) (unbiased by default)."""
    def student(x, weight=None, bias=None, eps=1e-5):
        y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)
        return y * (1 if weight is None else weight) + (0 if bias is None else bias)

    with pytest.raises(AssertionError, match="unbiased variance.*correction=0"):
        chk.check_layer_norm(student)


@pytest.mark.parametrize("hidden", [False, True])
def test_dropout_left_on_in_eval_is_named(hidden):
    def student(layer, x, mask=None):
        p = layer.dropout1.p
        if layer.norm_first:
            h = layer.norm1(x)
            a, w = layer.self_attn(h, h, h, mask=mask)
            x = x + F.dropout(a, p)  # training=True by default: still on in eval
            return x + F.dropout(layer.ff(layer.norm2(x)), p), w
        a, w = layer.self_attn(x, x, x, mask=mask)
        x = layer.norm1(x + F.dropout(a, p))
        return layer.norm2(x + F.dropout(layer.ff(x), p)), w

    with pytest.raises(AssertionError, match="likely misconception 'dropout left on in eval'"):
        chk.check_encoder_layer_forward(student, hidden=hidden)


def test_dropout_never_applied_is_named():
    def student(layer, x, mask=None):
        if layer.norm_first:
            h = layer.norm1(x)
            a, w = layer.self_attn(h, h, h, mask=mask)
            x = x + a
            return x + layer.ff(layer.norm2(x)), w
        a, w = layer.self_attn(x, x, x, mask=mask)
        x = layer.norm1(x + a)
        return layer.norm2(x + layer.ff(x)), w

    with pytest.raises(AssertionError, match="dropout never applied in training"):
        chk.check_encoder_layer_forward(student)


# ---------------------------------------------------------------- integrity and other failures
def test_reference_and_builtins_are_refused():
    with pytest.raises(IntegrityError):
        chk.check_layer_norm(ref.layer_norm)
    with pytest.raises(IntegrityError, match="torch.nn.functional.layer_norm"):
        chk.check_layer_norm(lambda x, weight=None, bias=None, eps=1e-5: F.layer_norm(x, x.shape[-1:], weight, bias,
                                                                                      eps))
    with pytest.raises(IntegrityError, match="torch.nn.functional.gelu"):
        chk.check_feed_forward(lambda x, w1, b1, w2, b2, activation="relu": F.linear(F.gelu(F.linear(x, w1, b1)),
                                                                                     w2, b2))
    with pytest.raises(IntegrityError):
        chk.check_encoder_layer_forward(lambda layer, x, mask=None: (layer(x, mask), None))
    with pytest.raises(IntegrityError):
        chk.check_encoder_layer_forward(lambda layer, x, mask=None: ref.encoder_layer_forward(layer, x, mask))

    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (chk.check_layer_norm, chk.check_feed_forward, chk.check_encoder_layer_forward):
        with pytest.raises(NotImplementedYet):
            check(stub)


def test_other_mistakes_fail_with_a_message():
    with pytest.raises(AssertionError, match="layer_norm"):
        chk.check_layer_norm(lambda x, weight=None, bias=None, eps=1e-5: layer_norm_ok(x, weight, bias, eps) * 1.1)
    with pytest.raises(AssertionError, match="gradients must flow back"):
        chk.check_layer_norm(lambda x, weight=None, bias=None, eps=1e-5: layer_norm_ok(x.detach(), weight, bias, eps))
    with pytest.raises(AssertionError, match="expected a tuple of 2 values"):
        chk.check_encoder_layer_forward(lambda layer, x, mask=None: encoder_layer_ok(layer, x, mask)[0])
