"""Read consensus: edit distance, pileups, and the alignment loss of DeepConsensus.

Covers
    * ``edit_distance(a, b)``: Levenshtein distance (unit costs) with a traceback, in numpy.
      The alignment is a string of operations, SAM-like, with ``a`` the query (a read) and
      ``b`` the reference (a backbone): "=" match, "X" mismatch, "I" a base of ``a`` that
      ``b`` lacks, "D" a base of ``b`` that ``a`` lacks.
    * ``pileup(reads, alignments, length)``: per backbone column, how many reads show a gap,
      A, C, G or T there (bases a read inserts between columns are dropped);
      ``majority_consensus(counts)``: the most frequent symbol per column, gaps removed.
    * ``soft_alignment_loss(logits, target, gamma)``: the alignment loss of DeepConsensus
      (Baid et al. 2023, Nature Biotechnology 41:232-238, "DeepConsensus improves the
      accuracy of sequences with a gap-aware sequence transformer", Methods, "Alignment
      loss"): a dynamic program over match / insertion / deletion whose min is replaced by a
      soft-min with temperature ``gamma``. Costs: a predicted position matched to a label
      base costs that base's cross-entropy -log p_j(y_i); a predicted position left
      unmatched (an insertion) costs -log p_j(gap); a label base left unmatched (a
      deletion) costs ``del_cost``. As gamma -> 0 it becomes the hard minimum-cost
      alignment; with 0/1 costs (``soft_edit_distance``) that is the edit distance.
    * ``positionwise_cross_entropy(logits, target)``: the plain alternative, the label padded
      with gaps and compared position by position.
    * ``poa_consensus(reads)``: partial-order alignment consensus, computed by ``pyspoa``
      (Vaser et al. 2017, SPOA), the strong classical baseline (not re-implemented here).
    * ``ConsensusTransformer``: a small encoder (lesson 05 blocks) that reads a window of
      pileup columns and predicts one symbol (gap or base) per column; ``windows`` and
      ``label_windows`` cut a molecule into training examples.
    * ``read_rows`` / ``row_windows``: the same windows with each read's own symbol per column
      (as DeepConsensus reads subreads aligned to its draft); ``context_windows`` adds each read's
      strand and the homopolymer run lengths (the backbone's, each read's); ``molecule_windows``
      builds one molecule's examples end to end; ``stitch`` puts window predictions back on the backbone.
    * ``VoteResidualTransformer``: majority vote plus a learned correction (a ``ConsensusTransformer``
      whose output starts at zero), the model shipped for section 6.
    * ``homopolymer_median_consensus``: a rule with no training (each homopolymer run of the POA backbone
      set to the reads' median run length), the strongest simple baseline of section 6;
      ``spanning_read_sets``: test sets of subreads cut to the reference span they share.
    * Evaluation: ``trimmed_error_rate``, ``phred_qv`` (QV = -10 log10 error rate),
      ``pass_subsets`` (the test subsets of 3 passes), ``sign_test`` (exact, paired), and
      ``load_pretrained`` (the models shipped in ``course_lib/data``: leave-one-molecule-out on the
      ``VALIDATION`` molecules, and one final model tested on the ``UNTOUCHED`` molecules).

Does NOT cover
    * banded or affine-gap alignment, local alignment, edlib-speed bit-parallel algorithms;
    * DeepConsensus's real input (base qualities, pulse widths, inter-pulse durations, a CCS
      draft with spaced insertion columns; of its inputs only the strand is here) and its banded loss (``width``);
    * phasing, polishing with a trained HMM (as Arrow/pbccs do), or calling per-base quality values.

Token convention everywhere: ``VOCAB = "-ACGT"``, index 0 is the gap.
"""
from __future__ import annotations

import collections
import math
import pathlib
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.blocks import Encoder
from course_lib.positional import SinusoidalPositionalEncoding
from course_lib.stats import paired_sign_p

from course_lib import solutions

_solution = solutions.of("course_lib.consensus")  # the exercises' bodies: course_lib/solutions/consensus.py

__all__ = [
    "VOCAB", "GAP", "encode", "decode",
    "edit_distance", "alignment_counts", "pileup", "majority_consensus",
    "soft_alignment_loss", "soft_edit_distance", "hard_alignment_loss", "positionwise_cross_entropy",
    "poa_consensus", "error_rate", "trimmed_error_rate", "column_labels", "windows", "label_windows", "ConsensusTransformer",
    "VoteResidualTransformer", "homopolymer_median_consensus", "spanning_read_sets", "read_rows", "row_windows", "context_windows", "molecule_windows", "pass_subsets", "stitch", "phred_qv", "sign_test", "PRETRAINED_FILE", "FINAL_FILE", "UNTOUCHED", "VALIDATION", "load_pretrained",
]

VOCAB = "-ACGT"
GAP = 0
_INDEX = {c: i for i, c in enumerate(VOCAB)}
_COMPLEMENT = str.maketrans("ACGTN", "TGCAN")


