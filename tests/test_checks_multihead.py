"""course_lib.checks.multihead: every known-wrong answer is caught and NAMED, correct independent
answers pass (visible and hidden), calling the reference is an IntegrityError."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_lib import multihead
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import multihead as C
from named import assert_named_alone


# ---------------------------------------------------------------- independent correct answers
def split_heads(x, num_heads):
    *lead, T, D = x.shape
    d = D // num_heads
    return np.stack([x[..., h * d:(h + 1) * d] for h in range(num_heads)], axis=-3) if isinstance(x, np.ndarray) \
        else torch.stack([x[..., h * d:(h + 1) * d] for h in range(num_heads)], dim=-3)


def split_heads_reshape(x, num_heads):
    *lead, T, D = x.shape
    y = x.reshape(*lead, T, num_heads, D // num_heads)
    return y.swapaxes(-3, -2) if isinstance(y, np.ndarray) else y.transpose(-3, -2)


def split_heads_einops_style(x, num_heads):
    *lead, T, D = x.shape
    y = x.reshape(*lead, T, num_heads, D // num_heads)
    n = len(lead)
    order = list(range(n)) + [n + 1, n, n + 2]
    return np.transpose(y, order) if isinstance(y, np.ndarray) else y.permute(*order)


def merge_heads(x):
    H = x.shape[-3]
    parts = [x[..., h, :, :] for h in range(H)]
    return np.concatenate(parts, axis=-1) if isinstance(x, np.ndarray) else torch.cat(parts, dim=-1)


def merge_heads_reshape(x):
    *lead, H, T, d = x.shape
    if isinstance(x, np.ndarray):
        return np.swapaxes(x, -3, -2).reshape(*lead, T, H * d)
    return x.transpose(-3, -2).reshape(*lead, T, H * d)


def merge_heads_moveaxis(x):
    *lead, H, T, d = x.shape
    if isinstance(x, np.ndarray):
        return np.moveaxis(x, -3, -2).reshape(*lead, T, H * d)
    return torch.movedim(x, -3, -2).reshape(*lead, T, H * d)


def multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, num_heads,
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


def multi_head_attention_einsum(query, key, value, w_q, w_k, w_v, w_o, num_heads,
                                b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    def proj(x, w, b):
        return np.einsum("...d,de->...e", x, w) + (0.0 if b is None else b)

    H = num_heads
    q = split_heads_reshape(proj(query, w_q, b_q), H)
    k = split_heads_reshape(proj(key, w_k, b_k), H)
    v = split_heads_reshape(proj(value, w_v, b_v), H)
    s = np.einsum("...htd,...hsd->...hts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    w = e / e.sum(-1, keepdims=True)
    return proj(merge_heads_reshape(np.einsum("...hts,...hsd->...htd", w, v)), w_o, b_o), w


def multi_head_attention_float32(query, key, value, w_q, w_k, w_v, w_o, num_heads,
                                 b_q=None, b_k=None, b_v=None, b_o=None, mask=None):
    f = (lambda a: None if a is None else np.asarray(a, dtype=np.float32))
    out, w = multi_head_attention_einsum(f(query), f(key), f(value), f(w_q), f(w_k), f(w_v), f(w_o), num_heads,
                                         f(b_q), f(b_k), f(b_v), f(b_o), mask)
    return out.astype(np.float32), w.astype(np.float32)


def numpy_params_from_torch(m):
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


def numpy_params_from_torch_chunk(m):
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


def numpy_params_from_torch_float32(m):
    p = numpy_params_from_torch(m)
    return {k: (v.astype(np.float32) if isinstance(v, np.ndarray) else v) for k, v in p.items()}


CORRECT = [
    (C.check_split_heads, split_heads), (C.check_split_heads, split_heads_reshape),
    (C.check_split_heads, split_heads_einops_style),
    (C.check_merge_heads, merge_heads), (C.check_merge_heads, merge_heads_reshape),
    (C.check_merge_heads, merge_heads_moveaxis),
    (C.check_multi_head_attention, multi_head_attention), (C.check_multi_head_attention, multi_head_attention_einsum),
    (C.check_multi_head_attention, multi_head_attention_float32),
    (C.check_numpy_params_from_torch, numpy_params_from_torch),
    (C.check_numpy_params_from_torch, numpy_params_from_torch_chunk),
    (C.check_numpy_params_from_torch, numpy_params_from_torch_float32),
]
WRONGS = [(C.check_split_heads, w) for w in C.WRONG_SPLIT] + \
         [(C.check_merge_heads, w) for w in C.WRONG_MERGE] + \
         [(C.check_multi_head_attention, w) for w in C.WRONG_MHA]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,fn", CORRECT, ids=[f.__name__ for _, f in CORRECT])
def test_correct_independent_answer_passes(check, fn, hidden):
    check(fn, hidden=hidden)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,wrong", WRONGS, ids=[f"{c.__name__}-{w.name}" for c, w in WRONGS])
def test_each_misconception_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("wrong", C.WRONG_PARAMS, ids=[w.name for w in C.WRONG_PARAMS])
def test_params_misconceptions_are_named(wrong, hidden):
    def student(m):
        return wrong.fn(m)

    assert_named_alone(C.check_numpy_params_from_torch, student, wrong.name, hidden=hidden)


def test_required_misconceptions_exist():
    names = {w.name for _, w in WRONGS}
    assert {"heads split along the sequence axis", "heads merged without transposing back",
            "mask inverted", "mask after softmax"} <= names


@pytest.mark.parametrize("check,name", [(c, fn.__name__) for c, fn in CORRECT if hasattr(multihead, fn.__name__)])
def test_calling_the_reference_is_an_integrity_error(check, name):
    ref = getattr(multihead, name)

    def cheat(*args, **kwargs):
        return ref(*args, **kwargs)

    with pytest.raises(IntegrityError):
        check(cheat)


def test_mha_may_reuse_lesson01_attention_but_not_the_multihead_reference():
    from course_lib.attention import scaled_dot_product_attention

    def with_lesson01(query, key, value, w_q, w_k, w_v, w_o, num_heads, b_q=None, b_k=None, b_v=None,
                      b_o=None, mask=None):
        def lin(x, w, b):
            return x @ w + (0.0 if b is None else b)

        q = split_heads(lin(query, w_q, b_q), num_heads)
        k = split_heads(lin(key, w_k, b_k), num_heads)
        v = split_heads(lin(value, w_v, b_v), num_heads)
        heads, w = scaled_dot_product_attention(q, k, v, mask)
        return lin(merge_heads(heads), w_o, b_o), w

    C.check_multi_head_attention(with_lesson01)

    def with_reference_split(*args, **kwargs):
        multihead.split_heads(args[0], args[7])
        return with_lesson01(*args, **kwargs)

    with pytest.raises(IntegrityError):
        C.check_multi_head_attention(with_reference_split)


@pytest.mark.parametrize("check", [c for c in dict.fromkeys(c for c, _ in CORRECT)])
def test_stub_is_not_implemented(check):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet):
        check(stub)


def test_params_must_be_a_complete_dict():
    with pytest.raises(AssertionError, match="return a dict"):
        C.check_numpy_params_from_torch(lambda m: tuple(numpy_params_from_torch(m).values()))
    with pytest.raises(AssertionError, match="lacks the keys"):
        C.check_numpy_params_from_torch(lambda m: {k: v for k, v in numpy_params_from_torch(m).items()
                                                   if k != "b_o"})


def test_per_head_weights_are_required():
    """Weights averaged over heads (nn.MultiheadAttention's default) are reported as a shape error."""
    def averaged(*args, **kwargs):
        out, w = multi_head_attention(*args, **kwargs)
        return out, w.mean(axis=1)

    with pytest.raises(AssertionError, match=r"weights: expected shape \(2, 2, 5, 5\)"):
        C.check_multi_head_attention(averaged)
