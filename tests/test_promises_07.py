"""Lesson 07: docstring promises, the wrong answer that breaks each, and the words of its message."""
import numpy as np
import pytest

from course_lib.checks import efficient as C
from named import assert_promise_broken, wrong
from test_checks_efficient import (causal_linear_attention, elu_feature_map, linear_attention,
                                   linear_attention_step)


def _elu_negative(x):
    return elu_feature_map(x) - 1.0


def _step_in_place(state, q_t, k_t, v_t, feature_map=elu_feature_map):
    out, (s, z) = linear_attention_step(state, q_t, k_t, v_t, feature_map)
    if state is not None:
        state[0][...] = s
        state[1][...] = z
        return out, state
    return out, (s, z)


def _features_2d_w_only(x, w):
    x, w = np.asarray(x, float), np.asarray(w, float)
    if w.ndim != 2:
        raise ValueError("w must be (m, d)")
    return np.exp(x @ w.T - 0.5 * (x ** 2).sum(-1)[..., None]) / np.sqrt(w.shape[0])


def _linear_3d_only(q, k, v, feature_map=elu_feature_map):
    if np.ndim(q) > 2:
        raise ValueError("expected (T, d)")
    return linear_attention(q, k, v, feature_map)


PROMISES = [
    (C.check_elu_feature_map, "always > 0", _elu_negative, "elu without +1"),
    (C.check_linear_attention, "any leading dims (..., T, d)", _linear_3d_only, "ValueError"),
    (C.check_linear_attention, "never builds the (T, S) matrix", C._linear_quadratic, C.QUADRATIC_NAME),
    (C.check_causal_linear_attention, "position i sees keys 0..i", wrong(C.WRONG_CAUSAL, "<lambda>", 'causal form sees future keys').fn, "sees future keys"),
    (C.check_causal_linear_attention, "O(T r d_v) memory", C._causal_quadratic, C.QUADRATIC_NAME),
    (C.check_linear_attention_step, "the input state is not modified", _step_in_place, "input modified in place"),
    (C.check_positive_random_features, "w (..., m, d) with leading dims", _features_2d_w_only, "ValueError"),
    (C.check_positive_random_features, "exp(w x - |x|^2 / 2)", wrong(C.WRONG_FEATURES, "<lambda>", 'forgot exp(-|x|^2/2)').fn, "forgot exp(-|x|^2/2)"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)


def test_causal_reference_alternative_still_passes():
    C.check_causal_linear_attention(causal_linear_attention)
