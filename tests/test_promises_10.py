"""Lesson 10: each docstring promise of a graded exercise, the wrong answer that breaks it, and the
words of the message that names it; and at least three correct formulations per exercise that pass."""
import collections
import math

import pytest
import torch

from course_lib import proteins as ref
from course_lib.checks import proteins as C
from course_lib.efficient import favor_features_torch
from course_lib.masking import causal_mask
from named import assert_promise_broken, wrong
from test_checks_proteins import (encode_loop, encode_vocab_lookup, favor_einsum, greedy_rowwise, kmer_dict,
                                  kmer_numpy)

AA = ref.AMINO_ACIDS


# ---------------------------------------------------------------- more correct formulations
def encode_regex_free(sequences, max_len=None):
    """Builds a padded list of lists, then one tensor."""
    if max_len is not None and max_len < 2:
        raise ValueError("max_len too small")
    table = collections.defaultdict(lambda: 3, {a: 5 + i for i, a in enumerate(AA)})
    rows = [[1, *[table[a] for a in (s.upper() if max_len is None else s.upper()[:max_len - 2])], 2] for s in sequences]
    T = max(map(len, rows))
    ids = torch.tensor([r + [0] * (T - len(r)) for r in rows])
    return ids, ids > 0


def kmer_counter_rows(sequences, k=3):
    rows = []
    for s in sequences:
        s = s.upper()
        c = collections.Counter(s[i:i + k] for i in range(len(s) - k + 1))
        row = torch.zeros(20**k)
        for kmer, n in c.items():
            if all(a in AA for a in kmer):
                row[sum(AA.index(a) * 20 ** (k - 1 - j) for j, a in enumerate(kmer))] = n
        rows.append(row / row.norm() if row.any() else row)
    return torch.stack(rows)


def favor_loop_heads(q, k, v, w, keep):
    out = torch.zeros_like(v)
    for b in range(q.shape[0]):
        n = int(keep[b].sum())
        for h in range(q.shape[1]):
            kk = torch.zeros(q.shape[2], 1, dtype=torch.bool)
            kk[:n] = True
            pq = favor_features_torch(q[b, h], w, is_query=True)
            pk = favor_features_torch(k[b, h], w, is_query=False, keep=kk)
            out[b, h, :n] = ((pq @ (pk.T @ v[b, h])) / (pq @ pk.sum(0)).unsqueeze(-1))[:n]
    return out


def favor_manual_features(q, k, v, w, keep, eps=1e-6):
    """FAVOR+ features written out (same stabilisers as lesson 07): per-query max, one max over real keys."""
    d, m = q.shape[-1], w.shape[0]
    kk = keep[:, None, :, None]
    w = w.to(q.dtype)

    def expo(x):
        x = x * d ** -0.25
        return x @ w.T - (x * x).sum(-1, keepdim=True) / 2

    eq, ek = expo(q), expo(k)
    eq = eq - eq.amax(-1, keepdim=True)
    ek = ek.masked_fill(~kk, -math.inf)
    ek = ek - ek.amax(dim=(-2, -1), keepdim=True)
    pq = (eq.exp() + eps) / math.sqrt(m)
    pk = ((ek.exp() + eps) / math.sqrt(m)) * kk
    out = (pq @ (pk.transpose(-2, -1) @ v)) / (pq @ pk.sum(-2).unsqueeze(-1))
    return out * kk


def greedy_with_lesson02_mask(model, src_ids, src_keep, max_len):
    if max_len < 1:
        raise ValueError("max_len")
    with torch.no_grad():
        memory = model.encode(src_ids, src_keep)
        out = torch.full((len(src_ids), 1), model.bos_id)
        finished = torch.zeros(len(src_ids), dtype=torch.bool)
        while out.shape[1] <= max_len and not finished.all():
            mask = torch.from_numpy(causal_mask(out.shape[1]))
            h = model.decoder(model.embed_target(out), memory, mask, src_keep[:, None, None, :])
            nxt = model.generator(h)[:, -1].argmax(-1).masked_fill(finished, model.pad_id)
            finished |= nxt == model.eos_id
            out = torch.cat([out, nxt[:, None]], 1)
    return out[:, 1:]


def greedy_loop_list(model, src_ids, src_keep, max_len):
    if max_len < 1:
        raise ValueError("max_len")
    with torch.no_grad():
        memory = model.encode(src_ids, src_keep)
        seqs = [[model.bos_id] for _ in range(len(src_ids))]
        done = [False] * len(src_ids)
        for _ in range(max_len):
            if all(done):
                break
            x = torch.tensor(seqs)
            T = x.shape[1]
            h = model.decoder(model.embed_target(x), memory, torch.tril(torch.ones(T, T, dtype=torch.bool)),
                              src_keep.unsqueeze(1).unsqueeze(1))
            best = model.generator(h[:, T - 1]).argmax(-1).tolist()
            for b in range(len(seqs)):
                seqs[b].append(model.pad_id if done[b] else best[b])
                done[b] = done[b] or best[b] == model.eos_id
    return torch.tensor(seqs)[:, 1:]


CORRECT = [
    (C.check_encode_proteins, f) for f in (encode_loop, encode_vocab_lookup, encode_regex_free)
] + [
    (C.check_kmer_vectors, f) for f in (kmer_dict, kmer_numpy, kmer_counter_rows)
] + [
    (C.check_favor_padded_attention, f) for f in (favor_einsum, favor_loop_heads, favor_manual_features)
] + [
    (C.check_greedy_decode, f) for f in (greedy_rowwise, greedy_with_lesson02_mask, greedy_loop_list)
]


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,fn", CORRECT, ids=[f"{c.__name__}:{f.__name__}" for c, f in CORRECT])
def test_correct_formulations_pass(check, fn, hidden):
    check(fn, hidden=hidden)


