"""The judge's material of ``course_lib.checks.dna`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import re

import numpy as np
import torch

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.dna import (
    _one_hot_cases,
    _random_dna,
    _rc_cases,
    _rf_cases,
    check_in_silico_mutagenesis,
    check_one_hot_dna,
    check_receptive_field,
    check_reverse_complement,
)


# ---------------------------------------------------------------- one_hot_dna
def _one_hot(seq, order="ACGT", n_value=0.0, upper=True):
    s = seq.upper() if upper else seq
    out = np.zeros((len(seq), 4), dtype=np.float32)
    for i, c in enumerate(s):
        if c in order:
            out[i, order.index(c)] = 1.0
        elif c in "Nn":
            out[i] = n_value
    return out


WRONG_ONE_HOT = [
    Wrong("columns not in A, C, G, T order", lambda s: _one_hot(s, order="ATCG"),
          "the columns must be A, C, G, T in that (alphabetical) order; with this order the reverse complement "
          "is the one-hot matrix flipped on both axes."),
    Wrong("N encoded as 0.25", lambda s: _one_hot(s, n_value=0.25),
          "N (unknown base) must be a row of zeros, as Enformer encodes it, not a uniform 0.25."),
    Wrong("lower case not recognised", lambda s: _one_hot(s, upper=False),
          "lower-case letters (soft-masked repeats in genome files) are the same bases: upper-case the string first."),
]


# written independently of course_lib.dna; the students' and the kernel's editions replace each by a stub
def _right_one_hot_table(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("bad letter")
    table = {"A": [1, 0, 0, 0], "C": [0, 1, 0, 0], "G": [0, 0, 1, 0], "T": [0, 0, 0, 1], "N": [0, 0, 0, 0]}
    return np.array([table[c] for c in seq.upper()], dtype=np.float32).reshape(len(seq), 4)


def _right_one_hot_eye(seq):
    if not set(seq.upper()) <= set("ACGTN"):
        raise ValueError("bad letter")
    eye = np.vstack([np.eye(4, dtype=np.float32), np.zeros((1, 4), np.float32)])
    return eye[["ACGTN".index(c) for c in seq.upper()]].reshape(len(seq), 4)


def _right_one_hot_torch_then_numpy(seq):
    if re.search("[^ACGTNacgtn]", seq):
        raise ValueError("bad letter")
    idx = torch.tensor([" ACGT".find(c) for c in seq.upper().replace("N", " ")], dtype=torch.long)
    out = torch.nn.functional.one_hot(idx.clamp(min=0), 5)[:, 1:] if len(seq) else torch.zeros(0, 4)
    return out.float().numpy().reshape(len(seq), 4)


def _breaks_one_hot_float64(seq):
    return _right_one_hot_table(seq).astype(np.float64)


def _breaks_one_hot_unknown_as_n(seq):
    return _right_one_hot_table("".join(c if c in "ACGTNacgtn" else "N" for c in seq))


def one_hot_cases() -> list[Case]:
    """The hidden cases of ``check_one_hot_dna``."""
    rng = seeded(1212)
    return _one_hot_cases() + [Case("500 random bases with N and lower case", (_random_dna(rng, 500, "ACGTNacgt"),)),
                               Case("no bases at all", ("",))]


def one_hot_raise_cases() -> list[Case]:
    return [Case("'ACGU' (U is RNA)", ("ACGU",))]


ONE_HOT_DNA = declare("12_long_range_dna", "one_hot_dna", check_one_hot_dna,
            misconceptions=WRONG_ONE_HOT,
            promises=(
                Breaks("a float32 numpy array", _breaks_one_hot_float64, "float32"),
                Breaks("N becomes a row of zeros", wrong_answer(WRONG_ONE_HOT, "N encoded as 0.25"),
                       "N encoded as 0.25"),
                Breaks("upper and lower case are the same base",
                       wrong_answer(WRONG_ONE_HOT, "lower case not recognised"), "lower case not recognised"),
                Breaks("columns A, C, G, T", wrong_answer(WRONG_ONE_HOT, "columns not in A, C, G, T order"),
                       "columns not in A, C, G, T order"),
                Breaks("any other letter raises ValueError", _breaks_one_hot_unknown_as_n, "ValueError"),
            ),
            right=(Right(_right_one_hot_table), Right(_right_one_hot_eye), Right(_right_one_hot_torch_then_numpy)))


# ---------------------------------------------------------------- reverse_complement
_COMP = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N", "a": "t", "c": "g", "g": "c", "t": "a", "n": "n"}


WRONG_RC = [
    Wrong("complemented but not reversed", lambda s: "".join(_COMP[c] for c in s),
          "the other strand is read 5' to 3', so the complement must also be reversed."),
    Wrong("reversed but not complemented", lambda s: s[::-1],
          "reversing is not enough: each base pairs with its complement (A-T, C-G)."),
]


def _right_rc_translate(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("bad letter")
    return seq.translate(str.maketrans("ACGTNacgtn", "TGCANtgcan"))[::-1]


def _right_rc_loop(seq):
    pairs = {"A": "T", "T": "A", "C": "G", "G": "C", "N": "N"}
    out = []
    for c in reversed(seq):
        if c.upper() not in pairs:
            raise ValueError(c)
        b = pairs[c.upper()]
        out.append(b if c.isupper() else b.lower())
    return "".join(out)


def _right_rc_recursive(seq):
    if set(seq) - set("ACGTNacgtn"):
        raise ValueError("bad letter")
    comp = dict(zip("ACGTNacgtn", "TGCANtgcan"))
    return "" if not seq else _right_rc_recursive(seq[1:]) + comp[seq[0]]


def _breaks_rc_list(seq):
    return list(_right_rc_translate(seq))


def _breaks_rc_unknown_kept(seq):
    comp = dict(zip("ACGTNacgtn", "TGCANtgcan"))
    return "".join(comp.get(c, c) for c in reversed(seq))


def rc_cases() -> list[Case]:
    """The hidden cases of ``check_reverse_complement``."""
    rng = seeded(1313)
    return _rc_cases() + [Case("300 random bases with N and lower case", (_random_dna(rng, 300, "ACGTNacgtn"),)),
                          Case("no bases at all", ("",)), Case("one base 'g'", ("g",))]


def rc_raise_cases() -> list[Case]:
    return [Case("'ACGX'", ("ACGX",))]


REVERSE_COMPLEMENT = declare("12_long_range_dna", "reverse_complement", check_reverse_complement,
            misconceptions=WRONG_RC,
            promises=(
                Breaks("complement and reverse", wrong_answer(WRONG_RC, "complemented but not reversed"),
                       "complemented but not reversed"),
                Breaks("returns a string", _breaks_rc_list, "expected shape ()"),
                Breaks("any other letter raises ValueError", _breaks_rc_unknown_kept, "ValueError"),
            ),
            right=(Right(_right_rc_translate), Right(_right_rc_loop), Right(_right_rc_recursive)))


# ---------------------------------------------------------------- receptive_field
def _rf(kernels, dilations=None, pools=None, *, use_pools=True, carry_jump=True, use_dilation=True, k_minus_1=True):
    n = len(kernels)
    dilations = [1] * n if dilations is None else list(dilations)
    pools = [1] * n if pools is None else list(pools)
    rf, jump = 1, 1
    for k, d, p in zip(kernels, dilations, pools):
        rf += ((k - 1) if k_minus_1 else k) * (d if use_dilation else 1) * jump
        if use_pools:
            rf += (p - 1) * jump
            if carry_jump:
                jump *= p
    return rf


WRONG_RF = [
    Wrong("pooling ignored", lambda kernel_sizes, dilations=None, pools=None: _rf(kernel_sizes, dilations, pools, use_pools=False),
          "a pooling of size p also widens the field (by p - 1 times the current jump) and makes every later "
          "layer's step p times larger."),
    Wrong("jump not carried through the pools", lambda kernel_sizes, dilations=None, pools=None: _rf(kernel_sizes, dilations, pools, carry_jump=False),
          "after a pooling of size p, neighbouring positions are p input bases apart: multiply the jump by p, "
          "so later kernels cover (k - 1) * dilation * jump bases."),
    Wrong("dilation ignored", lambda kernel_sizes, dilations=None, pools=None: _rf(kernel_sizes, dilations, pools, use_dilation=False),
          "a dilated kernel of size k spans (k - 1) * dilation + 1 positions."),
    Wrong("kernel instead of kernel - 1", lambda kernel_sizes, dilations=None, pools=None: _rf(kernel_sizes, dilations, pools, k_minus_1=False),
          "a kernel of size k adds k - 1 positions to the field (a 1-wide kernel adds nothing)."),
]


def _right_rf_loop(kernel_sizes, dilations=None, pools=None):
    n = len(kernel_sizes)
    dilations, pools = dilations or [1] * n, pools or [1] * n
    if not len(dilations) == len(pools) == n:
        raise ValueError("lengths differ")
    span, step = 1, 1
    for k, d, p in zip(kernel_sizes, dilations, pools):
        span += (k - 1) * d * step + (p - 1) * step
        step *= p
    return span


def _right_rf_backwards(kernel_sizes, dilations=None, pools=None):
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


def _right_rf_numpy(kernel_sizes, dilations=None, pools=None):
    k = np.asarray(kernel_sizes)
    d = np.ones_like(k) if dilations is None else np.asarray(dilations)
    p = np.ones_like(k) if pools is None else np.asarray(pools)
    if not k.shape == d.shape == p.shape:
        raise ValueError("lengths differ")
    jump = np.concatenate([[1], np.cumprod(p)[:-1]])
    return int(1 + ((k - 1) * d * jump).sum() + ((p - 1) * jump).sum())


def _breaks_rf_float(kernel_sizes, dilations=None, pools=None):
    return float(_right_rf_loop(kernel_sizes, dilations, pools))


def _breaks_rf_zip_truncates(kernel_sizes, dilations=None, pools=None):
    n = len(kernel_sizes)
    dilations = [1] * n if dilations is None else dilations
    pools = [1] * n if pools is None else pools
    field, jump = 1, 1
    for k, d, p in zip(kernel_sizes, dilations, pools):  # silently drops the extra layers
        field += (k - 1) * d * jump + (p - 1) * jump
        jump *= p
    return field


def rf_cases() -> list[Case]:
    """The hidden cases of ``check_receptive_field``."""
    return _rf_cases() + [
        Case("lesson 12's CNN: kernels [15, 5, 5, 5], dilations [1, 1, 1, 2], pools [4, 4, 1, 1]",
             ([15, 5, 5, 5], [1, 1, 1, 2], [4, 4, 1, 1])),
        Case("Enformer-like: kernel 15, then six (5, pool 2) blocks", ([15, 5, 5, 5, 5, 5, 5], [1] * 7, [2] * 7)),
        Case("dilated and pooled: kernels [5, 3, 3], dilations [1, 2, 4], pools [2, 1, 2]",
             ([5, 3, 3], [1, 2, 4], [2, 1, 2]))]


def rf_raise_cases() -> list[Case]:
    return [Case("kernels [3, 3] with pools [2]", ([3, 3], None, [2]))]


RECEPTIVE_FIELD = declare("12_long_range_dna", "receptive_field", check_receptive_field,
            misconceptions=WRONG_RF,
            promises=(
                Breaks("pooling multiplies the jump", wrong_answer(WRONG_RF, "jump not carried through the pools"),
                       "jump not carried through the pools"),
                Breaks("returns an int", _breaks_rf_float, "int"),
                Breaks("ValueError when the lists differ in length", _breaks_rf_zip_truncates, "ValueError"),
            ),
            right=(Right(_right_rf_loop), Right(_right_rf_backwards), Right(_right_rf_numpy)))


# ---------------------------------------------------------------- in_silico_mutagenesis
def _ism(predict, one_hot, *, flip=False, raw=False):
    x = torch.as_tensor(np.asarray(one_hot, dtype=np.float32))
    base = float(predict(x[None])[0])
    out = np.zeros(tuple(x.shape))
    for i in range(x.shape[0]):
        for b in range(4):
            m = x.clone()
            m[i] = 0.0
            m[i, b] = 1.0
            v = float(predict(m[None])[0])
            out[i, b] = v if raw else (base - v if flip else v - base)
    return out


WRONG_ISM = [
    Wrong("reference minus mutant", lambda f, x: _ism(f, x, flip=True),
          "the effect is prediction(mutant) - prediction(reference): a mutation that raises the score is positive."),
    Wrong("mutant score instead of the change", lambda f, x: _ism(f, x, raw=True),
          "subtract the unmutated sequence's prediction: the effect at the sequence's own base must be 0."),
]


def _right_ism_loop(predict, one_hot):
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


def _right_ism_per_position(predict, one_hot):
    x = torch.as_tensor(np.array(one_hot, dtype=np.float32))
    ref_score = predict(x[None])[0]
    rows = []
    for i in range(x.shape[0]):
        m = x.repeat(4, 1, 1)
        m[:, i] = torch.eye(4)
        rows.append((predict(m) - ref_score).double())
    return torch.stack(rows).numpy()


def _breaks_ism_in_place(predict, one_hot):
    out = _right_ism_loop(predict, one_hot)
    if isinstance(one_hot, np.ndarray):
        one_hot[0] = 0.0  # "cleans up" the caller's array
    return out


def _breaks_ism_numpy_only(predict, one_hot):
    if isinstance(one_hot, torch.Tensor):
        raise TypeError("expected a numpy array")
    return _right_ism_loop(predict, one_hot)


# a float32 answer, right but for the dtype the docstring promises
def _breaks_ism_float32(predict, one_hot):
    x = torch.tensor(np.array(one_hot), dtype=torch.float32)
    L = x.shape[0]
    batch = x.expand(4 * L, L, 4).clone()
    for i in range(L):
        batch[4 * i:4 * i + 4, i] = torch.eye(4)
    with torch.no_grad():
        return (predict(batch) - predict(x[None])).reshape(L, 4).float().numpy()


# the hidden test's seed (model and sequence), sequence length, alphabet, and the label of its torch tensor case
ISM = (1414, 40, "ACGTN", "the same sequence as a torch tensor")


IN_SILICO_MUTAGENESIS = declare("12_long_range_dna", "in_silico_mutagenesis", check_in_silico_mutagenesis,
            misconceptions=WRONG_ISM,
            promises=(
                Breaks("effect at the own base is 0", wrong_answer(WRONG_ISM, "mutant score instead of the change"),
                       "mutant score instead of the change"),
                Breaks("mutant minus reference", wrong_answer(WRONG_ISM, "reference minus mutant"),
                       "reference minus mutant"),
                Breaks("one_hot is not modified", _breaks_ism_in_place, "input modified in place"),
                Breaks("one_hot numpy or torch", _breaks_ism_numpy_only, "torch tensor"),
                Breaks("(L, 4) float64 array", _breaks_ism_float32, "promises a numpy array of dtype float64"),
            ),
            right=(Right(_right_ism_loop), Right(_right_ism_per_position)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (ONE_HOT_DNA, REVERSE_COMPLEMENT, RECEPTIVE_FIELD, IN_SILICO_MUTAGENESIS)
