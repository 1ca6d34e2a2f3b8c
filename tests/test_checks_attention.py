"""course_lib.checks.attention: correct answers pass, each known-wrong answer is named."""
import math

import numpy as np
import pytest
import torch

from course_lib import attention as A
from course_lib.checks import attention as C
from course_lib.checks.core import IntegrityError, NotImplementedYet
from named import assert_named_alone, named_in


def my_softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, np.where(s > 0, s, 1.0))


def softmax_float32(x, axis=-1):
    return my_softmax(np.asarray(x, dtype=np.float32), axis).astype(np.float32)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    out = np.exp(x - lse)
    return np.where(np.isnan(out), 0.0, out)


def softmax_torch_inside(x, axis=-1):
    t = torch.as_tensor(np.asarray(x, dtype=float))
    m = t.amax(dim=axis, keepdim=True)
    e = torch.exp(t - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    s = e.sum(dim=axis, keepdim=True)
    return (e / s.clamp_min(1e-300)).numpy()


def my_attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = my_softmax(s)
    return w @ v, w


def attention_float32(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    out, w = my_attention(q, k, v, mask)
    return out.astype(np.float32), w.astype(np.float32)


def attention_einsum(q, k, v, mask=None):
    s = np.einsum("...td,...sd->...ts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = my_softmax(s, axis=-1)
    return np.einsum("...ts,...sv->...tv", w, v), w


def attention_loop(q, k, v, mask=None):
    """One query at a time, on 2-D inputs; leading dims by recursion."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.ndim > 2:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        m = None if mask is None else np.broadcast_to(mask, lead + (q.shape[-2], k.shape[-2]))
        q, k, v = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
        outs = [attention_loop(q[i], k[i], v[i], None if m is None else m[i]) for i in range(lead[0])]
        return np.stack([o for o, _ in outs]), np.stack([w for _, w in outs])
    T, S = q.shape[0], k.shape[0]
    m = np.ones((T, S), dtype=bool) if mask is None else np.broadcast_to(mask, (T, S))
    out, w = np.zeros((T, v.shape[-1])), np.zeros((T, S))
    for t in range(T):
        scores = np.array([q[t] @ k[s] for s in range(S)]) / math.sqrt(q.shape[-1])
        w[t] = my_softmax(np.where(m[t], scores, -np.inf))
        out[t] = w[t] @ v
    return out, w


def my_attention_torch(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = torch.softmax(s, -1)
    w = torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def attention_torch_float32(q, k, v, mask=None):
    out, w = my_attention_torch(q.float(), k.float(), v.float(), mask)
    return out, w


def attention_torch_einsum(q, k, v, mask=None):
    s = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        s = torch.where(mask, s, torch.tensor(-math.inf, dtype=s.dtype))
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    w = e / e.sum(-1, keepdim=True).clamp_min(1e-300)
    return torch.einsum("...ts,...sv->...tv", w, v), w


CORRECT = [
    (C.check_softmax, my_softmax), (C.check_softmax, softmax_float32), (C.check_softmax, softmax_logsumexp),
    (C.check_softmax, softmax_torch_inside),
    (C.check_attention_numpy, my_attention), (C.check_attention_numpy, attention_float32),
    (C.check_attention_numpy, attention_einsum), (C.check_attention_numpy, attention_loop),
    (C.check_attention_torch, my_attention_torch), (C.check_attention_torch, attention_torch_float32),
    (C.check_attention_torch, attention_torch_einsum),
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,answer", CORRECT, ids=lambda x: getattr(x, "__name__", str(x)))
def test_correct_alternatives_pass(check, answer, hidden):
    check(answer, hidden=hidden)


WRONGS = ([(C.check_softmax, w) for w in C.WRONG_SOFTMAX] + [(C.check_attention_numpy, w) for w in C.WRONG_ATTENTION]
          + [(C.check_attention_torch, w) for w in C.WRONG_ATTENTION_TORCH])


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,wrong", WRONGS, ids=[f"{c.__name__}-{w.name}" for c, w in WRONGS])
def test_each_misconception_is_named_and_no_other(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden, may_pass=not hidden)


def test_required_misconceptions_are_recognised():
    names = {w.name for w in C.WRONG_ATTENTION} | {w.name for w in C.WRONG_SOFTMAX} | {
        w.name for w in C.WRONG_ATTENTION_TORCH}
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
