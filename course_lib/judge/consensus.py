"""The judge's material of ``course_lib.checks.consensus`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.consensus import (
    ce_cases_from,
    edit_cases_from,
    loss_cases_from,
    pileup_cases_from,
    check_edit_distance,
    check_pileup,
    check_positionwise_cross_entropy,
    check_soft_alignment_loss,
)


# ---------------------------------------------------------------- edit_distance
def _ed_table(a, b, *, init_offset=0, free_ends=False, sub_cost=1):
    n, m = len(a), len(b)
    t = np.zeros((n + 1, m + 1), dtype=np.int64)
    if not free_ends:
        t[:, 0] = np.arange(n + 1) + (init_offset if n else 0)
        t[0, :] = np.arange(m + 1) + (init_offset if m else 0)
        t[0, 0] = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            t[i, j] = min(t[i - 1, j - 1] + (sub_cost if a[i - 1] != b[j - 1] else 0), t[i - 1, j] + 1,
                          t[i, j - 1] + 1)
    return int(t[n, m])


WRONG_EDIT_DISTANCE = [
    Wrong("first row/column initialised to 0", lambda a, b: _ed_table(a, b, free_ends=True),
          "D[i, 0] must be i (turning a[:i] into the empty string takes i deletions) and D[0, j] must be j; "
          "with zeros there, bases at the ends are free and the distance is too small."),
    Wrong("first row/column off by one", lambda a, b: _ed_table(a, b, init_offset=1),
          "the first row and column are D[0, j] = j and D[i, 0] = i (start at 0 for the empty prefix), "
          "not j + 1 and i + 1."),
    Wrong("a mismatch costs 2", lambda a, b: _ed_table(a, b, sub_cost=2),
          "a substitution is ONE edit (the diagonal move costs 1 for a mismatch); you charged it as a deletion plus "
          "an insertion (cost 2)."),
    Wrong("a mismatch costs 0", lambda a, b: _ed_table(a, b, sub_cost=0),
          "the diagonal move costs 1 when the two bases differ and 0 only when they are equal."),
]


# written independently of course_lib.consensus; the students' and the kernel's editions replace each by a stub
def _right_edit_distance_loops(a, b):
    """Plain Python loops; the traceback prefers 'D', then 'I', then the diagonal (another tie-break)."""
    n, m = len(a), len(b)
    t = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        t[i][0] = i
    for j in range(m + 1):
        t[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            t[i][j] = min(t[i - 1][j - 1] + (a[i - 1] != b[j - 1]), t[i - 1][j] + 1, t[i][j - 1] + 1)
    ops, i, j = [], n, m
    while i or j:
        if j and t[i][j] == t[i][j - 1] + 1:
            ops.append("D")
            j -= 1
        elif i and t[i][j] == t[i - 1][j] + 1:
            ops.append("I")
            i -= 1
        else:
            ops.append("=" if a[i - 1] == b[j - 1] else "X")
            i, j = i - 1, j - 1
    return t[n][m], "".join(ops[::-1])


def _right_edit_distance_numpy_int32(a, b):
    """numpy table in int32 filled cell by cell, numpy integer returned."""
    n, m = len(a), len(b)
    t = np.zeros((n + 1, m + 1), dtype=np.int32)
    t[:, 0], t[0, :] = np.arange(n + 1), np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            t[i, j] = min(t[i - 1, j - 1] + (a[i - 1] != b[j - 1]), t[i - 1, j] + 1, t[i, j - 1] + 1)
    ops, i, j = [], n, m
    while i or j:
        if i and j and t[i, j] == t[i - 1, j - 1] + (a[i - 1] != b[j - 1]):
            ops.append("=" if a[i - 1] == b[j - 1] else "X")
            i, j = i - 1, j - 1
        elif j and t[i, j] == t[i, j - 1] + 1:
            ops.append("D")
            j -= 1
        else:
            ops.append("I")
            i -= 1
    return t[n, m], "".join(reversed(ops))


def _right_edit_distance_recursive(a, b):
    """Memoised recursion (a third formulation)."""
    import functools

    @functools.lru_cache(maxsize=None)
    def d(i, j):
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j - 1) + (a[i - 1] != b[j - 1]), d(i - 1, j) + 1, d(i, j - 1) + 1)

    ops, i, j = [], len(a), len(b)
    while i or j:
        if i and j and d(i, j) == d(i - 1, j - 1) + (a[i - 1] != b[j - 1]):
            ops.append("=" if a[i - 1] == b[j - 1] else "X")
            i, j = i - 1, j - 1
        elif i and d(i, j) == d(i - 1, j) + 1:
            ops.append("I")
            i -= 1
        else:
            ops.append("D")
            j -= 1
    return d(len(a), len(b)), "".join(reversed(ops))


def _breaks_with_ops(distance):
    """A wrong distance table with the (distance, operations) return the docstring asks for."""
    return lambda a, b: (distance(a, b), "")


def _breaks_ed_float_distance(a, b):
    d, ops = _right_edit_distance_loops(a, b)
    return float(d), ops


def _breaks_ed_insertions_as_deletions(a, b):
    d, ops = _right_edit_distance_loops(a, b)
    return d, ops.replace("I", "D")


def _with_no_operations(distance_fn):
    """A known wrong distance as a student's ``edit_distance``: (distance, operations) (the check compares the
    distance first and names the misconception from it)."""
    return lambda a, b: (distance_fn(a, b), "")


def edit_cases():
    """The hidden cases of ``check_edit_distance``: two edge cases, three longer random pairs, a real subread."""
    cases = edit_cases_from(seeded(1102), [Case("both empty", ("", "")), Case("one base each", ("A", "C"))], (30, 60))
    from course_lib.bio.pacbio import load_molecules

    mol = load_molecules()[0]
    cases.append(
        Case(
            f"real subread of ZMW {mol.zmw} vs its reference (first 80 bases)",
            (mol.passes()[1].seq[:80], mol.reference[:80]),
        )
    )
    return cases


EDIT_DISTANCE = declare("11_read_consensus", "edit_distance", check_edit_distance, equivalents=("soft_edit_distance",),
            misconceptions=WRONG_EDIT_DISTANCE, wrong_as_answer=_with_no_operations,
            promises=(
                Breaks("D[i, 0] = i, D[0, j] = j",
                       _breaks_with_ops(wrong_answer(WRONG_EDIT_DISTANCE, "first row/column initialised to 0")),
                       "first row/column"),
                Breaks("a mismatch costs 1", _breaks_with_ops(wrong_answer(WRONG_EDIT_DISTANCE, "a mismatch costs 2")),
                       "a mismatch costs 2"),
                Breaks("distance as a Python int", _breaks_ed_float_distance, "must be an integer"),
                Breaks("operations: I uses a base of a only", _breaks_ed_insertions_as_deletions, "operation"),
            ),
            right=(Right(_right_edit_distance_loops), Right(_right_edit_distance_numpy_int32),
                   Right(_right_edit_distance_recursive)))


# ---------------------------------------------------------------- pileup
def _pileup_variant(reads, alignments, length, *, gaps=True, advance_on_del=False, ins_next=False, order="-ACGT"):
    counts = np.zeros((length, 5), dtype=np.int64)
    col = {c: k for k, c in enumerate(order)}
    for read, ops in zip(reads, alignments):
        i = j = 0
        for op in ops:
            if op in "=X":
                counts[j, col[read[i]]] += 1
                i, j = i + 1, j + 1
            elif op == "I":
                if ins_next and j < length:
                    counts[j, col[read[i]]] += 1
                i += 1
            else:
                if gaps:
                    counts[j, col["-"]] += 1
                j += 1
                if advance_on_del:
                    i += 1
    return counts


WRONG_PILEUP = [
    Wrong("deletions not counted as gaps", functools.partial(_pileup_variant, gaps=False),
          "a 'D' means the read has NO base at this backbone column: count it in column 0 (the gap) of that row."),
    Wrong("read position advanced on a deletion", functools.partial(_pileup_variant, advance_on_del=True),
          "'D' uses a backbone column but no base of the read: move the column index, not the read index."),
    Wrong("inserted bases counted in the next column", functools.partial(_pileup_variant, ins_next=True),
          "an 'I' base sits between two backbone columns and is not counted anywhere; only '=', 'X' and 'D' "
          "fill a column."),
    Wrong("columns in the order ACGT-", functools.partial(_pileup_variant, order="ACGT-"),
          "the columns follow VOCAB = '-ACGT': the gap is column 0, then A, C, G, T."),
]


def _right_pileup_dict(reads, alignments, length):
    if len(reads) != len(alignments):
        raise ValueError("lengths differ")
    col = {"-": 0, "A": 1, "C": 2, "G": 3, "T": 4}
    counts = np.zeros((length, 5), dtype=np.int32)
    for read, ops in zip(reads, alignments):
        if sum(o != "I" for o in ops) != length or sum(o != "D" for o in ops) != len(read):
            raise ValueError("alignment does not fit")
        it = iter(read)
        j = 0
        for o in ops:
            if o == "D":
                counts[j, 0] += 1
                j += 1
            elif o == "I":
                next(it)
            else:
                counts[j, col[next(it)]] += 1
                j += 1
    return counts


def _right_pileup_onehot(reads, alignments, length):
    """Builds each read's gapped row, then sums one-hot rows."""
    if len(reads) != len(alignments):
        raise ValueError("one alignment per read")
    rows = []
    for read, ops in zip(reads, alignments):
        if sum(o in "=XD" for o in ops) != length or sum(o in "=XI" for o in ops) != len(read):
            raise ValueError("alignment does not fit")
        gapped, i = [], 0
        for o in ops:
            if o == "D":
                gapped.append("-")
            else:
                if o != "I":
                    gapped.append(read[i])
                i += 1
        rows.append(gapped)
    idx = np.array([["-ACGT".index(c) for c in r] for r in rows]).reshape(len(rows), length)
    return np.eye(5, dtype=np.int64)[idx].sum(0)


