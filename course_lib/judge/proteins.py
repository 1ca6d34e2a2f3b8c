"""The judge's material of ``course_lib.checks.proteins`` (see :mod:`course_lib.judge`): per exercise, its
hidden cases, known wrong answers, right alternatives, answers that break a promise, and its declaration.
"""
from __future__ import annotations

import collections
import math

import numpy as np
import torch

from course_lib import proteins as ref
from course_lib.checks.core import Case, Wrong, seeded
from course_lib.checks.exercise import Breaks, Right, declare, wrong_answer
from course_lib.checks.proteins import (
    _AA,
    _GREEDY_CONFIGS,
    _favor_case,
    _random_protein,
    check_encode_proteins,
    check_favor_padded_attention,
    check_greedy_decode,
    check_kmer_vectors,
    encode_cases_from,
    favor_cases_from,
    greedy_cases_from,
    kmer_cases_from,
)


_AA_ID = {a: i + len(ref.SPECIALS) for i, a in enumerate(_AA)}


# ---------------------------------------------------------------- encode_proteins
def _enc(sequences, max_len=None, *, specials=True, cut_eos=False, upper=True, offset=len(ref.SPECIALS),
         pad_to_max=False, invert=False, pad_id=ref.PAD):
    rows = []
    for s in sequences:
        s = s.upper() if upper else s
        ids = [(_AA.index(a) + offset) if a in _AA else ref.UNK for a in s]
        if specials:
            if cut_eos:
                ids = ([ref.CLS] + ids + [ref.EOS])[: max_len] if max_len else [ref.CLS] + ids + [ref.EOS]
            else:
                ids = [ref.CLS] + (ids if max_len is None else ids[: max_len - 2]) + [ref.EOS]
        elif max_len is not None:
            ids = ids[:max_len]
        rows.append(ids)
    T = max((len(r) for r in rows), default=0)
    if pad_to_max and max_len is not None:
        T = max_len
    out = torch.full((len(rows), T), pad_id, dtype=torch.long)
    keep = torch.zeros(len(rows), T, dtype=torch.bool)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.tensor(r, dtype=torch.long)
        keep[b, : len(r)] = True
    return out, (~keep if invert else keep)


WRONG_ENCODE = [
    Wrong("no <cls>/<eos>", lambda s, max_len=None: _enc(s, max_len, specials=False),
          "every sequence starts with <cls> (id 1) and ends with <eos> (id 2): "
          "[CLS] + residue ids + [EOS], then padding."),
    Wrong("<eos> cut off by truncation", lambda s, max_len=None: _enc(s, max_len, cut_eos=True),
          "truncate the RESIDUES to max_len - 2 before adding <cls> and <eos>; cutting the whole encoded "
          "sequence at max_len drops the <eos> of long proteins."),
    Wrong("lower-case residues become <unk>", lambda s, max_len=None: _enc(s, max_len, upper=False),
          "residues are case-insensitive: upper-case the sequence (s.upper()) before looking up ids."),
    Wrong("residue ids start at 0", lambda s, max_len=None: _enc(s, max_len, offset=0),
          "the five special tokens take ids 0..4, so 'A' is id 5 (AA_VOCAB.index('A')), not 0."),
    Wrong("padded to max_len instead of the longest sequence", lambda s, max_len=None: _enc(s, max_len,
                                                                                          pad_to_max=True),
          "T is the length of the longest ENCODED sequence in the batch (capped at max_len), not max_len itself."),
    Wrong("keep mask inverted", lambda s, max_len=None: _enc(s, max_len, invert=True),
          "keep is True at real tokens (<cls>, residues, <eos>) and False at padding (the course's mask "
          "convention: True = may attend)."),
    Wrong("padding with <eos>", lambda s, max_len=None: _enc(s, max_len, pad_id=ref.EOS),
          "pad with <pad> (id 0), not with <eos>; keep must be False exactly there."),
]


