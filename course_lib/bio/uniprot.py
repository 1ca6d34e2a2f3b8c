"""Reviewed UniProt proteins with their recommended names (lesson 10), split by sequence identity.

Covers
    * ``load_proteins(split=None)``: the 2,886 entries of the committed extract
      ``course_lib/data/uniprot_sprot_names.tsv.gz`` as frozen :class:`Protein`
      records (accession, entry name, recommended name, organism, split, cluster,
      sequence); ``split="train"`` or ``"test"`` selects one side.
    * ``data_file()``: the path of that extract.

The split is by sequence identity, not at random: proteins were clustered with
mmseqs2 at 50 % identity over 80 % coverage and whole clusters went to one side;
test proteins that mmseqs2 still found at >= 50 % identity to a training protein
were removed (3 of them). 2,311 train, 575 test. ``cluster`` is the accession of
the cluster's representative.

Does NOT cover
    * TrEMBL (unreviewed) entries, fragments and "Uncharacterized protein" entries:
      the build script leaves them out;
    * tokenisation and models (``course_lib.proteins``);
    * rebuilding the extract (``tests/data_scripts/uniprot_names.py``, needs the
      Debian package ``mmseqs2-examples``; never needed at run time).

Source: UniProtKB/Swiss-Prot entries shipped in the Debian package mmseqs2-examples
(``DB.fasta.gz``, 20,000 UniProt entries). UniProt: CC BY 4.0 (The UniProt
Consortium, "UniProt: the Universal Protein Knowledgebase in 2023", Nucleic Acids
Res. 51:D523). See ``course_lib/data/README.md``.
"""
from __future__ import annotations

import dataclasses
import functools
import gzip
import pathlib

__all__ = ["Protein", "load_proteins", "data_file", "SPLITS"]

SPLITS = ("train", "test")
_FILE = "uniprot_sprot_names.tsv.gz"
_COLUMNS = ("accession", "entry_name", "name", "organism", "split", "cluster", "sequence")


@dataclasses.dataclass(frozen=True)
class Protein:
    """One reviewed UniProt entry."""

    accession: str   # UniProt accession, e.g. "P0A7V0"
    entry_name: str  # UniProt entry name, e.g. "RS2_ECOLI"
    name: str        # recommended protein name, e.g. "30S ribosomal protein S2"
    organism: str    # source organism (OS field)
    split: str       # "train" or "test"
    cluster: str     # accession of the representative of its 50 %-identity cluster
    sequence: str    # amino acids, one letter each, upper case


def data_file() -> pathlib.Path:
    """Path of the committed extract."""
    return pathlib.Path(__file__).resolve().parent.parent / "data" / _FILE


@functools.lru_cache(maxsize=1)
def _load_all() -> tuple[Protein, ...]:
    with gzip.open(data_file(), "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if tuple(header) != _COLUMNS:
            raise ValueError(f"{data_file()}: unexpected columns {header}")
        return tuple(Protein(*line.rstrip("\n").split("\t")) for line in f if line.strip())


def load_proteins(split: str | None = None) -> list[Protein]:
    """All entries (``split=None``) or those of one split ("train" or "test"), in file order."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None, got {split!r}")
    return [p for p in _load_all() if split is None or p.split == split]
