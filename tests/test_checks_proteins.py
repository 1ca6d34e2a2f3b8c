"""The lesson 10 checks: every known wrong answer is named, the reference is refused (right alternatives and
promise-breaking answers are declared in course_lib/checks/proteins.py: tests/test_exercises.py)."""
from __future__ import annotations

import pytest
import torch

from course_lib import proteins as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import proteins as chk
from course_lib.judge import proteins as J
from course_lib.efficient import favor_features_torch
from named import assert_named_alone, declared_wrong_answers

# the independent right answers are declared with the exercises (course_lib/checks/proteins.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
encode_loop = J._right_encode_loop
kmer_dict = J._right_kmer_dict
favor_einsum = J._right_favor_einsum
greedy_rowwise = J._right_greedy_rowwise


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = declared_wrong_answers("10_proteins")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


@pytest.mark.parametrize("hidden", [False, True])
def test_quadratic_favor_is_named(hidden):
    def quadratic(q, k, v, w, keep):
        kk = keep[:, None, :, None]
        pq = favor_features_torch(q, w, is_query=True)
        pk = favor_features_torch(k, w, is_query=False, keep=kk)
        a = pq @ pk.transpose(-2, -1)  # (B, H, L, L)
        return (a @ v) / a.sum(-1, keepdim=True) * kk

    with pytest.raises(AssertionError, match="likely misconception 'quadratic'"):
        chk.check_favor_padded_attention(quadratic, hidden=hidden)


# ---------------------------------------------------------------- integrity and other failures
def test_reference_and_builtins_are_refused():
    for check, fn in [(chk.check_encode_proteins, ref.encode_proteins), (chk.check_kmer_vectors, ref.kmer_vectors),
                      (chk.check_favor_padded_attention, ref.favor_padded_attention),
                      (chk.check_greedy_decode, ref.greedy_decode)]:
        with pytest.raises(IntegrityError):
            check(fn)
        with pytest.raises(IntegrityError):
            check(lambda *a, _f=fn, **kw: _f(*a, **kw))

    from course_lib.efficient import attention_from_features_torch

    def via_lesson07(q, k, v, w, keep):
        kk = keep[:, None, :, None]
        return attention_from_features_torch(favor_features_torch(q, w, is_query=True),
                                             favor_features_torch(k, w, is_query=False, keep=kk), v) * kk

    with pytest.raises(IntegrityError):
        chk.check_favor_padded_attention(via_lesson07)

    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (chk.check_encode_proteins, chk.check_kmer_vectors, chk.check_favor_padded_attention,
                  chk.check_greedy_decode):
        with pytest.raises(NotImplementedYet):
            check(stub)


def test_wrong_dtypes_and_missing_errors_fail():
    with pytest.raises(AssertionError, match="int64"):
        chk.check_encode_proteins(lambda s, max_len=None: (encode_loop(s, max_len)[0].int(), encode_loop(s, max_len)[1]))
    with pytest.raises(AssertionError, match="ValueError"):
        chk.check_encode_proteins(lambda s, max_len=None: encode_loop(s, None if max_len == 1 else max_len))
    with pytest.raises(AssertionError, match="float32"):
        chk.check_kmer_vectors(lambda s, k=3: kmer_dict(s, k).double())
    with pytest.raises(AssertionError, match="float32"):
        chk.check_favor_padded_attention(lambda q, k, v, w, keep: favor_einsum(q.double(), k.double(), v.double(),
                                                                               w.double(), keep))


def test_checks_leave_global_rng_alone():
    state = torch.get_rng_state()
    chk.check_greedy_decode(greedy_rowwise)
    assert torch.equal(torch.get_rng_state(), state)