# written independently of course_lib.proteins; the students' and the kernel's editions replace each by a stub
def _right_encode_loop(sequences, max_len=None):
    if max_len is not None and max_len < 2:
        raise ValueError("max_len")
    rows = []
    for s in sequences:
        body = s.upper()
        if max_len is not None:
            body = body[: max_len - 2]
        rows.append([1] + [5 + _AA.index(a) if a in _AA else 3 for a in body] + [2])
    T = max(len(r) for r in rows)
    ids = [r + [0] * (T - len(r)) for r in rows]
    keep = [[True] * len(r) + [False] * (T - len(r)) for r in rows]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(keep)


def _right_encode_vocab_lookup(sequences, max_len=None):
    if max_len is not None and max_len < 2:
        raise ValueError("max_len")
    lookup = {a: ref.AA_VOCAB.index(a) for a in _AA}
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


def _right_encode_regex_free(sequences, max_len=None):
    """Builds a padded list of lists, then one tensor."""
    if max_len is not None and max_len < 2:
        raise ValueError("max_len too small")
    table = collections.defaultdict(lambda: 3, {a: 5 + i for i, a in enumerate(_AA)})
    rows = [[1, *[table[a] for a in (s.upper() if max_len is None else s.upper()[:max_len - 2])], 2] for s in sequences]
    T = max(map(len, rows))
    ids = torch.tensor([r + [0] * (T - len(r)) for r in rows])
    return ids, ids > 0


def _breaks_encode_int32(s, max_len=None):
    ids, keep = _right_encode_loop(s, max_len)
    return ids.int(), keep


def _breaks_encode_keep_int(s, max_len=None):
    ids, keep = _right_encode_loop(s, max_len)
    return ids, keep.long()


def _breaks_encode_no_error(s, max_len=None):
    return _right_encode_loop(s, None if (max_len is not None and max_len < 2) else max_len)


def _breaks_encode_mutates(s, max_len=None):
    s[:] = [x.upper() for x in s]
    return _right_encode_loop(s, max_len)


def _breaks_encode_numpy(s, max_len=None):
    ids, keep = _right_encode_loop(s, max_len)
    return ids.numpy(), keep.numpy()


def _more_encode_cases(rng) -> list[Case]:
    return [
        Case(
            "8 random proteins of 1..60 residues, max_len=32",
            ([_random_protein(rng, int(n), "X") for n in rng.integers(1, 61, size=8)],),
            {"max_len": 32},
        ),
        Case(
            "5 lower-case random proteins",
            ([_random_protein(rng, int(n)).lower() for n in rng.integers(5, 25, size=5)],),
        ),
        Case("max_len=2 (only <cls> and <eos>)", (["MKV", "A"],), {"max_len": 2}),
    ]


def encode_cases() -> list[Case]:
    """The hidden cases of the check: the visible builder's, with the judge's seed, and more."""
    return encode_cases_from(seeded(1010), _more_encode_cases)


ENCODE_PROTEINS = declare("10_proteins", "encode_proteins", check_encode_proteins,
            misconceptions=WRONG_ENCODE,
            promises=(
                Breaks("ids are int64", _breaks_encode_int32, "int64"),
                Breaks("keep is bool", _breaks_encode_keep_int, "bool"),
                Breaks("torch tensors, not numpy", _breaks_encode_numpy, "torch"),
                Breaks("ValueError when max_len < 2", _breaks_encode_no_error, "ValueError"),
                Breaks("the input list is not changed", _breaks_encode_mutates, "changed the list"),
                Breaks("<eos> always there after truncation",
                       wrong_answer(WRONG_ENCODE, "<eos> cut off by truncation"), "<eos> cut off"),
                Breaks("padded to the longest sequence",
                       wrong_answer(WRONG_ENCODE, "padded to max_len instead of the longest sequence"),
                       "padded to max_len"),
                Breaks("case-insensitive", wrong_answer(WRONG_ENCODE, "lower-case residues become <unk>"),
                       "lower-case"),
                Breaks("True at real tokens", wrong_answer(WRONG_ENCODE, "keep mask inverted"), "keep mask inverted"),
            ),
            right=(Right(_right_encode_loop), Right(_right_encode_vocab_lookup), Right(_right_encode_regex_free)))


