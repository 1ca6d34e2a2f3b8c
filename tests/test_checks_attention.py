"""course_lib.checks.attention: each known-wrong answer is named (the right alternatives are declared with the
exercises: tests/test_exercises.py)."""
import math

import numpy as np
import pytest

from course_lib import attention as A
from course_lib.checks import attention as C
from course_lib.judge import attention as J
from course_lib.checks.core import IntegrityError, NotImplementedYet
from named import assert_named_alone, declared_wrong_answers, named_in


# the independent right answers are declared with the exercises (course_lib/checks/attention.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
my_softmax = J._right_softmax
my_attention = J._right_attention
my_attention_torch = J._right_attention_torch


WRONGS = declared_wrong_answers("01_attention")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check,wrong", WRONGS)
def test_each_misconception_is_named_and_no_other(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name, may_pass=True)


def test_required_misconceptions_are_recognised():
    names = {w.name for w in J.WRONG_ATTENTION} | {w.name for w in J.WRONG_SOFTMAX} | {
        w.name for w in J.WRONG_ATTENTION_TORCH}
    assert {"missing scaling", "softmax wrong axis", "unstable softmax", "transposed K", "mask inverted",
            "softmax without normalisation", "NaN on a fully masked row", "softmax over the head axis",
            "k.T on a batched tensor"} <= names, names


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
    np.testing.assert_allclose(A.softmax(np.zeros(2)), [0.5, 0.5])  # the tripwire is removed afterwards


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


def test_two_wrong_answers_alike_on_one_input_are_told_apart_by_the_others():
    """A name is evidence only where the output shows it: when two known wrong answers agree on the
    failing input, the other inputs decide which one the student's output is."""
    from course_lib.checks.core import Case, Wrong, compare_with_reference

    def ref(x):
        return x * 2.0

    def doubled_plus_one(x):
        return x * 2.0 + 1.0

    def plus_one_where_positive(x):
        return x * 2.0 + (x > 0)

    cases = [Case("positive", (np.array([1.0, 2.0]),)), Case("mixed", (np.array([-1.0, 3.0]),))]
    wrongs = [Wrong("plus one where positive", plus_one_where_positive, "only positive entries"),
              Wrong("plus one", doubled_plus_one, "one added everywhere")]
    with pytest.raises(AssertionError) as err:
        compare_with_reference(doubled_plus_one, ref, cases, exercise="toy", wrongs=wrongs)
    assert named_in(str(err.value)) == {"plus one"}, str(err.value)
    with pytest.raises(AssertionError) as err:
        compare_with_reference(plus_one_where_positive, ref, cases, exercise="toy", wrongs=wrongs)
    assert named_in(str(err.value)) == {"plus one where positive"}, str(err.value)




def test_a_crash_is_named_only_when_it_is_the_known_crash():
    """A crash names a misconception only where the outputs show it (core.name_crash): the known wrong answer
    raises the same type of error on that input AND the student's output equals its output on another input
    where it differs from the reference. The same exception type is no evidence, and neither is the same
    text (issue 34: never by crash text)."""
    def forgot_transpose(q, k, v, mask=None):
        s = q @ k / math.sqrt(q.shape[-1])
        return my_softmax(s) @ v, my_softmax(s)

    def other_value_error(q, k, v, mask=None):
        raise ValueError("my own check of the shapes failed")

    assert named_in(str(pytest.raises(AssertionError, C.check_attention_numpy, forgot_transpose).value)) == {
        "transposed K"}
    message = str(pytest.raises(AssertionError, C.check_attention_numpy, other_value_error).value)
    assert named_in(message) == set() and "ValueError: my own check of the shapes failed" in message, message

    def same_crash_text_right_elsewhere(q, k, v, mask=None):
        if q.shape[-1] != k.shape[-2]:
            q @ k  # the very error (type and text) that Q @ K raises on these shapes
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        return my_softmax(s) @ v, my_softmax(s)

    message = str(pytest.raises(AssertionError, C.check_attention_numpy, same_crash_text_right_elsewhere).value)
    assert named_in(message) == set() and "ValueError: matmul" in message, message


def test_k_T_is_named_in_the_visible_test_issue_65():
    """numpy attention with k.T: the visible test has a batched case and names the misconception there."""
    def k_T(q, k, v, mask=None):
        s = q @ k.T / math.sqrt(q.shape[-1])
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        w = A.softmax(s)
        return w @ v, w
    with pytest.raises(AssertionError, match="k.T on a batched array"):
        C.check_attention_numpy(k_T)


def test_section_5s_torch_recipe_keeps_full_marks_issue_65():
    """masked_fill + torch.softmax(..., dim=-1), as section 5 says (NaN on a fully masked row allowed)."""
    import torch

    def as_written(q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
        return w @ v, w
    for hidden in (False, True):
        C.check_attention_torch(as_written, hidden=hidden)
