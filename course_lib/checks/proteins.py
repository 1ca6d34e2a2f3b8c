"""Checks for lesson 10 (proteins), with the misconceptions they name.

    check_encode_proteins(encode_proteins)                # encode_proteins(sequences, max_len=None)
    check_kmer_vectors(kmer_vectors)                      # kmer_vectors(sequences, k=3)
    check_favor_padded_attention(favor_padded_attention)  # favor_padded_attention(q, k, v, w, keep)
    check_greedy_decode(greedy_decode)                    # greedy_decode(model, src_ids, src_keep, max_len)

Named misconceptions
    encode_proteins: no <cls>/<eos>; <eos> cut off by truncation; lower-case residues
    become <unk>; residue ids start at 0 (the special tokens not counted); padded to
    max_len instead of the longest sequence; keep mask inverted (True at padding);
    padding with <eos> instead of <pad>.
    kmer_vectors: counts not normalised; last residue most significant (digits
    reversed); non-overlapping windows (step k); presence instead of counts; windows
    with a non-standard residue counted; NaN (0/0) for a sequence without k-mers;
    last window missed (n - k windows).
    favor_padded_attention: key padding ignored; padded query rows not zeroed;
    normaliser forgotten; and, by watching the shape of every tensor a torch function
    returns during the call (``torch.overrides.TorchFunctionMode``), an (L, L) matrix built.
    greedy_decode: no causal mask; source padding ignored (memory_mask); start token
    kept in the output; tokens generated after <eos> instead of padding; one step too
    many (max_len + 1 tokens); logits of the first position instead of the last.

Inputs are literal strings, strings drawn with ``core.seeded`` and tensors and models
drawn from ``torch.Generator().manual_seed``; ``hidden=True`` uses other, larger ones.

The hidden cases, the known wrong answers behind these names and the exercises' declarations are the judge's
(``course_lib/judge/proteins.py``), which the students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import contextlib
import torch

from course_lib import proteins as ref
from course_lib.checks import core
from course_lib.checks.core import (
    forbid,
    Case,
    assert_shape,
    call_student,
    compare_with_reference,
    reference,
    seeded,
)

__all__ = [
    "check_encode_proteins",
    "check_kmer_vectors",
    "check_favor_padded_attention",
    "check_greedy_decode",
]


FORBIDDEN_ENCODE = ("course_lib.proteins.encode_proteins",)

FORBIDDEN_KMER = ("course_lib.proteins.kmer_vectors",)

FORBIDDEN_FAVOR = forbid(
    "course_lib.proteins.favor_padded_attention",
    "course_lib.efficient.attention_from_features_torch",
    "course_lib.efficient.favor_attention_torch",
    "course_lib.efficient.linear_attention_torch",
    "course_lib.efficient.EfficientMultiHeadAttention.forward",
    "torch.nn.functional.scaled_dot_product_attention",
)

FORBIDDEN_GREEDY = ("course_lib.proteins.greedy_decode",)


_AA = ref.AMINO_ACIDS

QUADRATIC = ("the (L, L) attention matrix is built: a tensor of shape (..., {L}, {L}) appeared while your function "
             "ran on L = {L}. Compute phi(K)^T V (m, d) first and then phi(Q) times it; never phi(Q) phi(K)^T.")


# ---------------------------------------------------------------- inputs
def _random_protein(rng, n, extra=""):
    letters = _AA + extra
    return "".join(letters[i] for i in rng.integers(0, len(letters), size=n))


def encode_cases_from(rng, more=None) -> list[Case]:
    """The encode_proteins cases drawn from ``rng``, then ``more(rng)``'s."""
    cases = [
        Case("['MK', 'W']", (["MK", "W"],)),
        Case("['MKTAYIAK', 'mkt', 'ACDX'] (lower case, X)", (["MKTAYIAK", "mkt", "ACDX"],)),
        Case(
            "3 random proteins, max_len=6 (truncation)", ([_random_protein(rng, n) for n in (9, 4, 2)],), {"max_len": 6}
        ),
        Case("one protein with B, Z, U letters", ([_random_protein(rng, 12, "BZU")],)),
        Case("['', 'G'] (an empty sequence)", (["", "G"],)),
        Case("2 short proteins, max_len=40 (longer than both)", (["MKV", "PPGW"],), {"max_len": 40}),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _encode_cases() -> list[Case]:
    return encode_cases_from(seeded(10))


def kmer_cases_from(rng, more=None) -> list[Case]:
    """The kmer_vectors cases drawn from ``rng``, then ``more(rng)``'s."""
    cases = [
        Case("['AACD'], k=2", (["AACD"],), {"k": 2}),
        Case("['MKVLAAGMKV', 'CA'], k=2", (["MKVLAAGMKV", "CA"],), {"k": 2}),
        Case("3 random proteins with X, default k=3", ([_random_protein(rng, n, "X") for n in (30, 12, 7)],)),
        Case("['mkvl', 'AC'] (lower case; a sequence shorter than k), k=3", (["mkvl", "AC"],), {"k": 3}),
        Case("['GGGGGG', 'ACDEFG'], k=1", (["GGGGGG", "ACDEFG"],), {"k": 1}),
    ]
    if more is not None:
        cases += more(rng)
    return cases


def _kmer_cases() -> list[Case]:
    return kmer_cases_from(seeded(11))


def _favor_case(g, label, B, H, L, d, m, lengths, scale=1.0):
    from course_lib.efficient import draw_projection

    q, k, v = (torch.randn(B, H, L, d, generator=g, dtype=torch.float64) * scale for _ in range(3))
    w = draw_projection(m, d, generator=g, dtype=torch.float64)
    keep = torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]
    return Case(label, (q, k, v, w, keep))


