"""The lesson 08 references (course_lib.clinical) and the HPO loader, against direct computations."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from course_lib import clinical as C
from course_lib.bio import hpo


def test_mean_pool_matches_a_loop_and_ignores_padding():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    lengths = [5, 2, 0]
    mask = torch.arange(5)[None] < torch.tensor(lengths)[:, None]
    out = C.mean_pool(h, mask)
    for b, n in enumerate(lengths):
        expected = h[b, :n].mean(0) if n else torch.zeros(4, dtype=torch.float64)
        assert torch.allclose(out[b], expected)
    h2 = h.clone()
    h2[~mask] = 1e6  # padding values do not matter
    assert torch.allclose(C.mean_pool(h2, mask.long()), out)
    assert C.mean_pool(h.float(), mask).dtype == torch.float32


def test_cosine_top_k_brute_force_ties_and_errors():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(4, 6)), rng.normal(size=(9, 6)) * rng.uniform(0.1, 9, size=(9, 1))
    scores, idx = C.cosine_top_k(q, k, 3)
    for i in range(4):
        cos = [q[i] @ kk / np.linalg.norm(q[i]) / np.linalg.norm(kk) for kk in k]
        assert list(idx[i]) == sorted(range(9), key=lambda j: -cos[j])[:3]
        assert np.allclose(scores[i], np.array(cos)[idx[i]])
    keys = np.array([[1.0, 0], [0, 1], [2.0, 0], [1.0, 0]])
    assert C.cosine_top_k(np.array([[3.0, 0]]), keys, 4)[1].tolist() == [[0, 2, 3, 1]]
    assert C.cosine_top_k(np.zeros((1, 2)), keys, 2)[0].tolist() == [[0.0, 0.0]]
    for bad in (0, 5):
        with pytest.raises(ValueError):
            C.cosine_top_k(q, keys, bad)


def test_freeze_for_probe_trains_only_the_head():
    m = nn.Module()
    m.encoder = nn.Linear(4, 3)
    m.classifier = nn.Linear(3, 2)
    m.classifier.weight.requires_grad_(False)
    assert C.freeze_for_probe(m, "classifier") == 8
    assert [p.requires_grad for p in m.encoder.parameters()] == [False, False]
    assert all(p.requires_grad for p in m.classifier.parameters())
    with pytest.raises(ValueError):
        C.freeze_for_probe(m, "head")


def test_attention_rollout_is_the_product_of_residual_mixing():
    g = torch.Generator().manual_seed(1)
    att = torch.softmax(torch.randn(3, 2, 4, 4, generator=g, dtype=torch.float64), -1)
    eye = torch.eye(4, dtype=torch.float64)
    a = [0.5 * att[l].mean(0) + 0.5 * eye for l in range(3)]
    assert torch.allclose(C.attention_rollout(att), a[2] @ a[1] @ a[0])
    assert torch.allclose(C.attention_rollout(att).sum(-1), torch.ones(4, dtype=torch.float64))
    plain = [att[l].mean(0) for l in range(3)]
    assert torch.allclose(C.attention_rollout(att, residual=False), plain[2] @ plain[1] @ plain[0])


def test_tfidf_baseline_finds_shared_words_only():
    keys = ["enlarged heart", "abnormal kidney", "heart murmur"]
    q, k = C.tfidf_vectors(["kidney problem", "cardiomegaly"], keys)
    _, idx = C.cosine_top_k(q, k, 1)
    assert idx[0, 0] == 1 and idx[1, 0] == 0  # no shared word: all scores 0, first key
    assert not q[1].any()


def test_encoder_classifier_pools_and_classifies():
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 6)

        def forward(self, input_ids, attention_mask):
            return type("Out", (), {"last_hidden_state": self.emb(input_ids)})()

    torch.manual_seed(0)
    model = C.EncoderClassifier(Tiny(), 6, 3)
    ids, mask = torch.tensor([[1, 2, 0], [3, 0, 0]]), torch.tensor([[1, 1, 0], [1, 0, 0]])
    pooled = nn.functional.normalize(C.mean_pool(model.encoder.emb(ids), mask), dim=-1)
    assert torch.allclose(model(ids, mask), model.classifier(pooled))
    first = C.EncoderClassifier(model.encoder, 6, 3, pool=lambda h, m: h[:, 0])  # another pooling, passed in
    first.classifier = model.classifier
    assert torch.allclose(first(ids, mask), model.classifier(nn.functional.normalize(model.encoder.emb(ids)[:, 0], dim=-1)))


def test_hpo_terms_and_layperson_pairs():
    terms = {t.id: t for t in hpo.load_terms()}
    assert len(terms) > 18_000
    assert terms["HP:0001640"].name == "Cardiomegaly"
    assert ("Enlarged heart", "EXACT", "layperson") in terms["HP:0001640"].synonyms
    assert terms["HP:0001640"].parents == ("HP:0001627",)
    pairs = hpo.layperson_pairs(50, seed=3)
    assert pairs == hpo.layperson_pairs(50, seed=3) and len({p[0] for p in pairs}) == 50
    for tid, name, lay in pairs:
        assert terms[tid].name == name and lay.lower() != name.lower()
        assert (lay, "EXACT", "layperson") in terms[tid].synonyms
    with pytest.raises(ValueError):
        hpo.layperson_pairs(0)
