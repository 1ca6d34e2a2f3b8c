"""Checks for lesson 12 (long-range DNA), with the misconceptions they name.

    check_one_hot_dna(one_hot_dna)                     # (L, 4) float32, ACGT, N -> zeros
    check_reverse_complement(reverse_complement)       # complement and reverse, case kept
    check_receptive_field(receptive_field)             # conv/pool stack arithmetic
    check_in_silico_mutagenesis(in_silico_mutagenesis) # (L, 4) prediction changes

Named misconceptions
    one_hot_dna: columns in another order than A, C, G, T; N as 0.25 everywhere; lower case
    not recognised (rows of zeros).
    reverse_complement: complement without reversing; reversed without complementing.
    receptive_field: pooling ignored; jump (stride) not carried to later layers; dilation
    ignored; kernel counted instead of kernel - 1.
    in_silico_mutagenesis: reference minus mutant (sign flipped); the mutant's score
    instead of the difference.

``hidden=True`` uses other, larger inputs.
The hidden cases, the known wrong answers behind these names and the exercises' declarations are the judge's
(``course_lib/judge/dna.py``), which the students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import numpy as np
import torch

from course_lib import dna as ref
from course_lib.checks import core
from course_lib.checks.core import Case, assert_raises, call_student, compare_with_reference, seeded, to_numpy

__all__ = ["check_one_hot_dna", "check_reverse_complement", "check_receptive_field",
           "check_in_silico_mutagenesis"]


FORBIDDEN_ONE_HOT = ("course_lib.dna.one_hot_dna",)
FORBIDDEN_RC = ("course_lib.dna.reverse_complement", "Bio.Seq.reverse_complement", "Bio.Seq.Seq.reverse_complement")

FORBIDDEN_RF = ("course_lib.dna.receptive_field",)

FORBIDDEN_ISM = ("course_lib.dna.in_silico_mutagenesis",)


def _random_dna(rng, n, alphabet="ACGT"):
    return "".join(rng.choice(list(alphabet), size=n))


def _additive_predict(w):
    return lambda x: (x * w.to(x.dtype)).sum((1, 2))


def _pairwise_predict(w, pair):
    i, j = pair
    return lambda x: (x * w.to(x.dtype)).sum((1, 2)) + 2.0 * x[:, i, 2] * x[:, j, 3]


# ---------------------------------------------------------------- visible cases
def _one_hot_cases() -> list[Case]:
    return [Case("'ACGT'", ("ACGT",)), Case("'GATTACA' with an N", ("GATTNACA",)),
            Case("lower case 'acgtn'", ("acgtn",))]


def _rc_cases() -> list[Case]:
    return [Case("'AACG'", ("AACG",)), Case("'GATTACA'", ("GATTACA",)), Case("'acgtN'", ("acgtN",))]


def _rf_cases() -> list[Case]:
    return [Case("one conv, kernel 15", ([15],)),
            Case("kernels [15, 5], pools [2, 2]", ([15, 5],), {"pools": [2, 2]}),
            Case("kernels [3, 3, 3], dilations [1, 2, 4]", ([3, 3, 3], [1, 2, 4]))]


# inputs the docstrings say raise ValueError
def _one_hot_raise_cases() -> list[Case]:
    return [Case("'CAUG' (U is RNA)", ("CAUG",))]


def _rc_raise_cases() -> list[Case]:
    return [Case("'ACGR' (R is an IUPAC ambiguity code)", ("ACGR",))]


def _rf_raise_cases() -> list[Case]:
    return [Case("kernels [3, 3, 3] with dilations [1, 2] (one dilation short)", ([3, 3, 3], [1, 2]))]


# ---------------------------------------------------------------- checks
@core.graded
def check_one_hot_dna(student, hidden: bool = False) -> None:
    """Student ``one_hot_dna(seq)``: (L, 4) float32, columns A, C, G, T, N -> zeros, any case."""
    exercise = "one_hot_dna"
    cases = core.hidden_part(__name__).one_hot_cases() if hidden else _one_hot_cases()
    compare_with_reference(student, ref.one_hot_dna, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ONE_HOT"), forbidden=FORBIDDEN_ONE_HOT)
    out = call_student(student, Case("'ACGTN'", ("ACGTN",)), exercise, FORBIDDEN_ONE_HOT)
    if not isinstance(out, np.ndarray) or out.dtype != np.float32:
        raise AssertionError(f"{exercise}: the docstring promises a float32 numpy array, got "
                             f"{type(out).__name__} {getattr(out, 'dtype', '')}")
    for case in core.hidden_part(__name__).one_hot_raise_cases() if hidden else _one_hot_raise_cases():
        assert_raises(student, case, exercise, ValueError, "for a letter that is not A, C, G, T or N",
                      FORBIDDEN_ONE_HOT)


@core.graded
def check_reverse_complement(student, hidden: bool = False) -> None:
    """Student ``reverse_complement(seq)``: complement each base and reverse; N stays N; case kept."""
    exercise = "reverse_complement"
    cases = core.hidden_part(__name__).rc_cases() if hidden else _rc_cases()
    compare_with_reference(student, ref.reverse_complement, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "RC"), forbidden=FORBIDDEN_RC)
    out = call_student(student, Case("'ACGT'", ("ACGT",)), exercise, FORBIDDEN_RC)
    if not isinstance(out, str):
        raise AssertionError(f"{exercise}: the docstring promises a string, got {type(out).__name__}")
    for case in core.hidden_part(__name__).rc_raise_cases() if hidden else _rc_raise_cases():
        assert_raises(student, case, exercise, ValueError, "for a letter that is not A, C, G, T or N", FORBIDDEN_RC)


@core.graded
def check_receptive_field(student, hidden: bool = False) -> None:
    """Student ``receptive_field(kernel_sizes, dilations=None, pools=None)`` -> int."""
    exercise = "receptive_field"
    cases = core.hidden_part(__name__).rf_cases() if hidden else _rf_cases()
    compare_with_reference(student, ref.receptive_field, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "RF"), forbidden=FORBIDDEN_RF)
    out = call_student(student, Case("kernels [15, 5], pools [2, 2]", ([15, 5],), {"pools": [2, 2]}), exercise,
                       FORBIDDEN_RF)
    if not isinstance(out, (int, np.integer)):
        raise AssertionError(f"{exercise}: the docstring promises an int, got {type(out).__name__}")
    for case in core.hidden_part(__name__).rf_raise_cases() if hidden else _rf_raise_cases():
        assert_raises(student, case, exercise, ValueError, "when the lists differ in length", FORBIDDEN_RF)


@core.graded
def check_in_silico_mutagenesis(student, hidden: bool = False) -> None:
    """Student ``in_silico_mutagenesis(predict, one_hot)`` -> (L, 4) changes of the prediction."""
    exercise = "in_silico_mutagenesis"
    seed, length, alphabet, tensor_label = core.hidden_part(__name__).ISM if hidden else (
        14, 8, "ACGT", "the same sequence as a torch tensor (the docstring: one_hot is numpy or torch)")
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(length, 4, generator=g)
    rng = seeded(seed)
    seq = _random_dna(rng, length, alphabet)
    x = (np.array(list(seq))[:, None] == np.array(list("ACGT"))).astype(np.float32)  # N: a row of zeros
    cases = [Case(f"an additive model on {length} bases", (_additive_predict(w), x)),
             Case(f"a model with one interaction (positions 1 and {length - 2}) on {length} bases",
                  (_pairwise_predict(w, (1, length - 2)), x)),
             Case(tensor_label, (_additive_predict(w), torch.from_numpy(x.copy())))]
    # the model computes in float32 whatever the answer's dtype: differences of float32 scores, hence atol/rtol
    compare_with_reference(student, ref.in_silico_mutagenesis, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ISM"), forbidden=FORBIDDEN_ISM, atol=1e-5, rtol=1e-5)
    before = x.copy()
    raw = call_student(student, Case("an additive model (mutation check)", (_additive_predict(w), x)),
                       exercise, FORBIDDEN_ISM)
    core.assert_promised_dtype(raw, "float64", exercise, "an additive model (mutation check)",
                               "The model's scores are float32 tensors: convert them (.to(torch.float64) or "
                               "np.asarray(..., dtype=np.float64)) before you subtract and store.")
    out = to_numpy(raw)
    if not np.array_equal(x, before):
        raise AssertionError(f"{exercise}: your function changed the one_hot array it was given; the docstring "
                             "promises it is not modified (mutate a copy)")
    if out.shape != (length, 4):
        raise AssertionError(f"{exercise}: expected shape ({length}, 4), got {out.shape}")