def favor_cases_from(g, more=None) -> list[Case]:
    """The favor_padded_attention cases drawn from the generator ``g``, then ``more(g)``'s."""
    cases = [
        _favor_case(g, "B=2, H=2, L=6, d=4, m=16, lengths [4, 6]", 2, 2, 6, 4, 16, [4, 6]),
        _favor_case(g, "B=3, H=1, L=5, d=8, m=32, lengths [5, 1, 3]", 3, 1, 5, 8, 32, [5, 1, 3]),
        _favor_case(g, "B=1, H=4, L=7, d=4, m=8, no padding", 1, 4, 7, 4, 8, [7]),
    ]
    if more is not None:
        cases += more(g)
    return cases


def _favor_cases() -> list[Case]:
    return favor_cases_from(torch.Generator().manual_seed(12))


def _namer(seed: int, vocab: int = 12, d: int = 16):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = ref.ProteinNamer(vocab, d_model=d, num_heads=2, num_encoder_layers=2, num_decoder_layers=2,
                                 d_ff=2 * d, dropout=0.1, max_src_len=128, max_tgt_len=32)
    g = torch.Generator().manual_seed(seed)
    model = model.double()
    with torch.no_grad():  # LayerNorms near identity, 1/sqrt(fan_in) weights: token choices depend on the input
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * r)
            elif p.dim() == 2 and "embed" not in name:
                p.copy_(r / p.shape[1] ** 0.5)
            else:
                p.copy_(r * (1.0 if "embed" in name else 0.1))
        model.generator.bias[model.eos_id] += 0.5  # rows finish at different steps
        model.generator.bias[model.pad_id] -= 30.0  # <pad> is never generated
    return model.eval()


def greedy_cases_from(g, configs, model_seed_offset: int = 0) -> list[Case]:
    """One case per (index, source lengths, max_len) of ``configs``: a ProteinNamer seeded 100 * index +
    ``model_seed_offset`` and source ids drawn from the generator ``g``."""
    cases = []
    for seed, lengths, max_len in configs:
        model = _namer(100 * seed + model_seed_offset)
        S = max(lengths)
        ids = torch.randint(len(ref.SPECIALS), len(ref.AA_VOCAB), (len(lengths), S), generator=g)
        keep = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
        ids = ids.masked_fill(~keep, ref.PAD)
        cases.append(
            Case(f"{len(lengths)} proteins of lengths {lengths}, max_len={max_len}", (model, ids, keep, max_len))
        )
    return cases