def _right_pileup_add_at(reads, alignments, length):
    """Vectorised per read: the backbone column and the symbol of every operation, then np.add.at."""
    if len(reads) != len(alignments):
        raise ValueError("one alignment per read")
    counts = np.zeros((length, 5), dtype=np.int64)
    for read, ops in zip(reads, alignments):
        ops = np.array(list(ops), dtype="<U1")
        on_backbone, uses_read = np.isin(ops, list("=XD")), np.isin(ops, list("=XI"))
        if on_backbone.sum() != length or uses_read.sum() != len(read):
            raise ValueError("alignment does not fit")
        column = np.cumsum(on_backbone) - 1                       # backbone column of each operation
        read_pos = np.cumsum(uses_read) - 1                       # read position of each operation
        symbol = np.zeros(len(ops), dtype=np.int64)             # 0 is the gap column
        bases = np.array(["-ACGT".index(c) for c in read], dtype=np.int64)
        symbol[uses_read] = bases[read_pos[uses_read]]
        np.add.at(counts, (column[on_backbone], symbol[on_backbone]), 1)
    return counts


def _breaks_pileup_float(reads, alignments, length):
    return _right_pileup_dict(reads, alignments, length).astype(float)


def _breaks_pileup_zip_drops_a_read(reads, alignments, length):
    n = min(len(reads), len(alignments))
    return _right_pileup_dict(list(reads)[:n], list(alignments)[:n], length)


