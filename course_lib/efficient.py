"""Efficient attention: linear attention and the Performer's FAVOR+ (lesson 07).

Exact attention builds the (T, S) matrix softmax(Q K^T / sqrt(d)): O(T S) time and
memory. If the similarity is a dot product of feature maps, sim(q, k) = phi(q) . phi(k),
associativity gives the same result without that matrix:

    out_i = sum_j sim(q_i, k_j) v_j / sum_j sim(q_i, k_j)
          = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))

(phi(Q) phi(K)^T) V costs O(T S r); phi(Q) (phi(K)^T V) costs O((T + S) r d_v).

Covers
    * Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"):
      ``elu_feature_map`` (phi(x) = elu(x) + 1 > 0), the non-causal form
      ``linear_attention``, the causal form as prefix sums ``causal_linear_attention``
      and as a recurrent step ``linear_attention_step`` (the RNN view, state (s, z)),
      plus ``quadratic_linear_attention``, the same similarity computed the O(T S)
      way with an optional mask (what the fast forms must equal).
    * Performer FAVOR+ (Choromanski et al. 2021, "Rethinking Attention with
      Performers"): ``draw_projection`` (iid Gaussian or orthogonal random features,
      seeded), ``positive_random_features`` phi(x) = exp(w x - |x|^2/2) / sqrt(m),
      ``trig_random_features`` (sin/cos), ``softmax_kernel_estimate``, the
      closed-form mean squared errors of both estimators of SM(x, y) = exp(x . y), and
      ``favor_attention_mse_limit``, the large-m limit of m x MSE of the attention output.
    * torch versions for training and benchmarks: ``elu_feature_map_torch``,
      ``attention_from_features_torch``, ``linear_attention_torch``,
      ``favor_features_torch`` (with the numerical stabilisation) and
      ``favor_attention_torch`` (non-causal and causal). Their causal path is
      ``chunked_causal_attention_torch``: exact C x C masked blocks inside chunks of C
      tokens, the (r, d_v) state and the (r,) normaliser carried from chunk to chunk,
      so the working memory is O(L d + C^2) per head instead of the (L, r, d_v) prefix
      sums of ``prefix_sum_causal_attention_torch`` (kept as the plain form to test it
      against, and as the benchmark's "before").
    * ``EfficientMultiHeadAttention``: ``course_lib.multihead.MultiHeadAttention`` with
      linear or FAVOR+ heads (same parameters), and ``swap_attention`` to put it into
      a model such as ``course_lib.blocks.TransformerClassifier``.
    * ``measure_numpy_call``: best time and tracemalloc peak of one numpy call (the
      lesson's measurements; torch's allocations are invisible to tracemalloc), and
      ``measure_torch_call``: best time and the largest tensor one torch call builds.

Does NOT cover
    * fused/CUDA kernels (the chunked causal form is a Python loop over chunks of
      ordinary torch operations), redrawing features during training, FAVOR# or other
      later variants,
    * masks other than causal and key padding (padded keys get zero features);
      no dropout on attention weights (there are no weights to drop).

Conventions: shapes (..., T, d) for queries, (..., S, d) for keys, (..., S, d_v)
for values; r is the number of features per vector (d for elu+1, m for FAVOR+,
2m for sin/cos); m is always the number of random projections (rows of w).
Random state is explicit: ``draw_projection`` takes ``seed=`` or ``generator=``.
The numpy versions return float64; the torch versions keep the input dtype.
"""
from __future__ import annotations

import math
import time
import tracemalloc

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_leaves
from torch.utils._python_dispatch import TorchDispatchMode

from course_lib.attention import check_attention_shapes
from course_lib.multihead import MultiHeadAttention

from course_lib import solutions

_solution = solutions.of("course_lib.efficient")  # the exercises' bodies: course_lib/solutions/efficient.py

__all__ = [
    "elu_feature_map",
    "linear_attention",
    "causal_linear_attention",
    "linear_attention_step",
    "recurrent_linear_attention",
    "quadratic_linear_attention",
    "draw_projection",
    "positive_random_features",
    "trig_random_features",
    "softmax_kernel_estimate",
    "positive_features_mse",
    "trig_features_mse",
    "favor_attention_mse_limit",
    "elu_feature_map_torch",
    "attention_from_features_torch",
    "prefix_sum_causal_attention_torch",
    "chunked_causal_attention_torch",
    "DEFAULT_CHUNK_SIZE",
    "linear_attention_torch",
    "favor_features_torch",
    "favor_attention_torch",
    "EfficientMultiHeadAttention",
    "swap_attention",
    "measure_numpy_call",
    "measure_torch_call",
]


