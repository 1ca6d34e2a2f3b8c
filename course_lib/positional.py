"""Positional information for attention, which by itself ignores token order.

Attention is permutation equivariant (lesson 01): shuffle the tokens and the
outputs shuffle the same way. Word order ("no pain, chest tightness" vs "chest
pain, no tightness") must therefore be added to the input or to the scores.

Covers
    * ``sinusoidal_frequencies`` and ``sinusoidal_encoding``: the fixed encoding of
      Vaswani et al. 2017, section 3.5, in numpy:
      PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    * ``shift_matrix``: the block rotation M_k with PE(pos + k) = M_k @ PE(pos) for
      every pos, the reason this encoding makes relative offsets easy to read off.
    * ``SinusoidalPositionalEncoding`` and ``LearnedPositionalEmbedding``: torch
      modules that add fixed or trained position vectors to (B, T, d_model) inputs.
    * Relative positions as Enformer uses them (Avsec et al. 2021, Nature Methods
      18:1196, Methods, "relative positional encodings"): ``relative_positions``,
      the three basis-function families ``exponential_basis``, ``central_mask_basis``,
      ``gamma_basis``, their concatenation with a sign(r)-multiplied copy
      (``enformer_relative_features``), and ``relative_position_logits``, the extra
      score q_i . (W f(r_ij)) that such features add to attention.

Does NOT cover
    * rotary (RoPE) or ALiBi encodings;
    * Transformer-XL's learned bias vectors u, v and its "relative shift" trick that
      Enformer uses for speed (we index the (T, S) distance matrix directly);
    * dropout after adding positions (``course_lib.blocks.TransformerClassifier`` does it).

Enformer's basis functions follow the conventions of the paper's public code
(google-deepmind/deepmind-research, ``enformer/enformer.py``: the functions
``positional_features_exponential``, ``positional_features_central_mask`` and
``positional_features_gamma``), rewritten here in numpy from their formulas:

* exponential: half-lives h_i = 2^x_i with x_i spaced evenly from ``min_half_life``
  (in log2 units: the default 3.0 means a shortest half-life of 2^3 = 8 positions)
  to log2(seq_len);
* central mask: windows |r| < 2^i - 1, i = 1 .. n (so f_1 is 1 only at r = 0);
* gamma: the gamma probability DENSITY with means i * seq_len / n and standard
  deviation seq_len / (2 n), plus 1e-8, divided by its largest value over all the
  distances passed and all basis functions together (one global maximum, so the
  values depend on which distances are passed, as in Enformer).

Shapes: positions along axis -2 and features along axis -1, as the tokens:
encodings (T, d_model); distances (T, S) with r[i, j] = j - i (key position minus
query position); relative features (T, S, F).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from course_lib import solutions

_solution = solutions.of("course_lib.positional")  # the exercises' bodies: course_lib/solutions/positional.py

__all__ = [
    "sinusoidal_frequencies",
    "sinusoidal_encoding",
    "shift_matrix",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "relative_positions",
    "exponential_basis",
    "central_mask_basis",
    "gamma_basis",
    "enformer_relative_features",
    "relative_position_logits",
]


def _check_d_model(d_model: int) -> None:
    if not isinstance(d_model, (int, np.integer)) or d_model < 2 or d_model % 2:
        raise ValueError(
            f"d_model must be a positive even integer (features come in (sin, cos) pairs), got {d_model!r}"
        )


def sinusoidal_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies omega_i = 1 / base^(2i / d_model), i = 0 .. d_model/2 - 1.

    The wavelengths 2 pi / omega_i grow geometrically from 2 pi (i = 0) to almost
    2 pi * base (Vaswani et al. 2017, section 3.5).

    >>> sinusoidal_frequencies(4)
    array([1.  , 0.01])
    """
    _check_d_model(d_model)
    if base <= 1:
        raise ValueError(f"base must be > 1 (it sets the longest wavelength), got {base}")
    two_i = np.arange(0, d_model, 2, dtype=np.float64)  # (d/2,) the even feature indices 2i
    return base ** (-two_i / d_model)


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The fixed (num_positions, d_model) sinusoidal position matrix, positions 0, 1, ...

    PE[pos, 2i] = sin(pos * omega_i) and PE[pos, 2i + 1] = cos(pos * omega_i) with
    omega_i = 1 / base^(2i / d_model): sines in the even columns, cosines in the odd
    ones, interleaved. Every value lies in [-1, 1]. A numpy array (float64); an odd
    d_model raises ValueError (the columns come in (sin, cos) pairs).

    >>> sinusoidal_encoding(2, 4).round(4)
    array([[0.    , 1.    , 0.    , 1.    ],
           [0.8415, 0.5403, 0.01  , 1.    ]])
    """
    return _solution.sinusoidal_encoding(num_positions, d_model, base)


def shift_matrix(k: float, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The (d_model, d_model) matrix M_k with PE(pos + k) = M_k @ PE(pos) for every pos.

    It is block diagonal, one 2 x 2 rotation per frequency acting on the pair
    (sin, cos) = (PE[2i], PE[2i+1]):

        [[ cos(k omega_i), sin(k omega_i)],
         [-sin(k omega_i), cos(k omega_i)]]

    (the angle-addition formulas). M_k does not depend on pos, so "k steps further"
    is the same linear map everywhere in the sequence. For a matrix of rows,
    ``PE[k:] == PE[:-k] @ M_k.T``.

    >>> shift_matrix(1, 2).round(4)
    array([[ 0.5403,  0.8415],
           [-0.8415,  0.5403]])
    """
    return _solution.shift_matrix(k, d_model, base)


