"""course_lib.checks.multihead: every known-wrong answer is caught and NAMED, calling the reference is an
IntegrityError (the right alternatives are declared with the exercises: tests/test_exercises.py)."""
from __future__ import annotations

import pytest

from course_lib import multihead
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import multihead as C
from course_lib.judge import multihead as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/multihead.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
split_heads = J._right_split_heads
merge_heads = J._right_merge_heads
multi_head_attention = J._right_multi_head_attention
numpy_params_from_torch = J._right_numpy_params_from_torch
CHECKS = [(C.check_split_heads, "split_heads"), (C.check_merge_heads, "merge_heads"),
          (C.check_multi_head_attention, "multi_head_attention"),
          (C.check_numpy_params_from_torch, "numpy_params_from_torch")]

WRONGS = declared_wrong_answers("03_multihead")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check,wrong", WRONGS)
def test_each_misconception_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


def test_required_misconceptions_exist():
    names = {p.values[1].name for p in WRONGS}
    assert {"heads split along the sequence axis", "heads merged without transposing back",
            "mask inverted", "mask after softmax"} <= names


@pytest.mark.parametrize("check,name", CHECKS)
def test_calling_the_reference_is_an_integrity_error(check, name):
    ref = getattr(multihead, name)

    def cheat(*args, **kwargs):
        return ref(*args, **kwargs)

    with pytest.raises(IntegrityError):
        check(cheat)


def test_mha_may_reuse_lesson01_attention_but_not_the_multihead_reference():
    from course_lib.attention import scaled_dot_product_attention

    def with_lesson01(query, key, value, w_q, w_k, w_v, w_o, num_heads, b_q=None, b_k=None, b_v=None,
                      b_o=None, mask=None):
        def lin(x, w, b):
            return x @ w + (0.0 if b is None else b)

        q = split_heads(lin(query, w_q, b_q), num_heads)
        k = split_heads(lin(key, w_k, b_k), num_heads)
        v = split_heads(lin(value, w_v, b_v), num_heads)
        heads, w = scaled_dot_product_attention(q, k, v, mask)
        return lin(merge_heads(heads), w_o, b_o), w

    C.check_multi_head_attention(with_lesson01)

    def with_reference_split(*args, **kwargs):
        multihead.split_heads(args[0], args[7])
        return with_lesson01(*args, **kwargs)

    with pytest.raises(IntegrityError):
        C.check_multi_head_attention(with_reference_split)


@pytest.mark.parametrize("check", [c for c, _ in CHECKS])
def test_stub_is_not_implemented(check):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet):
        check(stub)


def test_params_must_be_a_complete_dict():
    with pytest.raises(AssertionError, match="return a dict"):
        C.check_numpy_params_from_torch(lambda m: tuple(numpy_params_from_torch(m).values()))
    with pytest.raises(AssertionError, match="lacks the keys"):
        C.check_numpy_params_from_torch(lambda m: {k: v for k, v in numpy_params_from_torch(m).items()
                                                   if k != "b_o"})


def test_per_head_weights_are_required():
    """Weights averaged over heads (nn.MultiheadAttention's default) are reported as a shape error."""
    def averaged(*args, **kwargs):
        out, w = multi_head_attention(*args, **kwargs)
        return out, w.mean(axis=1)

    with pytest.raises(AssertionError, match=r"weights: expected shape \(2, 2, 5, 5\)"):
        C.check_multi_head_attention(averaged)