# ---------------------------------------------------------------- linear attention (numpy)
def elu_feature_map(x) -> np.ndarray:
    """phi(x) = elu(x) + 1, elementwise: x + 1 for x > 0, exp(x) otherwise. Always > 0.

    Positivity makes every similarity phi(q) . phi(k) > 0, so the normaliser never
    vanishes and the weights are a proper average (Katharopoulos et al. 2020).

    >>> elu_feature_map(np.array([-1.0, 0.0, 2.0])).round(4)
    array([0.3679, 1.    , 3.    ])
    """
    return _solution.elu_feature_map(x)


def _check_qkv(q, k, v, causal: bool = False):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    check_attention_shapes(q.shape, k.shape, v.shape)
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal attention needs as many queries as keys (position i sees keys 0..i); got "
            f"T={q.shape[-2]} queries and S={k.shape[-2]} keys"
        )
    return q, k, v


def linear_attention(q, k, v, feature_map=elu_feature_map) -> np.ndarray:
    """Non-causal linear attention phi(Q) (phi(K)^T V), normalised, in O((T + S) r d_v).

    out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))

    Args:
        q: (..., T, d); k: (..., S, d); v: (..., S, d_v)
        feature_map: maps (..., L, d) to positive features (..., L, r); default elu + 1.

    Returns:
        out (..., T, d_v). No weights are returned: never building the (T, S)
        matrix is the point.

    Example (one query, two keys; elu+1 of [1, 0] is [2, 1], of [0, 1] is [1, 2]):
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]]); v = np.array([[1.0], [3.0]])
    >>> linear_attention(q, k, v)   # sims 2*2+1*1 = 5 and 2*1+1*2 = 4 -> (5*1 + 4*3) / 9
    array([[1.88888889]])
    """
    return _solution.linear_attention(q, k, v, feature_map)


def causal_linear_attention(q, k, v, feature_map=elu_feature_map) -> np.ndarray:
    """Causal linear attention by prefix sums: position i sees keys 0..i only.

    s_i = sum_{j<=i} phi(k_j) v_j^T (a cumulative sum over positions), z_i = sum_{j<=i} phi(k_j),
    out_i = phi(q_i)^T s_i / phi(q_i)^T z_i. Equals ``quadratic_linear_attention`` with a
    causal mask, in O(T r d_v) time and memory (the (T, r, d_v) prefix sums are kept).

    Args:
        q: (..., T, d); k: (..., T, d); v: (..., T, d_v) (self-attention: T queries, T keys)

    Returns:
        out (..., T, d_v)

    >>> q = k = np.array([[1.0, 0.0], [0.0, 1.0]]); v = np.array([[1.0], [3.0]])
    >>> causal_linear_attention(q, k, v)   # row 0 sees only v_0; row 1: (4*1 + 5*3) / 9
    array([[1.        ],
           [2.11111111]])
    """
    return _solution.causal_linear_attention(q, k, v, feature_map)


def linear_attention_step(state, q_t, k_t, v_t, feature_map=elu_feature_map):
    """One step of causal linear attention as an RNN: read one token, update the state.

    state = (s, z) with s (..., r, d_v) = sum_{j<t} phi(k_j) v_j^T and z (..., r) = sum_{j<t} phi(k_j),
    or None before the first token (zeros). The step adds token t, then reads:
    s' = s + phi(k_t) v_t^T, z' = z + phi(k_t), out_t = phi(q_t)^T s' / phi(q_t)^T z'.
    The input state is not modified; a new one is returned. The cost per token is
    O(r d_v) whatever t is, which is why a causal linear transformer generates
    text in constant time per token.

    Args:
        state: (s, z) or None
        q_t, k_t: (..., d); v_t: (..., d_v)

    Returns:
        (out_t (..., d_v), (s', z'))

    >>> out, (s, z) = linear_attention_step(None, np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([1.0]))
    >>> out, s.ravel(), z
    (array([1.]), array([2., 1.]), array([2., 1.]))
    """
    return _solution.linear_attention_step(state, q_t, k_t, v_t, feature_map)


def recurrent_linear_attention(q, k, v, feature_map=elu_feature_map) -> np.ndarray:
    """Causal linear attention computed token by token with ``linear_attention_step``.

    Same shapes and result as :func:`causal_linear_attention`; memory O(r d_v)
    for the state instead of O(T r d_v).
    """
    return _solution.recurrent_linear_attention(q, k, v, feature_map)


def quadratic_linear_attention(q, k, v, mask=None, feature_map=elu_feature_map):
    """The same similarity as linear attention, computed the O(T S) way: (phi(Q) phi(K)^T) V.

    weights_ij = phi(q_i) . phi(k_j) / sum_{j' allowed} phi(q_i) . phi(k_j'), with an optional
    boolean mask broadcastable to (..., T, S) (True = may attend). A row with no
    allowed key gets zero weights and a zero output.

    Returns:
        (out (..., T, d_v), weights (..., T, S))
    """
    return _solution.quadratic_linear_attention(q, k, v, mask, feature_map)


