"""Real PacBio subreads of lambda phage with their reference window (lesson 11).

Covers
    * ``load_molecules()``: the 11 molecules (ZMWs) of the shipped extract that have at
      least 3 mapped subreads, each as a frozen :class:`Molecule` with its subreads turned
      to the forward strand of the reference and the reference window they cover.
    * ``Molecule.passes(min_cover)``: the subreads that span most of the insert (full passes).

Does NOT cover
    * base qualities, kinetics (IPD, pulse width), adapters and the scraps of each ZMW;
    * reading BAM files: the extract was made once by ``tests/data_scripts/pacbio_lambda_subreads.py``
      with Debian's pbcore; nothing here needs pbcore, pysam or apt.

Source: Debian package ``python3-pbcore`` 2.1.2+dfsg-5, test data of pbcore (PacBio RS II
movie m140905_042212_sidney_c100564852550000001823085912221377_s1_X0, lambda phage,
reference lambda_NEB3011, 48,502 bp). Licence PacBio-BSD-3-Clause. See
``course_lib/data/README.md``.
"""
from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import pathlib


__all__ = ["Subread", "Molecule", "load_molecules", "DATA_FILE"]

DATA_FILE = pathlib.Path(__file__).resolve().parents[1] / "data" / "pacbio_lambda_subreads.json.gz"


@dataclasses.dataclass(frozen=True)
class Subread:
    """One pass of the polymerase around the circular molecule."""

    name: str       # movie/zmw/qstart_qend, as in the BAM
    seq: str        # bases on the FORWARD strand of the reference (reverse-complemented when strand is "-")
    strand: str     # "+" or "-": the strand the read was sequenced from, from the aligned BAM
    ref_start: int  # mapped reference span (0-based, half-open, forward strand), from the aligned BAM
    ref_end: int


@dataclasses.dataclass(frozen=True)
class Molecule:
    """One ZMW: its subreads and the reference window they cover."""

    zmw: int
    ref_start: int               # window [ref_start, ref_end) on lambda_NEB3011, forward strand
    ref_end: int
    reference: str               # the window's bases: the truth for this molecule
    subreads: tuple[Subread, ...]

    def passes(self, min_cover: float = 0.9) -> list[Subread]:
        """Subreads whose mapped span covers at least ``min_cover`` of the window (full passes)."""
        span = self.ref_end - self.ref_start
        return [s for s in self.subreads if (s.ref_end - s.ref_start) >= min_cover * span]


_FLIP = str.maketrans("ACGTN", "TGCAN")


@functools.lru_cache(maxsize=1)
def _load() -> tuple[Molecule, ...]:
    with gzip.open(DATA_FILE, "rt") as fh:
        doc = json.load(fh)
    out = []
    for m in doc["molecules"]:
        # a "-" subread is stored as read; its reverse complement is written out here, not as a function
        # (lesson 12 asks students to write reverse_complement: no course_lib function may compute it)
        subs = tuple(Subread(s["name"], s["seq"] if s["strand"] == "+" else s["seq"].translate(_FLIP)[::-1],
                             s["strand"], s["ref_start"], s["ref_end"]) for s in m["subreads"])
        out.append(Molecule(m["zmw"], m["ref_start"], m["ref_end"], m["reference"], subs))
    return tuple(out)


def load_molecules() -> list[Molecule]:
    """All molecules of the extract, by ZMW number.

    >>> mols = load_molecules()
    >>> len(mols), [len(m.passes()) for m in mols if len(m.passes()) >= 5]
    (11, [8, 6, 13])
    """
    return list(_load())
