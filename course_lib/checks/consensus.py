"""Checks for lesson 11 (read consensus), with the misconceptions they name.

    check_edit_distance(edit_distance)                     # edit_distance(a, b) -> (int, ops)
    check_pileup(pileup)                                   # pileup(reads, alignments, length) -> (L, 5)
    check_soft_alignment_loss(soft_alignment_loss)         # soft_alignment_loss(logits, target, gamma, del_cost=1.0)
    check_positionwise_cross_entropy(positionwise_cross_entropy)   # positionwise_cross_entropy(logits, target)

Named misconceptions
    edit_distance: first row/column initialised to 0 (free end gaps); first row/column off by
    one (D[i, 0] = i + 1); a mismatch costs 2 (only insertions and deletions); a mismatch
    costs 0. The alignment is checked on its own: it must use every base of both strings,
    "=" only where the bases agree, "X" only where they differ, and cost the distance.
    pileup: deletions not counted as gaps; the read position advanced on a deletion;
    inserted bases counted in the next column; columns in the order ACGT- instead of -ACGT.
    soft_alignment_loss: max instead of min (logsumexp of +cost / gamma); log-sum-exp not
    stabilised (exp underflows to 0 for small gamma: the loss becomes inf); insertion and
    deletion costs swapped; raw logits used as log-probabilities; padding counted as label.
    positionwise_cross_entropy: mean instead of sum; padding positions not scored;
    probabilities instead of log-probabilities; no softmax.

Inputs are seeded (``core.seeded``) or literal; the hidden edit-distance case also uses
real subreads from the shipped extract. ``hidden=True`` uses other, larger inputs.

The hidden cases, the known wrong answers behind these names and the exercises' declarations are the judge's
(``course_lib/judge/consensus.py``), which the students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from course_lib import consensus as ref
from course_lib.checks import core
from course_lib.checks.core import Case, call_student, compare_with_reference, seeded

__all__ = [
    "check_edit_distance", "check_pileup", "check_soft_alignment_loss", "check_positionwise_cross_entropy",
]


FORBIDDEN_EDIT = ("course_lib.consensus.edit_distance", "course_lib.consensus.soft_edit_distance",
                  "Levenshtein.distance", "Levenshtein.editops", "edlib.align")
# read_rows (a building block of the notebook's model) parses the alignments into per-read rows: pileup is then one
# np.bincount per column, so it is a door to this exercise
FORBIDDEN_PILEUP = ("course_lib.consensus.pileup", "course_lib.consensus.read_rows")

FORBIDDEN_LOSS = ("course_lib.consensus.soft_alignment_loss", "course_lib.consensus.hard_alignment_loss",
                  "course_lib.consensus.soft_edit_distance", "course_lib.consensus._soft_dp",
                  "course_lib.consensus._loss_costs")

FORBIDDEN_CE = core.forbid("course_lib.consensus.positionwise_cross_entropy", "torch.nn.functional.cross_entropy",
                "torch.nn.functional.nll_loss")

_BASES = "ACGT"


def _random_seq(rng, n):
    return "".join(rng.choice(list(_BASES), size=n)) if n else ""


# ---------------------------------------------------------------- edit_distance
def edit_cases_from(rng, fixed: list[Case], lengths: tuple[int, int]) -> list[Case]:
    """``fixed``, then three random pairs drawn from ``rng``, each string's length in ``range(*lengths)``."""
    cases = list(fixed)
    for k in range(3):
        cases.append(
            Case(
                f"random pair {k}",
                (_random_seq(rng, int(rng.integers(*lengths))), _random_seq(rng, int(rng.integers(*lengths)))),
            )
        )
    return cases


def _edit_cases():
    return edit_cases_from(seeded(1101), [
        Case("ACGT vs AGT", ("ACGT", "AGT")),
        Case("empty vs AC", ("", "AC")),
        Case("GATTACA vs GCATGCT", ("GATTACA", "GCATGCT")),
        Case("identical", ("ACCA", "ACCA")),
        Case("TTAC vs empty", ("TTAC", "")),
    ], (5, 15))


def _check_ops(ops, a, b, distance, exercise, label):
    if not isinstance(ops, str) or set(ops) - set("=XID"):
        raise AssertionError(f"{exercise} on '{label}': the alignment must be a str of '=', 'X', 'I', 'D', "
                             f"got {ops!r}")
    i = j = 0
    for k, op in enumerate(ops):
        if op in "=X":
            if i >= len(a) or j >= len(b):
                raise AssertionError(f"{exercise} on '{label}': operation {k} ('{op}') runs past the end of a "
                                     "string; '=' and 'X' use one base of each.")
            if (a[i] == b[j]) != (op == "="):
                raise AssertionError(f"{exercise} on '{label}': operation {k} is '{op}' but a[{i}] = {a[i]!r} and "
                                     f"b[{j}] = {b[j]!r}; '=' is for equal bases, 'X' for different ones.")
            i, j = i + 1, j + 1
        elif op == "I":
            i += 1
        else:
            j += 1
    if i != len(a) or j != len(b):
        raise AssertionError(f"{exercise} on '{label}': the alignment uses {i} bases of a (length {len(a)}) and "
                             f"{j} of b (length {len(b)}); 'I' uses a base of a only, 'D' a base of b only. "
                             "Did the traceback stop before reaching D[0, 0]?")
    cost = sum(op != "=" for op in ops)
    if cost != distance:
        raise AssertionError(f"{exercise} on '{label}': the alignment {ops!r} costs {cost} edits but the "
                             f"distance you return is {distance}; the traceback must follow an optimal path.")