def _breaks_pileup_unchecked(reads, alignments, length):
    counts = np.zeros((length, 5), dtype=np.int64)
    for read, ops in zip(reads, alignments):
        it, j = iter(read), 0
        for o in ops:
            if j >= length:
                break
            if o == "I":
                next(it, None)
                continue
            base = "-" if o == "D" else next(it, None)
            if base is None:
                break
            counts[j, "-ACGT".index(base)] += 1
            j += 1
    return counts


def pileup_cases():
    """The hidden cases of ``check_pileup``."""
    return pileup_cases_from(seeded(1112), [(40, 8), (25, 1), (60, 12)],
                             Case("a deletion before an insertion", (["CGAT"], ["=D==I"], 4)))


PILEUP = declare("11_read_consensus", "pileup", check_pileup,
            misconceptions=WRONG_PILEUP,
            promises=(
                Breaks("columns -ACGT, gap first", wrong_answer(WRONG_PILEUP, "columns in the order ACGT-"),
                       "columns in the order ACGT-"),
                Breaks("inserted bases are not counted",
                       wrong_answer(WRONG_PILEUP, "inserted bases counted in the next column"), "inserted bases"),
                Breaks("an int64 array", _breaks_pileup_float, "integer numpy array"),
                Breaks("ValueError when an alignment does not fit", _breaks_pileup_unchecked,
                       "every column of the backbone"),
                Breaks("ValueError when reads and alignments differ in number", _breaks_pileup_zip_drops_a_read,
                       "numbers of reads and alignments differ"),
            ),
            right=(Right(_right_pileup_dict), Right(_right_pileup_onehot), Right(_right_pileup_add_at)))