# ---------------------------------------------------------------- random features (Performer)
def draw_projection(m: int, d: int, *, orthogonal: bool = True, seed: int | None = None,
                    generator: torch.Generator | None = None, batch_shape=(),
                    dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Draw the (m, d) random projection w of FAVOR+; each row is marginally N(0, I_d).

    iid (``orthogonal=False``): every entry N(0, 1).
    orthogonal: rows come in blocks of d mutually orthogonal directions (QR of a
    Gaussian d x d matrix, column signs fixed by sign(diag R) so the directions are
    uniform on the sphere), each row rescaled by an independent chi_d norm (the norm
    of a fresh Gaussian d-vector), so its length has the distribution it would have
    if iid. The last block is cut to m mod d rows. Orthogonality lowers the
    estimator's variance (Choromanski et al. 2021, section on orthogonal random features).

    Pass exactly one of ``seed`` (an int) or ``generator`` (a torch.Generator).
    ``batch_shape`` draws independent projections at once: (*batch_shape, m, d).

    >>> w = draw_projection(4, 4, seed=0)
    >>> u = w / w.norm(dim=-1, keepdim=True)
    >>> bool(torch.allclose(u @ u.T, torch.eye(4, dtype=w.dtype), atol=1e-12))
    True
    """
    if (seed is None) == (generator is None):
        raise ValueError("pass exactly one of seed= (an int) or generator= (a torch.Generator), "
                         "so the draw is reproducible")
    if int(m) != m or int(d) != d or m < 1 or d < 1:
        raise ValueError(f"m (number of random features) and d (input size) must be positive ints, got m={m}, d={d}")
    m, d = int(m), int(d)
    batch_shape = tuple(batch_shape)
    g = generator if generator is not None else torch.Generator().manual_seed(int(seed))
    if not orthogonal:
        return torch.randn(*batch_shape, m, d, generator=g, dtype=dtype)
    n_blocks = -(-m // d)
    gauss = torch.randn(*batch_shape, n_blocks, d, d, generator=g, dtype=torch.float64)
    qmat, rmat = torch.linalg.qr(gauss)  # columns of qmat are orthonormal
    signs = torch.sign(torch.diagonal(rmat, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    directions = (qmat * signs[..., None, :]).transpose(-1, -2)  # (..., n_blocks, d, d), orthonormal rows
    directions = directions.reshape(*batch_shape, n_blocks * d, d)[..., :m, :]  # (..., m, d)
    norms = torch.randn(*batch_shape, m, d, generator=g, dtype=torch.float64).norm(dim=-1, keepdim=True)
    return (directions * norms).to(dtype)


def _as_projection(w) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.ndim < 2:
        raise ValueError(f"the projection w must have shape (..., m, d), got {w.shape}")
    return w


def positive_random_features(x, w) -> np.ndarray:
    """Positive random features of FAVOR+: phi(x) = exp(w x - |x|^2 / 2) / sqrt(m).

    For w with N(0, I_d) rows, E[phi(x) . phi(y)] = exp(x . y) = SM(x, y) (the softmax
    kernel), and every feature is positive, so estimated attention weights are never
    negative (Choromanski et al. 2021, Lemma 1). For softmax attention scale q and k
    by d^(-1/4) first, so that exp(q' . k') = exp(q . k / sqrt(d)).

    Args:
        x: (..., L, d) vectors
        w: (..., m, d) projection, leading dims broadcast with x's (e.g. many draws)

    Returns:
        features (..., L, m)

    >>> positive_random_features(np.array([[0.0, 0.0]]), np.ones((4, 2)))   # exp(0)/sqrt(4)
    array([[0.5, 0.5, 0.5, 0.5]])
    """
    return _solution.positive_random_features(x, w)


def trig_random_features(x, w) -> np.ndarray:
    """Trigonometric random features: phi(x) = exp(|x|^2 / 2) / sqrt(m) [sin(w x), cos(w x)].

    Also unbiased for SM(x, y) = exp(x . y), because E[cos(w (x - y))] = exp(-|x - y|^2 / 2),
    but the features can be negative, so estimated weights can be negative and
    the normaliser can cross zero. m projections give 2m features.

    Args: x (..., L, d); w (..., m, d).  Returns: features (..., L, 2m).
    """
    x = np.asarray(x, dtype=np.float64)
    w = _as_projection(w)
    if x.shape[-1] != w.shape[-1]:
        raise ValueError(f"x (..., L, d) and w (..., m, d) need the same d: x {x.shape}, w {w.shape}")
    m = w.shape[-2]
    projections = x @ np.swapaxes(w, -1, -2)  # (..., L, m)
    scale = np.exp(0.5 * np.sum(x * x, axis=-1, keepdims=True)) / math.sqrt(m)  # (..., L, 1)
    return np.concatenate([np.sin(projections), np.cos(projections)], axis=-1) * scale


def softmax_kernel_estimate(x, y, w, kind: str = "positive", feature_map=None) -> np.ndarray:
    """Random-feature estimate phi(x) . phi(y) of SM(x, y) = exp(x . y) for each draw in w.

    Args:
        x, y: (d,) vectors; w: (..., m, d) one or many projections
        kind: "positive" or "trig"
        feature_map: optional callable (x (..., L, d), w (..., m, d)) -> features (..., L, r), used
            instead of ``kind``'s map: the notebook passes your ``positive_random_features`` (the
            students' edition withholds the reference of that exercise until its solution is released)

    Returns:
        (...,) one estimate per projection in w
    """
    maps = {"positive": positive_random_features, "trig": trig_random_features}
    if feature_map is None:
        if kind not in maps:
            raise ValueError(f"kind must be one of {sorted(maps)}, got {kind!r}")
        feature_map = maps[kind]
    elif not callable(feature_map):
        raise ValueError(f"feature_map must be a callable (x, w) -> features, got {type(feature_map).__name__}")
    x = np.asarray(x, dtype=np.float64)[None, :]  # (1, d)
    y = np.asarray(y, dtype=np.float64)[None, :]
    fx, fy = feature_map(x, w), feature_map(y, w)  # (..., 1, r)
    return np.sum(fx * fy, axis=(-2, -1))


def positive_features_mse(x, y, m: int) -> float:
    """Closed-form MSE of the positive estimator with m iid projections (Performer, Lemma 2).

    MSE = (1/m) exp(|x + y|^2) SM(x, y)^2 (1 - exp(-|x + y|^2)): small when x + y is
    short, i.e. when SM(x, y) is small, exactly where softmax weights are small.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    s2 = float(np.sum((x + y) ** 2))
    sm = math.exp(float(x @ y))
    return math.exp(s2) * sm ** 2 * -math.expm1(-s2) / m


def trig_features_mse(x, y, m: int) -> float:
    """Closed-form MSE of the trigonometric estimator with m iid projections (Performer, Lemma 2).

    MSE = (1/(2m)) exp(|x + y|^2) SM(x, y)^(-2) (1 - exp(-|x - y|^2))^2
        = (1/(2m)) exp(|x|^2 + |y|^2) (1 - exp(-|x - y|^2))^2:
    large when SM(x, y) is small, the opposite of the positive estimator.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    d2 = float(np.sum((x - y) ** 2))
    return math.exp(float(x @ x + y @ y)) * math.expm1(-d2) ** 2 / (2 * m)


def favor_attention_mse_limit(q, k, v) -> float:
    """Large-m limit of m x MSE of FAVOR+ attention with m iid positive features (non-causal, eps = 0).

    The estimated output out_i = N_i / D_i is a ratio of two averages over m independent
    features, N_i = mean_l a_l(x_i) sum_j a_l(y_j) v_j and D_i = mean_l a_l(x_i) sum_j a_l(y_j), with
    a_l(x) = exp(w_l . x - |x|^2/2), x = q d^(-1/4), y = k d^(-1/4). Linearising the ratio around
    the exact output o_i = E[N_i] / E[D_i] (the delta method) gives, as m grows,

        m E[(out_i - o_i)^2] -> E_w[(a(x_i) sum_j a(y_j) (v_j - o_i))^2] / (sum_j exp(x_i . y_j))^2,

    per value dimension, and the Gaussian moment E[a(x)^2 a(y) a(y')] = exp(|2x + y + y'|^2/2
    - |x|^2 - |y|^2/2 - |y'|^2/2) makes the right side exact. Returned averaged over queries
    and value dimensions, like ``((out - exact) ** 2).mean()`` times m. So MSE ~ limit / m for
    large m (slope -1 on log-log axes); at small m the linearisation does not hold yet (the
    normaliser is itself random, and the output is a weighted average of the values, which
    cannot stray far from them). Orthogonal features are not covered (their limit is lower).

    Args:
        q: (T, d); k: (S, d); v: (S, d_v), unscaled as for softmax(q k^T / sqrt(d)) v.
    Cost O(T S^2 d) time, O(S^2 d) memory.

    >>> favor_attention_mse_limit(np.zeros((1, 2)), np.zeros((3, 2)), np.ones((3, 1)))   # all values equal
    0.0
    """
    q, k, v = _check_qkv(q, k, v)
    if q.ndim != 2:
        raise ValueError(f"favor_attention_mse_limit takes one head: q (T, d), k (S, d), v (S, d_v); got q {q.shape}")
    d = q.shape[-1]
    x, y = q * d ** -0.25, k * d ** -0.25  # (T, d), (S, d)
    sim = np.exp(x @ y.T)  # (T, S): exp(x_i . y_j), the unnormalised softmax weights
    exact = (sim @ v) / sim.sum(axis=1, keepdims=True)  # (T, d_v)
    half_sq_y = 0.5 * np.sum(y * y, axis=-1)  # (S,)
    total = 0.0
    for i in range(x.shape[0]):
        u = 2 * x[i] + y[:, None, :] + y[None, :, :]  # (S, S, d): 2 x_i + y_j + y_j'
        moment = np.exp(0.5 * np.sum(u * u, axis=-1) - x[i] @ x[i] - half_sq_y[:, None] - half_sq_y[None, :])
        dv = v - exact[i]  # (S, d_v): v_j - o_i
        total += np.einsum("jk,jc,kc->", moment, dv, dv) / sim[i].sum() ** 2
    return float(total / (x.shape[0] * v.shape[-1]))


# ---------------------------------------------------------------- torch versions
def elu_feature_map_torch(x: torch.Tensor) -> torch.Tensor:
    """elu(x) + 1 in torch (see :func:`elu_feature_map`)."""
    return _solution.elu_feature_map_torch(x)


def _check_torch_qkv(q, k, v, causal: bool):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    check_attention_shapes(q.shape, k.shape, v.shape)
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal attention needs T == S, got T={q.shape[-2]} queries and S={k.shape[-2]} keys")


DEFAULT_CHUNK_SIZE = 128  # tokens per chunk of the causal path; see chunked_causal_attention_torch


def prefix_sum_causal_attention_torch(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal linear attention from features by plain prefix sums (the form before chunking).

    s_i = sum_{j<=i} phi(k_j) v_j^T as one cumsum over positions, which keeps a
    (..., T, r, d_v) tensor: at T = 65,536, r = d_v = 64 that is 1 GiB per head in
    float32. Kept as the reference :func:`chunked_causal_attention_torch` is tested
    against, and as the "before" of ``tests/benchmarks/bench_efficient.py``.

    phi_q, phi_k: (..., T, r); v: (..., T, d_v). Returns out (..., T, d_v).
    """
    return _solution.prefix_sum_causal_attention_torch(phi_q, phi_k, v)


def chunked_causal_attention_torch(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor,
                                   chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    """Causal linear attention from features, chunk by chunk: O(T d + C^2) working memory per head.

    Cut the T positions into chunks of C = ``chunk_size`` tokens (the last one may be
    shorter). For the chunk of positions [a, b), with the state of all earlier chunks
    s = sum_{j<a} phi(k_j) v_j^T (r, d_v) and z = sum_{j<a} phi(k_j) (r,):

        A = tril(phi(Q_c) phi(K_c)^T)                        (C, C), keys j <= i in the chunk
        out_c = (phi(Q_c) s + A V_c) / (phi(Q_c) z + A 1)    (C, d_v)
        s <- s + phi(K_c)^T V_c,  z <- z + phi(K_c)^T 1      carried to the next chunk

    The same sums as :func:`prefix_sum_causal_attention_torch`, grouped differently:
    inside a chunk the quadratic masked form, across chunks the running sum (the RNN
    view, one chunk per step). C = 1 is the recurrent form, C >= T the masked quadratic form.

    Chunks are computed a group at a time (one batched matmul per step for all the
    group's chunks, the states at each chunk's start from a cumulative sum of the
    group's per-chunk states, as :func:`prefix_sum_causal_attention_torch` does per
    token): a Python loop of one step per chunk is bound by kernel launches on a GPU
    (at T = 65,536 and C = 128 that is 512 steps). A group holds as many chunks as keep
    its (C, C) blocks and (r, d_v) states no larger than the output (T d_v) or one
    block, so nothing of size (T, r, d_v) or (T, T) is built and the working memory
    stays O(T d_v + C^2) (autograd keeps a group's states for the backward pass:
    T / C of them in all).

    Args:
        phi_q, phi_k: (..., T, r) positive features; v: (..., T, d_v); leading dims
            broadcast as in a matmul (batch, heads).
        chunk_size: C, tokens per chunk (a positive int).

    Returns:
        out (..., T, d_v), in the inputs' dtype.

    >>> phi = torch.tensor([[2.0, 1.0], [1.0, 2.0], [1.0, 1.0]]); v = torch.tensor([[1.0], [3.0], [5.0]])
    >>> chunked_causal_attention_torch(phi, phi, v, chunk_size=2)   # row 2, chunk 2: (3*1 + 3*3 + 2*5) / 8
    tensor([[1.0000],
            [2.1111],
            [2.7500]])
    """
    return _solution.chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size)


def _causal_chunks(q, k, v, c: int, s, z):
    """g = len / c consecutive chunks of c tokens at once, after the state (s, z) of the chunks before them.

    Returns (out (..., g c, d_v), s, z) with the state after the last of them.
    """
    return _solution._causal_chunks(q, k, v, c, s, z)


def attention_from_features_torch(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor,
                                  causal: bool = False, chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    """Normalised linear attention from given features: phi_q (..., T, r), phi_k (..., S, r), v (..., S, d_v).

    Non-causal: phi_q (phi_k^T v) / phi_q (phi_k^T 1). Causal (T == S): the same sums
    stopped at each position, computed by :func:`chunked_causal_attention_torch` in
    chunks of ``chunk_size`` tokens (O(T d + C^2) memory per head; the plain prefix
    sums, :func:`prefix_sum_causal_attention_torch`, would keep a (..., T, r, d_v) tensor).
    Returns out (..., T, d_v).
    """
    return _solution.attention_from_features_torch(phi_q, phi_k, v, causal, chunk_size)


def linear_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                           feature_map=elu_feature_map_torch, chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    """Linear attention (elu + 1 features by default) in torch; differentiable. Returns (..., T, d_v).

    ``causal=True`` (T == S) runs :func:`chunked_causal_attention_torch` with ``chunk_size``.
    """
    return _solution.linear_attention_torch(q, k, v, causal, feature_map, chunk_size)


def favor_features_torch(x: torch.Tensor, w: torch.Tensor, *, is_query: bool, eps: float = 1e-6,
                         stabilize: bool = True, keep: torch.Tensor | None = None) -> torch.Tensor:
    """FAVOR+ features of queries or keys, scaled and stabilised as in the Performer.

    phi(x) = (exp(w x' - |x'|^2/2 - c) + eps) / sqrt(m) with x' = x d^(-1/4), so that
    E[phi(q) . phi(k)] = exp(-c_q - c_k) exp(q . k / sqrt(d)) when eps = 0.

    The stabiliser c (only with ``stabilize=True``) keeps exp from overflowing:
      * queries: c_i = max over the m features of query i's exponents (one per query row);
      * keys: c = one max over all keys and features (shared by every key).
    What this costs:
      * A constant shared by all keys of a query's row cancels exactly between the
        numerator and the normaliser, so the attention output is the same as without
        stabilisation. Per-query c_i and one global key c are both of that kind.
        A per-key max (c_j for each key) would NOT cancel: it reweights the keys by
        exp(-c_j) and makes the attention estimate wrong (biased), so we never use it.
      * Because c depends on the draw w, phi(q) . phi(k) on its own is no longer an
        unbiased estimate of exp(q . k / sqrt(d)) times a fixed constant; only the
        normalised attention, which does not see c, keeps its meaning.
      * The key max runs over all positions, future ones too. In exact arithmetic it
        cancels; numerically a much larger future key can push earlier keys' features
        into underflow. A streaming (RNN) decoder would keep a running max instead.
      * eps > 0 keeps every feature (and so the normaliser) strictly positive after
        underflow, but it does not cancel: with a_i(x) = exp(w_i x' - |x'|^2/2 - c) the
        unscaled features, phi(q) . phi(k) gains eps * (mean_i a_i(q) + mean_i a_i(k)) + eps^2,
        a small positive bias (relative to the largest feature, which is 1 after the
        max is subtracted) that pulls the weights toward uniform.

    Args:
        x: (..., L, d) queries or keys; w: (m, d) projection from :func:`draw_projection`
        is_query: True for queries (per-row max), False for keys (one shared max)
        keep: optional bool (..., L, 1), True = a real key; the others get zero features
            and are left out of the shared max (key padding)

    Returns:
        features (..., L, m)
    """
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
        raise ValueError("x and w must be torch tensors")
    if x.shape[-1] != w.shape[-1]:
        raise ValueError(f"x (..., L, d) and w (m, d) need the same d: x {tuple(x.shape)}, w {tuple(w.shape)}")
    d, m = x.shape[-1], w.shape[-2]
    x = x * d ** -0.25
    w = w.to(dtype=x.dtype, device=x.device)
    exponent = x @ w.transpose(-2, -1) - 0.5 * (x * x).sum(dim=-1, keepdim=True)  # (..., L, m)
    if keep is not None:
        exponent = exponent.masked_fill(~keep, float("-inf"))  # hidden rows: exp(-inf) = 0
    if stabilize:
        if is_query:
            c = exponent.amax(dim=-1, keepdim=True)  # (..., L, 1): one per query
        else:
            c = exponent.amax(dim=(-2, -1), keepdim=True)  # (..., 1, 1): shared by all keys
        exponent = exponent - torch.nan_to_num(c.detach(), neginf=0.0)  # all hidden: nothing to shift
    features = (torch.exp(exponent) + eps) / math.sqrt(m)
    return features if keep is None else features * keep.to(features.dtype)


def favor_attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor,
                          causal: bool = False, eps: float = 1e-6, stabilize: bool = True,
                          chunk_size: int = DEFAULT_CHUNK_SIZE) -> torch.Tensor:
    """FAVOR+ estimate of softmax(Q K^T / sqrt(d)) V in O((T + S) m d) time and memory.

    Args:
        q: (..., T, d); k: (..., S, d); v: (..., S, d_v); w: (m, d) from :func:`draw_projection`
        causal: position i sees keys 0..i (T == S), computed in chunks of ``chunk_size``
            tokens (:func:`chunked_causal_attention_torch`; in the students' edition it is withheld
            with lesson 07's ``causal_linear_attention`` until that solution is released)
        eps, stabilize: see :func:`favor_features_torch`

    Returns:
        out (..., T, d_v); converges to exact softmax attention as m grows.
    """
    _check_torch_qkv(q, k, v, causal)
    phi_q = favor_features_torch(q, w, is_query=True, eps=eps, stabilize=stabilize)  # (..., T, m)
    phi_k = favor_features_torch(k, w, is_query=False, eps=eps, stabilize=stabilize)  # (..., S, m)
    if causal:
        return chunked_causal_attention_torch(phi_q, phi_k, v, chunk_size)
    # non-causal: written out on torch operations (the same as attention_from_features_torch,
    # which the students' edition withholds with lesson 07's linear_attention)
    kv = phi_k.transpose(-2, -1) @ v  # (..., m, d_v)
    z = phi_k.sum(dim=-2)  # (..., m)
    return (phi_q @ kv) / (phi_q @ z.unsqueeze(-1))  # (..., T, d_v)


# ---------------------------------------------------------------- multi-head module and model surgery
class EfficientMultiHeadAttention(MultiHeadAttention):
    """:class:`course_lib.multihead.MultiHeadAttention` whose heads use linear attention or FAVOR+.

    Same projections (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), so weights copy
    one to one (:func:`swap_attention`). Per head: phi(q), phi(k) of shape (B, H, L, r), then
    :func:`attention_from_features_torch`.

    Args:
        d_model, num_heads, bias, batch_first: as MultiHeadAttention.
        kind: "linear" (elu + 1) or "favor" (positive orthogonal random features).
        num_features: m for "favor" (default 4 * d_head); the projection is drawn once
            from ``seed`` and kept as a buffer (not trained, not redrawn).

    ``forward(query, key, value, mask=None)``: ``mask`` may only hide keys (key padding):
    bool, True = may attend, broadcastable to (B, 1, 1, S); hidden keys get zero features.
    Returns (out, None): there is no attention matrix to return.
    """

    def __init__(self, d_model: int, num_heads: int, kind: str = "linear", num_features: int | None = None,
                 seed: int = 0, bias: bool = True, batch_first: bool = True, device=None, dtype=None):
        super().__init__(d_model, num_heads, dropout=0.0, bias=bias, batch_first=batch_first,
                         device=device, dtype=dtype)
        if kind not in ("linear", "favor"):
            raise ValueError(f"kind must be 'linear' or 'favor', got {kind!r}")
        self.kind = kind
        self.num_features = None
        if kind == "favor":
            self.num_features = int(num_features or 4 * self.d_head)
            w = draw_projection(self.num_features, self.d_head, seed=seed,
                                dtype=dtype or torch.get_default_dtype())
            self.register_buffer("projection", w.to(device) if device is not None else w)

    def extra_repr(self) -> str:
        extra = f", num_features={self.num_features}" if self.kind == "favor" else ""
        return f"{super().extra_repr()}, kind={self.kind}{extra}"

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None, need_weights: bool = False, average_attn_weights: bool = True):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be a 3-D tensor with D={self.d_model}, got "
                                 f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))  # (B, L, D)
        keep = None
        if mask is not None:
            if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
                raise ValueError("mask must be a bool tensor, True = may attend")
            if mask.dim() < 2 or mask.shape[-2] != 1:
                raise ValueError(
                    f"{type(self).__name__} takes key padding masks only, broadcastable to (B, 1, 1, S) "
                    f"(the same keys hidden from every query); got {tuple(mask.shape)}. A causal mask needs "
                    "the causal form (linear_attention_torch(..., causal=True), computed in chunks)"
                )
            keep = mask[..., 0, :].unsqueeze(-1)  # (..., S, 1), broadcasts against (B, H, S, r)
        H, d_head = self.num_heads, self.d_head
        # heads by reshaping (the same operations as lesson 03's split_heads / merge_heads, which
        # the students' edition withholds until lesson 03's solutions are released)
        q = self.q_proj(query).reshape(*query.shape[:-1], H, d_head).transpose(-3, -2)  # (B, H, T, d_head)
        k = self.k_proj(key).reshape(*key.shape[:-1], H, d_head).transpose(-3, -2)  # (B, H, S, d_head)
        v = self.v_proj(value).reshape(*value.shape[:-1], H, d_head).transpose(-3, -2)  # (B, H, S, d_head)
        if self.kind == "linear":
            phi_q, phi_k = F.elu(q) + 1.0, F.elu(k) + 1.0  # elu + 1 features (B, H, L, d_head)
            if keep is not None:
                phi_k = phi_k * keep.to(phi_k.dtype)  # hidden keys contribute nothing
        else:
            phi_q = favor_features_torch(q, self.projection, is_query=True)  # (B, H, T, m)
            phi_k = favor_features_torch(k, self.projection, is_query=False, keep=keep)  # (B, H, S, m)
        # phi_q (phi_k^T v) / phi_q (phi_k^T 1), non-causal, on torch operations
        kv = phi_k.transpose(-2, -1) @ v  # (B, H, r, d_head)
        z = phi_k.sum(dim=-2)  # (B, H, r)
        heads = (phi_q @ kv) / (phi_q @ z.unsqueeze(-1))  # (B, H, T, d_head)
        T = heads.shape[-2]
        out = self.out_proj(heads.transpose(-3, -2).reshape(*heads.shape[:-3], T, H * d_head))  # (B, T, D)
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, None


