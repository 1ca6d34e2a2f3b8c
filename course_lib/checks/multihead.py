"""Checks for lesson 03 (multi-head attention): split and merge heads, multi-head attention in
numpy, and loading the weights of ``torch.nn.MultiheadAttention``.

Each ``check_*`` compares the student's function with ``course_lib.multihead`` on fixed
and seeded inputs and names these misconceptions when it sees them:

* ``heads split along the sequence axis``  ``x.reshape(B, H, T, d_head)`` straight from
                                           (B, T, D): each "head" gets a block of TOKENS
* ``heads not moved before the sequence axis``  ``x.reshape(B, T, H, d_head)`` without the transpose
* ``heads interleaved``                    head h gets features h, h+H, h+2H, ... instead of a
                                           contiguous block of d_head features
* ``heads merged without transposing back``  ``x.reshape(B, T, D)`` straight from (B, H, T, d_head)
* ``heads averaged instead of concatenated``  mean over the head axis: (B, T, d_head)
* ``scaled by sqrt(d_model)``              scores divided by sqrt(D) instead of sqrt(d_head)
* ``output projection missing``            heads concatenated but W_o not applied
* ``weights in nn.Linear orientation``     ``x @ w.T``: the matrices are given as (D_in, D_out)
* ``biases ignored``                       b_q, b_k, b_v, b_o not added
* ``mask inverted`` / ``mask after softmax``  as in lessons 01 and 02
* ``weights not transposed``               nn.Linear stores (out, in); x @ W needs W.T
* ``output projection not transposed``     the q, k, v blocks transposed but out_proj.weight not

``hidden=True`` selects other, larger inputs for the hidden tests.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from course_lib import multihead as ref
from course_lib.checks.core import (
    forbid,
    Case,
    Wrong,
    call_student,
    compare_with_reference,
    seeded,
)
from course_lib.checks.exercise import Breaks, Right, declare  # noqa: F401

__all__ = [
    "check_split_heads",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_numpy_params_from_torch",
    "WRONG_SPLIT",
    "WRONG_MERGE",
    "WRONG_MHA",
    "WRONG_PARAMS",
]

FORBIDDEN = tuple(f"course_lib.multihead.{n}" for n in
                  ("split_heads", "merge_heads", "head_weights", "multi_head_attention",
                   "numpy_params_from_torch")) + forbid("torch.nn.functional.multi_head_attention_forward")
PARAM_KEYS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o", "num_heads")


# ---------------------------------------------------------------- split / merge, right and wrong
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

WRONG_SPLIT = [
    Wrong("heads split along the sequence axis", lambda x, num_heads: _split(x, num_heads, "sequence"), _SEQ_SPLIT),
    Wrong("heads not moved before the sequence axis", lambda x, num_heads: _split(x, num_heads, "no transpose"),
          "after x.reshape(B, T, H, d_head) the head axis must move in front of the sequence axis: the result "
          "is (B, H, T, d_head), so swap axes 1 and 2."),
    Wrong("heads interleaved", lambda x, num_heads: _split(x, num_heads, "interleaved"), _INTERLEAVED),
]

WRONG_MERGE = [
    Wrong("heads merged without transposing back", lambda x: _merge(x, "no transpose"), _NO_TRANSPOSE_MERGE),
    Wrong("heads interleaved", lambda x: _merge(x, "interleaved"), _INTERLEAVED),
    Wrong("heads averaged instead of concatenated", lambda x: _merge(x, "average"),
          "the heads are CONCATENATED along the features (D = H * d_head), not averaged; the output "
          "projection W_o then mixes them."),
]


def _split_cases(hidden: bool) -> list[Case]:
    rng = seeded(3011 if hidden else 31)
    shapes = [((2, 5, 12), 3), ((1, 7, 8), 2)] if hidden else [((2, 3, 8), 2)]
    if hidden:
        shapes += [((3, 4, 6), 6), ((5, 6), 2), ((2, 2, 3, 4), 2)]  # leading dims: none, (B,), (B, C)
    cases = [Case(f"x of shape {s}, num_heads={h}", (rng.normal(size=s), h)) for s, h in shapes]
    if hidden:
        cases.append(Case("a torch tensor of shape (2, 3, 8), num_heads=4",
                          (torch.from_numpy(rng.normal(size=(2, 3, 8))), 4)))
    return cases


def _merge_cases(hidden: bool) -> list[Case]:
    rng = seeded(3012 if hidden else 32)
    shapes = [(2, 3, 5, 4), (1, 2, 7, 3), (3, 6, 4, 1), (2, 3, 4), (2, 1, 2, 3, 2)] if hidden else [(2, 2, 3, 4)]
    cases = [Case(f"x of shape {s} (..., H, T, d_head)", (rng.normal(size=s),)) for s in shapes]
    if hidden:
        cases.append(Case("a torch tensor of shape (2, 2, 3, 4)", (torch.from_numpy(rng.normal(size=(2, 2, 3, 4))),)))
    return cases


def _same_kind(student, cases, exercise) -> None:
    """The docstring promises numpy in, numpy out; torch in, torch out."""
    for case in cases:
        out = call_student(student, case, exercise, FORBIDDEN)
        kind = torch.Tensor if isinstance(case.args[0], torch.Tensor) else np.ndarray
        if not isinstance(out, kind):
            raise AssertionError(f"{exercise}: on input '{case.label}' the docstring promises the same kind as the "
                                 f"input ({kind.__module__.split('.')[0]} {kind.__name__}), got {type(out).__name__}")


def check_split_heads(student, hidden: bool = False) -> None:
    """Student ``split_heads(x, num_heads)``: (..., T, D) -> (..., H, T, D/H), heads along features."""
    cases = _split_cases(hidden)
    compare_with_reference(student, ref.split_heads, cases, exercise="split_heads",
                           wrongs=WRONG_SPLIT, forbidden=FORBIDDEN)
    _same_kind(student, cases, "split_heads")


def check_merge_heads(student, hidden: bool = False) -> None:
    """Student ``merge_heads(x)``: (..., H, T, d_head) -> (..., T, H * d_head), inverse of split_heads."""
    cases = _merge_cases(hidden)
    compare_with_reference(student, ref.merge_heads, cases, exercise="merge_heads",
                           wrongs=WRONG_MERGE, forbidden=FORBIDDEN)
    _same_kind(student, cases, "merge_heads")


# ---------------------------------------------------------------- multi-head attention, right and wrong
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


def _mha_case(rng, label, B, T, S, D, H, bias=True, mask=None, cross=True):
    x = rng.normal(size=(B, T, D))
    kv = rng.normal(size=(B, S, D)) if cross else x
    ws = {f"w_{n}": rng.normal(size=(D, D)) / math.sqrt(D) * 1.5 for n in "qkvo"}
    kwargs = {f"b_{n}": rng.normal(size=D) * 0.5 for n in "qkvo"} if bias else {}
    if mask is not None:
        kwargs["mask"] = mask
    args = (x, kv, kv, ws["w_q"], ws["w_k"], ws["w_v"], ws["w_o"], H)
    return Case(label, args, kwargs)


def _mha_cases(hidden: bool) -> list[Case]:
    rng = seeded(3033 if hidden else 33)
    if not hidden:
        return [
            _mha_case(rng, "self-attention, B=2, T=5, D=8, H=2", 2, 5, 5, 8, 2, cross=False),
            _mha_case(rng, "cross-attention T=3, S=6, D=8, H=4, causal_mask(3, 6)", 2, 3, 6, 8, 4,
                      mask=np.tri(3, 6, 3, dtype=bool)),
        ]
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


def _unbatched(case: Case) -> Case:
    args = (case.args[0][0], case.args[1][0], case.args[2][0]) + case.args[3:]
    return Case(case.label, args, case.kwargs)


def check_multi_head_attention(student, hidden: bool = False) -> None:
    """Student numpy ``multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads,
    b_q=None, b_k=None, b_v=None, b_o=None, mask=None)`` -> (out (B, T, D), weights (B, H, T, S))."""
    compare_with_reference(student, ref.multi_head_attention, _mha_cases(hidden),
                           exercise="multi_head_attention", wrongs=WRONG_MHA, forbidden=FORBIDDEN,
                           output_names=("output", "weights"))


# ---------------------------------------------------------------- loading nn.MultiheadAttention weights
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


def _as_tuple(p) -> tuple:
    return tuple(p[k] for k in PARAM_KEYS)


def _torch_mha(seed: int, D: int, H: int, bias: bool, batch_first: bool):
    g = torch.Generator().manual_seed(seed)
    m = torch.nn.MultiheadAttention(D, H, bias=bias, batch_first=batch_first, dtype=torch.float64)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) / math.sqrt(D))
    return m.eval()


def _params_cases(hidden: bool) -> list[Case]:
    specs = [(3041, 12, 3, True, True), (3042, 6, 3, False, False), (3043, 10, 5, True, False)] if hidden \
        else [(41, 8, 2, True, True)]
    return [Case(f"nn.MultiheadAttention({D}, {H}, bias={b}, batch_first={bf})", (_torch_mha(s, D, H, b, bf),))
            for s, D, H, b, bf in specs]


def check_numpy_params_from_torch(student, hidden: bool = False) -> None:
    """Student ``numpy_params_from_torch(m)`` -> dict of numpy weights for multi_head_attention."""
    exercise = "numpy_params_from_torch"
    cases = _params_cases(hidden)
    for case in cases:
        got = call_student(student, case, exercise, FORBIDDEN, observe=_plain_params)
        if not isinstance(got, dict):
            raise AssertionError(f"{exercise}: return a dict with keys {', '.join(PARAM_KEYS)}; "
                                 f"got {got[1] if isinstance(got, tuple) else type(got).__name__}")
        missing = [k for k in PARAM_KEYS if k not in got]
        if missing:
            raise AssertionError(f"{exercise}: the dict lacks the keys {missing} (needed to call "
                                 "multi_head_attention(q, k, v, **params))")
        for k in PARAM_KEYS[:-1]:
            if got[k] is not None and not isinstance(got[k], np.ndarray):
                raise AssertionError(f"{exercise}: params[{k!r}] must be a numpy array (or None for a missing "
                                     f"bias), got {type(got[k]).__name__}; use .detach().numpy()")
    compare_with_reference(student, ref.numpy_params_from_torch, cases, exercise=exercise, wrongs=WRONG_PARAMS,
                           forbidden=FORBIDDEN, output_names=PARAM_KEYS, observe=_params_tuple)


def _plain_params(p):
    """The student's dict as plain data (a dict of arrays/None/int), or a marker for another type."""
    if not isinstance(p, dict):
        return ("not a dict", type(p).__name__)
    return {str(k): v for k, v in p.items() if k in PARAM_KEYS}


