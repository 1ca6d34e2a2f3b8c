"""course_lib.checks.attention: correct answers pass, each known-wrong answer is named."""
import math

import numpy as np
import pytest
import torch

from course_lib import attention as A
from course_lib.checks import attention as C
from course_lib.checks.core import IntegrityError, NotImplementedYet


def my_softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def my_attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = my_softmax(s)
    return w @ v, w


def my_attention_torch(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = torch.softmax(s, -1)
    return w @ v, w


@pytest.mark.parametrize("hidden", [False, True])
def test_independent_correct_answers_pass(hidden):
    C.check_softmax(my_softmax, hidden=hidden)
    C.check_attention_numpy(my_attention, hidden=hidden)
    C.check_attention_torch(my_attention_torch, hidden=hidden)


@pytest.mark.parametrize("wrong", C.WRONG_SOFTMAX, ids=lambda w: w.name)
def test_wrong_softmax_is_named(wrong):
    with pytest.raises(AssertionError, match=f"likely misconception '{wrong.name}'"):
        C.check_softmax(wrong.fn, hidden=True)


@pytest.mark.parametrize("wrong", C.WRONG_ATTENTION, ids=lambda w: w.name)
def test_wrong_attention_numpy_is_named(wrong):
    with pytest.raises(AssertionError, match=f"likely misconception '{wrong.name}'"):
        C.check_attention_numpy(wrong.fn)


@pytest.mark.parametrize("wrong", C.WRONG_ATTENTION_TORCH, ids=lambda w: w.name)
def test_wrong_attention_torch_is_named(wrong):
    with pytest.raises(AssertionError, match=f"likely misconception '{wrong.name}'"):
        C.check_attention_torch(wrong.fn)


def test_required_misconceptions_are_recognised():
    names = {w.name for w in C.WRONG_ATTENTION} | {w.name for w in C.WRONG_SOFTMAX}
    assert {"missing scaling", "softmax wrong axis", "unstable softmax", "transposed K", "mask inverted"} <= names


def test_stub_reports_not_implemented():
    def stub(x, axis=-1):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="not implemented yet"):
        C.check_softmax(stub)


def test_calling_the_reference_is_an_integrity_error():
    with pytest.raises(IntegrityError):
        C.check_softmax(A.softmax)
    with pytest.raises(IntegrityError, match="reference implementation"):
        C.check_attention_numpy(lambda q, k, v, mask=None: A.scaled_dot_product_attention(q, k, v, mask))
    from course_lib.attention import softmax as aliased  # an alias bound before the check runs

    with pytest.raises(IntegrityError):
        C.check_softmax(lambda x, axis=-1: aliased(x, axis))
    # the tripwire is removed afterwards
    np.testing.assert_allclose(A.softmax(np.zeros(2)), [0.5, 0.5])


def test_calling_torch_builtin_is_an_integrity_error():
    import torch.nn.functional as F

    def cheat(q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None

    with pytest.raises(IntegrityError, match="scaled_dot_product_attention"):
        C.check_attention_torch(cheat)
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"


def test_wrong_return_type_is_explained():
    with pytest.raises(AssertionError, match="tuple"):
        C.check_attention_numpy(lambda q, k, v, mask=None: my_attention(q, k, v, mask)[0])


def test_student_exception_is_reported_with_input():
    def broken(q, k, v, mask=None):
        raise KeyError("oops")

    with pytest.raises(AssertionError, match="raised KeyError"):
        C.check_attention_numpy(broken)


def test_detached_torch_output_is_caught():
    def detached(q, k, v, mask=None):
        out, w = my_attention_torch(q, k, v, mask)
        return out.detach(), w.detach()

    with pytest.raises(AssertionError, match="gradients"):
        C.check_attention_torch(detached)