def encode(seq: str) -> np.ndarray:
    """'AC-T' -> array([1, 2, 0, 4]) (int64); any other letter raises ValueError."""
    try:
        return np.array([_INDEX[c] for c in seq], dtype=np.int64)
    except KeyError as err:
        raise ValueError(f"unknown symbol {err.args[0]!r}: only {VOCAB!r} are allowed") from None


def decode(ids, drop_gaps: bool = True) -> str:
    """[1, 2, 0, 4] -> 'ACT' (or 'AC-T' with drop_gaps=False)."""
    s = "".join(VOCAB[int(i)] for i in ids)
    return s.replace("-", "") if drop_gaps else s


# ---------------------------------------------------------------- edit distance
def edit_distance(a: str, b: str) -> tuple[int, str]:
    """Levenshtein distance between ``a`` and ``b`` and one optimal alignment.

    D[i, j] = distance between a[:i] and b[:j]: D[i, 0] = i, D[0, j] = j,
    D[i, j] = min(D[i-1, j-1] + (a[i-1] != b[j-1]), D[i-1, j] + 1, D[i, j-1] + 1).
    The traceback from D[len(a), len(b)] gives the operations, in order from the start:
    "=" (match) and "X" (mismatch) use one base of each, "I" one base of ``a`` only,
    "D" one base of ``b`` only. Any optimal alignment is correct; this one prefers the
    diagonal, then "I", then "D".

    Returns:
        (distance as a Python int, operations as a str with len(a) + number of "D" symbols).

    >>> edit_distance("ACGT", "AGT")
    (1, '=I==')
    >>> edit_distance("", "AC")
    (2, 'DD')
    """
    return _solution.edit_distance(a, b)


def alignment_counts(ops: str) -> dict:
    """Number of each operation: {'=': .., 'X': .., 'I': .., 'D': ..}."""
    return {op: ops.count(op) for op in "=XID"}


# ---------------------------------------------------------------- pileup and majority vote
def pileup(reads: Sequence[str], alignments: Sequence[str], length: int) -> np.ndarray:
    """Count, per backbone column, the symbols that the aligned reads put there.

    ``alignments[r]`` aligns ``reads[r]`` (query) to a backbone of ``length`` bases
    (reference), with the operations of :func:`edit_distance`. At each backbone column a
    read shows its base ("=" or "X") or a gap ("D"); bases it inserts ("I") sit between
    columns and are not counted.

    Returns:
        counts, int64 array (length, 5); columns follow VOCAB = "-ACGT" (gap first).

    Raises:
        ValueError when an alignment does not use every base of its read or every column of
        the backbone, or when the numbers of reads and alignments differ.

    >>> pileup(["AC", "AGC"], ["=D=", "=X="], 3)[:, :4]   # backbone 'ATC'
    array([[0, 2, 0, 0],
           [1, 0, 0, 1],
           [0, 0, 2, 0]])
    """
    return _solution.pileup(reads, alignments, length)


def majority_consensus(counts: np.ndarray) -> str:
    """The most frequent symbol of each column (ties: the first in "-ACGT"), gaps removed.

    >>> majority_consensus(np.array([[0, 2, 0, 0, 0], [2, 0, 0, 1, 0], [0, 0, 2, 0, 0]]))
    'AC'
    """
    return decode(np.asarray(counts).argmax(axis=-1))


# ---------------------------------------------------------------- the alignment loss
_BIG = 1e9  # stands for +inf outside the table: finite, so that no NaN reaches the gradient


def _soft_dp(sub: torch.Tensor, ins: torch.Tensor, dele: torch.Tensor, lengths: torch.Tensor,
             gamma: float | None) -> torch.Tensor:
    """Soft-min alignment DP over anti-diagonals d = i + j (each step vectorised over i).

    sub (B, M, N): cost of matching label i with prediction j; ins (B, N): cost of leaving
    prediction j unmatched; dele (B, M): cost of leaving label i unmatched; lengths (B,):
    the label length of each row (<= M). gamma None = hard min. Returns V[len_b, N], (B,).
    """
    return _solution._soft_dp(sub, ins, dele, lengths, gamma)


def _loss_costs(logits: torch.Tensor, target: torch.Tensor, del_cost: float):
    return _solution._loss_costs(logits, target, del_cost)


