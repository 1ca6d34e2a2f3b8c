"""Simulated regulatory sequences: real DNA, real JASPAR motifs, SIMULATED labels and placements.

Real expression measurements (CAGE, RNA-seq tracks) do not ship offline, so lesson 12
simulates a label with a known long-range rule and asks whether a model finds it.

What is real and what is simulated
    * real: the background DNA (windows of the Arabidopsis thaliana chloroplast genome,
      ``course_lib.bio.corpus.chloroplast_genome``) and the three JASPAR 2024 motifs
      (CC BY 4.0), extracted into ``course_lib/data/jaspar_motifs.json`` by
      ``tests/data_scripts/jaspar_motifs.py``: SP1 MA0079.5 (GC box, a promoter element),
      HNF4A MA1494.2 (a liver enhancer factor), CTCF MA0139.2 (a decoy that does nothing
      here). Each motif is implanted as its consensus (the most frequent base of each column);
    * simulated: where the motifs are written (presence, distance, orientation) and the
      labels (``simulated_label``). Nothing here is a measurement.

Covers
    * ``load_motifs()``: the three motifs;
    * ``simulated_label(promoter_forward, has_enhancer, enhancer_distance, max_effect_distance)``:
      the rule that defines "expressed";
    * ``regulatory_dataset(n, length=512, seed=0, region=None)``: n sequences, their labels
      and where each element sits; ``region`` ("train", "validation" or "test") draws the
      windows from one of three disjoint stretches of the genome (``GENOME_REGIONS``);
    * ``element_spans``, ``background_spans``, ``knock_out``, ``randomise`` and
      ``reverse_in_place``: the windows of an element (or of plain background) and a copy of
      one-hot sequences with those windows set to N, to random bases, or reverse complemented
      where they stand, for the knock-out experiment of lesson 12;
    * ``accuracy_interval`` (Wilson) and ``mcnemar_exact``: an interval for one model's
      accuracy and a paired test of two models on the same test sequences.

How one sequence is made (all draws from ``numpy.random.default_rng(seed)``)
    1. background: a window of ``length`` bases of the real chloroplast genome at a random
       start, from a random strand (reverse complement with probability 1/2). With ``region``
       the window lies wholly inside one block of that region (``GENOME_REGIONS``, a block
       drawn in proportion to the windows it holds); without it, anywhere in the genome;
    2. the transcription start site (TSS) is position ``length // 2``; the promoter slot is
       the 9 bases ending 20 bases upstream of it. Its state is drawn from ``p_promoter``
       (default 0.6, 0.2, 0.1, 0.1): "forward" (the SP1 consensus), "reversed" (its
       reverse complement), "absent" (the slot keeps its background bases, redrawn in the
       rare window whose background there is the consensus) or "mutated" (the consensus
       with ``PROMOTER_MUTATIONS`` = 3 of its 9 positions, drawn without replacement, each
       changed to one of the 3 other bases);
    3. the HNF4A enhancer is present with probability ``p_enhancer`` (1/2) and the CTCF
       decoy, independently, with probability ``p_decoy`` (1/2): all four combinations
       occur. Each present element starts at a distance |d| drawn uniformly from
       [``min_distance``, ``max_distance``] bases from the TSS, upstream or downstream
       with probability 1/2, in either orientation (1/2 each), every draw independent;
       when both are present the decoy's position is drawn again until the two do not
       overlap.

The label (``simulated_label``): expressed (1) if and only if the promoter is FORWARD
(an intact SP1 consensus read forward: promoter elements are directional in this simulation,
and a reversed, absent or mutated one is not a promoter) and the HNF4A enhancer is present
(either orientation: enhancers act in both) at |d| <= ``max_effect_distance`` (default:
every implanted distance counts). The decoy never changes the label, so "decoy absent"
says nothing about it: the enhancer is the only distal cause. A chance match of a motif
in the background does not change the label either: only implanted elements count.
Because a quarter of the non-forward promoters are absent and a quarter mutated, "no reversed
site" does not imply "a forward promoter": a model has to read the forward site itself.

The genome's regions (``GENOME_REGIONS``, 0-based half-open): the chloroplast genome
(154,478 bases) has two inverted repeats, IRb [84,170, 110,434) and IRa [128,214, 154,478),
each the other's reverse complement; training windows take both repeats (and the large
single-copy region from 30,000 to 84,170), validation windows [12,000, 30,000), test windows
[0, 12,000) and the small single-copy region [110,434, 128,214). No 32-base stretch of one
region occurs in another, on either strand (tests/test_dna.py checks it). Windows of one
region overlap each other (the test region's 29,780 bases hold 2,000 windows of 512 bases:
each base is in about 34 of them); windows of different regions never share a base.

Does NOT cover
    * real enhancer grammar (cooperativity, spacing, chromatin, 3D contacts);
    * nuclear sequence: chloroplast DNA is real DNA but no human or nuclear locus.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from typing import Sequence

import numpy as np
import torch

from course_lib.bio.corpus import chloroplast_genome
from course_lib.stats import paired_sign_p, wilson_interval

__all__ = ["Motif", "load_motifs", "simulated_label", "RegulatoryData", "regulatory_dataset",
           "PROMOTER_END_UPSTREAM", "PROMOTER_STATES", "PROMOTER_MUTATIONS", "GENOME_REGIONS",
           "element_spans", "background_spans", "knock_out", "randomise", "reverse_in_place",
           "accuracy_interval", "mcnemar_exact"]

PROMOTER_END_UPSTREAM = 20  # the SP1 site ends this many bases before the TSS
PROMOTER_STATES = ("forward", "reversed", "absent", "mutated")  # only "forward" can give "expressed"
PROMOTER_MUTATIONS = 3  # positions of the SP1 consensus changed in a "mutated" promoter
# Disjoint stretches of the chloroplast genome (0-based, half-open) for training, validation and test windows.
# Both inverted repeats (IRb [84170, 110434), IRa [128214, 154478), reverse complements of each other) are in
# "train", so no stretch of DNA is shared between regions (see the module docstring).
GENOME_REGIONS = {"train": ((30_000, 110_434), (128_214, 154_478)),
                  "validation": ((12_000, 30_000),),
                  "test": ((0, 12_000), (110_434, 128_214))}
_COMP = str.maketrans("ACGT", "TGCA")


@dataclasses.dataclass(frozen=True)
class Motif:
    """One JASPAR motif: id, name and its 4 x width count matrix (rows A, C, G, T)."""

    matrix_id: str
    name: str
    counts: np.ndarray  # (4, width)

    @property
    def consensus(self) -> str:
        return "".join("ACGT"[i] for i in self.counts.argmax(axis=0))


@functools.lru_cache(maxsize=1)
def load_motifs() -> dict[str, Motif]:
    """name -> Motif for SP1, HNF4A and CTCF, from the committed JASPAR 2024 extract."""
    path = pathlib.Path(__file__).resolve().parent.parent / "data" / "jaspar_motifs.json"
    payload = json.loads(path.read_text())
    return {m["name"]: Motif(m["matrix_id"], m["name"], np.array([m["counts"][b] for b in "ACGT"]))
            for m in payload["motifs"]}


def simulated_label(promoter_forward: bool, has_enhancer: bool, enhancer_distance: int = 0,
                    max_effect_distance: int | None = None) -> int:
    """1 (expressed) iff the promoter is forward and the enhancer is present with |distance| in range.

    The decoy is not an argument: it never changes the label.

    >>> simulated_label(True, True, -200), simulated_label(False, True, 60), simulated_label(True, False)
    (1, 0, 0)
    """
    in_range = max_effect_distance is None or abs(int(enhancer_distance)) <= max_effect_distance
    return int(bool(promoter_forward) and bool(has_enhancer) and in_range)


@dataclasses.dataclass
class RegulatoryData:
    """n simulated sequences; every array has length n. A distance is an element's first base - TSS."""

    sequences: list               # DNA strings, each ``length`` bases
    labels: np.ndarray            # (n,) int64, 1 = expressed (simulated)
    promoter_forward: np.ndarray  # (n,) bool: the promoter state is "forward"
    has_enhancer: np.ndarray      # (n,) bool: HNF4A implanted
    enhancer_distance: np.ndarray  # (n,) int, negative = upstream; 0 where there is no enhancer
    has_decoy: np.ndarray         # (n,) bool: CTCF implanted
    decoy_distance: np.ndarray    # (n,) int; 0 where there is no decoy
    tss: int                      # the TSS position (length // 2)
    promoter_state: np.ndarray = None  # (n,) str, one of PROMOTER_STATES
    window_start: np.ndarray = None    # (n,) int, where the background window starts in the genome


