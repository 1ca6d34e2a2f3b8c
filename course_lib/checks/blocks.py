"""Checks for lesson 05 (transformer blocks), with the misconceptions they name.

    check_layer_norm(layer_norm)                         # layer_norm(x, weight=None, bias=None, eps=1e-5)
    check_feed_forward(feed_forward)                     # feed_forward(x, w1, b1, w2, b2, activation="relu")
    check_encoder_layer_forward(encoder_layer_forward)   # encoder_layer_forward(layer, x, mask=None)

Named misconceptions
    layer_norm: LayerNorm over the wrong axis (tokens instead of features); statistics
    over the whole tensor; unbiased variance (divide by d - 1); eps outside the square
    root; mean not subtracted (RMSNorm); weight and bias ignored; weight and bias swapped.
    feed_forward: weights not transposed (nn.Linear stores (out, in)); tanh or sigmoid
    approximation instead of the exact erf GELU; activation argument ignored; activation
    also after the second linear map; biases left out.
    encoder_layer_forward: residual added after the norm in a pre-norm block; post-norm
    and pre-norm swapped; LayerNorm on the sublayer output instead of the sum; no
    residual connection; one LayerNorm for both sublayers; mask ignored; dropout left on
    in eval (two calls in eval mode differ); dropout never applied in training.

All inputs are float64 torch tensors; ``hidden=True`` uses other, larger inputs.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course_lib import blocks as ref
from course_lib.checks.core import (
    forbid,
    Case,
    Wrong,
    assert_close,
    assert_shape,
    call_student,
    compare_with_reference,
    reference,
    seeded,
)
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer  # noqa: F401
from course_lib.checks import gradients as _gradients
from course_lib.checks import transcript as _transcript

__all__ = [
    "check_layer_norm",
    "check_feed_forward",
    "check_encoder_layer_forward",
    "WRONG_LAYER_NORM",
    "WRONG_FEED_FORWARD",
    "WRONG_ENCODER_LAYER",
]

FORBIDDEN_LAYER_NORM = forbid(
    "course_lib.blocks.layer_norm",
    "course_lib.blocks.LayerNorm.forward",
    "torch.nn.functional.layer_norm",
    "torch.layer_norm",
    "torch.nn.functional.rms_norm",
)
FORBIDDEN_FEED_FORWARD = forbid(
    "course_lib.blocks.feed_forward",
    "course_lib.blocks.gelu",
    "course_lib.blocks.FeedForward.forward",
    "torch.nn.functional.gelu",
)
FORBIDDEN_ENCODER_LAYER = forbid(
    "course_lib.blocks.encoder_layer_forward",
    "course_lib.blocks.EncoderLayer.forward",
    "torch.nn.TransformerEncoderLayer.forward",
)


def _t(rng, *shape, scale=1.0, shift=0.0):
    return torch.from_numpy(rng.normal(size=shape) * scale + shift)


# ---------------------------------------------------------------- layer_norm: known wrong answers
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


# ---------------------------------------------------------------- feed_forward: known wrong answers
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


# ---------------------------------------------------------------- encoder layer: known wrong answers
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

DROPOUT_ON_IN_EVAL = ("dropout left on in eval: in eval mode (layer.eval()) the layer must be deterministic, but "
                      "two calls on the same input gave different outputs. Use the layer's dropout modules "
                      "(the layer's own dropout1 and dropout2), which switch off in eval mode, not F.dropout(a, p) whose "
                      "training flag defaults to True.")
DROPOUT_NEVER_ON = ("dropout never applied in training: with layer.train() and p=0.5 your output equals the "
                    "eval-mode output. Pass each sublayer's output through layer.dropout1 / layer.dropout2 before "
                    "the residual sum.")


# ---------------------------------------------------------------- inputs
def _ln_cases(hidden: bool) -> list[Case]:
    rng = seeded(606 if hidden else 6)
    cases = [
        Case("x (4, 5) with weight and bias", (_t(rng, 4, 5, scale=2.0, shift=1.0), _t(rng, 5), _t(rng, 5))),
        Case("x (2, 3, 4) (B, T, d), weight and bias", (_t(rng, 2, 3, 4, scale=3.0), _t(rng, 4), _t(rng, 4))),
        Case("x (3, 3) with a large offset, no weight or bias", (_t(rng, 3, 3, shift=50.0),)),
        Case("x (2, 6) with eps=0.1 and small values", (_t(rng, 2, 6, scale=0.1), _t(rng, 6), _t(rng, 6)),
             {"eps": 0.1}),
    ]
    if hidden:
        cases += [
            Case("x (2, 7, 16) with weight and bias", (_t(rng, 2, 7, 16, scale=5.0, shift=-2.0), _t(rng, 16),
                                                        _t(rng, 16))),
            Case("x (1, 2) (d = 2)", (_t(rng, 1, 2),)),
            Case("x (3, 4, 8), eps=1.0", (_t(rng, 3, 4, 8), _t(rng, 8), _t(rng, 8)), {"eps": 1.0}),
            Case("x (2, 2, 3, 5) (two leading dims), weight and bias", (_t(rng, 2, 2, 3, 5), _t(rng, 5), _t(rng, 5))),
            Case("x (5,) (a single token, no leading dims)", (_t(rng, 5, scale=2.0),)),
        ]
    return cases


def _ff_cases(hidden: bool) -> list[Case]:
    rng = seeded(707 if hidden else 7)

    def params(d, d_ff, bias=True):
        return (_t(rng, d_ff, d, scale=0.5), _t(rng, d_ff) if bias else None, _t(rng, d, d_ff, scale=0.5),
                _t(rng, d) if bias else None)

    cases = [
        Case("x (2, 3, 4), d_ff=6, relu", (_t(rng, 2, 3, 4), *params(4, 6)), {"activation": "relu"}),
        Case("x (5, 4), d_ff=8, gelu", (_t(rng, 5, 4, scale=2.0), *params(4, 8)), {"activation": "gelu"}),
        Case("x (3, 5), d_ff=5 (square), gelu", (_t(rng, 3, 5), *params(5, 5)), {"activation": "gelu"}),
        Case("x (2, 4), d_ff=6, default activation", (_t(rng, 2, 4), *params(4, 6))),
    ]
    if hidden:
        cases += [
            Case("x (2, 7, 16), d_ff=64, gelu", (_t(rng, 2, 7, 16, scale=3.0), *params(16, 64)),
                 {"activation": "gelu"}),
            Case("x (4, 8), d_ff=12, relu, no biases", (_t(rng, 4, 8), *params(8, 12, bias=False)),
                 {"activation": "relu"}),
            Case("x (3, 6), d_ff=6, gelu, no biases", (_t(rng, 3, 6), *params(6, 6, bias=False)),
                 {"activation": "gelu"}),
            Case("x (2, 2, 3, 4) (two leading dims), d_ff=6, gelu", (_t(rng, 2, 2, 3, 4), *params(4, 6)),
                 {"activation": "gelu"}),
        ]
    return cases


def _layer(seed: int, d: int, heads: int, d_ff: int, norm_first: bool, activation: str, dropout: float = 0.1):
    g = torch.Generator().manual_seed(seed)
    layer = ref.EncoderLayer(d, heads, d_ff, dropout=dropout, activation=activation, norm_first=norm_first,
                             dtype=torch.float64)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.4)
        for norm in (layer.norm1, layer.norm2):  # scales near 1, so the layer is well conditioned
            norm.weight.add_(1.0)
    return layer.eval()


def _enc_cases(hidden: bool) -> list[Case]:
    rng = seeded(808 if hidden else 8)
    d, heads, d_ff, B, T = (16, 4, 24, 3, 7) if hidden else (8, 2, 12, 2, 5)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[0, T - 2:] = False
    pad = keep[:, None, None, :]  # (B, 1, 1, T)
    cases = []
    for i, (norm_first, act) in enumerate([(False, "relu"), (True, "relu"), (True, "gelu"), (False, "gelu")]):
        layer = _layer(10 * i + (900 if hidden else 0), d, heads, d_ff, norm_first, act)
        kind = "pre-norm" if norm_first else "post-norm"
        x = _t(rng, B, T, d)
        cases.append(Case(f"{kind} {act} layer, x {tuple(x.shape)}, no mask", (layer, x)))
        mask, mname = (causal, "causal (T, T)") if i % 2 == 0 else (pad, "padding (B, 1, 1, T)")
        cases.append(Case(f"{kind} {act} layer, x {tuple(x.shape)}, {mname} mask", (layer, _t(rng, B, T, d)),
                          {"mask": mask}))
    return cases


# ---------------------------------------------------------------- checks
def check_layer_norm(student, hidden: bool = False) -> None:
    """Student ``layer_norm(x, weight=None, bias=None, eps=1e-5)`` equals nn.LayerNorm's maths."""
    exercise = "layer_norm"
    compare_with_reference(student, ref.layer_norm, _ln_cases(hidden), exercise=exercise, wrongs=WRONG_LAYER_NORM,
                           forbidden=FORBIDDEN_LAYER_NORM)
    rng = seeded(616 if hidden else 16)
    x = _t(rng, 3, 10 if hidden else 6, scale=4.0, shift=3.0)
    y = call_student(student, Case("x without weight and bias, eps=0", (x,), {"eps": 0.0}), exercise,
                     FORBIDDEN_LAYER_NORM)
    if not isinstance(y, torch.Tensor):
        raise AssertionError(f"{exercise}: must return a torch tensor, got {type(y).__name__}")
    assert_shape(y, tuple(x.shape), f"{exercise}: the output has the input's shape")
    assert_close(y.mean(dim=-1), torch.zeros(3, dtype=torch.float64),
                 f"{exercise}: without weight and bias each token (row) must have mean 0 over its features")
    assert_close((y**2).mean(dim=-1), torch.ones(3, dtype=torch.float64),
                 f"{exercise}: without weight and bias each row must have (biased) variance 1 over its features")
    # measured, not reported (issue 57): the gradient autograd gives x through the student's output, recorded
    # as plain data and compared with the reference's (requires_grad=True on a numpy result gives none)
    xg = x.clone().requires_grad_()
    seed = 6160 if hidden else 160
    got = call_student(student, Case("x that requires grad", (xg,)), exercise, FORBIDDEN_LAYER_NORM,
                       observe=_gradients.observe_gradient((xg,), ("x",), seed))
    expected = reference(_gradients.reference_gradient, ref.layer_norm, (xg,), (0,), ("x",), seed)
    if not _transcript.is_pending(expected):  # record mode: the verifier compares, outside the kernel
        _gradients.compare_gradients(got, expected, exercise, "x that requires grad", assert_close)


