"""Simulated regulatory sequences: real DNA, real JASPAR motifs, SIMULATED labels.

Real expression measurements (CAGE, RNA-seq tracks) do not ship offline, so lesson 12
simulates a label with a known long-range rule and asks whether a model finds it.

Covers
    * ``load_motifs()``: three real JASPAR 2024 motifs (CC BY 4.0), extracted into
      ``course_lib/data/jaspar_motifs.json`` by ``tests/data_scripts/jaspar_motifs.py``:
      SP1 MA0079.5 (GC box, a promoter element), HNF4A MA1494.2 (a liver enhancer
      factor), CTCF MA0139.2 (used as a decoy that does nothing here). Each motif is
      implanted as its consensus (the most frequent base of each column).
    * ``simulated_label(promoter_forward, distal_motif, distance, max_effect_distance)``:
      the rule that defines "expressed".
    * ``regulatory_dataset(n, length=512, seed=0)``: n sequences and their labels.

How one sequence is made (all draws from ``numpy.random.default_rng(seed)``)
    1. background: a window of ``length`` bases of the real Arabidopsis thaliana
       chloroplast genome (``course_lib.bio.corpus.chloroplast_genome``) at a random
       start, from a random strand (reverse complement with probability 1/2);
    2. the transcription start site (TSS) is position ``length // 2``; the SP1 consensus
       is written ending 20 bases upstream of it, forward (probability 0.7) or reverse
       complemented (0.3);
    3. one distal element is written at a distance |d| drawn uniformly from
       [``min_distance``, ``max_distance``] bases from the TSS (to the element's first
       base), upstream or downstream with probability 1/2 each: HNF4A (probability 1/2)
       or the CTCF decoy, in a random orientation.

The label (``simulated_label``): expressed (1) if and only if the promoter is FORWARD
(promoter elements are directional in this simulation), the distal element is HNF4A (in
either orientation: enhancers act in both), and |d| <= ``max_effect_distance`` (default:
every implanted distance counts). Otherwise 0. A chance match of a motif in the
background does not change the label: only implanted elements count.

Does NOT cover
    * real enhancer grammar (cooperativity, spacing, chromatin, 3D contacts);
    * nuclear sequence: chloroplast DNA is real DNA but no human or nuclear locus.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import pathlib

import numpy as np

from course_lib.bio.corpus import chloroplast_genome

__all__ = ["Motif", "load_motifs", "simulated_label", "RegulatoryData", "regulatory_dataset",
           "PROMOTER_END_UPSTREAM"]

PROMOTER_END_UPSTREAM = 20  # the SP1 site ends this many bases before the TSS
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


def simulated_label(promoter_forward: bool, distal_motif: str, distance: int,
                    max_effect_distance: int | None = None) -> int:
    """1 (expressed) iff the promoter is forward, the distal element is HNF4A and |distance| is in range.

    >>> simulated_label(True, "HNF4A", -300), simulated_label(False, "HNF4A", 40), simulated_label(True, "CTCF", 40)
    (1, 0, 0)
    """
    in_range = max_effect_distance is None or abs(distance) <= max_effect_distance
    return int(bool(promoter_forward) and distal_motif == "HNF4A" and in_range)


@dataclasses.dataclass
class RegulatoryData:
    """n simulated sequences; every array has length n."""

    sequences: list          # DNA strings, each ``length`` bases
    labels: np.ndarray       # (n,) int64, 1 = expressed (simulated)
    promoter_forward: np.ndarray  # (n,) bool
    distal_motif: np.ndarray      # (n,) str: "HNF4A" or "CTCF"
    distance: np.ndarray          # (n,) int: distal element start - TSS (negative = upstream)
    tss: int                      # the TSS position (length // 2)


def regulatory_dataset(n: int, length: int = 512, seed: int = 0, min_distance: int = 48,
                       max_distance: int | None = None, max_effect_distance: int | None = None) -> RegulatoryData:
    """``n`` simulated sequences of ``length`` bases (see the module docstring). Deterministic in ``seed``.

    ``max_distance`` defaults to the farthest the element fits: length // 2 - width of the
    longest motif - 1.
    """
    motifs = load_motifs()
    sp1, hnf4a, ctcf = motifs["SP1"].consensus, motifs["HNF4A"].consensus, motifs["CTCF"].consensus
    tss = length // 2
    widest = max(len(hnf4a), len(ctcf))
    max_distance = tss - widest - 1 if max_distance is None else max_distance
    if not PROMOTER_END_UPSTREAM + len(sp1) + widest <= min_distance <= max_distance <= tss - widest - 1:
        raise ValueError(f"need {PROMOTER_END_UPSTREAM + len(sp1) + widest} <= min_distance <= max_distance <= "
                         f"{tss - widest - 1} (the elements must not overlap and must fit), got "
                         f"{min_distance}, {max_distance}")
    genome = chloroplast_genome()
    rng = np.random.default_rng(seed)
    seqs, labels, fwd, which, dist = [], [], [], [], []
    for _ in range(n):
        start = int(rng.integers(0, len(genome) - length))
        s = genome[start:start + length]
        if rng.random() < 0.5:
            s = s[::-1].translate(_COMP)
        s = list(s)
        forward = bool(rng.random() < 0.7)
        site = sp1 if forward else sp1[::-1].translate(_COMP)
        p_end = tss - PROMOTER_END_UPSTREAM
        s[p_end - len(site):p_end] = site
        name = "HNF4A" if rng.random() < 0.5 else "CTCF"
        element = hnf4a if name == "HNF4A" else ctcf
        if rng.random() < 0.5:
            element = element[::-1].translate(_COMP)
        d = int(rng.integers(min_distance, max_distance + 1)) * (1 if rng.random() < 0.5 else -1)
        s[tss + d:tss + d + len(element)] = element
        seqs.append("".join(s))
        fwd.append(forward)
        which.append(name)
        dist.append(d)
        labels.append(simulated_label(forward, name, d, max_effect_distance))
    return RegulatoryData(seqs, np.array(labels, dtype=np.int64), np.array(fwd), np.array(which),
                          np.array(dist), tss)