# ---------------------------------------------------------------- kmer_vectors
def _kmer(sequences, k=3, *, normalise=True, reverse=False, step=1, presence=False, unknown_as_a=False,
          miss_last=False, nan_rows=False):
    out = np.zeros((len(sequences), 20**k))
    for b, s in enumerate(sequences):
        s = s.upper()
        stop = len(s) - k + (0 if miss_last else 1)
        for i in range(0, max(stop, 0), step):
            window = s[i:i + k]
            if not unknown_as_a and any(a not in _AA for a in window):
                continue
            digits = [_AA.index(a) if a in _AA else 0 for a in window]
            if reverse:
                digits = digits[::-1]
            idx = 0
            for dgt in digits:
                idx = idx * 20 + dgt
            out[b, idx] = 1.0 if presence else out[b, idx] + 1.0
        if normalise:
            n = np.linalg.norm(out[b])
            with np.errstate(invalid="ignore", divide="ignore"):
                out[b] = out[b] / n if (n > 0 or nan_rows) else out[b]
    return torch.from_numpy(out).float()


WRONG_KMER = [
    Wrong("counts not normalised", lambda s, k=3: _kmer(s, k, normalise=False),
          "divide each row of counts by its Euclidean norm (row / row.norm()), so that the dot product of two "
          "vectors is their cosine similarity."),
    Wrong("digits reversed", lambda s, k=3: _kmer(s, k, reverse=True),
          "the FIRST residue of the k-mer is the most significant digit: index = sum_i idx(a_i) * 20**(k - i) "
          "(for k=2, 'AC' is 0 * 20 + 1 = 1 and 'CA' is 20)."),
    Wrong("non-overlapping windows", lambda s, k=3: _kmer(s, k, step=k),
          "k-mers overlap: take a window at EVERY position (step 1), n - k + 1 windows for n residues."),
    Wrong("presence instead of counts", lambda s, k=3: _kmer(s, k, presence=True),
          "count how often each k-mer occurs (a k-mer seen twice counts 2), not only whether it occurs."),
    Wrong("windows with a non-standard residue counted", lambda s, k=3: _kmer(s, k, unknown_as_a=True),
          "skip every window that holds a letter outside the 20 standard amino acids (X, B, Z, U, ...)."),
    Wrong("NaN for a sequence without k-mers", lambda s, k=3: _kmer(s, k, nan_rows=True),
          "a sequence without any k-mer must give a row of zeros, not 0/0 = NaN: divide by "
          "a norm kept away from 0 by a tiny floor (or skip rows whose norm is 0)."),
    Wrong("last window missed", lambda s, k=3: _kmer(s, k, miss_last=True),
          "a sequence of n residues has n - k + 1 windows: range(len(s) - k + 1), not range(len(s) - k)."),
]


def _right_kmer_dict(sequences, k=3):
    out = torch.zeros(len(sequences), 20**k)
    for b, s in enumerate(sequences):
        s = s.upper()
        for i in range(len(s) - k + 1):
            w = s[i:i + k]
            if all(a in _AA for a in w):
                idx = 0
                for a in w:
                    idx = 20 * idx + _AA.index(a)
                out[b, idx] += 1
    n = out.norm(dim=1, keepdim=True)
    return torch.where(n > 0, out / torch.where(n > 0, n, torch.ones_like(n)), out)


def _right_kmer_numpy(sequences, k=3):
    out = np.zeros((len(sequences), 20**k), dtype=np.float64)
    powers = 20 ** np.arange(k - 1, -1, -1)
    for b, s in enumerate(sequences):
        codes = np.array([_AA.find(a) for a in s.upper()], dtype=np.int64)
        if len(codes) < k:
            continue
        win = np.lib.stride_tricks.sliding_window_view(codes, k)
        win = win[(win >= 0).all(axis=1)]
        np.add.at(out[b], win @ powers, 1.0)
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    out = np.divide(out, norm, out=np.zeros_like(out), where=norm > 0)
    return torch.from_numpy(out).float()