def check_feed_forward(student, hidden: bool = False) -> None:
    """Student ``feed_forward(x, w1, b1, w2, b2, activation="relu")`` with nn.Linear-layout weights."""
    exercise = "feed_forward"
    compare_with_reference(student, ref.feed_forward, _ff_cases(hidden), exercise=exercise,
                           wrongs=WRONG_FEED_FORWARD, forbidden=FORBIDDEN_FEED_FORWARD)
    # the same network at every position: permuting positions permutes the output
    rng = seeded(717 if hidden else 17)
    x = _t(rng, 6, 4)
    w1, b1, w2, b2 = _t(rng, 10, 4), _t(rng, 10), _t(rng, 4, 10), _t(rng, 4)
    out = call_student(student, Case("x (6, 4)", (x, w1, b1, w2, b2), {"activation": "gelu"}), exercise,
                       FORBIDDEN_FEED_FORWARD)
    perm = torch.from_numpy(rng.permutation(6))
    out_p = call_student(student, Case("x (6, 4), rows permuted", (x[perm], w1, b1, w2, b2),
                                       {"activation": "gelu"}), exercise, FORBIDDEN_FEED_FORWARD)
    assert_close(out_p, out[perm], f"{exercise}: the network is applied to each position on its own, so permuting "
                                   "the positions must permute the outputs")