def _distance_only(student, exercise):
    def fn(a, b):
        out = student(a, b)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise AssertionError(f"{exercise}: expected a tuple (distance, operations), got {type(out).__name__}")
        d = out[0]
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise AssertionError(f"{exercise}: the distance must be an integer, got {type(d).__name__}")
        return int(d)
    return fn


def _reference_distance(a, b):
    """The reference's distance (passed to compare_with_reference as the reference)."""
    return ref.edit_distance(a, b)[0]


@core.graded
def check_edit_distance(student, hidden: bool = False) -> None:
    """Distance equals the reference; the alignment is valid and costs the distance (any tie-break)."""
    exercise = "edit_distance"
    cases = core.hidden_part(__name__).edit_cases() if hidden else _edit_cases()
    compare_with_reference(_distance_only(student, exercise), _reference_distance, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "EDIT_DISTANCE"), forbidden=FORBIDDEN_EDIT)
    for case in cases:
        d, ops = call_student(student, case, exercise, FORBIDDEN_EDIT)
        _check_ops(ops, *case.args, int(d), exercise, case.label)


# ---------------------------------------------------------------- pileup
def _simulate(rng, backbone, p_sub=0.06, p_ins=0.08, p_del=0.05):
    """A read and its alignment to ``backbone``, built together from random edits."""
    read, ops = [], []
    for base in backbone:
        while rng.random() < p_ins:
            read.append(str(rng.choice(list(_BASES))))
            ops.append("I")
        u = rng.random()
        if u < p_del:
            ops.append("D")
        elif u < p_del + p_sub:
            read.append(str(rng.choice([c for c in _BASES if c != base])))
            ops.append("X")
        else:
            read.append(base)
            ops.append("=")
    return "".join(read), "".join(ops)


def pileup_cases_from(rng, sizes, last: Case) -> list[Case]:
    """The docstring's example, R reads simulated from ``rng`` on a random backbone of L bases for each (L, R) of
    ``sizes``, then ``last``."""
    cases = [Case("docstring example (backbone ATC)", (["AC", "AGC"], ["=D=", "=X="], 3))]
    for L, R in sizes:
        backbone = _random_seq(rng, L)
        pairs = [_simulate(rng, backbone, p_sub=0.1, p_ins=0.15, p_del=0.15) for _ in range(R)]
        cases.append(
            Case(f"{R} simulated reads on a backbone of {L}", ([p[0] for p in pairs], [p[1] for p in pairs], L))
        )
    cases.append(last)
    return cases


def _pileup_cases():
    return pileup_cases_from(seeded(1111), [(12, 3), (20, 5)],
                             Case("a deletion before an insertion", (["ACT"], ["=D=I"], 3)))


@core.graded
def check_pileup(student, hidden: bool = False) -> None:
    """Counts equal the reference; integer (L, 5) array; ValueError for an alignment that does not fit."""
    exercise = "pileup"
    cases = core.hidden_part(__name__).pileup_cases() if hidden else _pileup_cases()
    compare_with_reference(student, ref.pileup, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "PILEUP"), forbidden=FORBIDDEN_PILEUP)
    out = call_student(student, cases[0], exercise, FORBIDDEN_PILEUP)
    if not isinstance(out, np.ndarray) or out.dtype.kind not in "iu":
        raise AssertionError(f"{exercise}: expected an integer numpy array, got "
                             f"{type(out).__name__} {getattr(out, 'dtype', '')}")
    core.assert_raises(student, Case("an alignment with one column too many", (["AC"], ["=D=D"], 3)), exercise,
                       ValueError, "when an alignment does not use every column of the backbone", FORBIDDEN_PILEUP)
    core.assert_raises(student, Case("two reads but one alignment", (["AC", "AC"], ["=D="], 3)), exercise,
                       ValueError, "when the numbers of reads and alignments differ (zip would drop a read)",
                       FORBIDDEN_PILEUP)


# ---------------------------------------------------------------- soft_alignment_loss
def loss_cases_from(rng, shapes, dtype=torch.float64) -> list[Case]:
    """One case per (B, N, M, gamma) of ``shapes``, logits of ``dtype`` and padded labels drawn from ``rng``."""
    cases = []
    for B, N, M, gamma in shapes:
        logits = torch.from_numpy(rng.normal(size=(B, N, 5)) * 3).to(dtype)
        target = torch.from_numpy(rng.integers(1, 5, size=(B, M)))
        for b in range(1, B):
            target[b, M - b :] = 0
        cases.append(Case(f"B={B}, N={N}, M={M}, gamma={gamma}", (logits, target, gamma)))
    return cases


