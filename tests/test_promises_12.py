"""Lesson 12: each docstring promise of a graded exercise, the wrong answer that breaks it, and the
words of the message that names it (the correct formulations, three per exercise, one float32, are in
tests/test_checks_dna.py and pass visible and hidden checks there)."""
import numpy as np
import pytest
import torch

from course_lib.checks import dna as C
from test_checks_dna import ism_float32, ism_loop, one_hot_table, rc_translate, rf_loop
from named import assert_promise_broken, wrong


def _one_hot_float64(seq):
    return one_hot_table(seq).astype(np.float64)


def _one_hot_unknown_as_n(seq):
    return one_hot_table("".join(c if c in "ACGTNacgtn" else "N" for c in seq))


def _rc_list(seq):
    return list(rc_translate(seq))


def _rc_unknown_kept(seq):
    comp = dict(zip("ACGTNacgtn", "TGCANtgcan"))
    return "".join(comp.get(c, c) for c in reversed(seq))


def _rf_float(kernel_sizes, dilations=None, pools=None):
    return float(rf_loop(kernel_sizes, dilations, pools))


def _rf_zip_truncates(kernel_sizes, dilations=None, pools=None):
    n = len(kernel_sizes)
    dilations = [1] * n if dilations is None else dilations
    pools = [1] * n if pools is None else pools
    field, jump = 1, 1
    for k, d, p in zip(kernel_sizes, dilations, pools):  # silently drops the extra layers
        field += (k - 1) * d * jump + (p - 1) * jump
        jump *= p
    return field


def _ism_in_place(predict, one_hot):
    out = ism_loop(predict, one_hot)
    if isinstance(one_hot, np.ndarray):
        one_hot[0] = 0.0  # "cleans up" the caller's array
    return out


def _ism_numpy_only(predict, one_hot):
    if isinstance(one_hot, torch.Tensor):
        raise TypeError("expected a numpy array")
    return ism_loop(predict, one_hot)


PROMISES = [
    (C.check_one_hot_dna, "a float32 numpy array", _one_hot_float64, "float32"),
    (C.check_one_hot_dna, "N becomes a row of zeros", wrong(C.WRONG_ONE_HOT, "<lambda>", 'N encoded as 0.25').fn, "N encoded as 0.25"),
    (C.check_one_hot_dna, "upper and lower case are the same base", wrong(C.WRONG_ONE_HOT, "<lambda>", 'lower case not recognised').fn, "lower case not recognised"),
    (C.check_one_hot_dna, "columns A, C, G, T", wrong(C.WRONG_ONE_HOT, "<lambda>", 'columns not in A, C, G, T order').fn, "columns not in A, C, G, T order"),
    (C.check_one_hot_dna, "any other letter raises ValueError", _one_hot_unknown_as_n, "ValueError"),
    (C.check_reverse_complement, "complement and reverse", wrong(C.WRONG_RC, "<lambda>", 'complemented but not reversed').fn, "complemented but not reversed"),
    (C.check_reverse_complement, "returns a string", _rc_list, "expected shape ()"),
    (C.check_reverse_complement, "any other letter raises ValueError", _rc_unknown_kept, "ValueError"),
    (C.check_receptive_field, "pooling multiplies the jump", wrong(C.WRONG_RF, "<lambda>", 'jump not carried through the pools').fn, "jump not carried through the pools"),
    (C.check_receptive_field, "returns an int", _rf_float, "int"),
    (C.check_receptive_field, "ValueError when the lists differ in length", _rf_zip_truncates, "ValueError"),
    (C.check_in_silico_mutagenesis, "effect at the own base is 0", wrong(C.WRONG_ISM, "<lambda>", 'mutant score instead of the change').fn, "mutant score instead of the change"),
    (C.check_in_silico_mutagenesis, "mutant minus reference", wrong(C.WRONG_ISM, "<lambda>", 'reference minus mutant').fn, "reference minus mutant"),
    (C.check_in_silico_mutagenesis, "one_hot is not modified", _ism_in_place, "input modified in place"),
    (C.check_in_silico_mutagenesis, "one_hot numpy or torch", _ism_numpy_only, "torch tensor"),
    (C.check_in_silico_mutagenesis, "(L, 4) float64 array", ism_float32, "promises a numpy array of dtype float64"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
