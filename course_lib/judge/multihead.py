"""The judge's material of ``course_lib.checks.multihead`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare
from course_lib.checks.multihead import (
    PARAM_KEYS,
    _mha_case,
    _unbatched,
    check_merge_heads,
    check_multi_head_attention,
    check_numpy_params_from_torch,
    check_split_heads,
    merge_cases_from,
    params_cases_from,
    split_cases_from,
)


def _split(x, H, kind="right"):
    x = np.asarray(x)
    *lead, T, D = x.shape
    d = D // H
    if kind == "sequence":
        return x.reshape(*lead, H, T, d)
    if kind == "no transpose":
        return x.reshape(*lead, T, H, d)
    if kind == "interleaved":
        return np.moveaxis(x.reshape(*lead, T, d, H), -1, -3)
    return x.reshape(*lead, T, H, d).swapaxes(-3, -2)


def _merge(x, kind="right"):
    x = np.asarray(x)
    *lead, H, T, d = x.shape
    if kind == "no transpose":
        return x.reshape(*lead, T, H * d)
    if kind == "interleaved":
        return np.moveaxis(x, -3, -1).reshape(*lead, T, H * d)
    if kind == "average":
        return x.mean(axis=-3)
    return x.swapaxes(-3, -2).reshape(*lead, T, H * d)


_SEQ_SPLIT = ("the heads were split along the SEQUENCE axis: x.reshape(B, H, T, d_head) straight from "
              "(B, T, D) gives each head a block of tokens. Split the FEATURE axis: "
              "x.reshape(B, T, H, d_head), then swap T and H (.swapaxes(1, 2) / .transpose(1, 2)).")


_NO_TRANSPOSE_MERGE = ("the heads were merged in the wrong order: x.reshape(B, T, D) straight from "
                       "(B, H, T, d_head) mixes tokens of different heads. Move H back next to d_head "
                       "first (swap axes 1 and 2), then reshape to (B, T, D).")


_INTERLEAVED = ("head h must own a CONTIGUOUS block of features, h * d_head .. (h + 1) * d_head - 1 (as "
                "nn.MultiheadAttention does); yours interleaves them (feature j goes to head j % H). "
                "Reshape the last axis to (H, d_head), not (d_head, H).")


def _as_tuple(p) -> tuple:
    return tuple(p[k] for k in PARAM_KEYS)


def _right_split_heads_reshape(x, num_heads):
    *lead, T, D = x.shape
    y = x.reshape(*lead, T, num_heads, D // num_heads)
    return y.swapaxes(-3, -2) if isinstance(y, np.ndarray) else y.transpose(-3, -2)


def _right_merge_heads_reshape(x):
    *lead, H, T, d = x.shape
    if isinstance(x, np.ndarray):
        return np.swapaxes(x, -3, -2).reshape(*lead, T, H * d)
    return x.transpose(-3, -2).reshape(*lead, T, H * d)


# ---------------------------------------------------------------- split_heads
WRONG_SPLIT = [
    Wrong("heads split along the sequence axis", lambda x, num_heads: _split(x, num_heads, "sequence"), _SEQ_SPLIT),
    Wrong("heads not moved before the sequence axis", lambda x, num_heads: _split(x, num_heads, "no transpose"),
          "after x.reshape(B, T, H, d_head) the head axis must move in front of the sequence axis: the result "
          "is (B, H, T, d_head), so swap axes 1 and 2."),
    Wrong("heads interleaved", lambda x, num_heads: _split(x, num_heads, "interleaved"), _INTERLEAVED),
]


# written independently of course_lib.multihead; the students' and the kernel's editions replace each by a stub
def _right_split_heads(x, num_heads):
    *lead, T, D = x.shape
    d = D // num_heads
    return np.stack([x[..., h * d:(h + 1) * d] for h in range(num_heads)], axis=-3) if isinstance(x, np.ndarray) \
        else torch.stack([x[..., h * d:(h + 1) * d] for h in range(num_heads)], dim=-3)


def _right_split_heads_einops_style(x, num_heads):
    *lead, T, D = x.shape
    y = x.reshape(*lead, T, num_heads, D // num_heads)
    n = len(lead)
    order = list(range(n)) + [n + 1, n, n + 2]
    return np.transpose(y, order) if isinstance(y, np.ndarray) else y.permute(*order)


def _breaks_split_3d_only(x, num_heads):
    B, T, D = x.shape
    return np.asarray(x).reshape(B, T, num_heads, D // num_heads).swapaxes(1, 2)


def _breaks_split_numpy_only(x, num_heads):
    return _right_split_heads_reshape(np.asarray(x), num_heads)


def split_cases() -> list[Case]:
    """The hidden cases of ``check_split_heads``: leading dims none, (B,), (B, C), and a torch tensor."""
    return split_cases_from(seeded(3011), [((2, 5, 12), 3), ((1, 7, 8), 2), ((3, 4, 6), 6), ((5, 6), 2),
                                           ((2, 2, 3, 4), 2)], torch_shapes=[((2, 3, 8), 4)])


SPLIT_HEADS = declare("03_multihead", "split_heads", check_split_heads,
            misconceptions=WRONG_SPLIT,
            promises=(
                Breaks("any leading dims (..., T, D)", _breaks_split_3d_only, "split_heads"),
                Breaks("torch in, torch out", _breaks_split_numpy_only, "same kind"),
            ),
            right=(Right(_right_split_heads), Right(_right_split_heads_reshape),
                   Right(_right_split_heads_einops_style)))


# ---------------------------------------------------------------- merge_heads
WRONG_MERGE = [
    Wrong("heads merged without transposing back", lambda x: _merge(x, "no transpose"), _NO_TRANSPOSE_MERGE),
    Wrong("heads interleaved", lambda x: _merge(x, "interleaved"), _INTERLEAVED),
    Wrong("heads averaged instead of concatenated", lambda x: _merge(x, "average"),
          "the heads are CONCATENATED along the features (D = H * d_head), not averaged; the output "
          "projection W_o then mixes them."),
]


def _right_merge_heads(x):
    H = x.shape[-3]
    parts = [x[..., h, :, :] for h in range(H)]
    return np.concatenate(parts, axis=-1) if isinstance(x, np.ndarray) else torch.cat(parts, dim=-1)


def _right_merge_heads_moveaxis(x):
    *lead, H, T, d = x.shape
    if isinstance(x, np.ndarray):
        return np.moveaxis(x, -3, -2).reshape(*lead, T, H * d)
    return torch.movedim(x, -3, -2).reshape(*lead, T, H * d)


def _breaks_merge_numpy_only(x):
    return _right_merge_heads_reshape(np.asarray(x))


def merge_cases() -> list[Case]:
    """The hidden cases of ``check_merge_heads``."""
    return merge_cases_from(seeded(3012), [(2, 3, 5, 4), (1, 2, 7, 3), (3, 6, 4, 1), (2, 3, 4), (2, 1, 2, 3, 2)],
                            [(2, 2, 3, 4)])


MERGE_HEADS = declare("03_multihead", "merge_heads", check_merge_heads,
            misconceptions=WRONG_MERGE,
            promises=(
                Breaks("torch in, torch out", _breaks_merge_numpy_only, "same kind"),
            ),
            right=(Right(_right_merge_heads), Right(_right_merge_heads_reshape), Right(_right_merge_heads_moveaxis)))


# ---------------------------------------------------------------- multi_head_attention
def _softmax_rows(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _np_mha(query, key, value, w_q, w_k, w_v, w_o, num_heads, b_q=None, b_k=None, b_v=None, b_o=None,
            mask=None, *, split="right", merge="right", scale="head", out_proj=True, transpose_w=False,
            biases=True, invert_mask=False, mask_after=False):
    def proj(x, w, b):
        w = np.asarray(w, dtype=np.float64)
        y = np.asarray(x, dtype=np.float64) @ (w.T if transpose_w else w)
        return y if (b is None or not biases) else y + b

    H, D = num_heads, np.shape(query)[-1]
    q = _split(proj(query, w_q, b_q), H, split)
    k = _split(proj(key, w_k, b_k), H, split)
    v = _split(proj(value, w_v, b_v), H, split)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(D if scale == "model" else D // H)
    if mask is not None and not mask_after:
        scores = np.where(~np.asarray(mask) if invert_mask else mask, scores, -np.inf)
    w = _softmax_rows(scores)
    if mask is not None and mask_after:
        w = np.where(mask, w, 0.0)
    heads = w @ v
    if split == "sequence" and merge == "right":
        merge = "no transpose"  # the inverse of the sequence split
    if split == "interleaved":
        merge = "interleaved"
    out = _merge(heads, merge)
    return (proj(out, w_o, b_o) if out_proj else out), w


def _wrong_mha(**options):
    return lambda *args, **kwargs: _np_mha(*args, **kwargs, **options)


_MHA_WRONGS = {
    "heads split along the sequence axis": (dict(split="sequence"), _SEQ_SPLIT),
    "heads merged without transposing back": (dict(merge="no transpose"), _NO_TRANSPOSE_MERGE),
    "heads interleaved": (dict(split="interleaved"), _INTERLEAVED),
    "scaled by sqrt(d_model)": (dict(scale="model"),
                                "each head's scores are divided by sqrt(d_head) = sqrt(D / H), the size of "
                                "the vectors that are dotted, not by sqrt(D)."),
    "output projection missing": (dict(out_proj=False),
                                  "after merging the heads, apply the output projection: out @ w_o + b_o."),
    "weights in nn.Linear orientation": (dict(transpose_w=True),
                                         "the matrices are given in the paper's orientation, (D_in, D_out), "
                                         "applied as x @ w; you used x @ w.T (nn.Linear's convention)."),
    "biases ignored": (dict(biases=False), "add the biases b_q, b_k, b_v, b_o (when they are not None) "
                                           "after each projection."),
    "mask inverted": (dict(invert_mask=True), "the mask is inverted: True means 'may attend', so put -inf "
                                              "where the mask is False."),
    "mask after softmax": (dict(mask_after=True), "the mask was applied after the softmax, so the weights no "
                                                  "longer sum to 1; put -inf into the scores before it."),
}


WRONG_MHA = [Wrong(name, _wrong_mha(**opts), msg) for name, (opts, msg) in _MHA_WRONGS.items()]


def _right_multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads,
                                b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    def lin(x, w, b):
        return x @ w + (0.0 if b is None else b)

    D = query.shape[-1]
    d = D // num_heads
    q, k, v = lin(query, w_q, b_q), lin(key, w_k, b_k), lin(value, w_v, b_v)
    heads, weights = [], []
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    for h in range(num_heads):
        sl = slice(h * d, (h + 1) * d)
        s = q[..., sl] @ np.swapaxes(k[..., sl], -1, -2) / math.sqrt(d)  # (..., T, S)
        if mask is not None:
            m = np.broadcast_to(mask, lead + (num_heads, q.shape[-2], k.shape[-2]))[..., h, :, :]
            s = np.where(m, s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        w = e / e.sum(-1, keepdims=True)
        heads.append(w @ v[..., sl])
        weights.append(w)
    return lin(np.concatenate(heads, -1), w_o, b_o), np.stack(weights, axis=-3)


def _right_multi_head_attention_einsum(query, key, value, w_q, w_k, w_v, w_o, num_heads,
                                       b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    def proj(x, w, b):
        return np.einsum("...d,de->...e", x, w) + (0.0 if b is None else b)

    H = num_heads
    q = _right_split_heads_reshape(proj(query, w_q, b_q), H)
    k = _right_split_heads_reshape(proj(key, w_k, b_k), H)
    v = _right_split_heads_reshape(proj(value, w_v, b_v), H)
    s = np.einsum("...htd,...hsd->...hts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    w = e / e.sum(-1, keepdims=True)
    return proj(_right_merge_heads_reshape(np.einsum("...hts,...hsd->...htd", w, v)), w_o, b_o), w


def _right_multi_head_attention_float32(query, key, value, w_q, w_k, w_v, w_o, num_heads,
                                        b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    f = (lambda a: None if a is None else np.asarray(a, dtype=np.float32))
    out, w = _right_multi_head_attention_einsum(f(query), f(key), f(value), f(w_q), f(w_k), f(w_v), f(w_o),
                                                num_heads, f(b_q), f(b_k), f(b_v), f(b_o), mask)
    return out.astype(np.float32), w.astype(np.float32)


def _breaks_mha_mutates(query, key, value, w_q, *args, **kwargs):
    out = _right_multi_head_attention(query, key, value, w_q, *args, **kwargs)
    w_q *= 1.0 + 1e-3
    return out


def mha_cases() -> list[Case]:
    """The hidden cases of ``check_multi_head_attention``."""
    rng = seeded(3033)
    pad = (np.arange(6) < np.array([6, 4, 2])[:, None])[:, None, None, :]  # (B, 1, 1, S)
    both = (np.tri(7, dtype=bool) & (np.arange(7) < np.array([7, 5])[:, None])[:, None, :])[:, None]  # (B, 1, T, S)
    return [
        _mha_case(rng, "B=3, T=4, S=6, D=12, H=3, no biases, padding mask (B, 1, 1, S)", 3, 4, 6, 12, 3,
                  bias=False, mask=pad),
        _mha_case(rng, "self-attention B=2, T=7, D=16, H=4, causal AND padding (B, 1, T, S)", 2, 7, 7, 16, 4,
                  mask=both, cross=False),
        _mha_case(rng, "one head, T=3, S=5, D=6", 1, 3, 5, 6, 1),
        _mha_case(rng, "B=1, T=2, S=9, D=12, H=6", 1, 2, 9, 12, 6),
        _unbatched(_mha_case(rng, "no batch axis: query (4, 8), key (5, 8), H=2", 1, 4, 5, 8, 2)),
    ]


MULTI_HEAD_ATTENTION = declare("03_multihead", "multi_head_attention", check_multi_head_attention,
            misconceptions=WRONG_MHA,
            promises=(
                Breaks("inputs unchanged", _breaks_mha_mutates, "input modified in place"),
            ),
            right=(Right(_right_multi_head_attention), Right(_right_multi_head_attention_einsum),
                   Right(_right_multi_head_attention_float32)))


# ---------------------------------------------------------------- numpy_params_from_torch
def _params(m, *, transpose=True, transpose_out=True):
    D = m.embed_dim
    w = m.in_proj_weight.detach().to(torch.float64).numpy()
    b = None if m.in_proj_bias is None else m.in_proj_bias.detach().to(torch.float64).numpy()
    p = {f"w_{n}": (w[i * D:(i + 1) * D].T if transpose else w[i * D:(i + 1) * D]) for i, n in enumerate("qkv")}
    p.update({f"b_{n}": None if b is None else b[i * D:(i + 1) * D] for i, n in enumerate("qkv")})
    wo = m.out_proj.weight.detach().to(torch.float64).numpy()
    p["w_o"] = wo.T if (transpose and transpose_out) else wo
    p["b_o"] = None if m.out_proj.bias is None else m.out_proj.bias.detach().to(torch.float64).numpy()
    p["num_heads"] = m.num_heads
    return p


WRONG_PARAMS = [
    Wrong("weights not transposed", lambda m: _params(m, transpose=False),
          "nn.Linear and in_proj_weight store weights as (out_features, in_features) and compute x @ W.T; "
          "multi_head_attention computes x @ w, so transpose each block (and out_proj.weight)."),
    Wrong("output projection not transposed", lambda m: _params(m, transpose_out=False),
          "out_proj.weight is an nn.Linear weight too, (out, in): transpose it like the q, k, v blocks."),
]


def _right_numpy_params_from_torch(m):
    D = m.embed_dim
    W = m.in_proj_weight.detach().double().numpy()
    b = m.in_proj_bias
    q, k, v = np.split(W, 3, axis=0)
    out = dict(w_q=q.T, w_k=k.T, w_v=v.T, w_o=m.out_proj.weight.detach().double().numpy().T,
               num_heads=m.num_heads)
    if b is None:
        out.update(b_q=None, b_k=None, b_v=None, b_o=None)
    else:
        bq, bk, bv = np.split(b.detach().double().numpy(), 3)
        out.update(b_q=bq, b_k=bk, b_v=bv, b_o=m.out_proj.bias.detach().double().numpy())
    assert out["w_q"].shape == (D, D)
    return out


def _right_numpy_params_from_torch_chunk(m):
    D = m.embed_dim
    W = m.in_proj_weight.detach().numpy()
    out = {f"w_{n}": W[i * D:(i + 1) * D].T.copy() for i, n in enumerate("qkv")}
    bias = m.in_proj_bias
    for i, n in enumerate("qkv"):
        out[f"b_{n}"] = None if bias is None else bias.detach().numpy()[i * D:(i + 1) * D]
    out["w_o"] = m.out_proj.weight.detach().numpy().T
    out["b_o"] = None if m.out_proj.bias is None else m.out_proj.bias.detach().numpy()
    out["num_heads"] = m.num_heads
    return out


def _right_numpy_params_from_torch_float32(m):
    p = _right_numpy_params_from_torch(m)
    return {k: (v.astype(np.float32) if isinstance(v, np.ndarray) else v) for k, v in p.items()}


def _breaks_params_torch_tensors(m):
    return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v)
            for k, v in _right_numpy_params_from_torch(m).items()}


def _breaks_params_tuple(m):
    return tuple(_right_numpy_params_from_torch(m).values())


def params_cases() -> list[Case]:
    """The hidden cases of ``check_numpy_params_from_torch``."""
    return params_cases_from([(3041, 12, 3, True, True), (3042, 6, 3, False, False), (3043, 10, 5, True, False)])


NUMPY_PARAMS_FROM_TORCH = declare("03_multihead", "numpy_params_from_torch", check_numpy_params_from_torch,
            misconceptions=WRONG_PARAMS,
            promises=(
                Breaks("numpy arrays", _breaks_params_torch_tensors, "numpy array"),
                Breaks("a dict", _breaks_params_tuple, "dict"),
            ),
            right=(Right(_right_numpy_params_from_torch), Right(_right_numpy_params_from_torch_chunk),
                   Right(_right_numpy_params_from_torch_float32)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (SPLIT_HEADS, MERGE_HEADS, MULTI_HEAD_ATTENTION, NUMPY_PARAMS_FROM_TORCH)