def _check_input(x: torch.Tensor, d_model: int, max_len: int, kind: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"expected a (B, T, d_model) tensor, got {getattr(x, 'shape', type(x).__name__)}")
    if x.shape[-1] != d_model:
        raise ValueError(f"input has {x.shape[-1]} features, the {kind} positions were built for d_model={d_model}")
    if x.shape[1] > max_len:
        raise ValueError(
            f"sequence length {x.shape[1]} exceeds max_len={max_len} of the {kind} positions"
            + (": learned positions cannot extrapolate beyond the lengths they were trained on"
               if kind == "learned" else "; build the module with a larger max_len")
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding: x (B, T, d_model) -> x + PE[:T].

    No parameters; the table is a non-trainable float32 buffer (the values of
    :func:`sinusoidal_encoding`, rounded to float32) and moves with ``.to(device)``.
    It is built from :func:`sinusoidal_frequencies` here, not by calling lesson 04's
    exercise, so the module also works in the students' bundle before that solution
    is released (tests/test_positional.py shows the two tables are identical).
    """

    def __init__(self, d_model: int, max_len: int = 512, base: float = 10000.0):
        super().__init__()
        if not isinstance(max_len, (int, np.integer)) or max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
        self.d_model, self.max_len = d_model, max_len
        omega = sinusoidal_frequencies(d_model, base)  # (d/2,)
        angles = np.arange(max_len, dtype=np.float64)[:, None] * omega[None, :]  # (max_len, d/2)
        table = np.empty((max_len, d_model), dtype=np.float64)
        table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)  # sines even, cosines odd
        self.register_buffer("pe", torch.from_numpy(table).float(), persistent=False)  # (max_len, d_model)

    def encoding(self, length: int) -> torch.Tensor:
        """The first ``length`` position vectors, (length, d_model)."""
        return self.pe[:length]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.d_model, self.max_len, "sinusoidal")
        return x + self.pe[: x.shape[1]].to(x.dtype)  # (B, T, d) + (T, d)


class LearnedPositionalEmbedding(nn.Module):
    """Adds one trained vector per position: x (B, T, d_model) -> x + P[:T].

    The table (max_len, d_model) starts as N(0, 0.02^2) (as GPT-2 does) and is
    learned with the rest of the model. Unlike the sinusoidal table it has no
    values for positions >= max_len, and positions never seen in training keep
    their random start.
    """

    def __init__(self, max_len: int, d_model: int, *, generator: torch.Generator | None = None):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model, generator=generator) * 0.02)

    def encoding(self, length: int) -> torch.Tensor:
        return self.weight[:length]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.d_model, self.max_len, "learned")
        return x + self.weight[: x.shape[1]].to(x.dtype)


# ---------------------------------------------------------------- relative positions (Enformer)
def relative_positions(T: int, S: int | None = None) -> np.ndarray:
    """Integer (T, S) matrix r[i, j] = j - i: where key j sits relative to query i.

    >>> relative_positions(3)
    array([[ 0,  1,  2],
           [-1,  0,  1],
           [-2, -1,  0]])
    """
    S = T if S is None else S
    for name, n in (("T", T), ("S", S)):
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{name} must be a positive integer, got {n!r}")
    return np.arange(S)[None, :] - np.arange(T)[:, None]  # (T, S)


def _check_basis_args(num_basis: int, seq_len: float | None = None) -> None:
    if not isinstance(num_basis, (int, np.integer)) or num_basis < 1:
        raise ValueError(f"num_basis must be a positive integer, got {num_basis!r}")
    if seq_len is not None and seq_len <= 1:
        raise ValueError(f"seq_len (the longest distance of interest) must be > 1, got {seq_len}")


def exponential_basis(distances, num_basis: int, seq_len: float, min_half_life: float = 3.0) -> np.ndarray:
    """Exponential decays f_i(r) = exp(-ln(2) |r| / h_i), shape distances.shape + (num_basis,).

    f_i halves every h_i positions: f_i(0) = 1, f_i(h_i) = 0.5. As in Enformer, the
    half-lives are h_i = 2^x_i with x_i = np.linspace(min_half_life, log2(seq_len),
    num_basis): ``min_half_life`` is in log2 units (the default 3.0 gives a shortest
    half-life of 2^3 = 8 positions) and the longest half-life is seq_len. Raises
    ValueError unless 2^min_half_life <= seq_len.

    >>> exponential_basis(np.array([0, 8, -8, 32]), num_basis=2, seq_len=32).round(4)
    array([[1.    , 1.    ],
           [0.5   , 0.8409],
           [0.5   , 0.8409],
           [0.0625, 0.5   ]])
    """
    return _solution.exponential_basis(distances, num_basis, seq_len, min_half_life)


def central_mask_basis(distances, num_basis: int) -> np.ndarray:
    """Nested windows f_i(r) = 1 if |r| < 2^i - 1 else 0, i = 1 .. num_basis (as Enformer).

    f_1 is 1 only at r = 0, f_2 for |r| <= 2, f_3 for |r| <= 6, f_4 for |r| <= 14, ...:
    each window about twice as wide as the previous one, all centred on the query.

    >>> central_mask_basis(np.array([0, 1, 2, -5]), num_basis=3)
    array([[1., 1., 1.],
           [0., 1., 1.],
           [0., 1., 1.],
           [0., 0., 1.]])
    """
    _check_basis_args(num_basis)
    r = np.abs(np.asarray(distances, dtype=np.float64))[..., None]  # (..., 1)
    widths = 2.0 ** np.arange(1, num_basis + 1) - 1.0  # (n,) thresholds 1, 3, 7, 15, ...: windows 1, 5, 13, 29 wide
    return (r < widths).astype(np.float64)  # (..., n)


def gamma_basis(distances, num_basis: int, seq_len: float) -> np.ndarray:
    """Bumps at increasing distances: gamma densities of |r|, scaled by one global maximum.

    Basis i (i = 1 .. n) is the gamma probability density with mean mu_i = i * seq_len / n
    and standard deviation sigma = seq_len / (2 n) (shape alpha_i = (mu_i / sigma)^2 = 4 i^2,
    rate beta_i = mu_i / sigma^2), evaluated at |r|. As in Enformer, 1e-8 is added and
    the whole array is divided by its largest entry, taken over ALL the distances passed
    and all basis functions: the largest value is exactly 1, the other bumps peak lower
    (a wider density has a lower peak), and the values depend on which distances are
    passed. f_i(0) = 1e-8 / max. Raises ValueError for an empty ``distances``.

    >>> gamma_basis(np.array([0, 7.5, 10]), num_basis=2, seq_len=20).round(4)
    array([[0.    , 0.    ],
           [1.    , 0.008 ],
           [0.872 , 0.0806]])
    """
    _check_basis_args(num_basis, seq_len)
    r = np.abs(np.asarray(distances, dtype=np.float64))[..., None]  # (..., 1)
    if r.size == 0:
        raise ValueError("distances is empty: the gamma basis is scaled by its maximum over the distances passed")
    k = np.arange(1, num_basis + 1, dtype=np.float64)  # (n,)
    mean = k * seq_len / num_basis
    std = seq_len / (2.0 * num_basis)
    alpha, beta = (mean / std) ** 2, mean / std**2  # alpha = 4 k^2 >= 4: the density is 0 at r = 0
    log_norm = np.array([math.lgamma(a) for a in alpha]) - alpha * np.log(beta)  # log(Gamma(a) / b^a)
    with np.errstate(divide="ignore"):
        log_pdf = (alpha - 1.0) * np.log(r) - beta * r - log_norm  # (..., n); log(0) = -inf gives exactly 0
    pdf = np.exp(log_pdf) + 1e-8
    return pdf / pdf.max()  # (..., n)


def enformer_relative_features(distances, num_features: int, seq_len: float, symmetric: bool = False,
                               min_half_life: float = 3.0) -> np.ndarray:
    """Enformer's relative position features, shape distances.shape + (num_features,).

    The three families (exponential, central mask, gamma) contribute equally. With
    ``symmetric=False`` (as Enformer does) each basis value f(|r|) also appears
    multiplied by sign(r), so the features can tell upstream (r < 0) from
    downstream (r > 0): num_features must then be divisible by 6, else by 3.

    Layout: [exp | central | gamma] (each num_features / 6 wide), then the same
    three times sign(r).
    """
    groups = 3 if symmetric else 6
    if not isinstance(num_features, (int, np.integer)) or num_features < groups or num_features % groups:
        raise ValueError(
            f"num_features must be a positive multiple of {groups} (3 basis families"
            f"{'' if symmetric else ' x (symmetric, sign(r) copy)'}), got {num_features!r}"
        )
    r = np.asarray(distances, dtype=np.float64)
    n = num_features // groups
    _check_basis_args(n, seq_len)
    if not min_half_life <= math.log2(seq_len):
        raise ValueError(f"min_half_life is log2 of the shortest half-life and must be <= log2(seq_len) = "
                         f"{math.log2(seq_len):.3g}, got {min_half_life}")
    # the exponential family as exponential_basis computes it, written out rather than called: that is
    # lesson 04's exercise, and this function must work in the students' bundle before its solution is
    # out (lesson 12 uses it); tests/test_positional.py shows the features are the same bit for bit
    half_lives = 2.0 ** np.linspace(min_half_life, math.log2(seq_len), n)  # (n,)
    exponential = np.exp(-math.log(2.0) * np.abs(r)[..., None] / half_lives)  # (..., n)
    sym = np.concatenate([exponential, central_mask_basis(r, n), gamma_basis(r, n, seq_len)], axis=-1)  # (..., 3n)
    if symmetric:
        return sym
    return np.concatenate([sym, np.sign(r)[..., None] * sym], axis=-1)  # (..., 6n)


def relative_position_logits(q, features, w_r) -> np.ndarray:
    """The positional part of the attention score: logits[..., i, j] = q_i . (W_r^T f(r_ij)).

    Args:
        q: queries (..., T, d_k)
        features: relative features (T, S, F), e.g. ``enformer_relative_features(relative_positions(T, S), ...)``
        w_r: (F, d_k) projection of the features to "relative keys"

    Returns (..., T, S). Enformer adds this (plus the content score q_i . k_j and
    learned biases not covered here) before the softmax, with the same 1/sqrt(d_k) scale.
    """
    q, features, w_r = (np.asarray(a, dtype=np.float64) for a in (q, features, w_r))
    if features.ndim != 3 or w_r.ndim != 2:
        raise ValueError(f"features must be (T, S, F) and w_r (F, d_k); got {features.shape} and {w_r.shape}")
    if q.ndim < 2 or q.shape[-2] != features.shape[0]:
        raise ValueError(f"q must be (..., T, d_k) with T = features.shape[0] = {features.shape[0]}, got {q.shape}")
    if w_r.shape != (features.shape[-1], q.shape[-1]):
        raise ValueError(f"w_r must be (F, d_k) = ({features.shape[-1]}, {q.shape[-1]}), got {w_r.shape}")
    rel_keys = features @ w_r  # (T, S, d_k): one "key" per (query, offset)
    return np.einsum("...td,tsd->...ts", q, rel_keys)  # (..., T, S)
