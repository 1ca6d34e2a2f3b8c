"""Lesson 08: using a pretrained encoder on clinical text.

Covers (the exercises of notebooks/08_clinical_text)
    * :func:`mean_pool`: one vector per text, the mean of its token vectors over real tokens;
    * :func:`cosine_top_k`: retrieval, the k keys most similar to each query by cosine;
    * :func:`freeze_for_probe`: freeze an encoder so that only its classification head trains
      (a *linear probe*);
    * :func:`attention_rollout`: where a token's representation came from, through all layers,
      with the residual stream accounted for (Abnar & Zuidema, "Quantifying Attention Flow in
      Transformers", ACL 2020).
And what the notebook's case study uses besides: :class:`EncoderClassifier` (a pretrained
encoder + mean pooling + linear head), :func:`tfidf_vectors`, the word-based search baseline, and
:func:`subgroup_accuracy`, accuracy per subgroup with Wilson intervals (who does a model fail?).

Does NOT cover
    * loading the model (``course_lib.pretrained``), training loops (``course_lib.training``);
    * attention flow (the max-flow variant of the same paper) or gradient-based attributions;
    * fairness metrics beyond per-group accuracy (calibration, equalised odds) and corrections for
      comparing many groups at once.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

import numpy as np
import torch
from torch import nn

from course_lib.stats import wilson_interval

from course_lib import solutions

_solution = solutions.of("course_lib.clinical")  # the exercises' bodies: course_lib/solutions/clinical.py

__all__ = ["mean_pool", "cosine_top_k", "freeze_for_probe", "attention_rollout", "EncoderClassifier",
           "tfidf_vectors", "subgroup_accuracy"]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token vectors over REAL tokens only (padding left out).

    Args:
        hidden: (..., T, d) float token vectors (e.g. (B, T, d) from an encoder).
        attention_mask: (..., T), 1 / True = real token, 0 / False = padding (int, bool or float).

    Returns:
        (..., d) in hidden's dtype: sum over t of mask[t] * hidden[t], divided by the number of
        real tokens. A row without any real token gives zeros (not NaN). Inputs are not changed.

    >>> h = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])   # the last token is padding
    >>> mean_pool(h, torch.tensor([[1, 1, 0]]))
    tensor([[2., 3.]])
    """
    return _solution.mean_pool(hidden, attention_mask)