def swap_attention(model: nn.Module, kind: str = "linear", num_features: int | None = None, seed: int = 0) -> nn.Module:
    """Replace every MultiHeadAttention inside ``model`` by an EfficientMultiHeadAttention with
    a copy of its projection weights (in place; returns ``model``). Raises ValueError if none is found.

    Used to train the same classifier with exact and with linear attention from the same
    initial weights: ``swap_attention(copy.deepcopy(model), "linear")``.
    """
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is MultiHeadAttention:
                p = child.q_proj.weight
                new = EfficientMultiHeadAttention(child.d_model, child.num_heads, kind, num_features, seed=seed,
                                                  bias=child.q_proj.bias is not None, batch_first=child.batch_first,
                                                  device=p.device, dtype=p.dtype)
                new.load_state_dict(child.state_dict(), strict=False)
                setattr(parent, name, new.train(child.training))
                swapped += 1
    if swapped == 0:
        raise ValueError("the model holds no course_lib.multihead.MultiHeadAttention to swap")
    return model


class _LargestNewTensor(TorchDispatchMode):
    """Remembers the largest storage (in bytes) any torch operation allocates for its outputs."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        leaves = tree_leaves((args, kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in leaves if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            # a view (or an in-place result) shares its input's storage: it allocates nothing
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


def measure_torch_call(fn, *args, repeats: int = 3, **kwargs) -> tuple[float, int]:
    """(best wall time in seconds over ``repeats`` calls, bytes of the largest tensor built during one call).

    The torch counterpart of :func:`measure_numpy_call`: torch's allocations are invisible to
    tracemalloc, so the memory figure is the largest tensor any torch operation returned
    during the call (views and in-place results excluded: they share an input's storage),
    counted by a ``TorchDispatchMode``: a lower bound of the
    call's peak memory that is the same on every machine (e.g. the (T, r, d_v) prefix sums of
    :func:`prefix_sum_causal_attention_torch`). Calls run under ``torch.inference_mode``; CUDA
    work is synchronised before each clock reading.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")

    def sync():
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    best = math.inf
    with torch.inference_mode():
        fn(*args, **kwargs)  # warm-up: lazy initialisation is not the call's time
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            fn(*args, **kwargs)
            sync()
            best = min(best, time.perf_counter() - t0)
        with _LargestNewTensor() as mode:
            fn(*args, **kwargs)
    return best, mode.largest


def measure_numpy_call(fn, *args, repeats: int = 3, **kwargs) -> tuple[float, int]:
    """(best wall time in seconds over ``repeats`` calls, peak bytes tracemalloc saw during one call).

    tracemalloc sees every numpy array allocation, so the peak is the largest amount of
    memory the call's arrays held at once (inputs excluded). It does not see torch tensors.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return best, peak - before
