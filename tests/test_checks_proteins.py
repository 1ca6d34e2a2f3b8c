"""The lesson 10 checks: independent correct answers pass, every known wrong answer is named, the reference is refused."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from course_lib import proteins as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import proteins as chk
from course_lib.efficient import favor_features_torch
from named import assert_named_alone, wrong_answer_params

AA = "ACDEFGHIKLMNPQRSTVWY"


# ---------------------------------------------------------------- independent correct answers
def encode_loop(sequences, max_len=None):
    if max_len is not None and max_len < 2:
        raise ValueError("max_len")
    rows = []
    for s in sequences:
        body = s.upper()
        if max_len is not None:
            body = body[: max_len - 2]
        rows.append([1] + [5 + AA.index(a) if a in AA else 3 for a in body] + [2])
    T = max(len(r) for r in rows)
    ids = [r + [0] * (T - len(r)) for r in rows]
    keep = [[True] * len(r) + [False] * (T - len(r)) for r in rows]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(keep)


def encode_vocab_lookup(sequences, max_len=None):
    if max_len is not None and max_len < 2:
        raise ValueError("max_len")
    lookup = {a: ref.AA_VOCAB.index(a) for a in AA}
    seqs = [[lookup.get(a, ref.UNK) for a in s.upper()] for s in sequences]
    if max_len is not None:
        seqs = [x[: max_len - 2] for x in seqs]
    T = max(len(x) for x in seqs) + 2
    ids = torch.zeros(len(seqs), T, dtype=torch.int64)
    for b, x in enumerate(seqs):
        ids[b, 0] = ref.CLS
        ids[b, 1:len(x) + 1] = torch.as_tensor(x, dtype=torch.int64)
        ids[b, len(x) + 1] = ref.EOS
    return ids, ids.ne(0)


def kmer_dict(sequences, k=3):
    out = torch.zeros(len(sequences), 20**k)
    for b, s in enumerate(sequences):
        s = s.upper()
        for i in range(len(s) - k + 1):
            w = s[i:i + k]
            if all(a in AA for a in w):
                idx = 0
                for a in w:
                    idx = 20 * idx + AA.index(a)
                out[b, idx] += 1
    n = out.norm(dim=1, keepdim=True)
    return torch.where(n > 0, out / torch.where(n > 0, n, torch.ones_like(n)), out)


def kmer_numpy(sequences, k=3):
    out = np.zeros((len(sequences), 20**k), dtype=np.float64)
    powers = 20 ** np.arange(k - 1, -1, -1)
    for b, s in enumerate(sequences):
        codes = np.array([AA.find(a) for a in s.upper()], dtype=np.int64)
        if len(codes) < k:
            continue
        win = np.lib.stride_tricks.sliding_window_view(codes, k)
        win = win[(win >= 0).all(axis=1)]
        np.add.at(out[b], win @ powers, 1.0)
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    out = np.divide(out, norm, out=np.zeros_like(out), where=norm > 0)
    return torch.from_numpy(out).float()


def favor_einsum(q, k, v, w, keep):
    kk = keep[:, None, :, None]
    pq = favor_features_torch(q, w, is_query=True)
    pk = favor_features_torch(k, w, is_query=False, keep=kk)
    num = torch.einsum("bhlm,bhmd->bhld", pq, torch.einsum("bhlm,bhld->bhmd", pk, v))
    den = torch.einsum("bhlm,bhm->bhl", pq, pk.sum(-2)).unsqueeze(-1)
    return torch.where(kk, num / den, torch.zeros_like(num))


def favor_float32(q, k, v, w, keep):
    out = favor_einsum(q.float(), k.float(), v.float(), w.float(), keep)
    return out.to(v.dtype)


@torch.no_grad()
def greedy_rowwise(model, src_ids, src_keep, max_len):
    """Each protein alone, without padding, then padded together."""
    if max_len < 1:
        raise ValueError("max_len")
    rows = []
    for b in range(src_ids.shape[0]):
        n = int(src_keep[b].sum())
        ids, keep = src_ids[b:b + 1, :n], src_keep[b:b + 1, :n]
        memory = model.encode(ids, keep)
        seq = [model.bos_id]
        for _ in range(max_len):
            x = torch.tensor([seq])
            T = len(seq)
            h = model.decoder(model.embed_target(x), memory, torch.tril(torch.ones(T, T)).bool(), keep[:, None, None])
            seq.append(int(model.generator(h[0, -1]).argmax()))
            if seq[-1] == model.eos_id:
                break
        rows.append(seq[1:])
    T = max(len(r) for r in rows)
    return torch.tensor([r + [model.pad_id] * (T - len(r)) for r in rows], dtype=torch.long)


def greedy_float32(model, src_ids, src_keep, max_len):
    import copy
    m = copy.deepcopy(model).float()
    return greedy_rowwise(m, src_ids, src_keep, max_len)


CORRECT = [
    (chk.check_encode_proteins, encode_loop), (chk.check_encode_proteins, encode_vocab_lookup),
    (chk.check_kmer_vectors, kmer_dict), (chk.check_kmer_vectors, kmer_numpy),
    (chk.check_favor_padded_attention, favor_einsum),
    (chk.check_greedy_decode, greedy_rowwise),
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, fn", CORRECT, ids=[f"{c.__name__}:{f.__name__}" for c, f in CORRECT])
def test_correct_independent_answers_pass(check, fn, hidden):
    check(fn, hidden=hidden)


# ---------------------------------------------------------------- every named misconception
WRONG_ANSWERS = wrong_answer_params((chk.check_encode_proteins, chk.WRONG_ENCODE),
                                   (chk.check_kmer_vectors, chk.WRONG_KMER),
                                   (chk.check_favor_padded_attention, chk.WRONG_FAVOR),
                                   (chk.check_greedy_decode, chk.WRONG_GREEDY))


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, wrong", WRONG_ANSWERS)
def test_each_wrong_answer_is_named(check, wrong, hidden):
    assert_named_alone(check, wrong.fn, wrong.name, hidden=hidden)


@pytest.mark.parametrize("hidden", [False, True])
def test_quadratic_favor_is_named(hidden):
    def quadratic(q, k, v, w, keep):
        kk = keep[:, None, :, None]
        pq = favor_features_torch(q, w, is_query=True)
        pk = favor_features_torch(k, w, is_query=False, keep=kk)
        a = pq @ pk.transpose(-2, -1)  # (B, H, L, L)
        return (a @ v) / a.sum(-1, keepdim=True) * kk

    with pytest.raises(AssertionError, match="likely misconception 'quadratic'"):
        chk.check_favor_padded_attention(quadratic, hidden=hidden)


# ---------------------------------------------------------------- integrity and other failures
def test_reference_and_builtins_are_refused():
    for check, fn in [(chk.check_encode_proteins, ref.encode_proteins), (chk.check_kmer_vectors, ref.kmer_vectors),
                      (chk.check_favor_padded_attention, ref.favor_padded_attention),
                      (chk.check_greedy_decode, ref.greedy_decode)]:
        with pytest.raises(IntegrityError):
            check(fn)
        with pytest.raises(IntegrityError):
            check(lambda *a, _f=fn, **kw: _f(*a, **kw))

    from course_lib.efficient import attention_from_features_torch

    def via_lesson07(q, k, v, w, keep):
        kk = keep[:, None, :, None]
        return attention_from_features_torch(favor_features_torch(q, w, is_query=True),
                                             favor_features_torch(k, w, is_query=False, keep=kk), v) * kk

    with pytest.raises(IntegrityError):
        chk.check_favor_padded_attention(via_lesson07)

    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in (chk.check_encode_proteins, chk.check_kmer_vectors, chk.check_favor_padded_attention,
                  chk.check_greedy_decode):
        with pytest.raises(NotImplementedYet):
            check(stub)


def test_wrong_dtypes_and_missing_errors_fail():
    with pytest.raises(AssertionError, match="int64"):
        chk.check_encode_proteins(lambda s, max_len=None: (encode_loop(s, max_len)[0].int(), encode_loop(s, max_len)[1]))
    with pytest.raises(AssertionError, match="ValueError"):
        chk.check_encode_proteins(lambda s, max_len=None: encode_loop(s, None if max_len == 1 else max_len))
    with pytest.raises(AssertionError, match="float32"):
        chk.check_kmer_vectors(lambda s, k=3: kmer_dict(s, k).double())
    with pytest.raises(AssertionError, match="float32"):
        chk.check_favor_padded_attention(lambda q, k, v, w, keep: favor_einsum(q.double(), k.double(), v.double(),
                                                                               w.double(), keep))


def test_checks_leave_global_rng_alone():
    state = torch.get_rng_state()
    chk.check_greedy_decode(greedy_rowwise)
    assert torch.equal(torch.get_rng_state(), state)
