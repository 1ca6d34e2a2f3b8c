"""course_lib.bio.corpus: the ~1 MB medical corpus from real shipped data, the general reference
text and the chloroplast genome: sizes, sources, determinism, cleanliness, no disk writes."""
from __future__ import annotations

import collections
import hashlib

import pytest

from course_lib.bio import corpus


def test_one_megabyte_from_three_real_sources():
    docs = corpus.medical_documents()
    text = corpus.medical_corpus()
    size = len(text.encode("utf-8"))
    assert 990_000 <= size <= 1_000_000
    by_source = collections.Counter(d.source for d in docs)
    assert set(by_source) == {"drug_review", "hpo", "icd10cm"}
    assert by_source["drug_review"] == 979                    # every review fits in its 45 % share
    share = {s: sum(len(d.text.encode()) + 1 for d in docs if d.source == s) / size for s in by_source}
    assert 0.33 <= share["hpo"] <= 0.37 and 0.18 <= share["icd10cm"] <= 0.24
    assert all(d.text and "\n" not in d.text for d in docs)
    assert text.count("\n") == len(docs) - 1


def test_sources_hold_real_medical_text():
    hpo = corpus.hpo_documents()
    assert len(hpo) > 18_000                                   # 19,484 terms minus obsolete ones and the root
    assert any(d.startswith("Hepatosplenomegaly: ") for d in hpo)
    assert "Pneumothorax" in {d.split(":")[0] for d in hpo}
    assert not any('\\"' in d or d.endswith("]") for d in hpo)  # definitions lose their OBO quoting and refs
    icd = corpus.icd10_documents()
    assert len(icd) > 90_000 and icd[0] == "Cholera"
    reviews = corpus.drug_review_documents()
    assert len(reviews) == 979
    text = corpus.medical_corpus()
    for word in ("pneumothorax", "acetaminophen", "spleen", "hepatitis", "megaly", "migraine"):
        assert word in text.lower()


def test_deterministic_and_smaller_budgets_nest_sources():
    a = corpus.medical_corpus(200_000)
    corpus.medical_documents.cache_clear()
    b = corpus.medical_corpus(200_000)
    assert a == b
    assert hashlib.sha256(a.encode()).hexdigest() == hashlib.sha256(b.encode()).hexdigest()
    small = corpus.medical_documents(200_000)
    assert 190_000 <= len(corpus.medical_corpus(200_000).encode()) <= 200_000
    # evenly spaced: the small ICD-10-CM share still reaches the last chapters (Z codes come last)
    icd = corpus.icd10_documents()
    picked = [d.text for d in small if d.source == "icd10cm"]
    positions = sorted(icd.index(t) for t in picked[:5] + picked[-5:])
    assert positions[-1] > 0.9 * len(icd)


def test_bad_budget():
    for bad in (10, -1, 2.5, "1MB", True):
        with pytest.raises(ValueError, match="n_bytes"):
            corpus.medical_documents(bad)


def test_general_reference_corpus_is_english_prose_not_medical():
    text = corpus.python_reference_corpus()
    assert 400_000 < len(text.encode()) < 600_000
    assert "statement" in text and "pneumothorax" not in text.lower()
    assert not any(line.startswith("+----") and line.endswith("+") for line in text.splitlines())


def test_chloroplast_genome():
    seq = corpus.chloroplast_genome()
    assert len(seq) == 154_478 and set(seq) == set("ACGT")
    gc = (seq.count("G") + seq.count("C")) / len(seq)
    assert abs(gc - 0.3629) < 1e-3                             # chloroplasts are AT-rich
    assert seq.startswith("ATGGGCGAACGACGGGAATTGAACCCGCG")      # trnH-GUG start, as in the GenBank record


def test_nothing_written_into_the_working_tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus.medical_documents.cache_clear()
    corpus.medical_corpus(50_000)
    corpus.python_reference_corpus()
    assert list(tmp_path.iterdir()) == []