def _check_dropout(student, exercise: str, hidden: bool) -> None:
    d, heads, d_ff = (16, 4, 24) if hidden else (8, 2, 12)
    layer = _layer(77, d, heads, d_ff, norm_first=hidden, activation="relu", dropout=0.5)
    rng = seeded(818 if hidden else 18)
    x = _t(rng, 2, 5, d)
    case = Case("a layer with dropout p=0.5 in eval mode", (layer, x))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        first = call_student(student, case, exercise, FORBIDDEN_ENCODER_LAYER)
        second = call_student(student, case, exercise, FORBIDDEN_ENCODER_LAYER)
        out1 = first[0] if isinstance(first, (tuple, list)) else first
        out2 = second[0] if isinstance(second, (tuple, list)) else second
        if isinstance(out1, torch.Tensor) and isinstance(out2, torch.Tensor) and out1.shape == out2.shape \
                and not torch.allclose(out1, out2, rtol=0, atol=1e-12):
            raise AssertionError(f"{exercise}: likely misconception 'dropout left on in eval': {DROPOUT_ON_IN_EVAL}")
        layer.train()
        layer.self_attn.dropout = 0.0  # only the residual-branch dropouts act
        layer.ff.dropout.p = 0.0
        trained = call_student(student, Case("the same layer in train mode", (layer, x)), exercise,
                               FORBIDDEN_ENCODER_LAYER)
        out_t = trained[0] if isinstance(trained, (tuple, list)) else trained
        if isinstance(out_t, torch.Tensor) and isinstance(out1, torch.Tensor) and out_t.shape == out1.shape \
                and torch.allclose(out_t, out1, rtol=0, atol=1e-12):
            raise AssertionError(f"{exercise}: {DROPOUT_NEVER_ON}")


