"""The lesson 11 checks: every known wrong answer is named, correct answers pass, the reference is refused."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from course_lib import consensus as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import consensus as chk
from named import assert_named_alone, wrong_answer_params


# ---------------------------------------------------------------- independent correct answers
def edit_distance_loops(a, b):
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


def edit_distance_numpy_int32(a, b):
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


def edit_distance_recursive(a, b):
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


def pileup_dict(reads, alignments, length):
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


def pileup_onehot(reads, alignments, length):
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


def pileup_add_at(reads, alignments, length):
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


def soft_loss_loops(logits, target, gamma, del_cost=1.0):
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


def soft_loss_manual_lse(logits, target, gamma, del_cost=1.0):
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


def ce_gather(logits, target):
    B, N, _ = logits.shape
    if target.shape[1] > N:
        raise ValueError("label too long")
    padded = torch.cat([target, torch.zeros(B, N - target.shape[1], dtype=target.dtype)], 1)
    return -torch.log_softmax(logits, -1).gather(2, padded[..., None].long())[..., 0].sum(1)


def ce_onehot(logits, target):
    B, N, V = logits.shape
    if target.shape[1] > N:
        raise ValueError("label too long")
    padded = torch.zeros(B, N, dtype=torch.long)
    padded[:, : target.shape[1]] = target
    logp = logits - torch.logsumexp(logits, -1, keepdim=True)
    return -(torch.nn.functional.one_hot(padded, V).to(logits.dtype) * logp).sum((1, 2))


def ce_float32(logits, target):
    """Computed and returned in float32."""
    return ce_gather(logits.float(), target)


def soft_loss_float32(logits, target, gamma, del_cost=1.0):
    """The loops in float32, returned in float32."""
    return soft_loss_loops(logits.float(), target, gamma, del_cost)


CORRECT = [
    (chk.check_edit_distance, edit_distance_loops), (chk.check_edit_distance, edit_distance_numpy_int32),
    (chk.check_edit_distance, edit_distance_recursive),
    (chk.check_pileup, pileup_dict), (chk.check_pileup, pileup_onehot), (chk.check_pileup, pileup_add_at),
    (chk.check_soft_alignment_loss, soft_loss_loops), (chk.check_soft_alignment_loss, soft_loss_manual_lse),
    (chk.check_soft_alignment_loss, soft_loss_float32),
    (chk.check_positionwise_cross_entropy, ce_gather), (chk.check_positionwise_cross_entropy, ce_onehot),
    (chk.check_positionwise_cross_entropy, ce_float32),
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=[f.__name__ for _, f in CORRECT])
def test_correct_independent_answers_pass(check, fn, hidden):
    check(fn, hidden=hidden)


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = wrong_answer_params((chk.check_edit_distance, chk.WRONG_EDIT_DISTANCE),
                                   (chk.check_pileup, chk.WRONG_PILEUP),
                                   (chk.check_soft_alignment_loss, chk.WRONG_SOFT_ALIGNMENT_LOSS),
                                   (chk.check_positionwise_cross_entropy, chk.WRONG_CROSS_ENTROPY))


def _as_student(check, wrong):
    """A wrong answer written as a student would: for edit_distance, with some traceback."""
    if check is chk.check_edit_distance:
        return lambda a, b: (wrong.fn(a, b), "")
    if check is chk.check_soft_alignment_loss:
        def fn(logits, target, gamma, del_cost=1.0):
            if not gamma > 0 or len(logits) != len(target):
                raise ValueError("gamma or shapes")
            return wrong.fn(logits, target, gamma, del_cost)
        return fn
    if check is chk.check_pileup:
        def fn(reads, alignments, length):
            if len(reads) != len(alignments):
                raise ValueError("one alignment per read")
            for r, ops in zip(reads, alignments):
                if sum(o in "=XD" for o in ops) != length:
                    raise ValueError("bad")
            return wrong.fn(reads, alignments, length)
        return fn
    return wrong.fn


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, _as_student(check, wrong), wrong.name, hidden=hidden)


# ---------------------------------------------------------------- integrity and other failures
def test_reference_and_builtins_are_refused():
    with pytest.raises(IntegrityError):
        chk.check_edit_distance(ref.edit_distance)
    with pytest.raises(IntegrityError):
        chk.check_pileup(lambda r, a, n: ref.pileup(r, a, n))
    with pytest.raises(IntegrityError):
        chk.check_soft_alignment_loss(lambda x, t, g, del_cost=1.0: ref.soft_alignment_loss(x, t, g, del_cost))


def test_pileup_through_read_rows_is_refused():
    """read_rows, the notebook's building block, does pileup's parsing: counting its columns is the exercise."""
    def via_rows(reads, alignments, length):
        rows = ref.read_rows(reads, alignments, length)
        return np.stack([np.bincount(rows[:, j], minlength=5) for j in range(length)]).astype(np.int64) \
            if length else np.zeros((0, 5), np.int64)

    reads, alignments = ["AC", "AGC"], ["=D=", "=X="]
    np.testing.assert_array_equal(via_rows(reads, alignments, 3), ref.pileup(reads, alignments, 3))
    with pytest.raises(IntegrityError, match="read_rows"):
        chk.check_pileup(via_rows)
    with pytest.raises(IntegrityError, match="cross_entropy"):
        chk.check_positionwise_cross_entropy(
            lambda x, t: torch.nn.functional.cross_entropy(
                x.transpose(1, 2), torch.nn.functional.pad(t, (0, x.shape[1] - t.shape[1])), reduction="none").sum(1))

    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (chk.check_edit_distance, chk.check_pileup, chk.check_soft_alignment_loss,
                  chk.check_positionwise_cross_entropy):
        with pytest.raises(NotImplementedYet):
            check(stub)


def test_invalid_alignment_is_explained():
    with pytest.raises(AssertionError, match="'=' is for equal bases"):
        chk.check_edit_distance(lambda a, b: (edit_distance_loops(a, b)[0],
                                              edit_distance_loops(a, b)[1].replace("X", "=")))
    with pytest.raises(AssertionError, match="did the traceback stop|Did the traceback stop"):
        chk.check_edit_distance(lambda a, b: (edit_distance_loops(a, b)[0], edit_distance_loops(a, b)[1][:-1]))


def test_detached_loss_is_caught():
    with pytest.raises(AssertionError, match="gradients can flow"):
        chk.check_soft_alignment_loss(lambda x, t, g, del_cost=1.0: soft_loss_loops(x.detach(), t, g, del_cost))
