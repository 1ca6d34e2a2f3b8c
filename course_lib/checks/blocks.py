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

All inputs are float64 torch tensors; ``hidden=True`` uses other, larger inputs: they, the known wrong answers
behind these names and the exercises' declarations are the judge's (``course_lib/judge/blocks.py``), which the
students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import torch

from course_lib import blocks as ref
from course_lib.checks import core
from course_lib.checks.core import (
    forbid,
    Case,
    assert_close,
    assert_shape,
    call_student,
    compare_with_reference,
    reference,
    seeded,
)
from course_lib.checks import gradients as _gradients
from course_lib.checks import transcript as _transcript

__all__ = [
    "check_layer_norm",
    "check_feed_forward",
    "check_encoder_layer_forward",
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


DROPOUT_ON_IN_EVAL = ("dropout left on in eval: in eval mode (layer.eval()) the layer must be deterministic, but "
                      "two calls on the same input gave different outputs. Use the layer's dropout modules "
                      "(the layer's own dropout1 and dropout2), which switch off in eval mode, not F.dropout(a, p) whose "
                      "training flag defaults to True.")

DROPOUT_NEVER_ON = ("dropout never applied in training: with layer.train() and p=0.5 your output equals the "
                    "eval-mode output. Pass each sublayer's output through layer.dropout1 / layer.dropout2 before "
                    "the residual sum.")


# ---------------------------------------------------------------- inputs
def ln_case(rng, label: str, shape: tuple, *, affine: bool = True, scale: float = 1.0, shift: float = 0.0,
            **kwargs) -> Case:
    """x of ``shape`` (times ``scale``, plus ``shift``) and, with ``affine``, a weight and a bias, drawn from ``rng``;
    ``kwargs``: the call's (eps)."""
    x = _t(rng, *shape, scale=scale, shift=shift)
    return Case(label, (x, _t(rng, shape[-1]), _t(rng, shape[-1])) if affine else (x,), kwargs)


def ln_cases_from(rng) -> list[Case]:
    """The layer_norm cases every test has, drawn from ``rng``."""
    return [
        ln_case(rng, "x (4, 5) with weight and bias", (4, 5), scale=2.0, shift=1.0),
        ln_case(rng, "x (2, 3, 4) (B, T, d), weight and bias", (2, 3, 4), scale=3.0),
        ln_case(rng, "x (3, 3) with a large offset, no weight or bias", (3, 3), affine=False, shift=50.0),
        ln_case(rng, "x (2, 6) with eps=0.1 and small values", (2, 6), scale=0.1, eps=0.1),
    ]


def _ln_cases() -> list[Case]:
    return ln_cases_from(seeded(6))


def ff_params(rng, d, d_ff, bias=True) -> tuple:
    """w1, b1, w2, b2 in nn.Linear's layout, drawn from ``rng`` (biases None without ``bias``)."""
    return (_t(rng, d_ff, d, scale=0.5), _t(rng, d_ff) if bias else None, _t(rng, d, d_ff, scale=0.5),
            _t(rng, d) if bias else None)


def ff_case(rng, label: str, shape: tuple, d_ff: int, activation: str | None = None, *, scale: float = 1.0,
            bias: bool = True) -> Case:
    """x of ``shape`` (times ``scale``) and the weights of a network with ``d_ff`` hidden units (``ff_params``),
    drawn from ``rng``; ``activation`` None: the default's."""
    x = _t(rng, *shape, scale=scale)
    return Case(label, (x, *ff_params(rng, shape[-1], d_ff, bias)),
                {} if activation is None else {"activation": activation})


def ff_cases_from(rng) -> list[Case]:
    """The feed_forward cases every test has, drawn from ``rng``."""
    return [
        ff_case(rng, "x (2, 3, 4), d_ff=6, relu", (2, 3, 4), 6, "relu"),
        ff_case(rng, "x (5, 4), d_ff=8, gelu", (5, 4), 8, "gelu", scale=2.0),
        ff_case(rng, "x (3, 5), d_ff=5 (square), gelu", (3, 5), 5, "gelu"),
        ff_case(rng, "x (2, 4), d_ff=6, default activation", (2, 4), 6),
    ]


def _ff_cases() -> list[Case]:
    rng = seeded(7)
    return ff_cases_from(rng) + [ff_case(rng, "x (2, 2, 3, 4): two leading dims, as the docstring's (..., d_model) "
                                              "allows; d_ff=6, gelu", (2, 2, 3, 4), 6, "gelu")]


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


def enc_cases_from(rng, sizes: tuple, layer_seeds: int) -> list[Case]:
    """Post- and pre-norm layers of ``sizes`` = (d, heads, d_ff, B, T) (their weights drawn from seeds
    ``layer_seeds`` + 0, 10, 20, 30), each without a mask and with one; inputs drawn from ``rng``."""
    d, heads, d_ff, B, T = sizes
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[0, T - 2:] = False
    pad = keep[:, None, None, :]  # (B, 1, 1, T)
    cases = []
    for i, (norm_first, act) in enumerate([(False, "relu"), (True, "relu"), (True, "gelu"), (False, "gelu")]):
        layer = _layer(10 * i + layer_seeds, d, heads, d_ff, norm_first, act)
        kind = "pre-norm" if norm_first else "post-norm"
        x = _t(rng, B, T, d)
        cases.append(Case(f"{kind} {act} layer, x {tuple(x.shape)}, no mask", (layer, x)))
        mask, mname = (causal, "causal (T, T)") if i % 2 == 0 else (pad, "padding (B, 1, 1, T)")
        cases.append(Case(f"{kind} {act} layer, x {tuple(x.shape)}, {mname} mask", (layer, _t(rng, B, T, d)),
                          {"mask": mask}))
    return cases


def _enc_cases() -> list[Case]:
    return enc_cases_from(seeded(8), (8, 2, 12, 2, 5), 0)


# ---------------------------------------------------------------- checks
@core.graded
def check_layer_norm(student, hidden: bool = False) -> None:
    """Student ``layer_norm(x, weight=None, bias=None, eps=1e-5)`` equals nn.LayerNorm's maths."""
    exercise = "layer_norm"
    judge = core.hidden_part(__name__) if hidden else None
    compare_with_reference(student, ref.layer_norm, judge.ln_cases() if hidden else _ln_cases(), exercise=exercise,
                           wrongs=core.wrongs(__name__, "LAYER_NORM"), forbidden=FORBIDDEN_LAYER_NORM)
    seed, width, gradient_seed = judge.LAYER_NORM_PROPERTY if hidden else (16, 6, 160)
    rng = seeded(seed)
    x = _t(rng, 3, width, scale=4.0, shift=3.0)
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
    got = call_student(student, Case("x that requires grad", (xg,)), exercise, FORBIDDEN_LAYER_NORM,
                       observe=_gradients.observe_gradient((xg,), ("x",), gradient_seed))
    expected = reference(_gradients.reference_gradient, ref.layer_norm, (xg,), (0,), ("x",), gradient_seed)
    if not _transcript.is_pending(expected):  # record mode: the verifier compares, outside the kernel
        _gradients.compare_gradients(got, expected, exercise, "x that requires grad", assert_close)


@core.graded
def check_feed_forward(student, hidden: bool = False) -> None:
    """Student ``feed_forward(x, w1, b1, w2, b2, activation="relu")`` with nn.Linear-layout weights."""
    exercise = "feed_forward"
    judge = core.hidden_part(__name__) if hidden else None
    compare_with_reference(student, ref.feed_forward, judge.ff_cases() if hidden else _ff_cases(), exercise=exercise,
                           wrongs=core.wrongs(__name__, "FEED_FORWARD"), forbidden=FORBIDDEN_FEED_FORWARD)
    # the same network at every position: permuting positions permutes the output
    rng = seeded(judge.FEED_FORWARD_PROPERTY_SEED if hidden else 17)
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
    (d, heads, d_ff), norm_first, seed = core.hidden_part(__name__).DROPOUT if hidden else ((8, 2, 12), False, 18)
    layer = _layer(77, d, heads, d_ff, norm_first=norm_first, activation="relu", dropout=0.5)
    rng = seeded(seed)
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


@core.graded
def check_encoder_layer_forward(student, hidden: bool = False) -> None:
    """Student ``encoder_layer_forward(layer, x, mask=None) -> (out, weights)``, post- and pre-norm."""
    exercise = "encoder_layer_forward"
    with torch.random.fork_rng():  # building layers draws from the global RNG; leave the notebook's state alone
        cases = core.hidden_part(__name__).enc_cases() if hidden else _enc_cases()
        # dropout first: a student with dropout on in eval gives random outputs that match nothing
        _check_dropout(student, exercise, hidden)
        compare_with_reference(student, ref.encoder_layer_forward, cases, exercise=exercise,
                               wrongs=core.wrongs(__name__, "ENCODER_LAYER"), forbidden=FORBIDDEN_ENCODER_LAYER,
                               output_names=("output", "attention weights"))
        layer, x = cases[0].args
        out, w = call_student(student, cases[0], exercise, FORBIDDEN_ENCODER_LAYER)
    assert_shape(out, tuple(x.shape), f"{exercise}: the output has the input's shape (B, T, d_model)")
    assert_shape(w, (x.shape[0], x.shape[1], x.shape[1]),
                 f"{exercise}: return the self-attention weights averaged over heads, (B, T, T)")