# ---------------------------------------------------------------- positionwise_cross_entropy
def _ce_variant(logits, target, *, reduce="sum", score_pad=True, probs=False, raw=False):
    B, N, _ = logits.shape
    padded = torch.zeros(B, N, dtype=torch.long)
    padded[:, : target.shape[1]] = target
    logp = logits if raw else torch.log_softmax(logits, -1)
    if probs:
        logp = logp.exp()
    per = -logp.gather(2, padded.unsqueeze(-1)).squeeze(-1)           # (B, N)
    if not score_pad:
        per = per * (torch.arange(N)[None, :] < target.shape[1])
    return per.sum(-1) if reduce == "sum" else per.mean(-1)


WRONG_CROSS_ENTROPY = [
    Wrong("mean instead of sum", functools.partial(_ce_variant, reduce="mean"),
          "the loss is the SUM over the N positions (comparable with the alignment loss, which sums costs), "
          "not the mean."),
    Wrong("padding positions not scored", functools.partial(_ce_variant, score_pad=False),
          "the label is padded with gaps to N positions and every position is scored: the model must learn to "
          "predict the gaps too."),
    Wrong("probabilities instead of log-probabilities", functools.partial(_ce_variant, probs=True),
          "cross-entropy is -log p(label): use log_softmax, not softmax."),
    Wrong("no softmax", functools.partial(_ce_variant, raw=True),
          "logits are not log-probabilities: normalise them over the classes (log-softmax) first."),
]


def _right_ce_gather(logits, target):
    B, N, _ = logits.shape
    if target.shape[1] > N:
        raise ValueError("label too long")
    padded = torch.cat([target, torch.zeros(B, N - target.shape[1], dtype=target.dtype)], 1)
    return -torch.log_softmax(logits, -1).gather(2, padded[..., None].long())[..., 0].sum(1)


def _right_ce_onehot(logits, target):
    B, N, V = logits.shape
    if target.shape[1] > N:
        raise ValueError("label too long")
    padded = torch.zeros(B, N, dtype=torch.long)
    padded[:, : target.shape[1]] = target
    logp = logits - torch.logsumexp(logits, -1, keepdim=True)
    return -(torch.nn.functional.one_hot(padded, V).to(logits.dtype) * logp).sum((1, 2))


def _right_ce_float32(logits, target):
    """Computed and returned in float32."""
    return _right_ce_gather(logits.float(), target)


def _breaks_ce_truncates_a_long_label(logits, target):
    return _right_ce_gather(logits, target[:, :logits.shape[1]])


def _breaks_ce_zeroes_the_target(logits, target):
    out = _right_ce_gather(logits, target)
    target.zero_()
    return out


def ce_cases():
    """The hidden cases of ``check_positionwise_cross_entropy``."""
    return ce_cases_from(seeded(1132), [(1, 9, 6), (4, 6, 2)])


POSITIONWISE_CROSS_ENTROPY = declare("11_read_consensus", "positionwise_cross_entropy", check_positionwise_cross_entropy,
            misconceptions=WRONG_CROSS_ENTROPY,
            promises=(
                Breaks("summed over positions", wrong_answer(WRONG_CROSS_ENTROPY, "mean instead of sum"),
                       "mean instead of sum"),
                Breaks("padding included", wrong_answer(WRONG_CROSS_ENTROPY, "padding positions not scored"),
                       "padding positions"),
                Breaks("ValueError when M > N", _breaks_ce_truncates_a_long_label, "longer than"),
                Breaks("inputs unchanged", _breaks_ce_zeroes_the_target, "input modified in place"),
            ),
            right=(Right(_right_ce_gather), Right(_right_ce_onehot), Right(_right_ce_float32)))