_GREEDY_CONFIGS = [(0, [9, 4, 6, 2], 8), (1, [5, 5, 3], 6), (2, [7], 3), (3, [10, 3, 8, 6, 1], 12)]


def _greedy_cases() -> list[Case]:
    return greedy_cases_from(torch.Generator().manual_seed(13), _GREEDY_CONFIGS)


# ---------------------------------------------------------------- helpers
@contextlib.contextmanager
def _one_thread():
    """Tiny tensors: one intra-op thread is faster (and far faster on a busy machine); restored afterwards."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _expect_value_error(student, case: Case, exercise: str, forbidden, what: str) -> None:
    try:
        call_student(student, case, exercise, forbidden)
    except AssertionError as err:
        if isinstance(err.__cause__, ValueError):
            return
        raise
    raise AssertionError(f"{exercise}: {what} must raise ValueError (input: {case.label})")


def _tensors(x):
    """The tensors inside a result (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _tensors(item)]
    return []


def _largest_square(student, case: Case, exercise: str, forbidden, L: int):
    from torch.overrides import TorchFunctionMode

    seen = {"square": False}

    class _Shapes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in _tensors(out):
                if isinstance(t, torch.Tensor) and t.dim() >= 2 and tuple(t.shape[-2:]) == (L, L):
                    seen["square"] = True
            return out

    with _Shapes():
        out = call_student(student, case, exercise, forbidden)
    return out, seen["square"]


# ---------------------------------------------------------------- checks
@core.graded
def check_encode_proteins(student, hidden: bool = False) -> None:
    """Student ``encode_proteins(sequences, max_len=None) -> (ids int64 (B, T), keep bool (B, T))``."""
    exercise = "encode_proteins"
    cases = core.hidden_part(__name__).encode_cases() if hidden else _encode_cases()
    compare_with_reference(student, ref.encode_proteins, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ENCODE"), forbidden=FORBIDDEN_ENCODE, output_names=("ids", "keep"))
    seqs = ["MKTAYIAK", "mkt", "ACDX", "wbz"]  # a fresh list: the student's function must leave it as it is
    before = list(seqs)
    ids, keep = call_student(student, Case("['MKTAYIAK', 'mkt', 'ACDX', 'wbz']", (seqs,)), exercise,
                             FORBIDDEN_ENCODE)
    if seqs != before:
        raise AssertionError(f"{exercise}: your function changed the list of sequences it was given")
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64:
        raise AssertionError(f"{exercise}: ids must be a torch int64 tensor (torch.long), got "
                             f"{type(ids).__name__} {getattr(ids, 'dtype', '')}")
    if not isinstance(keep, torch.Tensor) or keep.dtype != torch.bool:
        raise AssertionError(f"{exercise}: keep must be a torch bool tensor, got {type(keep).__name__} "
                             f"{getattr(keep, 'dtype', '')}")
    decoded = reference(ref.decode_proteins, ids)
    expected = ["".join(a if a in _AA else "X" for a in s.upper()) for s in seqs]
    if decoded != expected:
        raise AssertionError(f"{exercise}: decoding your ids does not give the sequences back "
                             f"(got {decoded}, expected {expected})")
    _expect_value_error(student, Case("max_len=1", (["MK"],), {"max_len": 1}), exercise, FORBIDDEN_ENCODE,
                        "max_len < 2 (no room for <cls> and <eos>)")


@core.graded
def check_kmer_vectors(student, hidden: bool = False) -> None:
    """Student ``kmer_vectors(sequences, k=3) -> float32 tensor (B, 20**k)`` of unit-length k-mer counts."""
    exercise = "kmer_vectors"
    cases = core.hidden_part(__name__).kmer_cases() if hidden else _kmer_cases()
    compare_with_reference(student, ref.kmer_vectors, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "KMER"), forbidden=FORBIDDEN_KMER, atol=1e-6, rtol=1e-5)
    out = call_student(student, cases[2], exercise, FORBIDDEN_KMER)
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
        raise AssertionError(f"{exercise}: return a torch float32 tensor, got {type(out).__name__} "
                             f"{getattr(out, 'dtype', '')}")
    assert_shape(out, (3, 8000), f"{exercise}: 3 sequences with k=3 give (3, 20**3)")
    empty = call_student(student, Case("['AC', 'X'] with k=3 (no k-mer at all)", (["AC", "X"],), {"k": 3}),
                         exercise, FORBIDDEN_KMER)
    if not isinstance(empty, torch.Tensor) or not bool(torch.isfinite(empty).all()) or float(empty.abs().sum()) != 0:
        raise AssertionError(f"{exercise}: a sequence without any k-mer must give a row of zeros (no NaN from 0/0)")