def _loss_cases(dtype=torch.float64):
    return loss_cases_from(seeded(1121), [(2, 4, 3, 1.0), (3, 5, 6, 0.1), (2, 6, 5, 0.01)], dtype)


def _grad_of(fn, logits, target, gamma):
    x = logits.detach().clone().requires_grad_(True)
    out = fn(x, target, gamma)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise AssertionError("soft_alignment_loss: the loss must be a torch tensor that gradients can flow "
                             "back through (no .item(), numpy or .detach() inside)")
    out.sum().backward()
    if x.grad is None:
        raise AssertionError("soft_alignment_loss: no gradient reached the logits")
    return x.grad.to(out.dtype)  # a loss computed in float32 has a float32-accurate gradient


def _reference_gradient(logits, target, gamma):
    """d(sum of the reference loss)/d logits (passed to compare_with_reference as the reference)."""
    return _grad_of(ref.soft_alignment_loss, logits, target, gamma)


@core.graded
def check_soft_alignment_loss(student, hidden: bool = False) -> None:
    """Loss equals the reference (several gammas, padded labels), (B,) of the logits' dtype, gradients flow."""
    exercise = "soft_alignment_loss"
    cases = core.hidden_part(__name__).loss_cases() if hidden else _loss_cases()
    compare_with_reference(student, ref.soft_alignment_loss, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "SOFT_ALIGNMENT_LOSS"), forbidden=FORBIDDEN_LOSS)
    first = call_student(student, cases[0], exercise, FORBIDDEN_LOSS)
    if not isinstance(first, torch.Tensor):
        raise AssertionError(f"{exercise}: expected a torch tensor, got {type(first).__name__}")
    # float32 in, float32 out (the dtype promise)
    case32 = (core.hidden_part(__name__).loss_cases(dtype=torch.float32) if hidden else _loss_cases(dtype=torch.float32))[1]
    out32 = call_student(student, case32, exercise, FORBIDDEN_LOSS)
    if not isinstance(out32, torch.Tensor) or out32.dtype != torch.float32:
        raise AssertionError(f"{exercise}: float32 logits must give a float32 loss, got "
                             f"{getattr(out32, 'dtype', type(out32).__name__)}")
    # gradients flow and equal the reference's
    grad_cases = [Case(c.label + " (gradient)", c.args) for c in cases[:2]]
    compare_with_reference(functools.partial(_grad_of, student), _reference_gradient, grad_cases, exercise=exercise + " (gradient w.r.t. logits)", forbidden=FORBIDDEN_LOSS)
    core.assert_raises(student, Case("gamma = 0", (cases[0].args[0], cases[0].args[1], 0.0)), exercise,
                       ValueError, "when gamma <= 0 (the soft-min divides by gamma)", FORBIDDEN_LOSS)
    logits, target = cases[0].args[0], cases[0].args[1]
    core.assert_raises(student, Case("logits of one row more than the target", (
        torch.cat([logits, logits[:1]]), target, 1.0)), exercise, ValueError,
        "when the shapes do not fit (here logits have one row more than target)", FORBIDDEN_LOSS)


# ---------------------------------------------------------------- positionwise_cross_entropy
def ce_cases_from(rng, shapes) -> list[Case]:
    """One case per (B, N, M) of ``shapes``, logits and labels drawn from ``rng``."""
    cases = []
    for B, N, M in shapes:
        logits = torch.from_numpy(rng.normal(size=(B, N, 5)) * 2)
        target = torch.from_numpy(rng.integers(0, 5, size=(B, M)))
        cases.append(Case(f"B={B}, N={N}, M={M}", (logits, target)))
    return cases


def _ce_cases():
    return ce_cases_from(seeded(1131), [(2, 5, 3), (3, 4, 4)])


@core.graded
def check_positionwise_cross_entropy(student, hidden: bool = False) -> None:
    """Equals the reference on padded labels; (B,) tensor; ValueError when the label is longer than N."""
    exercise = "positionwise_cross_entropy"
    cases = core.hidden_part(__name__).ce_cases() if hidden else _ce_cases()
    compare_with_reference(student, ref.positionwise_cross_entropy, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "CROSS_ENTROPY"), forbidden=FORBIDDEN_CE)
    first = call_student(student, cases[0], exercise, FORBIDDEN_CE)
    if not isinstance(first, torch.Tensor):
        raise AssertionError(f"{exercise}: expected a torch tensor, got {type(first).__name__}")
    logits, target = cases[0].args
    long_target = torch.ones(logits.shape[0], logits.shape[1] + 2, dtype=torch.long)
    core.assert_raises(student, Case("label longer than the prediction", (logits, long_target)), exercise,
                       ValueError, "when the label is longer than the N predicted positions", FORBIDDEN_CE)
