"""Lesson 01: each docstring promise of a graded exercise, the wrong answer that breaks it, and the
words of the message that names it (issue 22). A promise without a row here has no check."""
import math

import numpy as np
import pytest
import torch

from course_lib.checks import attention as C
from test_checks_attention import my_attention, my_attention_torch, my_softmax
from named import assert_promise_broken


def _softmax_nan_row(x, axis=-1):
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _softmax_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    return my_softmax(x, axis)


def _softmax_float16(x, axis=-1):
    return my_softmax(x, axis).astype(np.float16)


def _attention_2d_only(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = my_softmax(s)
    return w @ v, w


def _attention_returns_torch(q, k, v, mask=None):
    out, w = my_attention(q, k, v, mask)
    return torch.from_numpy(out), torch.from_numpy(w)


def _torch_detached(q, k, v, mask=None):
    out, w = my_attention_torch(q.detach(), k, v, mask)
    return out, w


def _torch_kT(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return w @ v, w


PROMISES = [
    (C.check_softmax, "stable for large scores (exp does not overflow)", lambda x, axis=-1: C._softmax_unstable(x, axis),
     "unstable softmax"),
    (C.check_softmax, "a fully -inf slice gets zeros, not NaN", _softmax_nan_row, "NaN on a fully masked row"),
    (C.check_softmax, "normalised along `axis`", C._softmax_axis0, "softmax wrong axis"),
    (C.check_softmax, "inputs unchanged", _softmax_in_place, "input modified in place"),
    (C.check_softmax, "float answer in at least float32", _softmax_float16, "half precision"),
    (C.check_attention_numpy, "any leading dims (..., T, d_k)", _attention_2d_only, "scaled_dot_product_attention"),
    (C.check_attention_numpy, "numpy in, numpy out", _attention_returns_torch, "numpy array"),
    (C.check_attention_numpy, "a fully masked row gets zero weights", C._wrong_attention("NaN on a fully masked row"),
     "NaN on a fully masked row"),
    (C.check_attention_torch, "differentiable", _torch_detached, "gradients"),
    (C.check_attention_torch, "any leading dims (k.transpose(-2, -1))", _torch_kT, "k.T on a batched tensor"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