def _right_kmer_counter_rows(sequences, k=3):
    rows = []
    for s in sequences:
        s = s.upper()
        c = collections.Counter(s[i:i + k] for i in range(len(s) - k + 1))
        row = torch.zeros(20**k)
        for kmer, n in c.items():
            if all(a in _AA for a in kmer):
                row[sum(_AA.index(a) * 20 ** (k - 1 - j) for j, a in enumerate(kmer))] = n
        rows.append(row / row.norm() if row.any() else row)
    return torch.stack(rows)


def _breaks_kmer_float64(s, k=3):
    return _right_kmer_dict(s, k).double()


def _breaks_kmer_nan_rows(s, k=3):
    raw = _kmer(s, k, normalise=False)
    return raw / raw.norm(dim=1, keepdim=True)


def _more_kmer_cases(rng) -> list[Case]:
    return [
        Case(
            "6 random proteins of 20..80 residues with X and B, k=3",
            ([_random_protein(rng, int(n), "XB") for n in rng.integers(20, 81, size=6)],),
            {"k": 3},
        ),
        Case(
            "4 random proteins, k=2", ([_random_protein(rng, int(n)) for n in rng.integers(3, 40, size=4)],), {"k": 2}
        ),
    ]


def kmer_cases() -> list[Case]:
    """The hidden cases of the check: the visible builder's, with the judge's seed, and more."""
    return kmer_cases_from(seeded(1111), _more_kmer_cases)


KMER_VECTORS = declare("10_proteins", "kmer_vectors", check_kmer_vectors,
            misconceptions=WRONG_KMER,
            promises=(
                Breaks("float32", _breaks_kmer_float64, "float32"),
                Breaks("a sequence without k-mers is a row of zeros", _breaks_kmer_nan_rows, "row of zeros"),
                Breaks("unit length rows", wrong_answer(WRONG_KMER, "counts not normalised"), "not normalised"),
                Breaks("overlapping windows, step 1", wrong_answer(WRONG_KMER, "non-overlapping windows"),
                       "non-overlapping"),
                Breaks("non-standard residues skipped",
                       wrong_answer(WRONG_KMER, "windows with a non-standard residue counted"), "non-standard"),
                Breaks("first residue most significant", wrong_answer(WRONG_KMER, "digits reversed"),
                       "digits reversed"),
            ),
            right=(Right(_right_kmer_dict), Right(_right_kmer_numpy), Right(_right_kmer_counter_rows)))


# ---------------------------------------------------------------- favor_padded_attention
def _favor(q, k, v, w, keep, *, mask_keys=True, zero_queries=True, normalise=True):
    from course_lib.efficient import favor_features_torch

    key_keep = keep[:, None, :, None]
    phi_q = favor_features_torch(q, w, is_query=True)
    phi_k = favor_features_torch(k, w, is_query=False, keep=key_keep if mask_keys else None)
    kv = phi_k.transpose(-2, -1) @ v
    out = phi_q @ kv
    if normalise:
        den = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)
        out = out / torch.where(den == 0, torch.ones_like(den), den)
    return out * key_keep.to(out.dtype) if zero_queries else out


WRONG_FAVOR = [
    Wrong("key padding ignored", lambda q, k, v, w, keep: _favor(q, k, v, w, keep, mask_keys=False),
          "padded keys must contribute nothing: pass keep (as (B, 1, L, 1)) to favor_features_torch for the KEYS, "
          "so their features are 0 in both phi(K)^T V and phi(K)^T 1."),
    Wrong("padded query rows not zeroed", lambda q, k, v, w, keep: _favor(q, k, v, w, keep, zero_queries=False),
          "set the output rows of padded queries to 0 (multiply by the keep mask, broadcast over heads and features)."),
    Wrong("normaliser forgotten", lambda q, k, v, w, keep: _favor(q, k, v, w, keep, normalise=False),
          "divide phi(Q)(phi(K)^T V) by phi(Q)(phi(K)^T 1): the softmax weights of each query sum to 1."),
]