def _params_tuple(p):
    p = _plain_params(p)
    if isinstance(p, tuple):
        return p
    return tuple(p.get(k) for k in PARAM_KEYS)


# ---------------------------------------------------------------- right alternatives (course_lib/checks/exercise.py)
# written independently of course_lib.multihead; the students' and the kernel's editions replace each by a stub
def _right_split_heads(x, num_heads):
    *lead, T, D = x.shape
    d = D // num_heads
    return np.stack([x[..., h * d:(h + 1) * d] for h in range(num_heads)], axis=-3) if isinstance(x, np.ndarray) \
        else torch.stack([x[..., h * d:(h + 1) * d] for h in range(num_heads)], dim=-3)


def _right_split_heads_reshape(x, num_heads):
    *lead, T, D = x.shape
    y = x.reshape(*lead, T, num_heads, D // num_heads)
    return y.swapaxes(-3, -2) if isinstance(y, np.ndarray) else y.transpose(-3, -2)


def _right_split_heads_einops_style(x, num_heads):
    *lead, T, D = x.shape
    y = x.reshape(*lead, T, num_heads, D // num_heads)
    n = len(lead)
    order = list(range(n)) + [n + 1, n, n + 2]
    return np.transpose(y, order) if isinstance(y, np.ndarray) else y.permute(*order)


def _right_merge_heads(x):
    H = x.shape[-3]
    parts = [x[..., h, :, :] for h in range(H)]
    return np.concatenate(parts, axis=-1) if isinstance(x, np.ndarray) else torch.cat(parts, dim=-1)


def _right_merge_heads_reshape(x):
    *lead, H, T, d = x.shape
    if isinstance(x, np.ndarray):
        return np.swapaxes(x, -3, -2).reshape(*lead, T, H * d)
    return x.transpose(-3, -2).reshape(*lead, T, H * d)


def _right_merge_heads_moveaxis(x):
    *lead, H, T, d = x.shape
    if isinstance(x, np.ndarray):
        return np.moveaxis(x, -3, -2).reshape(*lead, T, H * d)
    return torch.movedim(x, -3, -2).reshape(*lead, T, H * d)


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


# ---------------------------------------------------------------- answers that break one promise each
def _breaks_split_3d_only(x, num_heads):
    B, T, D = x.shape
    return np.asarray(x).reshape(B, T, num_heads, D // num_heads).swapaxes(1, 2)


def _breaks_split_numpy_only(x, num_heads):
    return _right_split_heads_reshape(np.asarray(x), num_heads)


def _breaks_merge_numpy_only(x):
    return _right_merge_heads_reshape(np.asarray(x))


def _breaks_params_torch_tensors(m):
    return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v)
            for k, v in _right_numpy_params_from_torch(m).items()}


def _breaks_mha_mutates(query, key, value, w_q, *args, **kwargs):
    out = _right_multi_head_attention(query, key, value, w_q, *args, **kwargs)
    w_q *= 1.0 + 1e-3
    return out


def _breaks_params_tuple(m):
    return tuple(_right_numpy_params_from_torch(m).values())


# ---------------------------------------------------------------- the exercises (course_lib/checks/exercise.py)
EXERCISES = (
    declare("03_multihead", "split_heads", check_split_heads,
            misconceptions=WRONG_SPLIT,
            promises=(
                Breaks("any leading dims (..., T, D)", _breaks_split_3d_only, "split_heads"),
                Breaks("torch in, torch out", _breaks_split_numpy_only, "same kind"),
            ),
            right=(Right(_right_split_heads), Right(_right_split_heads_reshape),
                   Right(_right_split_heads_einops_style))),
    declare("03_multihead", "merge_heads", check_merge_heads,
            misconceptions=WRONG_MERGE,
            promises=(
                Breaks("torch in, torch out", _breaks_merge_numpy_only, "same kind"),
            ),
            right=(Right(_right_merge_heads), Right(_right_merge_heads_reshape), Right(_right_merge_heads_moveaxis))),
    declare("03_multihead", "multi_head_attention", check_multi_head_attention,
            misconceptions=WRONG_MHA,
            promises=(
                Breaks("inputs unchanged", _breaks_mha_mutates, "input modified in place"),
            ),
            right=(Right(_right_multi_head_attention), Right(_right_multi_head_attention_einsum),
                   Right(_right_multi_head_attention_float32))),
    declare("03_multihead", "numpy_params_from_torch", check_numpy_params_from_torch,
            misconceptions=WRONG_PARAMS,
            promises=(
                Breaks("numpy arrays", _breaks_params_torch_tensors, "numpy array"),
                Breaks("a dict", _breaks_params_tuple, "dict"),
            ),
            right=(Right(_right_numpy_params_from_torch), Right(_right_numpy_params_from_torch_chunk),
                   Right(_right_numpy_params_from_torch_float32))),
)
