"""The lesson 12 checks: correct alternatives pass, every named wrong answer is named, promises are enforced."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from course_lib import dna as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import dna as chk
from named import assert_named_alone


# ---------------------------------------------------------------- independent correct answers (3 per exercise)
def one_hot_table(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("bad letter")
    table = {"A": [1, 0, 0, 0], "C": [0, 1, 0, 0], "G": [0, 0, 1, 0], "T": [0, 0, 0, 1], "N": [0, 0, 0, 0]}
    return np.array([table[c] for c in seq.upper()], dtype=np.float32).reshape(len(seq), 4)


def one_hot_eye(seq):
    if not set(seq.upper()) <= set("ACGTN"):
        raise ValueError("bad letter")
    eye = np.vstack([np.eye(4, dtype=np.float32), np.zeros((1, 4), np.float32)])
    return eye[["ACGTN".index(c) for c in seq.upper()]].reshape(len(seq), 4)


def one_hot_torch_then_numpy(seq):
    if re.search("[^ACGTNacgtn]", seq):
        raise ValueError("bad letter")
    idx = torch.tensor([" ACGT".find(c) for c in seq.upper().replace("N", " ")], dtype=torch.long)
    out = torch.nn.functional.one_hot(idx.clamp(min=0), 5)[:, 1:] if len(seq) else torch.zeros(0, 4)
    return out.float().numpy().reshape(len(seq), 4)


def rc_translate(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("bad letter")
    return seq.translate(str.maketrans("ACGTNacgtn", "TGCANtgcan"))[::-1]


def rc_loop(seq):
    pairs = {"A": "T", "T": "A", "C": "G", "G": "C", "N": "N"}
    out = []
    for c in reversed(seq):
        if c.upper() not in pairs:
            raise ValueError(c)
        b = pairs[c.upper()]
        out.append(b if c.isupper() else b.lower())
    return "".join(out)


def rc_recursive(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("bad letter")
    comp = dict(zip("ACGTNacgtn", "TGCANtgcan"))
    return "" if not seq else rc_recursive(seq[1:]) + comp[seq[0]]


def rf_loop(kernel_sizes, dilations=None, pools=None):
    n = len(kernel_sizes)
    dilations, pools = dilations or [1] * n, pools or [1] * n
    if not len(dilations) == len(pools) == n:
        raise ValueError("lengths differ")
    span, step = 1, 1
    for k, d, p in zip(kernel_sizes, dilations, pools):
        span += (k - 1) * d * step + (p - 1) * step
        step *= p
    return span


def rf_backwards(kernel_sizes, dilations=None, pools=None):
    """From the output back to the input: r_in = (r_out - 1) * p + 1 for a pool, + (k - 1) d for a conv."""
    n = len(kernel_sizes)
    dilations = [1] * n if dilations is None else dilations
    pools = [1] * n if pools is None else pools
    if len(dilations) != n or len(pools) != n:
        raise ValueError("lengths differ")
    r = 1
    for k, d, p in reversed(list(zip(kernel_sizes, dilations, pools))):
        r = (r - 1) * p + p  # a pool: r outputs need (r - 1) * p + p inputs
        r = r + (k - 1) * d
    return int(r)


def rf_numpy(kernel_sizes, dilations=None, pools=None):
    k = np.asarray(kernel_sizes)
    d = np.ones_like(k) if dilations is None else np.asarray(dilations)
    p = np.ones_like(k) if pools is None else np.asarray(pools)
    if not k.shape == d.shape == p.shape:
        raise ValueError("lengths differ")
    jump = np.concatenate([[1], np.cumprod(p)[:-1]])
    return int(1 + ((k - 1) * d * jump).sum() + ((p - 1) * jump).sum())


def ism_loop(predict, one_hot):
    x = torch.as_tensor(np.array(one_hot, dtype=np.float32))
    base = float(predict(x[None])[0])
    out = np.zeros((x.shape[0], 4))
    for i in range(x.shape[0]):
        for b in range(4):
            m = x.clone()
            m[i] = 0
            m[i, b] = 1
            out[i, b] = float(predict(m[None])[0]) - base
    return out


def ism_float32(predict, one_hot):
    x = torch.tensor(np.array(one_hot), dtype=torch.float32)
    L = x.shape[0]
    batch = x.expand(4 * L, L, 4).clone()
    for i in range(L):
        batch[4 * i:4 * i + 4, i] = torch.eye(4)
    with torch.no_grad():
        return (predict(batch) - predict(x[None])).reshape(L, 4).float().numpy()


def ism_per_position(predict, one_hot):
    x = torch.as_tensor(np.array(one_hot, dtype=np.float32))
    ref_score = predict(x[None])[0]
    rows = []
    for i in range(x.shape[0]):
        m = x.repeat(4, 1, 1)
        m[:, i] = torch.eye(4)
        rows.append((predict(m) - ref_score).double())
    return torch.stack(rows).numpy()


CORRECT = {
    chk.check_one_hot_dna: [one_hot_table, one_hot_eye, one_hot_torch_then_numpy],
    chk.check_reverse_complement: [rc_translate, rc_loop, rc_recursive],
    chk.check_receptive_field: [rf_loop, rf_backwards, rf_numpy],
    chk.check_in_silico_mutagenesis: [ism_loop, ism_per_position],  # ism_float32 breaks the float64 promise (test_promises_12)
}


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", [(c, f) for c, fs in CORRECT.items() for f in fs],
                         ids=[f.__name__ for fs in CORRECT.values() for f in fs])
def test_correct_alternatives_pass(check, fn, hidden):
    check(fn, hidden=hidden)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, ref_fn", [(chk.check_one_hot_dna, ref.one_hot_dna),
                                           (chk.check_reverse_complement, ref.reverse_complement),
                                           (chk.check_receptive_field, ref.receptive_field),
                                           (chk.check_in_silico_mutagenesis, ref.in_silico_mutagenesis)])
def test_reference_passes_through_a_copy_but_is_refused_when_called(check, ref_fn, hidden):
    with pytest.raises(IntegrityError):
        check(ref_fn, hidden=hidden)
    with pytest.raises(AssertionError):
        check(lambda *a, **k: ref_fn(*a, **k), hidden=hidden)


WRONGS = [(chk.check_one_hot_dna, chk.WRONG_ONE_HOT), (chk.check_reverse_complement, chk.WRONG_RC),
          (chk.check_receptive_field, chk.WRONG_RF), (chk.check_in_silico_mutagenesis, chk.WRONG_ISM)]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", [(c, w) for c, ws in WRONGS for w in ws],
                         ids=[w.name for _, ws in WRONGS for w in ws])
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


def test_stub_is_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check, _ in WRONGS:
        with pytest.raises(NotImplementedYet):
            check(stub)