def _right_favor_einsum(q, k, v, w, keep):
    from course_lib.efficient import favor_features_torch

    kk = keep[:, None, :, None]
    pq = favor_features_torch(q, w, is_query=True)
    pk = favor_features_torch(k, w, is_query=False, keep=kk)
    num = torch.einsum("bhlm,bhmd->bhld", pq, torch.einsum("bhlm,bhld->bhmd", pk, v))
    den = torch.einsum("bhlm,bhm->bhl", pq, pk.sum(-2)).unsqueeze(-1)
    return torch.where(kk, num / den, torch.zeros_like(num))


def _right_favor_loop_heads(q, k, v, w, keep):
    from course_lib.efficient import favor_features_torch

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


def _right_favor_manual_features(q, k, v, w, keep, eps=1e-6):
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


def _breaks_favor_float64_always(q, k, v, w, keep):
    return _right_favor_einsum(q.double(), k.double(), v.double(), w.double(), keep)


def _breaks_favor_quadratic(q, k, v, w, keep):
    from course_lib.efficient import favor_features_torch

    kk = keep[:, None, :, None]
    pq = favor_features_torch(q, w, is_query=True)
    pk = favor_features_torch(k, w, is_query=False, keep=keep[:, None, :, None])
    return ((pq @ pk.transpose(-2, -1)) @ v) / (pq @ pk.transpose(-2, -1)).sum(-1, keepdim=True) * kk


def _more_favor_cases(g) -> list[Case]:
    return [
        _favor_case(
            g,
            "B=4, H=2, L=33, d=16, m=64, lengths [33, 20, 2, 9], larger q and k",
            4,
            2,
            33,
            16,
            64,
            [33, 20, 2, 9],
            scale=2.0,
        ),
        _favor_case(g, "B=2, H=3, L=10, d=2, m=4, lengths [10, 7]", 2, 3, 10, 2, 4, [10, 7]),
    ]


def favor_cases() -> list[Case]:
    """The hidden cases of the check: the visible builder's, with the judge's seed, and more."""
    return favor_cases_from(torch.Generator().manual_seed(1212), _more_favor_cases)


FAVOR_MEMORY = (1414, 700)  # the hidden memory test's seed and sequence length L


FAVOR_PADDED_ATTENTION = declare("10_proteins", "favor_padded_attention", check_favor_padded_attention,
            misconceptions=WRONG_FAVOR,
            promises=(
                Breaks("padded keys contribute nothing", wrong_answer(WRONG_FAVOR, "key padding ignored"),
                       "key padding ignored"),
                Breaks("padded query rows are 0", wrong_answer(WRONG_FAVOR, "padded query rows not zeroed"),
                       "padded query rows"),
                Breaks("output in the dtype of v", _breaks_favor_float64_always, "float32"),
                Breaks("never builds an (L, L) matrix", _breaks_favor_quadratic, "quadratic"),
            ),
            right=(Right(_right_favor_einsum), Right(_right_favor_loop_heads), Right(_right_favor_manual_features)))


# ---------------------------------------------------------------- greedy_decode
def _greedy(model, src_ids, src_keep, max_len, *, causal=True, memory_mask=True, keep_bos=False, stop=True,
            extra_step=False, first_position=False):
    memory = model.encode(src_ids, src_keep)
    mmask = src_keep[:, None, None, :] if memory_mask else None
    B = src_ids.shape[0]
    out = torch.full((B, 1), model.bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len + (1 if extra_step else 0)):
        T = out.shape[1]
        tmask = torch.ones(T, T, dtype=torch.bool).tril() if causal else None
        h = model.decoder(model.embed_target(out), memory, tmask, mmask)
        nxt = model.generator(h[:, 0] if first_position else h[:, -1]).argmax(dim=-1)
        if stop:
            nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done = done | (nxt == model.eos_id)
        if bool(done.all()):
            break
    return out if keep_bos else out[:, 1:]