def soft_alignment_loss(logits: torch.Tensor, target: torch.Tensor, gamma: float,
                        del_cost: float = 1.0) -> torch.Tensor:
    """DeepConsensus's alignment loss with a soft-min of temperature ``gamma`` (one value per row).

    p = softmax(logits) over VOCAB = "-ACGT" (gap first). Row b of ``target`` holds the label
    bases (ids 1-4); gaps (0) are padding and are removed first, leaving y_1..y_M. With
    V[0, 0] = 0, V[i, 0] = i * del_cost, V[0, j] = sum_{k<=j} -log p_k(gap), and

        V[i, j] = softmin_gamma( V[i-1, j-1] - log p_j(y_i),   # prediction j is base y_i
                                 V[i, j-1]  - log p_j(gap),    # prediction j is extra: a gap
                                 V[i-1, j]  + del_cost )       # label base y_i is missed
        softmin_gamma(u) = -gamma * log(sum_k exp(-u_k / gamma))   (computed with logsumexp)

    the loss is V[M, N]. As gamma -> 0 it is the cost of the best alignment; it is
    differentiable in ``logits`` for every gamma > 0.

    Args:
        logits: (B, N, 5) float; target: (B, M) int, bases 1-4 and padding 0 (M may differ from N);
        gamma: temperature, > 0; del_cost: cost of a label base that no prediction covers.

    Returns:
        (B,) tensor of the logits' dtype and device.

    Raises:
        ValueError when gamma <= 0 or the shapes do not fit.

    >>> logits = torch.log(torch.tensor([[[0.1, 0.6, 0.1, 0.1, 0.1]]]))   # one position, p(A) = 0.6
    >>> soft_alignment_loss(logits, torch.tensor([[1]]), gamma=1e-3)      # min(-log 0.6, -log 0.1 + 1)
    tensor([0.5108])
    """
    return _solution.soft_alignment_loss(logits, target, gamma, del_cost)


def hard_alignment_loss(logits: torch.Tensor, target: torch.Tensor, del_cost: float = 1.0) -> torch.Tensor:
    """The gamma -> 0 limit of :func:`soft_alignment_loss`: a hard min over alignments, (B,)."""
    return _solution.hard_alignment_loss(logits, target, del_cost)


def soft_edit_distance(a: str, b: str, gamma: float) -> float:
    """The same soft-min DP with unit costs: tends to ``edit_distance(a, b)[0]`` as gamma -> 0.

    >>> round(soft_edit_distance("ACGT", "AGT", 0.01), 3)
    1.0
    """
    return _solution.soft_edit_distance(a, b, gamma)