# ---------------------------------------------------------------- soft_alignment_loss
def _loss_variant(logits, target, gamma, del_cost=1.0, *, mode="min", swap=False, raw=False, keep_pad=False):
    logp = logits if raw else torch.log_softmax(logits, dim=-1)
    B, N, _ = logp.shape
    out = []
    for b in range(B):
        y = [int(t) for t in target[b] if keep_pad or int(t) != 0]
        M = len(y)
        ins = [-logp[b, j, 0] for j in range(N)]
        if swap:
            ins_c = lambda j: del_cost + 0 * logp[b, j, 0]  # noqa: E731
            del_c = lambda i: -logp[b, min(i, N - 1), 0]   # noqa: E731
        else:
            ins_c = lambda j: ins[j]  # noqa: E731
            del_c = lambda i: torch.as_tensor(del_cost, dtype=logp.dtype)  # noqa: E731
        V = [[None] * (N + 1) for _ in range(M + 1)]
        V[0][0] = torch.zeros((), dtype=logp.dtype)
        for j in range(1, N + 1):
            V[0][j] = V[0][j - 1] + ins_c(j - 1)
        for i in range(1, M + 1):
            V[i][0] = V[i - 1][0] + del_c(i - 1)
            for j in range(1, N + 1):
                u = torch.stack([V[i - 1][j - 1] - logp[b, j - 1, y[i - 1]], V[i][j - 1] + ins_c(j - 1),
                                 V[i - 1][j] + del_c(i - 1)])
                if mode == "max":
                    V[i][j] = gamma * torch.logsumexp(u / gamma, 0)
                elif mode == "naive":
                    V[i][j] = -gamma * torch.log(torch.exp(-u / gamma).sum())
                else:
                    V[i][j] = -gamma * torch.logsumexp(-u / gamma, 0)
        out.append(V[M][N])
    return torch.stack(out)


WRONG_SOFT_ALIGNMENT_LOSS = [
    Wrong("max instead of min", functools.partial(_loss_variant, mode="max"),
          "the loss looks for the CHEAPEST alignment: softmin(u) = -gamma * logsumexp(-u / gamma); you computed "
          "gamma * logsumexp(u / gamma), a soft MAX, which prefers the most expensive alignment."),
    Wrong("missing log-sum-exp stabilisation", functools.partial(_loss_variant, mode="naive"),
          "with a small gamma, exp(-u / gamma) underflows to 0 and log(0) = -inf, so the loss becomes inf; use "
          "torch.logsumexp (it subtracts the largest term before exponentiating)."),
    Wrong("gap costs swapped", functools.partial(_loss_variant, swap=True),
          "a PREDICTED position left unmatched (insertion) costs -log p_j(gap); a LABEL base left unmatched "
          "(deletion) costs del_cost. You used them the other way round."),
    Wrong("raw logits used as log-probabilities", functools.partial(_loss_variant, raw=True),
          "the costs are -log p with p = softmax(logits) over the classes: turn the logits into log-probabilities "
          "first (a stable log-softmax, not log of softmax)."),
    Wrong("padding counted as label", functools.partial(_loss_variant, keep_pad=True),
          "zeros in `target` are padding: remove them, so that row b's label is only its bases (ids 1-4)."),
]


def _right_soft_loss_loops(logits, target, gamma, del_cost=1.0):
    """Row by row, cell by cell (the obvious student answer)."""
    if gamma <= 0:
        raise ValueError("gamma must be > 0")
    if logits.shape[0] != target.shape[0]:
        raise ValueError("logits and target must have the same number of rows")
    logp = torch.log_softmax(logits, -1)
    out = []
    for b in range(logits.shape[0]):
        y = [int(t) for t in target[b] if int(t) != 0]
        N = logits.shape[1]
        prev = [torch.zeros((), dtype=logits.dtype)]
        for j in range(N):
            prev.append(prev[-1] - logp[b, j, 0])
        for i in range(1, len(y) + 1):
            cur = [prev[0] + del_cost]
            for j in range(1, N + 1):
                u = torch.stack([prev[j - 1] - logp[b, j - 1, y[i - 1]], cur[j - 1] - logp[b, j - 1, 0],
                                 prev[j] + del_cost])
                cur.append(-gamma * torch.logsumexp(-u / gamma, 0))
            prev = cur
        out.append(prev[N])
    return torch.stack(out)