def _draw_distance(rng, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi + 1)) * (1 if rng.random() < 0.5 else -1)


def _window_starts(genome_length: int, length: int, region: str | None) -> list[tuple[int, int]]:
    """[(first start, last start + 1)] of the windows of ``length`` bases that fit in ``region``'s blocks."""
    if region is None:
        return [(0, genome_length - length)]
    if region not in GENOME_REGIONS:
        raise ValueError(f"region must be None or one of {sorted(GENOME_REGIONS)}, got {region!r}")
    blocks = [(a, min(b, genome_length) - length + 1) for a, b in GENOME_REGIONS[region]]
    if any(hi <= lo for lo, hi in blocks):
        raise ValueError(f"a window of {length} bases does not fit in every block of region {region!r}")
    return blocks


def regulatory_dataset(n: int, length: int = 512, seed: int = 0, region: str | None = None,
                       min_distance: int = 48, max_distance: int | None = None,
                       max_effect_distance: int | None = None,
                       p_promoter: Sequence[float] = (0.6, 0.2, 0.1, 0.1),
                       p_enhancer: float = 0.5, p_decoy: float = 0.5) -> RegulatoryData:
    """``n`` simulated sequences of ``length`` bases (see the module docstring). Deterministic in ``seed``.

    ``region`` ("train", "validation", "test" or None for the whole genome) is where the
    background windows come from (``GENOME_REGIONS``). ``p_promoter`` gives the probabilities
    of the promoter states ``PROMOTER_STATES`` (forward, reversed, absent, mutated).
    ``max_distance`` defaults to the farthest an element fits: length // 2 - width of the
    longest motif - 1. Raises ValueError for distances that do not fit or overlap the
    promoter, an unknown region, and probabilities outside [0, 1] or not summing to 1.
    """
    motifs = load_motifs()
    sp1, hnf4a, ctcf = motifs["SP1"].consensus, motifs["HNF4A"].consensus, motifs["CTCF"].consensus
    tss = length // 2
    widest = max(len(hnf4a), len(ctcf))
    max_distance = tss - widest - 1 if max_distance is None else max_distance
    if not PROMOTER_END_UPSTREAM + len(sp1) + widest <= min_distance <= max_distance <= tss - widest - 1:
        raise ValueError(f"need {PROMOTER_END_UPSTREAM + len(sp1) + widest} <= min_distance <= max_distance <= "
                         f"{tss - widest - 1} (the elements must not overlap the promoter and must fit), got "
                         f"{min_distance}, {max_distance}")
    for name, p in (("p_enhancer", p_enhancer), ("p_decoy", p_decoy)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
    p_promoter = np.asarray(p_promoter, dtype=float)
    if p_promoter.shape != (len(PROMOTER_STATES),) or (p_promoter < 0).any() or abs(p_promoter.sum() - 1) > 1e-9:
        raise ValueError(f"p_promoter must be {len(PROMOTER_STATES)} probabilities of {PROMOTER_STATES} "
                         f"summing to 1, got {p_promoter.tolist()}")
    genome = chloroplast_genome()
    blocks = _window_starts(len(genome), length, region)
    block_p = np.array([hi - lo for lo, hi in blocks], dtype=float)
    block_p /= block_p.sum()
    rng = np.random.default_rng(seed)
    seqs, labels, states, starts, has_e, d_e, has_d, d_d = [], [], [], [], [], [], [], []
    p_end = tss - PROMOTER_END_UPSTREAM
    for _ in range(n):
        state = PROMOTER_STATES[int(rng.choice(len(PROMOTER_STATES), p=p_promoter))]
        while True:  # an "absent" promoter must not be the consensus by chance (about 1 window in 250,000)
            lo, hi = blocks[int(rng.choice(len(blocks), p=block_p))]
            start = int(rng.integers(lo, hi))
            s = genome[start:start + length]
            if rng.random() < 0.5:
                s = s[::-1].translate(_COMP)
            if state != "absent" or s[p_end - len(sp1):p_end] != sp1:
                break
        s = list(s)
        if state == "forward":
            site = sp1
        elif state == "reversed":
            site = sp1[::-1].translate(_COMP)
        elif state == "mutated":
            site = list(sp1)
            for i in rng.choice(len(sp1), PROMOTER_MUTATIONS, replace=False):
                site[i] = "ACGT".replace(site[i], "")[int(rng.integers(3))]
            site = "".join(site)
        else:
            site = None
        if site is not None:
            s[p_end - len(site):p_end] = site
        enhancer, decoy = bool(rng.random() < p_enhancer), bool(rng.random() < p_decoy)
        de = dd = 0
        if enhancer:
            de = _draw_distance(rng, min_distance, max_distance)
            element = hnf4a if rng.random() < 0.5 else hnf4a[::-1].translate(_COMP)
            s[tss + de:tss + de + len(element)] = element
        if decoy:
            while True:  # the decoy may not overlap the enhancer
                dd = _draw_distance(rng, min_distance, max_distance)
                if not enhancer or dd + len(ctcf) <= de or de + len(hnf4a) <= dd:
                    break
            element = ctcf if rng.random() < 0.5 else ctcf[::-1].translate(_COMP)
            s[tss + dd:tss + dd + len(element)] = element
        seqs.append("".join(s))
        states.append(state)
        starts.append(start)
        has_e.append(enhancer)
        d_e.append(de)
        has_d.append(decoy)
        d_d.append(dd)
        labels.append(simulated_label(state == "forward", enhancer, de, max_effect_distance))
    states = np.array(states, dtype=object)
    return RegulatoryData(seqs, np.array(labels, dtype=np.int64), states == "forward",
                          np.array(has_e, dtype=bool), np.array(d_e, dtype=np.int64),
                          np.array(has_d, dtype=bool), np.array(d_d, dtype=np.int64), tss,
                          states.astype(str), np.array(starts, dtype=np.int64))


# ---------------------------------------------------------------- knock-outs
def element_spans(data: RegulatoryData, element: str) -> np.ndarray:
    """(n, 2) int array of [start, end) of ``element`` in each sequence; (-1, -1) where it is absent.

    ``element`` is "promoter" (the SP1 site, always present), "enhancer" (HNF4A) or "decoy" (CTCF).
    """
    motifs = load_motifs()
    n = len(data.labels)
    if element == "promoter":
        end = data.tss - PROMOTER_END_UPSTREAM
        return np.tile([end - len(motifs["SP1"].consensus), end], (n, 1)).astype(np.int64)
    if element not in ("enhancer", "decoy"):
        raise ValueError(f"element must be 'promoter', 'enhancer' or 'decoy', got {element!r}")
    present = data.has_enhancer if element == "enhancer" else data.has_decoy
    dist = data.enhancer_distance if element == "enhancer" else data.decoy_distance
    width = len(motifs["HNF4A" if element == "enhancer" else "CTCF"].consensus)
    spans = np.stack([data.tss + dist, data.tss + dist + width], axis=1).astype(np.int64)
    spans[~present] = -1
    return spans


def background_spans(data: RegulatoryData, width: int, seed: int = 0, margin: int = 16) -> np.ndarray:
    """(n, 2) [start, end) of a window of ``width`` bases of plain background in each sequence.

    The window keeps ``margin`` bases away from every implanted element and from the TSS bin,
    so knocking it out removes no element: the control for the knock-out of an element.
    Drawn from ``numpy.random.default_rng(seed)``; raises ValueError if no window fits.
    """
    length = len(data.sequences[0])
    rng = np.random.default_rng(seed)
    taken = [element_spans(data, e) for e in ("promoter", "enhancer", "decoy")]
    out = np.empty((len(data.labels), 2), dtype=np.int64)
    for i in range(len(data.labels)):
        free = np.ones(length - width + 1, dtype=bool)  # candidate starts
        busy = [(data.tss - margin, data.tss + 16 + margin)] + [
            (a - margin, b + margin) for a, b in (t[i] for t in taken) if a >= 0]
        for a, b in busy:
            free[max(0, a - width + 1):max(0, b)] = False
        starts = np.flatnonzero(free)
        if starts.size == 0:
            raise ValueError(f"no background window of {width} bases fits in sequence {i}")
        s = int(rng.choice(starts))
        out[i] = (s, s + width)
    return out


def knock_out(one_hot: torch.Tensor, spans: np.ndarray) -> torch.Tensor:
    """A copy of (N, L, 4) one-hot sequences with row i's bases spans[i, 0]:spans[i, 1] set to N (zeros).

    A span of (-1, -1) leaves its sequence unchanged. The input is not modified.
    """
    spans = np.asarray(spans)
    if one_hot.dim() != 3 or spans.shape != (one_hot.shape[0], 2):
        raise ValueError(f"need one_hot (N, L, 4) and spans (N, 2), got {tuple(one_hot.shape)} and {spans.shape}")
    out = one_hot.clone()
    for i, (a, b) in enumerate(spans.tolist()):
        if a >= 0:
            out[i, a:b] = 0.0
    return out


def _check_spans(one_hot: torch.Tensor, spans) -> np.ndarray:
    spans = np.asarray(spans)
    if one_hot.dim() != 3 or spans.shape != (one_hot.shape[0], 2):
        raise ValueError(f"need one_hot (N, L, 4) and spans (N, 2), got {tuple(one_hot.shape)} and {spans.shape}")
    return spans


def randomise(one_hot: torch.Tensor, spans: np.ndarray, seed: int = 0) -> torch.Tensor:
    """A copy of (N, L, 4) one-hot sequences with row i's bases spans[i, 0]:spans[i, 1] replaced by random bases.

    Each base is drawn uniformly from A, C, G, T with ``numpy.random.default_rng(seed)`` (so a
    replaced base can equal the old one). A span of (-1, -1) leaves its sequence unchanged.
    Unlike ``knock_out`` (N, all-zero rows, which no training sequence has), the result is ordinary DNA.
    """
    spans = _check_spans(one_hot, spans)
    rng = np.random.default_rng(seed)
    out = one_hot.clone()
    eye = torch.eye(4, dtype=one_hot.dtype)
    for i, (a, b) in enumerate(spans.tolist()):
        if a >= 0:
            out[i, a:b] = eye[torch.from_numpy(rng.integers(0, 4, b - a))]
    return out


def reverse_in_place(one_hot: torch.Tensor, spans: np.ndarray) -> torch.Tensor:
    """A copy of (N, L, 4) one-hot sequences with row i's span reverse complemented where it stands.

    With columns A, C, G, T the reverse complement of a stretch is the stretch flipped on both
    axes. A span of (-1, -1) leaves its sequence unchanged. Turns a forward promoter into a
    reversed one (and back) without moving anything else.
    """
    spans = _check_spans(one_hot, spans)
    out = one_hot.clone()
    for i, (a, b) in enumerate(spans.tolist()):
        if a >= 0:
            out[i, a:b] = one_hot[i, a:b].flip(0).flip(1)
    return out


# ---------------------------------------------------------------- comparing two classifiers
def accuracy_interval(correct, z: float = 1.96) -> tuple[float, float, float]:
    """(accuracy, low, high): the Wilson score interval (95 % with z = 1.96) of a 0/1 array.

    >>> [round(v, 3) for v in accuracy_interval([1] * 30 + [0] * 10)]
    [0.75, 0.598, 0.858]
    """
    c = np.asarray(correct, dtype=bool)
    if c.size == 0:
        raise ValueError("no predictions to score")
    low, high = wilson_interval(int(c.sum()), c.size, z)
    return float(c.mean()), float(low), float(high)


def mcnemar_exact(correct_a, correct_b) -> tuple[int, int, float]:
    """Paired exact McNemar test of two classifiers on the same items -> (only_a_right, only_b_right, p).

    Only the discordant items count; under "equally accurate" each is a fair coin, so the
    two-sided p-value is that of a binomial(b + c, 1/2) count at least as far from even.

    >>> mcnemar_exact([1, 1, 1, 0], [0, 0, 0, 0])
    (3, 0, 0.25)
    """
    a, b = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"the two models must be scored on the same items, got {a.shape} and {b.shape}")
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    return only_a, only_b, paired_sign_p(only_a, only_b)