def check_encoder_layer_forward(student, hidden: bool = False) -> None:
    """Student ``encoder_layer_forward(layer, x, mask=None) -> (out, weights)``, post- and pre-norm."""
    exercise = "encoder_layer_forward"
    with torch.random.fork_rng():  # building layers draws from the global RNG; leave the notebook's state alone
        cases = _enc_cases(hidden)
        # dropout first: a student with dropout on in eval gives random outputs that match nothing
        _check_dropout(student, exercise, hidden)
        compare_with_reference(student, ref.encoder_layer_forward, cases, exercise=exercise,
                               wrongs=WRONG_ENCODER_LAYER, forbidden=FORBIDDEN_ENCODER_LAYER,
                               output_names=("output", "attention weights"))
        layer, x = cases[0].args
        out, w = call_student(student, cases[0], exercise, FORBIDDEN_ENCODER_LAYER)
    assert_shape(out, tuple(x.shape), f"{exercise}: the output has the input's shape (B, T, d_model)")
    assert_shape(w, (x.shape[0], x.shape[1], x.shape[1]),
                 f"{exercise}: return the self-attention weights averaged over heads, (B, T, T)")


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
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


# ---------------------------------------------------------------- answers that break one promise each
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


def _breaks_ff_2d_only(x, w1, b1, w2, b2, activation="relu"):
    if x.dim() > 3:
        raise ValueError("expected (B, T, d)")
    return _right_feed_forward_ok(x, w1, b1, w2, b2, activation)


def _breaks_enc_half(layer, x, mask=None):
    out, w = _right_encoder_layer_ok(layer, x, mask)
    return out.to(torch.float16), w


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("05_blocks", "layer_norm", check_layer_norm,
            misconceptions=WRONG_LAYER_NORM,
            promises=(
                Breaks("any leading dims (..., d)", _breaks_ln_2d_only, "ValueError"),
                Breaks("inputs unchanged", _breaks_ln_in_place, "input modified in place"),
                Breaks("differentiable", _breaks_ln_detached, "gradients"),
                Breaks("biased variance", wrong_answer(WRONG_LAYER_NORM, "unbiased variance"), "unbiased variance"),
            ),
            right=(Right(_right_layer_norm_ok), Right(_right_layer_norm_two_pass), Right(_right_layer_norm_float32))),
    declare("05_blocks", "feed_forward", check_feed_forward,
            misconceptions=WRONG_FEED_FORWARD,
            promises=(
                Breaks("any leading dims (..., d_model)", _breaks_ff_2d_only, "ValueError"),
                Breaks("exact erf GELU", wrong_answer(WRONG_FEED_FORWARD, "tanh approximation of GELU"),
                       "tanh approximation of GELU"),
            ),
            right=(Right(_right_feed_forward_ok), Right(_right_feed_forward_matmul),
                   Right(_right_feed_forward_float32))),
    declare("05_blocks", "encoder_layer_forward", check_encoder_layer_forward,
            misconceptions=WRONG_ENCODER_LAYER,
            promises=(
                Breaks("float answer in at least float32", _breaks_enc_half, "half precision"),
                Breaks("mask applied", wrong_answer(WRONG_ENCODER_LAYER, "mask ignored"), "mask ignored"),
            ),
            right=(Right(_right_encoder_layer_ok), Right(_right_encoder_layer_sublayers),
                   Right(_right_encoder_layer_explicit_branches), Right(_right_encoder_layer_float32))),
)