def _right_soft_loss_manual_lse(logits, target, gamma, del_cost=1.0):
    """Own stabilised log-sum-exp (subtract the min cost), float32 computation cast back."""
    if not gamma > 0:
        raise ValueError("gamma")
    if logits.ndim != 3 or target.ndim != 2 or len(logits) != len(target) or logits.shape[2] != 5:
        raise ValueError(f"shapes {tuple(logits.shape)} and {tuple(target.shape)} do not fit")
    dtype = logits.dtype
    logp = torch.log_softmax(logits.double(), -1)
    res = []
    for b in range(logits.shape[0]):
        y = target[b][target[b] != 0].tolist()
        N = logits.shape[1]
        V = {(0, 0): torch.zeros((), dtype=torch.float64)}
        for j in range(1, N + 1):
            V[0, j] = V[0, j - 1] - logp[b, j - 1, 0]
        for i in range(1, len(y) + 1):
            V[i, 0] = V[i - 1, 0] + del_cost
            for j in range(1, N + 1):
                u = torch.stack([V[i - 1, j - 1] - logp[b, j - 1, y[i - 1]], V[i, j - 1] - logp[b, j - 1, 0],
                                 V[i - 1, j] + del_cost])
                m = u.min()
                V[i, j] = m - gamma * torch.log(torch.exp(-(u - m) / gamma).sum())
        res.append(V[len(y), N])
    return torch.stack(res).to(dtype)


def _right_soft_loss_float32(logits, target, gamma, del_cost=1.0):
    """The loops in float32, returned in float32."""
    return _right_soft_loss_loops(logits.float(), target, gamma, del_cost)


def _breaks_loss_gamma_unchecked(logits, target, gamma, del_cost=1.0):
    return _right_soft_loss_loops(logits, target, max(gamma, 1e-6), del_cost)


def _breaks_loss_float64(logits, target, gamma, del_cost=1.0):
    return _right_soft_loss_loops(logits.double(), target, gamma, del_cost)


def _breaks_loss_detached(logits, target, gamma, del_cost=1.0):
    return _right_soft_loss_loops(logits, target, gamma, del_cost).detach()


def _breaks_loss_rows_silently_dropped(logits, target, gamma, del_cost=1.0):
    return _right_soft_loss_loops(logits[:len(target)], target, gamma, del_cost)


def loss_cases(dtype=torch.float64):
    """The hidden cases of ``check_soft_alignment_loss``."""
    return loss_cases_from(seeded(1122), [(1, 8, 8, 0.5), (4, 7, 5, 0.05), (2, 3, 6, 0.005)], dtype)


SOFT_ALIGNMENT_LOSS = declare("11_read_consensus", "soft_alignment_loss", check_soft_alignment_loss,
            equivalents=("_soft_dp", "_loss_costs", "hard_alignment_loss",),
            misconceptions=WRONG_SOFT_ALIGNMENT_LOSS,
            promises=(
                Breaks("a soft MIN", wrong_answer(WRONG_SOFT_ALIGNMENT_LOSS, "max instead of min"),
                       "max instead of min"),
                Breaks("gaps in target are padding, removed first",
                       wrong_answer(WRONG_SOFT_ALIGNMENT_LOSS, "padding counted as label"), "padding counted as label"),
                Breaks("of the logits' dtype", _breaks_loss_float64, "float32 loss"),
                Breaks("differentiable in logits", _breaks_loss_detached, "gradients"),
                Breaks("ValueError when gamma <= 0", _breaks_loss_gamma_unchecked, "gamma <= 0"),
                Breaks("ValueError when the shapes do not fit", _breaks_loss_rows_silently_dropped,
                       "shapes do not fit"),
            ),
            right=(Right(_right_soft_loss_loops), Right(_right_soft_loss_manual_lse),
                   Right(_right_soft_loss_float32)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (EDIT_DISTANCE, PILEUP, POSITIONWISE_CROSS_ENTROPY, SOFT_ALIGNMENT_LOSS)