# ---------------------------------------------------------------- wrong answers, one per promise
def _encode_int32(s, max_len=None):
    ids, keep = encode_loop(s, max_len)
    return ids.int(), keep


def _encode_keep_int(s, max_len=None):
    ids, keep = encode_loop(s, max_len)
    return ids, keep.long()


def _encode_no_error(s, max_len=None):
    return encode_loop(s, None if (max_len is not None and max_len < 2) else max_len)


def _encode_mutates(s, max_len=None):
    s[:] = [x.upper() for x in s]
    return encode_loop(s, max_len)


def _encode_numpy(s, max_len=None):
    ids, keep = encode_loop(s, max_len)
    return ids.numpy(), keep.numpy()


def _kmer_float64(s, k=3):
    return kmer_dict(s, k).double()


def _kmer_nan_rows(s, k=3):
    raw = C._kmer(s, k, normalise=False)
    return raw / raw.norm(dim=1, keepdim=True)


def _favor_float64_always(q, k, v, w, keep):
    return favor_einsum(q.double(), k.double(), v.double(), w.double(), keep)


def _greedy_int32(model, src_ids, src_keep, max_len):
    return greedy_rowwise(model, src_ids, src_keep, max_len).int()


def _greedy_no_error(model, src_ids, src_keep, max_len):
    return greedy_rowwise(model, src_ids, src_keep, max(max_len, 1))


PROMISES = [
    (C.check_encode_proteins, "ids are int64", _encode_int32, "int64"),
    (C.check_encode_proteins, "keep is bool", _encode_keep_int, "bool"),
    (C.check_encode_proteins, "torch tensors, not numpy", _encode_numpy, "torch"),
    (C.check_encode_proteins, "ValueError when max_len < 2", _encode_no_error, "ValueError"),
    (C.check_encode_proteins, "the input list is not changed", _encode_mutates, "changed the list"),
    (C.check_encode_proteins, "<eos> always there after truncation", wrong(C.WRONG_ENCODE, "<lambda>", '<eos> cut off by truncation').fn, "<eos> cut off"),
    (C.check_encode_proteins, "padded to the longest sequence", wrong(C.WRONG_ENCODE, "<lambda>", 'padded to max_len instead of the longest sequence').fn, "padded to max_len"),
    (C.check_encode_proteins, "case-insensitive", wrong(C.WRONG_ENCODE, "<lambda>", 'lower-case residues become <unk>').fn, "lower-case"),
    (C.check_encode_proteins, "True at real tokens", wrong(C.WRONG_ENCODE, "<lambda>", 'keep mask inverted').fn, "keep mask inverted"),
    (C.check_kmer_vectors, "float32", _kmer_float64, "float32"),
    (C.check_kmer_vectors, "a sequence without k-mers is a row of zeros", _kmer_nan_rows, "row of zeros"),
    (C.check_kmer_vectors, "unit length rows", wrong(C.WRONG_KMER, "<lambda>", 'counts not normalised').fn, "not normalised"),
    (C.check_kmer_vectors, "overlapping windows, step 1", wrong(C.WRONG_KMER, "<lambda>", 'non-overlapping windows').fn, "non-overlapping"),
    (C.check_kmer_vectors, "non-standard residues skipped", wrong(C.WRONG_KMER, "<lambda>", 'windows with a non-standard residue counted').fn, "non-standard"),
    (C.check_kmer_vectors, "first residue most significant", wrong(C.WRONG_KMER, "<lambda>", 'digits reversed').fn, "digits reversed"),
    (C.check_favor_padded_attention, "padded keys contribute nothing", wrong(C.WRONG_FAVOR, "<lambda>", 'key padding ignored').fn, "key padding ignored"),
    (C.check_favor_padded_attention, "padded query rows are 0", wrong(C.WRONG_FAVOR, "<lambda>", 'padded query rows not zeroed').fn, "padded query rows"),
    (C.check_favor_padded_attention, "output in the dtype of v", _favor_float64_always, "float32"),
    (C.check_favor_padded_attention, "never builds an (L, L) matrix", lambda q, k, v, w, keep: (
        lambda kk, pq, pk: ((pq @ pk.transpose(-2, -1)) @ v) / (pq @ pk.transpose(-2, -1)).sum(-1, keepdim=True) * kk)(
        keep[:, None, :, None], favor_features_torch(q, w, is_query=True),
        favor_features_torch(k, w, is_query=False, keep=keep[:, None, :, None])), "quadratic"),
    (C.check_greedy_decode, "without the start token", wrong(C.WRONG_GREEDY, "fn", 'start token kept in the output').fn, "start token"),
    (C.check_greedy_decode, "at most max_len tokens", wrong(C.WRONG_GREEDY, "fn", 'one step too many').fn, "one step too many"),
    (C.check_greedy_decode, "pad after <eos>", wrong(C.WRONG_GREEDY, "fn", 'tokens generated after <eos>').fn, "after <eos>"),
    (C.check_greedy_decode, "causal mask", wrong(C.WRONG_GREEDY, "fn", 'no causal mask').fn, "no causal mask"),
    (C.check_greedy_decode, "source padding masked", wrong(C.WRONG_GREEDY, "fn", 'source padding ignored').fn, "source padding ignored"),
    (C.check_greedy_decode, "int64 ids", _greedy_int32, "int64"),
    (C.check_greedy_decode, "ValueError when max_len < 1", _greedy_no_error, "ValueError"),
]


@pytest.mark.parametrize("check,promise,wrong,words", PROMISES, ids=[p[1] for p in PROMISES])
def test_a_broken_promise_loses_points_with_its_name(check, promise, wrong, words):
    assert_promise_broken(check, wrong, promise, words)
