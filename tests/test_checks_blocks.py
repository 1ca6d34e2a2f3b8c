"""The lesson 05 checks: every known wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/blocks.py: tests/test_exercises.py)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib import blocks as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import blocks as chk
from course_lib.judge import blocks as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/blocks.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
layer_norm_ok = J._right_layer_norm_ok
encoder_layer_ok = J._right_encoder_layer_ok


def test_checks_leave_global_rng_alone():
    state = torch.get_rng_state()
    chk.check_encoder_layer_forward(encoder_layer_ok)
    assert torch.equal(torch.get_rng_state(), state)


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = declared_wrong_answers("05_blocks")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


def test_required_misconceptions_are_named():
    ln = {w.name for w in J.WRONG_LAYER_NORM}
    assert {"LayerNorm over the wrong axis", "unbiased variance"} <= ln
    assert "residual added after the norm in a pre-norm block" in {w.name for w in J.WRONG_ENCODER_LAYER}


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