def positionwise_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each row's label padded with gaps to N, position by position, summed.

    The label of row b is ``target[b]`` (ids 0-4); it is padded at the end with gaps (0) to
    the N positions of ``logits`` and the loss is sum_j -log softmax(logits[b, j])[label_j].
    Every position counts, padding included (the model must predict the gaps).

    Args:
        logits: (B, N, 5) float; target: (B, M) int with M <= N.
        The inputs are not changed.

    Returns:
        (B,) float tensor.

    Raises:
        ValueError when M > N.

    >>> logits = torch.log(torch.tensor([[[0.1, 0.6, 0.1, 0.1, 0.1], [0.7, 0.1, 0.1, 0.05, 0.05]]]))
    >>> positionwise_cross_entropy(logits, torch.tensor([[1]]))   # -log 0.6 - log 0.7
    tensor([0.8675])
    """
    return _solution.positionwise_cross_entropy(logits, target)


# ---------------------------------------------------------------- baselines and evaluation
def poa_consensus(reads: Sequence[str]) -> str:
    """Partial-order alignment consensus of ``reads`` by pyspoa (global alignment, SPOA's defaults)."""
    import spoa

    consensus, _ = spoa.poa(list(reads), genmsa=False)
    return consensus


def error_rate(consensus: str, truth: str, distance=None) -> float:
    """Edit distance / len(truth); ``distance`` is a function like :func:`edit_distance`."""
    distance = distance or edit_distance
    return distance(consensus, truth)[0] / len(truth)


def trimmed_error_rate(consensus: str, truth: str) -> float:
    """Edit errors per truth base, not counting bases that stick out beyond either end of the truth.

    The leading and trailing runs of "I" in the alignment consensus -> truth (a pass or a
    consensus that runs past the reference window by a few bases of adapter) are dropped.

    >>> trimmed_error_rate("GGACGTA", "ACGT")    # 'GG' and 'A' hang over the ends
    0.0
    """
    ops = edit_distance(consensus, truth)[1].strip("I")
    return sum(op != "=" for op in ops) / len(truth)


def column_labels(backbone_to_truth: str, truth: str) -> list[str]:
    """Truth bases that belong to each backbone column, from the alignment backbone -> truth.

    ``backbone_to_truth`` aligns the backbone (query) to the truth (reference). A column
    matched to a truth base gets it; a backbone base absent from the truth ("I") gets "";
    truth bases that no column covers ("D") join the previous column (the first column
    when they come before it).

    >>> column_labels("=I=D", "ACG")     # backbone 'AxC' -> truth 'ACG'
    ['A', '', 'CG']
    """
    labels: list[str] = []
    lead = ""  # truth bases before the first column
    j = 0
    for op in backbone_to_truth:
        if op in "=X":
            labels.append(truth[j])
            j += 1
        elif op == "I":
            labels.append("")
        else:  # "D": a truth base between columns
            if labels:
                labels[-1] += truth[j]
            else:
                lead += truth[j]
            j += 1
    if labels:
        labels[0] = lead + labels[0]
    return labels


def windows(counts: np.ndarray, backbone: str, width: int, stride: int) -> tuple[np.ndarray, list[int]]:
    """Model inputs: windows of ``width`` columns every ``stride`` (the last one ends at the end).

    Each column's features: the pileup fractions (5) and the backbone base one-hot (5).

    Returns:
        (features float32 (n_windows, width, 10), start column of each window).
    """
    L = len(backbone)
    if L < width:
        raise ValueError(f"the backbone ({L} columns) is shorter than one window ({width})")
    frac = counts / np.maximum(counts.sum(-1, keepdims=True), 1)           # (L, 5)
    onehot = np.eye(len(VOCAB))[encode(backbone)]                          # (L, 5)
    feats = np.concatenate([frac, onehot], axis=-1).astype(np.float32)    # (L, 10)
    starts = list(range(0, L - width + 1, stride))
    if starts[-1] != L - width:
        starts.append(L - width)
    return np.stack([feats[s:s + width] for s in starts]), starts


def label_windows(labels: list[str], starts: list[int], width: int, max_len: int) -> np.ndarray:
    """The truth bases of each window's columns, left-packed and padded with gaps: (n, max_len) int64.

    Labels longer than ``max_len`` are cut (rare: a window whose backbone misses many bases).
    """
    out = np.zeros((len(starts), max_len), dtype=np.int64)
    for k, s in enumerate(starts):
        ids = encode("".join(labels[s:s + width]))[:max_len]
        out[k, :len(ids)] = ids
    return out


class ConsensusTransformer(nn.Module):
    """Pileup window -> one symbol (gap, A, C, G, T) per column.

    features (B, W, 10) -> Linear -> + sinusoidal positions -> pre-norm encoder stack
    (``course_lib.blocks.Encoder``) -> Linear -> logits (B, W, 5).

    The encoder's modules and parameters are lesson 05's ``Encoder`` (so the shipped weights
    load into it), but its forward pass is written out in :meth:`_encode` with torch operations
    (matmul, softmax, dropout), in the same order as the course's references of lessons 01, 03
    and 05 compute it: it calls none of those graded exercises (withheld from the students'
    bundle until released), and its numbers do not move when those modules change their own
    arithmetic (tests/test_consensus.py checks it bit for bit against the references).
    """

    def __init__(self, d_model: int = 64, num_heads: int = 4, num_layers: int = 2, d_ff: int = 128,
                 dropout: float = 0.1, max_len: int = 256, in_features: int = 2 * len(VOCAB)):
        super().__init__()
        self.embed = nn.Linear(in_features, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model, max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first=True)
        self.head = nn.Linear(d_model, len(VOCAB))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        h = self.positions(self.embed(features))   # (B, W, d_model)
        return self.head(self._encode(h))           # (B, W, 5)

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        """``self.encoder`` (pre-norm layers, then its final norm) applied to x (B, W, d_model), no mask:
        per layer x = x + dropout1(SelfAttention(norm1(x))), then x = x + dropout2(FFN(norm2(x)))."""
        for layer in self.encoder.layers:
            if not layer.norm_first:
                raise ValueError("ConsensusTransformer's encoder is pre-norm (norm_first=True)")
            x = x + layer.dropout1(self._self_attention(layer.self_attn, layer.norm1(x)))
            x = x + layer.dropout2(layer.ff(layer.norm2(x)))
        return x if self.encoder.norm is None else self.encoder.norm(x)

    @staticmethod
    def _self_attention(attn: nn.Module, h: torch.Tensor) -> torch.Tensor:
        """Multi-head self-attention of h (B, W, D) with the projections of ``attn`` (a course MultiHeadAttention)."""
        B, W, D = h.shape
        H = attn.num_heads
        q, k, v = (proj(h).reshape(B, W, H, D // H).swapaxes(1, 2) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D // H), dim=-1)    # (B, H, W, W)
        if attn.training and attn.dropout > 0.0:
            weights = F.dropout(weights, p=attn.dropout, training=True)
        return attn.out_proj((weights @ v).swapaxes(1, 2).reshape(B, W, D))            # (B, W, D)


class VoteResidualTransformer(nn.Module):
    """A :class:`ConsensusTransformer` that starts from majority vote and learns corrections to it.

    logits = vote_scale * log(column fractions + eps) + correction(features), where ``correction``
    is a ``ConsensusTransformer`` whose output layer starts at zero: before training, the argmax of
    every column is the vote's symbol (ties: the first in "-ACGT", as :func:`majority_consensus`),
    so training can only move it away from the vote where the loss says so. The column fractions
    are read from the features at ``frac_at`` (5 values; :func:`row_windows` and
    :func:`context_windows` put them right after the ``frac_at // 5`` read slots, and the backbone
    base one-hot right after them).

    With ``base_blind=True`` the correction does not see which bases the column holds, only how the
    reads relate to the backbone: per read slot, whether the read shows a gap, the backbone's base
    or another base; the gap fraction and the fraction that shows the backbone's base; then the
    features after the backbone base (strands, run lengths: :func:`context_windows`). It then cannot
    learn the training molecules' sequence by heart, only rules that hold on any sequence, and its
    ``in_features`` is ``3 * (frac_at // 5) + 2 + (number of features after the backbone base)``.

    >>> model = VoteResidualTransformer(frac_at=25, in_features=41, d_model=16, num_heads=2, d_ff=32)
    >>> x = torch.zeros(1, 4, 41); x[0, :, 25 + 2] = 1.0          # every read shows C
    >>> model.eval()(x).argmax(-1).tolist()
    [[2, 2, 2, 2]]
    """

    def __init__(self, frac_at: int, eps: float = 0.05, vote_scale: float = 2.0, base_blind: bool = False,
                 **transformer):
        super().__init__()
        self.frac_at, self.eps, self.base_blind = int(frac_at), float(eps), bool(base_blind)
        self.net = ConsensusTransformer(**transformer)
        nn.init.zeros_(self.net.head.weight)
        nn.init.zeros_(self.net.head.bias)
        self.vote_scale = nn.Parameter(torch.tensor(float(vote_scale)))

    def blind(self, features: torch.Tensor) -> torch.Tensor:
        """The features without base identities (see the class docstring): (B, W, F) -> (B, W, F - 2 * frac_at // 5 - 8)."""
        n_vocab = len(VOCAB)
        reads = features[..., :self.frac_at].unflatten(-1, (self.frac_at // n_vocab, n_vocab))   # (B, W, R, 5)
        frac = features[..., self.frac_at:self.frac_at + n_vocab]                                # (B, W, 5)
        base = features[..., self.frac_at + n_vocab:self.frac_at + 2 * n_vocab]                  # (B, W, 5)
        gap = reads[..., GAP]                                                                     # (B, W, R)
        same = (reads * base.unsqueeze(-2)).sum(-1)                                               # (B, W, R)
        other = reads.sum(-1) - gap - same
        return torch.cat([gap, same, other, frac[..., GAP:GAP + 1], (frac * base).sum(-1, keepdim=True),
                          features[..., self.frac_at + 2 * n_vocab:]], dim=-1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        frac = features[..., self.frac_at:self.frac_at + len(VOCAB)]                 # (B, W, 5)
        seen = self.blind(features) if self.base_blind else features
        return self.vote_scale * torch.log(frac + self.eps) + self.net(seen)         # (B, W, 5)


# ---------------------------------------------------------------- evaluation on molecules left out of training and shipped weights
def read_rows(reads: Sequence[str], alignments: Sequence[str], length: int) -> np.ndarray:
    """Each read's symbol at each backbone column, as the rows of a multiple alignment: (n_reads, length) int64.

    Row r holds read r's base id ("=" or "X") or GAP ("D") at each of the ``length`` backbone
    columns (bases the read inserts between columns are dropped, as in :func:`pileup`), so
    ``pileup`` is the per-column count of these ids. Unlike the counts, the rows keep which read
    shows what: a read with one base fewer in a homopolymer shows its gap in one column, and
    another read may show its gap in a different column of the same run.

    >>> read_rows(["AC", "AGC"], ["=D=", "=X="], 3)      # backbone 'ATC'
    array([[1, 0, 2],
           [1, 3, 2]])
    """
    # pileup is this lesson's exercise (withheld from the students' bundle until its solution is released) and
    # read_rows a building block the notebook uses, so it walks the alignment its own way (issue 65: no
    # solution's text in a shipped building block): each op takes the next base of the read or not, and fills
    # the next backbone column or not
    if len(reads) != len(alignments):
        raise ValueError(f"got {len(reads)} reads but {len(alignments)} alignments")
    rows = np.zeros((len(reads), length), dtype=np.int64)  # GAP = 0 where the read shows no base
    for r, ops in enumerate(alignments):
        read = reads[r]
        uses = collections.Counter(ops)
        bases_used, columns = uses["="] + uses["X"] + uses["I"], uses["="] + uses["X"] + uses["D"]
        if bases_used != len(read) or columns != length or len(ops) != sum(uses[o] for o in "=XID"):
            raise ValueError(f"alignment {r} uses {bases_used} bases of its read ({len(read)} long) and "
                             f"{columns} backbone columns (expected {length})")
        bases, shown = iter(read), []
        for op in ops:
            base = next(bases) if op in "=XI" else None  # "D": the read has no base for this column
            if op != "I":  # "I": a base between columns, in no row
                shown.append(GAP if base is None else _INDEX[base])
        rows[r] = shown
    return rows


def row_windows(rows: np.ndarray, backbone: str, width: int, stride: int, max_reads: int = 5):
    """Model inputs that keep the reads apart: per column, each read's symbol one-hot (``max_reads``
    slots of 5, zeros for absent reads), then the pileup fractions (5) and the backbone base one-hot (5).

    Returns:
        (features float32 (n_windows, width, 5 * max_reads + 10), start column of each window),
        the windows placed as in :func:`windows`.

    Raises:
        ValueError when there are more reads than ``max_reads``.
    """
    n, L = rows.shape
    if n > max_reads:
        raise ValueError(f"{n} reads, more than the {max_reads} read slots of the model")
    onehot = np.zeros((L, max_reads, len(VOCAB)), dtype=np.float32)
    onehot[:, :n] = np.eye(len(VOCAB), dtype=np.float32)[rows.T]             # (L, n, 5)
    counts = onehot.sum(1)
    base, starts = windows(counts, backbone, width, stride)                  # (n_windows, width, 10)
    per_read = onehot.reshape(L, -1)
    return np.concatenate([np.stack([per_read[s:s + width] for s in starts]), base], axis=-1), starts


def context_windows(rows: np.ndarray, strands: Sequence[str], backbone: str, width: int, stride: int,
                    max_reads: int = 5, max_run: int = 8):
    """:func:`row_windows` plus context per column: each read's strand, and homopolymer run lengths.

    Per column: the ``5 * max_reads + 10`` features of :func:`row_windows`; then, per read slot, the
    strand the read was sequenced from (+1 for "+", -1 for "-", 0 for an absent read;
    ``Subread.strand``: PacBio's errors depend on it); then the length of the backbone's
    homopolymer run that the column belongs to, and the column's place in that run (0 for its
    first column); then, per read slot, how many bases of that run's base the read shows in the
    run's columns (its own length of the run; 0 for an absent read). Lengths and places are divided
    by ``max_run`` and capped at 1. A read with one base fewer in a run shows its gap in one column,
    another read may show its gap in another column: per column the vote cannot see that both
    reads are short, their run lengths can (and a run's columns hold the same base, so which of
    them becomes a gap does not change the consensus: the last ones can).

    Returns:
        (features float32 (n_windows, width, 7 * max_reads + 12), start column of each window).

    Raises:
        ValueError when there are more reads than ``max_reads``, or strands other than "+" / "-",
        or not one strand per read.

    >>> feats, starts = context_windows(np.array([[1, 1, 2], [1, 0, 2]]), "+-", "AAC", 3, 3)
    >>> feats.shape, feats[0, 1, 35:].tolist()    # strands; run 2 / 8, place 1 / 8; read runs 2 / 8, 1 / 8
    ((1, 3, 47), [1.0, -1.0, 0.0, 0.0, 0.0, 0.25, 0.125, 0.25, 0.125, 0.0, 0.0, 0.0])
    """
    n, L = rows.shape
    if len(strands) != n or any(s not in ("+", "-") for s in strands):
        raise ValueError(f"need one strand ('+' or '-') per read: {n} reads, strands {list(strands)!r}")
    feats, starts = row_windows(rows, backbone, width, stride, max_reads)
    strand = np.zeros(max_reads, dtype=np.float32)
    strand[:n] = [1.0 if s == "+" else -1.0 for s in strands]
    run = np.zeros(L, dtype=np.float32)                        # backbone run length per column
    place = np.zeros(L, dtype=np.float32)                      # the column's place in its run, 0 first
    read_run = np.zeros((L, max_reads), dtype=np.float32)      # each read's length of that run
    ids = encode(backbone)
    i = 0
    while i < L:
        j = i
        while j < L and ids[j] == ids[i]:
            j += 1
        run[i:j] = j - i
        place[i:j] = np.arange(j - i)
        read_run[i:j, :n] = (rows[:, i:j] == ids[i]).sum(-1)
        i = j
    extra = np.concatenate([np.broadcast_to(strand, (L, max_reads)), np.minimum(run[:, None], max_run),
                            np.minimum(place[:, None], max_run), np.minimum(read_run, max_run)], axis=-1)
    extra[:, max_reads:] /= max_run
    return np.concatenate([feats, np.stack([extra[s:s + width] for s in starts])], axis=-1), starts


def homopolymer_median_consensus(rows: np.ndarray, backbone: str) -> str:
    """A consensus rule with no training: the POA backbone with each homopolymer run set to the reads' median length.

    ``rows`` are the reads' symbols per backbone column (:func:`read_rows`). The backbone is cut into
    homopolymer runs (maximal stretches of one base; a lone base is a run of length 1). For each run of
    base b over columns i..j, each read's length of the run is the number of those columns in which it
    shows b (as in :func:`context_windows`), and the run is written as b repeated the lower median of
    those lengths (the middle value for an odd number of reads, the smaller middle value for an even
    number), so a run can keep its length, get shorter or vanish, never grow. Bases other than b that a
    read shows in the run, and bases it inserts between columns, are not counted.

    It is the strongest simple baseline of lesson 11: most errors of majority vote on the POA backbone
    are extra bases inside homopolymers, which two reads that are each one base short hide by putting
    their gaps in different columns; the median of the reads' run lengths sees that both are short.

    Raises:
        ValueError when ``rows`` is not (n_reads >= 1, len(backbone)).

    >>> homopolymer_median_consensus(np.array([[1, 0, 1, 2], [1, 1, 0, 2], [1, 1, 1, 2]]), "AAAC")
    'AAC'
    """
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[0] < 1 or rows.shape[1] != len(backbone):
        raise ValueError(f"rows must be (n_reads >= 1, {len(backbone)}) for a backbone of {len(backbone)} bases, "
                         f"got {rows.shape}")
    ids = encode(backbone)
    out, i, L = [], 0, len(backbone)
    while i < L:
        j = i
        while j < L and ids[j] == ids[i]:
            j += 1
        lengths = np.sort((rows[:, i:j] == ids[i]).sum(-1))
        out.append(backbone[i] * int(lengths[(len(lengths) - 1) // 2]))
        i = j
    return "".join(out)


def molecule_windows(truth: str, reads: Sequence[str], width: int, max_label: int, stride: int,
                     max_reads: int | None = None, strands: Sequence[str] | None = None):
    """One molecule's model inputs on its POA backbone, with the reference functions of this module.

    The backbone is ``poa_consensus(reads)``; every read is aligned to it (:func:`edit_distance`),
    the :func:`pileup` is cut into :func:`windows` (or, with ``max_reads``, the aligned rows into
    :func:`row_windows`; with ``max_reads`` and ``strands``, one per read, into :func:`context_windows`),
    and each window's label is the truth bases of its columns (:func:`column_labels` of the
    backbone -> truth alignment, :func:`label_windows`).

    Returns:
        (features (n, width, F) float32, labels (n, max_label) int64, backbone str,
        counts (L, 5) int64, starts list[int]).
    """
    backbone = poa_consensus(reads)
    alignments = [edit_distance(r, backbone)[1] for r in reads]
    counts = pileup(reads, alignments, len(backbone))
    if max_reads is None:
        feats, starts = windows(counts, backbone, width, stride)
    elif strands is None:
        feats, starts = row_windows(read_rows(reads, alignments, len(backbone)), backbone, width, stride, max_reads)
    else:
        feats, starts = context_windows(read_rows(reads, alignments, len(backbone)), strands, backbone, width, stride,
                                        max_reads)
    labels = column_labels(edit_distance(backbone, truth)[1], truth)
    return feats, label_windows(labels, starts, width, max_label), backbone, counts, starts


def pass_subsets(n_passes: int, n: int = 20, seed: int = 1) -> list[tuple[int, ...]]:
    """Subsets of 3 of a molecule's ``n_passes`` passes to test on: all of them when there are at most
    ``n``, else ``n`` drawn without replacement by ``numpy.random.default_rng(seed)``, in sorted order.

    >>> len(pass_subsets(6)), len(pass_subsets(13)), pass_subsets(4)
    (20, 20, [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)])
    """
    import itertools

    if n_passes < 3:
        raise ValueError(f"a subset of 3 passes needs at least 3 passes, got {n_passes}")
    subsets = list(itertools.combinations(range(n_passes), 3))
    if len(subsets) <= n:
        return subsets
    pick = np.random.default_rng(seed).choice(len(subsets), size=n, replace=False)
    return [subsets[i] for i in sorted(pick)]


def spanning_read_sets(molecule, align, k: int = 3, min_span: int = 96) -> list[dict]:
    """Every set of ``k`` subreads of ``molecule`` (full or partial passes), cut to the reference span they all cover.

    For subreads i1 < ... < ik whose mapped spans (``Subread.ref_start`` / ``ref_end``) share at least
    ``min_span`` reference bases, each subread is aligned to its own mapped span with ``align`` (a function
    ``(read, reference) -> (distance, operations)`` such as :func:`edit_distance`; the notebook passes the
    student's) and the read bases aligned to the common span are kept, so that every read and the truth
    cover the same bases. A molecule with few full passes still gives test sets this way (as the training
    sets of ``tests/data_scripts/consensus_weights.py`` are made).

    Returns:
        a list, in the order of ``itertools.combinations``, of dicts with ``subreads`` (the indices),
        ``reads`` (forward-strand bases), ``strands`` and ``truth`` (the reference bases of the span).
    """
    import itertools

    offsets = []
    for s in molecule.subreads:
        a = s.ref_start - molecule.ref_start
        ops = align(s.seq, molecule.reference[a:s.ref_end - molecule.ref_start])[1]
        before, used = [], 0          # before[j]: read bases aligned before reference column a + j
        for op in ops:
            if op == "I":
                used += 1
                continue
            before.append(used)
            used += op in "=X"
        before.append(len(s.seq))
        offsets.append((a, before))
    sets = []
    for combo in itertools.combinations(range(len(molecule.subreads)), k):
        lo = max(molecule.subreads[i].ref_start for i in combo) - molecule.ref_start
        hi = min(molecule.subreads[i].ref_end for i in combo) - molecule.ref_start
        if hi - lo < min_span:
            continue
        reads = [molecule.subreads[i].seq[offsets[i][1][lo - offsets[i][0]]:offsets[i][1][hi - offsets[i][0]]] for i in combo]
        sets.append(dict(subreads=combo, reads=reads, strands=[molecule.subreads[i].strand for i in combo],
                         truth=molecule.reference[lo:hi]))
    return sets


def stitch(predictions, starts: Sequence[int], length: int) -> np.ndarray:
    """Per-column symbol ids of a backbone from per-window predictions (n, width).

    Window k writes its columns starting at ``starts[k]``; a later window overwrites the
    columns it shares with an earlier one. Raises ValueError when a column is left unwritten.

    >>> stitch(np.array([[1, 2, 3], [4, 4, 4]]), [0, 2], 5)
    array([1, 2, 4, 4, 4])
    """
    predictions = np.asarray(predictions)
    if len(predictions) != len(starts):
        raise ValueError(f"got {len(predictions)} windows but {len(starts)} starts")
    columns = np.full(length, -1, dtype=np.int64)
    for s, row in zip(starts, predictions):
        columns[s:s + len(row)] = row
    if (columns < 0).any():
        raise ValueError(f"columns {np.flatnonzero(columns < 0)[:5].tolist()}... are covered by no window")
    return columns


def phred_qv(error_rate: float) -> float:
    """Phred quality value QV = -10 log10(error rate): 1 % -> QV 20, 0.1 % -> QV 30 (0 -> inf).

    The unit in which PacBio and DeepConsensus report read accuracy (Q20 = 99 %, Q30 = 99.9 %).

    >>> phred_qv(0.01), phred_qv(0.001)
    (20.0, 30.0)
    """
    if not 0 <= error_rate <= 1:
        raise ValueError(f"an error rate lies in [0, 1], got {error_rate!r}")
    return math.inf if error_rate == 0 else -10.0 * math.log10(error_rate)


def sign_test(a: Sequence[float], b: Sequence[float]) -> tuple[int, int, int, float]:
    """Exact two-sided sign test of paired values: is ``a`` lower than ``b`` more often than chance?

    Pairs with a < b are wins, a > b losses, equal ones ties (left out of the test). Under the
    null hypothesis a win and a loss are equally likely, so wins ~ Binomial(wins + losses, 1/2);
    the p-value is the probability of a split at least as uneven, both directions, capped at 1.

    Returns:
        (wins, losses, ties, p).

    >>> sign_test([1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2])[3]   # 6 wins of 6: 2 / 64
    0.03125
    """
    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    wins = sum(x < y for x, y in zip(a, b))
    losses = sum(x > y for x, y in zip(a, b))
    ties = len(a) - wins - losses
    return wins, losses, ties, paired_sign_p(wins, losses)


PRETRAINED_FILE = pathlib.Path(__file__).resolve().parent / "data" / "consensus_transformer_folds.pt"
FINAL_FILE = pathlib.Path(__file__).resolve().parent / "data" / "consensus_transformer_final.pt"
UNTOUCHED = (14743, 39571)   # the test molecules: no choice of lesson 11 looked at them, no shipped final model saw them
VALIDATION = (32861, 6251, 37134)   # the molecules the configuration and features were chosen on


def load_pretrained(device: str | torch.device = "cpu", which: str = "folds") -> tuple[dict, dict]:
    """Models trained offline by ``tests/data_scripts/consensus_weights.py``, keyed by the molecules left out of training.

    ``which="folds"``: the three leave-one-molecule-out models of the ``VALIDATION`` molecules (the
    configuration and the features were chosen by looking at those molecules), ``{left-out ZMW: model}``.
    ``which="final"``: ONE model of that configuration trained on every molecule but the ``UNTOUCHED``
    ones, ``{ZMW: model}`` for each untouched ZMW (the same model object under each key).

    Returns:
        (models in eval mode, info: the settings and the figures measured when they were trained, as
        stored in the file). The model is the class that ``info["architecture"]`` names
        (:class:`VoteResidualTransformer` for the shipped files; :class:`ConsensusTransformer` when the
        file names none), built with ``info["model"]``; ``info["features"]`` names the function that makes
        its inputs (``"context_windows"``: :func:`context_windows`, which needs each read's strand; else
        :func:`row_windows`).

    Raises:
        ValueError when ``which`` is neither "folds" nor "final"; FileNotFoundError when the file is
        missing (the course ships both in ``course_lib/data``).
    """
    files = {"folds": PRETRAINED_FILE, "final": FINAL_FILE}
    if which not in files:
        raise ValueError(f"which must be 'folds' or 'final', got {which!r}")
    path = files[which]
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: it ships with the course; rebuild it with "
                                f"tests/data_scripts/consensus_weights.py{' --final' if which == 'final' else ''}")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    info = blob["info"]
    architecture = {"ConsensusTransformer": ConsensusTransformer,
                    "VoteResidualTransformer": VoteResidualTransformer}[info.get("architecture", "ConsensusTransformer")]

    def build(state):
        model = architecture(**info["model"])
        model.load_state_dict(state)
        return model.to(device).eval()

    if which == "final":
        model = build(blob["model"])
        return {int(zmw): model for zmw in info["test_molecules"]}, info
    return {int(zmw): build(state) for zmw, state in blob["folds"].items()}, info