@core.graded
def check_favor_padded_attention(student, hidden: bool = False) -> None:
    """Student ``favor_padded_attention(q, k, v, w, keep)``: FAVOR+ with key padding, padded rows 0, linear memory."""
    with _one_thread():
        _check_favor(student, hidden)


def _check_favor(student, hidden: bool) -> None:
    exercise = "favor_padded_attention"
    cases = core.hidden_part(__name__).favor_cases() if hidden else _favor_cases()
    compare_with_reference(student, ref.favor_padded_attention, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "FAVOR"), forbidden=FORBIDDEN_FAVOR)
    seed, L = core.hidden_part(__name__).FAVOR_MEMORY if hidden else (14, 500)
    g = torch.Generator().manual_seed(seed)
    big = _favor_case(g, f"B=2, H=2, L={L}, d=8, m=16, lengths [{L}, {L // 2}]", 2, 2, L, 8, 16, [L, L // 2])
    out, square = _largest_square(student, big, exercise, FORBIDDEN_FAVOR, L)
    if square:
        raise AssertionError(f"{exercise}: likely misconception 'quadratic': " + QUADRATIC.format(L=L))
    assert_shape(out, tuple(big.args[2].shape), f"{exercise}: the output has v's shape (B, H, L, d)")
    q, k, v, w, keep = big.args
    v2 = v.clone()
    v2[1, :, L // 2:] = 1e6  # values of padded keys must not matter
    out2 = call_student(student, Case(big.label + ", huge values at padded keys", (q, k, v2, w, keep)), exercise,
                        FORBIDDEN_FAVOR)
    if not torch.allclose(out2.to(torch.float64), out.to(torch.float64), rtol=1e-6, atol=1e-8):
        raise AssertionError(f"{exercise}: changing the values of PADDED keys changed the output: padded keys "
                             "must get zero features")
    f32 = Case(cases[0].label + " in float32", tuple(a.float() if a.is_floating_point() else a
                                                     for a in cases[0].args))
    out32 = call_student(student, f32, exercise, FORBIDDEN_FAVOR)
    if not isinstance(out32, torch.Tensor) or out32.dtype != torch.float32:
        raise AssertionError(f"{exercise}: float32 inputs must give a float32 output, got "
                             f"{getattr(out32, 'dtype', type(out32).__name__)}")


@core.graded
def check_greedy_decode(student, hidden: bool = False) -> None:
    """Student ``greedy_decode(model, src_ids, src_keep, max_len)`` equals greedy decoding step by step."""
    with _one_thread():
        _check_greedy(student, hidden)


def _check_greedy(student, hidden: bool) -> None:
    exercise = "greedy_decode"
    cases = core.hidden_part(__name__).greedy_cases() if hidden else _greedy_cases()
    compare_with_reference(student, ref.greedy_decode, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "GREEDY"), forbidden=FORBIDDEN_GREEDY)
    out = call_student(student, cases[0], exercise, FORBIDDEN_GREEDY)
    if not isinstance(out, torch.Tensor) or out.dtype != torch.int64:
        raise AssertionError(f"{exercise}: return a torch int64 tensor of token ids, got "
                             f"{getattr(out, 'dtype', type(out).__name__)}")
    if out.shape[1] > cases[0].args[3]:
        raise AssertionError(f"{exercise}: at most max_len tokens per row, got {out.shape[1]}")
    _expect_value_error(student, Case("max_len=0", cases[0].args[:3] + (0,)), exercise, FORBIDDEN_GREEDY,
                        "max_len < 1")