def _greedy_wrong(**flags):
    def fn(model, src_ids, src_keep, max_len):
        with torch.no_grad():
            return _greedy(model, src_ids, src_keep, max_len, **flags)
    return fn


WRONG_GREEDY = [
    Wrong("no causal mask", _greedy_wrong(causal=False),
          "pass a causal tgt_mask (T, T), True on and below the diagonal, to "
          "model.decoder: without it, earlier prefix positions attend to later ones and the model sees a "
          "different computation than in training."),
    Wrong("source padding ignored", _greedy_wrong(memory_mask=False),
          "pass the source's keep mask as the decoder's memory mask (broadcast over heads and queries) so that "
          "cross-attention ignores the padding of shorter "
          "proteins."),
    Wrong("start token kept in the output", _greedy_wrong(keep_bos=True),
          "return the generated tokens only: drop the <bos> column you started with."),
    Wrong("tokens generated after <eos>", _greedy_wrong(stop=False),
          "once a row has produced <eos> it is finished: give it model.pad_id at every later step."),
    Wrong("one step too many", _greedy_wrong(extra_step=True),
          "generate at most max_len tokens, the <eos> included: count the steps."),
    Wrong("logits of the first position", _greedy_wrong(first_position=True),
          "the next token is predicted from the decoder's output at the LAST position of the prefix."),
]


@torch.no_grad()
def _right_greedy_rowwise(model, src_ids, src_keep, max_len):
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


def _right_greedy_with_lesson02_mask(model, src_ids, src_keep, max_len):
    from course_lib.masking import causal_mask

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


def _right_greedy_loop_list(model, src_ids, src_keep, max_len):
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


def _breaks_greedy_int32(model, src_ids, src_keep, max_len):
    return _right_greedy_rowwise(model, src_ids, src_keep, max_len).int()


def _breaks_greedy_no_error(model, src_ids, src_keep, max_len):
    return _right_greedy_rowwise(model, src_ids, src_keep, max(max_len, 1))


def greedy_cases() -> list[Case]:
    """The hidden cases of ``check_greedy_decode``: the visible configurations and three more, other models."""
    configs = _GREEDY_CONFIGS + [(4, [20, 11, 15, 4, 18, 7], 15), (5, [6, 2], 1), (6, [12, 12, 9, 3], 10)]
    return greedy_cases_from(torch.Generator().manual_seed(1313), configs, model_seed_offset=7)


GREEDY_DECODE = declare("10_proteins", "greedy_decode", check_greedy_decode,
            misconceptions=WRONG_GREEDY,
            promises=(
                Breaks("without the start token", wrong_answer(WRONG_GREEDY, "start token kept in the output"),
                       "start token"),
                Breaks("at most max_len tokens", wrong_answer(WRONG_GREEDY, "one step too many"), "one step too many"),
                Breaks("pad after <eos>", wrong_answer(WRONG_GREEDY, "tokens generated after <eos>"), "after <eos>"),
                Breaks("causal mask", wrong_answer(WRONG_GREEDY, "no causal mask"), "no causal mask"),
                Breaks("source padding masked", wrong_answer(WRONG_GREEDY, "source padding ignored"),
                       "source padding ignored"),
                Breaks("int64 ids", _breaks_greedy_int32, "int64"),
                Breaks("ValueError when max_len < 1", _breaks_greedy_no_error, "ValueError"),
            ),
            right=(Right(_right_greedy_rowwise), Right(_right_greedy_with_lesson02_mask),
                   Right(_right_greedy_loop_list)))


# ---------------------------------------------------------------- the exercises, in order
EXERCISES = (ENCODE_PROTEINS, KMER_VECTORS, FAVOR_PADDED_ATTENTION, GREEDY_DECODE)
