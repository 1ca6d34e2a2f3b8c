"""Lesson 03: docstring promises, the wrong answer that breaks each, and the words of its message."""
import numpy as np
import pytest

from course_lib.checks import multihead as C
from test_checks_multihead import merge_heads_reshape, multi_head_attention, numpy_params_from_torch, split_heads_reshape
from named import assert_promise_broken


def _split_3d_only(x, num_heads):
    B, T, D = x.shape
    return np.asarray(x).reshape(B, T, num_heads, D // num_heads).swapaxes(1, 2)


def _split_numpy_only(x, num_heads):
    return split_heads_reshape(np.asarray(x), num_heads)


def _merge_numpy_only(x):
    return merge_heads_reshape(np.asarray(x))


def _params_torch_tensors(m):
    import torch

    return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in numpy_params_from_torch(m).items()}


def _mha_mutates(query, key, value, w_q, *args, **kwargs):
    out = multi_head_attention(query, key, value, w_q, *args, **kwargs)
    w_q *= 1.0 + 1e-3
    return out


PROMISES = [
    (C.check_split_heads, "any leading dims (..., T, D)", _split_3d_only, "split_heads"),
    (C.check_split_heads, "torch in, torch out", _split_numpy_only, "same kind"),
    (C.check_merge_heads, "torch in, torch out", _merge_numpy_only, "same kind"),
    (C.check_multi_head_attention, "inputs unchanged", _mha_mutates, "input modified in place"),
    (C.check_numpy_params_from_torch, "numpy arrays", _params_torch_tensors, "numpy array"),
    (C.check_numpy_params_from_torch, "a dict", lambda m: tuple(numpy_params_from_torch(m).values()), "dict"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