def cosine_top_k(queries: np.ndarray, keys: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """For each query, the k keys with the highest cosine similarity, best first.

    Args:
        queries: (Q, d) float array; keys: (N, d) float array; 1 <= k <= N (else ValueError).
        The inputs are not changed.

    Returns:
        (scores, indices): scores (Q, k) float, the cosine similarities in decreasing order;
        indices (Q, k) integer, the rows of ``keys`` they belong to. Equal scores keep the
        smaller key index first. A zero vector has cosine 0 with everything.

    >>> q = np.array([[1.0, 0.0]]); keys = np.array([[0.0, 2.0], [3.0, 0.0], [1.0, 1.0]])
    >>> cosine_top_k(q, keys, 2)
    (array([[1.        , 0.70710678]]), array([[1, 2]]))
    """
    return _solution.cosine_top_k(queries, keys, k)


def freeze_for_probe(model: nn.Module, head: str = "classifier") -> int:
    """Freeze every parameter of ``model`` except those of its submodule ``head``.

    Sets ``requires_grad = False`` on all parameters outside ``model.<head>`` and ``True`` on
    the parameters of ``model.<head>`` (even if they were frozen before), so an optimiser only
    changes the head: a linear probe on a frozen encoder. Works in place and returns the number
    of trainable scalar parameters (elements, not tensors). Raises ValueError when the model
    has no submodule called ``head``.

    >>> m = nn.Sequential()
    >>> m.encoder = nn.Linear(4, 3); m.classifier = nn.Linear(3, 2)
    >>> freeze_for_probe(m, "classifier")      # 3 * 2 weights + 2 biases
    8
    """
    return _solution.freeze_for_probe(model, head)


def attention_rollout(attentions: torch.Tensor, residual: bool = True) -> torch.Tensor:
    """Attention rollout: how much each output token draws on each input token, over all layers.

    For each layer l: average the heads, A_l = mean_h attentions[l, h]; with ``residual``,
    account for the skip connection as A_l <- (A_l + I) / 2 (rows still sum to 1). Then
    compose the layers, first layer first: R = A_L @ ... @ A_2 @ A_1.

    Args:
        attentions: (L, H, T, T), rows summing to 1 (attentions[l, h, i, j]: token i attends to j).
        residual: add the identity for the residual stream (True) or use attention alone.

    Returns:
        (T, T) in the input's dtype; R[i, j] = share of input token j in output token i (rows sum to 1).

    >>> a = torch.tensor([[[[0.0, 1.0], [0.0, 1.0]]]])   # one layer, one head: both attend to token 1
    >>> attention_rollout(a)
    tensor([[0.5000, 0.5000],
            [0.0000, 1.0000]])
    """
    return _solution.attention_rollout(attentions, residual)


class EncoderClassifier(nn.Module):
    """A pretrained encoder + pooling + L2 normalisation + a linear head (``classifier``).

    ``forward(input_ids, attention_mask)`` -> (B, num_classes) logits. The encoder is any module
    called as ``encoder(input_ids=..., attention_mask=...)`` that returns an object with
    ``last_hidden_state`` (B, T, d) (a ``transformers`` model). ``pool(hidden, attention_mask)``
    turns token vectors into one vector per text (default: :func:`mean_pool`; the notebook passes
    the student's own). With :func:`freeze_for_probe` only the head trains (a linear probe);
    without it the whole model is fine-tuned.
    """

    def __init__(self, encoder: nn.Module, d_model: int, num_classes: int, pool=None):
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Linear(d_model, num_classes)
        self.pool = pool

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        pool = self.pool if self.pool is not None else mean_pool
        pooled = nn.functional.normalize(pool(hidden, attention_mask), dim=-1)  # (B, d)
        return self.classifier(pooled)


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def tfidf_vectors(queries: Sequence[str], keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word-based search baseline: TF-IDF vectors of lower-cased words, (Q, V) and (N, V).

    The vocabulary (V words) and the inverse document frequencies
    idf(w) = log((1 + N) / (1 + df(w))) + 1 come from the N keys; a query word that no key
    contains is ignored. Rank them with :func:`cosine_top_k`: a query that shares no word with any
    key is then a zero vector and scores 0 everywhere.

    >>> q, k = tfidf_vectors(["heart problem"], ["enlarged heart", "kidney"])
    >>> q.shape, k.shape, bool(q[0] @ k[0] > 0), float(q[0] @ k[1])
    ((1, 3), (2, 3), True, 0.0)
    """
    vocab: dict[str, int] = {}
    docs = [Counter(_words(t)) for t in keys]
    for d in docs:
        for w in d:
            vocab.setdefault(w, len(vocab))
    df = np.zeros(len(vocab))
    for d in docs:
        for w in d:
            df[vocab[w]] += 1
    idf = np.log((1 + len(keys)) / (1 + df)) + 1

    def vectors(texts):
        out = np.zeros((len(texts), len(vocab)))
        for i, t in enumerate(texts):
            for w, c in Counter(_words(t)).items():
                if w in vocab:
                    out[i, vocab[w]] = c * idf[vocab[w]]
        return out

    return vectors(queries), vectors(keys)


def subgroup_accuracy(correct: Sequence[bool] | np.ndarray | torch.Tensor, groups: Sequence[str],
                      z: float = 1.96) -> list[dict]:
    """Accuracy per subgroup with its Wilson score interval (95% with z = 1.96), worst first.

    Args:
        correct: (N,) right (True / 1) or wrong (False / 0) per example, bool or 0/1 ints.
        groups: (N,) the subgroup of each example (e.g. the true condition of a review).
        z: the normal quantile of the interval.

    Returns:
        One dict per subgroup, ``{"group", "n", "correct", "accuracy", "low", "high"}``, sorted by
        accuracy (lowest first; ties by group name), so the first row is where the model fails most.
        The inputs are not modified.

    >>> rows = subgroup_accuracy([1, 1, 0, 1, 0, 0], ["a", "a", "a", "b", "b", "b"])
    >>> [(r["group"], r["n"], r["correct"], round(r["accuracy"], 3)) for r in rows]
    [('b', 3, 1, 0.333), ('a', 3, 2, 0.667)]
    """
    flags = np.asarray(correct.detach().cpu() if isinstance(correct, torch.Tensor) else correct)
    if flags.ndim != 1:
        raise ValueError(f"correct must be one flag per example, shape (N,), got shape {flags.shape}")
    if len(groups) != len(flags):
        raise ValueError(f"correct has {len(flags)} entries but groups has {len(groups)}: one group per example")
    if len(flags) == 0:
        raise ValueError("no examples: correct and groups are empty")
    if not np.isin(flags, (0, 1)).all():
        raise ValueError("correct must hold only True/False or 0/1 per example")
    flags = flags.astype(bool)
    rows = []
    for g in sorted(set(groups)):
        member = np.array([x == g for x in groups])
        n, k = int(member.sum()), int(flags[member].sum())
        low, high = wilson_interval(k, n, z)
        rows.append({"group": g, "n": n, "correct": k, "accuracy": k / n, "low": low, "high": high})
    return sorted(rows, key=lambda r: (r["accuracy"], r["group"]))
