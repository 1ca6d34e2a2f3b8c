"""course_lib.checks.attention: correct answers pass, each known-wrong answer is named."""
import math

import numpy as np
import pytest
import torch

from course_lib import attention as A
from course_lib.checks import attention as C
from course_lib.checks.core import IntegrityError, NotImplementedYet


def my_softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, np.where(s > 0, s, 1.0))


def softmax_float32(x, axis=-1):
    return my_softmax(np.asarray(x, dtype=np.float32), axis).astype(np.float32)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    out = np.exp(x - lse)
    return np.where(np.isnan(out), 0.0, out)


def softmax_torch_inside(x, axis=-1):
    t = torch.as_tensor(np.asarray(x, dtype=float))
    m = t.amax(dim=axis, keepdim=True)
    e = torch.exp(t - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    s = e.sum(dim=axis, keepdim=True)
    return (e / s.clamp_min(1e-300)).numpy()


def my_attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = my_softmax(s)
    return w @ v, w


def attention_float32(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    out, w = my_attention(q, k, v, mask)
    return out.astype(np.float32), w.astype(np.float32)


def attention_einsum(q, k, v, mask=None):
    s = np.einsum("...td,...sd->...ts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = my_softmax(s, axis=-1)
    return np.einsum("...ts,...sv->...tv", w, v), w


def attention_loop(q, k, v, mask=None):
    """One query at a time, on 2-D inputs; leading dims by recursion."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.ndim > 2:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        m = None if mask is None else np.broadcast_to(mask, lead + (q.shape[-2], k.shape[-2]))
        q, k, v = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
        outs = [attention_loop(q[i], k[i], v[i], None if m is None else m[i]) for i in range(lead[0])]
        return np.stack([o for o, _ in outs]), np.stack([w for _, w in outs])
    T, S = q.shape[0], k.shape[0]
    m = np.ones((T, S), dtype=bool) if mask is None else np.broadcast_to(mask, (T, S))
    out, w = np.zeros((T, v.shape[-1])), np.zeros((T, S))
    for t in range(T):
        scores = np.array([q[t] @ k[s] for s in range(S)]) / math.sqrt(q.shape[-1])
        w[t] = my_softmax(np.where(m[t], scores, -np.inf))
        out[t] = w[t] @ v
    return out, w


def my_attention_torch(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = torch.softmax(s, -1)
    w = torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def attention_torch_float32(q, k, v, mask=None):
    out, w = my_attention_torch(q.float(), k.float(), v.float(), mask)
    return out, w


def attention_torch_einsum(q, k, v, mask=None):
    s = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        s = torch.where(mask, s, torch.tensor(-math.inf, dtype=s.dtype))
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    w = e / e.sum(-1, keepdim=True).clamp_min(1e-300)
    return torch.einsum("...ts,...sv->...tv", w, v), w


CORRECT = [
    (C.check_softmax, my_softmax), (C.check_softmax, softmax_float32), (C.check_softmax, softmax_logsumexp),
    (C.check_softmax, softmax_torch_inside),
    (C.check_attention_numpy, my_attention), (C.check_attention_numpy, attention_float32),
    (C.check_attention_numpy, attention_einsum), (C.check_attention_numpy, attention_loop),
    (C.check_attention_torch, my_attention_torch), (C.check_attention_torch, attention_torch_float32),
    (C.check_attention_torch, attention_torch_einsum),
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,answer", CORRECT, ids=lambda x: getattr(x, "__name__", str(x)))
def test_correct_alternatives_pass(check, answer, hidden):
    check(answer, hidden=hidden)


def _named(message: str) -> set[str]:
    import re

    return set(re.findall(r"likely misconception '([^']+)'", message))


