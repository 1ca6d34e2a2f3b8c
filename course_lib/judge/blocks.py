"""The judge's material of ``course_lib.checks.blocks`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import math

import torch

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.blocks import (
    check_encoder_layer_forward,
    check_feed_forward,
    check_layer_norm,
    enc_cases_from,
    ff_case,
    ff_cases_from,
    ln_case,
    ln_cases_from,
)


# ---------------------------------------------------------------- layer_norm
def _ln(x, weight=None, bias=None, eps=1e-5, *, dims=(-1,), correction=0, eps_outside=False, center=True,
        affine=True, swap=False):
    mean = x.mean(dim=dims, keepdim=True) if center else torch.zeros_like(x)
    n = math.prod(x.shape[d] for d in dims)
    var = ((x - mean) ** 2).sum(dim=dims, keepdim=True) / (n - correction)
    y = (x - mean) / (torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps))
    w, b = (bias, weight) if swap else (weight, bias)
    if affine and w is not None:
        y = y * w
    if affine and b is not None:
        y = y + b
    return y


WRONG_LAYER_NORM = [
    Wrong("LayerNorm over the wrong axis", lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, dims=(-2,)),
          "the mean and variance were taken over the TOKEN axis (-2), mixing different tokens; LayerNorm "
          "normalises each token over its own features, the last axis."),
    Wrong("statistics over the whole tensor",
          lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, dims=tuple(range(x.dim()))),
          "the mean and variance were taken over the whole tensor; LayerNorm uses one mean and one variance "
          "PER TOKEN, over the last axis only (keeping that axis so the statistics broadcast)."),
    Wrong("unbiased variance", lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, correction=1),
          "you divided by d - 1 (torch.var's default, unbiased=True); LayerNorm uses the BIASED variance, "
          "mean((x - mean)^2), as nn.LayerNorm does: x.var(dim=-1, unbiased=False) or correction=0."),
    Wrong("eps outside the square root", lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, eps_outside=True),
          "eps goes INSIDE the square root: (x - mean) / sqrt(var + eps), not / (sqrt(var) + eps)."),
    Wrong("mean not subtracted (RMSNorm)", lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, center=False),
          "you divided by the root mean square without subtracting the mean first (that is RMSNorm); "
          "LayerNorm centres each token on its own mean over the features first."),
    Wrong("weight and bias ignored", lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, affine=False),
          "after normalising, multiply by `weight` and add `bias` (the learned scale and shift) when given."),
    Wrong("weight and bias swapped", lambda x, w=None, b=None, eps=1e-5: _ln(x, w, b, eps, swap=True),
          "the normalised value is multiplied by `weight` (the scale, starts at 1) and then `bias` is added."),
]


# written independently of course_lib.blocks; the students' and the kernel's editions replace each by a stub
def _right_layer_norm_ok(x, weight=None, bias=None, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(var + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


def _right_layer_norm_two_pass(x, weight=None, bias=None, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _right_layer_norm_float32(x, weight=None, bias=None, eps=1e-5):
    f = (lambda t: None if t is None else t.float())
    return _right_layer_norm_two_pass(x.float(), f(weight), f(bias), eps)


def _breaks_ln_2d_only(x, weight=None, bias=None, eps=1e-5):
    if x.dim() != 2:
        raise ValueError("expected (T, d)")
    return _right_layer_norm_ok(x, weight, bias, eps)


def _breaks_ln_in_place(x, weight=None, bias=None, eps=1e-5):
    y = _right_layer_norm_ok(x, weight, bias, eps)
    if not x.requires_grad:
        x.zero_()
    return y


def _breaks_ln_detached(x, weight=None, bias=None, eps=1e-5):
    return _right_layer_norm_ok(x.detach(), weight, bias, eps)


def ln_cases() -> list[Case]:
    """The hidden cases of ``check_layer_norm``."""
    rng = seeded(606)
    return ln_cases_from(rng) + [
        ln_case(rng, "x (2, 7, 16) with weight and bias", (2, 7, 16), scale=5.0, shift=-2.0),
        ln_case(rng, "x (1, 2) (d = 2)", (1, 2), affine=False),
        ln_case(rng, "x (3, 4, 8), eps=1.0", (3, 4, 8), eps=1.0),
        ln_case(rng, "x (2, 2, 3, 5) (two leading dims), weight and bias", (2, 2, 3, 5)),
        ln_case(rng, "x (5,) (a single token, no leading dims)", (5,), affine=False, scale=2.0),
    ]


LAYER_NORM_PROPERTY = (616, 10, 6160)  # the hidden property test's seed, width, and gradient seed


LAYER_NORM = declare("05_blocks", "layer_norm", check_layer_norm,
            misconceptions=WRONG_LAYER_NORM,
            promises=(
                Breaks("any leading dims (..., d)", _breaks_ln_2d_only, "ValueError"),
                Breaks("inputs unchanged", _breaks_ln_in_place, "input modified in place"),
                Breaks("differentiable", _breaks_ln_detached, "gradients"),
                Breaks("biased variance", wrong_answer(WRONG_LAYER_NORM, "unbiased variance"), "unbiased variance"),
            ),
            right=(Right(_right_layer_norm_ok), Right(_right_layer_norm_two_pass), Right(_right_layer_norm_float32)))


# ---------------------------------------------------------------- feed_forward
def _gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_sigmoid(x):
    return x * torch.sigmoid(1.702 * x)


def _ff(x, w1, b1, w2, b2, activation="relu", *, transpose=True, gelu=_gelu_erf, ignore_act=False,
        act_after=False, biases=True):
    act = torch.relu if (activation == "relu" or ignore_act) else gelu
    wt1, wt2 = (w1.T, w2.T) if transpose else (w1, w2)
    h = x @ wt1 + (b1 if biases and b1 is not None else 0.0)
    out = act(h) @ wt2 + (b2 if biases and b2 is not None else 0.0)
    return act(out) if act_after else out


WRONG_FEED_FORWARD = [
    Wrong("weights not transposed",
          lambda x, w1, b1, w2, b2, activation="relu": _ff(x, w1, b1, w2, b2, activation, transpose=False),
          "w1 and w2 are in nn.Linear's (out_features, in_features) layout, so the product is x @ w1.T "
          "(shape (..., d_ff)), not x @ w1."),
    Wrong("tanh approximation of GELU",
          lambda x, w1, b1, w2, b2, activation="relu": _ff(x, w1, b1, w2, b2, activation, gelu=_gelu_tanh),
          "that is the tanh approximation of GELU; this exercise asks for the exact one, "
          "x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))) (torch.erf), as nn.GELU() computes by default."),
    Wrong("sigmoid approximation of GELU",
          lambda x, w1, b1, w2, b2, activation="relu": _ff(x, w1, b1, w2, b2, activation, gelu=_gelu_sigmoid),
          "x * sigmoid(1.702 x) only approximates GELU; use the exact 0.5 * x * (1 + erf(x / sqrt(2)))."),
    Wrong("activation argument ignored",
          lambda x, w1, b1, w2, b2, activation="relu": _ff(x, w1, b1, w2, b2, activation, ignore_act=True),
          "you always used ReLU; with activation='gelu' the hidden layer must use GELU."),
    Wrong("activation after the second linear map",
          lambda x, w1, b1, w2, b2, activation="relu": _ff(x, w1, b1, w2, b2, activation, act_after=True),
          "the nonlinearity sits only between the two linear maps: FFN(x) = act(x W1^T + b1) W2^T + b2; "
          "the output is not passed through it again (it must be able to be negative)."),
    Wrong("biases left out",
          lambda x, w1, b1, w2, b2, activation="relu": _ff(x, w1, b1, w2, b2, activation, biases=False),
          "add b1 after the first linear map and b2 after the second (when they are not None)."),
]


def _right_feed_forward_ok(x, w1, b1, w2, b2, activation="relu"):
    h = torch.einsum("...i,fi->...f", x, w1)
    if b1 is not None:
        h = h + b1
    h = h.clamp(min=0) if activation == "relu" else h * 0.5 * torch.erfc(-h / math.sqrt(2))
    out = torch.einsum("...f,of->...o", h, w2)
    return out if b2 is None else out + b2


def _right_feed_forward_matmul(x, w1, b1, w2, b2, activation="relu"):
    h = x @ w1.T + (0 if b1 is None else b1)
    h = torch.relu(h) if activation == "relu" else 0.5 * h * (1 + torch.erf(h / 2 ** 0.5))
    return h @ w2.T + (0 if b2 is None else b2)


def _right_feed_forward_float32(x, w1, b1, w2, b2, activation="relu"):
    f = (lambda t: None if t is None else t.float())
    return _right_feed_forward_matmul(x.float(), f(w1), f(b1), f(w2), f(b2), activation)


def _breaks_ff_2d_only(x, w1, b1, w2, b2, activation="relu"):
    if x.dim() > 3:
        raise ValueError("expected (B, T, d)")
    return _right_feed_forward_ok(x, w1, b1, w2, b2, activation)


def ff_cases() -> list[Case]:
    """The hidden cases of ``check_feed_forward``."""
    rng = seeded(707)
    return ff_cases_from(rng) + [
        ff_case(rng, "x (2, 7, 16), d_ff=64, gelu", (2, 7, 16), 64, "gelu", scale=3.0),
        ff_case(rng, "x (4, 8), d_ff=12, relu, no biases", (4, 8), 12, "relu", bias=False),
        ff_case(rng, "x (3, 6), d_ff=6, gelu, no biases", (3, 6), 6, "gelu", bias=False),
        ff_case(rng, "x (2, 2, 3, 4) (two leading dims), d_ff=6, gelu", (2, 2, 3, 4), 6, "gelu"),
    ]


FEED_FORWARD_PROPERTY_SEED = 717


FEED_FORWARD = declare("05_blocks", "feed_forward", check_feed_forward,
            misconceptions=WRONG_FEED_FORWARD,
            promises=(
                Breaks("any leading dims (..., d_model)", _breaks_ff_2d_only, "ValueError"),
                Breaks("exact erf GELU", wrong_answer(WRONG_FEED_FORWARD, "tanh approximation of GELU"),
                       "tanh approximation of GELU"),
            ),
            right=(Right(_right_feed_forward_ok), Right(_right_feed_forward_matmul),
                   Right(_right_feed_forward_float32)))


# ---------------------------------------------------------------- encoder_layer_forward
def _enc(layer, x, mask=None, *, kind):
    sa = layer.self_attn
    pre = layer.norm_first
    if kind == "swapped":
        pre = not pre
    if kind == "mask ignored":
        mask = None
    n1, n2 = layer.norm1, (layer.norm1 if kind == "one norm" else layer.norm2)
    if pre:
        h = n1(x)
        a, w = sa(h, h, h, mask=mask)
        if kind == "residual after norm":
            x = h + layer.dropout1(a)
            h2 = n2(x)
            return h2 + layer.dropout2(layer.ff(h2)), w
        if kind == "no residual":
            x = layer.dropout1(a)
            return layer.dropout2(layer.ff(n2(x))), w
        x = x + layer.dropout1(a)
        return x + layer.dropout2(layer.ff(n2(x))), w
    a, w = sa(x, x, x, mask=mask)
    if kind == "norm on branch":
        x = x + n1(layer.dropout1(a))
        return x + n2(layer.dropout2(layer.ff(x))), w
    if kind == "no residual":
        x = n1(layer.dropout1(a))
        return n2(layer.dropout2(layer.ff(x))), w
    x = n1(x + layer.dropout1(a))
    return n2(x + layer.dropout2(layer.ff(x))), w


_ENC_MESSAGES = {
    "residual after norm": (
        "residual added after the norm in a pre-norm block",
        "in a pre-norm layer the residual stream is the UN-normalised x: x = x + dropout1(SA(norm1(x))). "
        "You added the sublayer output to norm1(x) instead, so the stream is re-normalised at every layer."),
    "swapped": (
        "post-norm and pre-norm swapped",
        "layer.norm_first=True means pre-norm, x = x + SA(norm1(x)); False means post-norm (the 2017 paper), "
        "x = norm1(x + SA(x)). Your branches are the other way round."),
    "norm on branch": (
        "LayerNorm on the sublayer output instead of the sum",
        "in post-norm the LayerNorm is applied to the SUM x + dropout1(SA(x)), not to the sublayer output alone."),
    "no residual": (
        "no residual connection",
        "each sublayer's output is ADDED to its input (the residual connection); without it the layer "
        "replaces x instead of refining it."),
    "one norm": (
        "one LayerNorm for both sublayers",
        "the attention sublayer uses layer.norm1 and the feed-forward sublayer layer.norm2 (separate weights)."),
    "mask ignored": (
        "mask ignored",
        "pass the mask to the attention: layer.self_attn(q, k, v, mask=mask)."),
}


WRONG_ENCODER_LAYER = [Wrong(name, (lambda k: lambda layer, x, mask=None: _enc(layer, x, mask, kind=k))(kind), msg)
                       for kind, (name, msg) in _ENC_MESSAGES.items()]


def _right_encoder_layer_ok(layer, x, mask=None):
    def sa(h):
        return layer.self_attn(h, h, h, mask=mask)

    if layer.norm_first:
        a, w = sa(layer.norm1(x))
        x = x + layer.dropout1(a)
        return x + layer.dropout2(layer.ff(layer.norm2(x))), w
    a, w = sa(x)
    x = layer.norm1(x + layer.dropout1(a))
    return layer.norm2(x + layer.dropout2(layer.ff(x))), w


def _right_encoder_layer_sublayers(layer, x, mask=None):
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


def _right_encoder_layer_explicit_branches(layer, x, mask=None):
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


def _right_encoder_layer_float32(layer, x, mask=None):
    """The whole layer run in float32, the layer itself unchanged: torch.func.functional_call swaps in
    float32 copies of its parameters (the casts are differentiable: gradients still reach them)."""
    params = {f"layer.{name}": t.float() for name, t in list(layer.named_parameters()) + list(layer.named_buffers())
              if t.is_floating_point()}

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, h, m):
            return _right_encoder_layer_ok(self.layer, h, m)

    return torch.func.functional_call(Holder(), params, (x.float(), mask))


def _breaks_enc_half(layer, x, mask=None):
    out, w = _right_encoder_layer_ok(layer, x, mask)
    return out.to(torch.float16), w


def enc_cases() -> list[Case]:
    """The hidden cases of ``check_encoder_layer_forward``."""
    return enc_cases_from(seeded(808), (16, 4, 24, 3, 7), 900)


DROPOUT = ((16, 4, 24), True, 818)  # the hidden dropout test's (d, heads, d_ff), norm_first, and input seed


ENCODER_LAYER_FORWARD = declare("05_blocks", "encoder_layer_forward", check_encoder_layer_forward,
            misconceptions=WRONG_ENCODER_LAYER,
            promises=(
                Breaks("float answer in at least float32", _breaks_enc_half, "half precision"),
                Breaks("mask applied", wrong_answer(WRONG_ENCODER_LAYER, "mask ignored"), "mask ignored"),
            ),
            right=(Right(_right_encoder_layer_ok), Right(_right_encoder_layer_sublayers),
                   Right(_right_encoder_layer_explicit_branches), Right(_right_encoder_layer_float32)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (LAYER_NORM, FEED_FORWARD, ENCODER_LAYER_FORWARD)
