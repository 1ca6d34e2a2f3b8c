"""Proteins (lesson 10): residue tokens, a k-mer baseline, Performer attention with padding, name decoding.

Covers
    * The amino-acid vocabulary (``AA_VOCAB``: 5 special tokens, then the 20 standard
      residues) and ``encode_proteins`` / ``decode_proteins``: ``<cls>`` residues ``<eos>``,
      padded with ``<pad>`` into one (B, T) batch with a key padding mask.
    * ``kmer_vectors``: overlapping k-mer counts of each sequence as an L2-normalised
      vector of size 20^k, the representation of the nearest-neighbour naming baseline
      (cosine similarity = dot product of two such vectors).
    * ``favor_padded_attention``: the Performer's FAVOR+ attention (lesson 07,
      ``course_lib.efficient.favor_features_torch``) on a padded batch of proteins of
      different lengths, in O(L m d) memory: padded keys contribute nothing, padded
      query rows are zero.
    * ``NameTokenizer``, ``name_tokens``, ``token_f1``, ``naming_scores``: words of a
      UniProt recommended name and the two scores of the naming experiment (exact
      match and token-level F1, both case-insensitive).
    * ``ProteinNamer``: an encoder-decoder built from lesson 05's ``Encoder`` and
      ``Decoder`` (``course_lib.blocks``); its encoder may use FAVOR+ heads
      (``course_lib.efficient.swap_attention``). ``greedy_decode`` generates names with it.
    * ``ProteinMLM`` and ``mask_residues``: a small encoder trained to predict masked
      residues (the course's own protein language model, see the notebook for why
      no pretrained one is used).
    * ``peak_tensor_memory``: the largest number of bytes held at once by the tensors a
      call creates (CPU or GPU), measured by watching every tensor operation.

Does NOT cover
    * beam search, sampling, length penalties, a key/value cache in decoding;
    * alignment-based homology search (BLAST, mmseqs2): the k-mer baseline only counts
      shared k-mers;
    * ambiguous residues (B, Z, X, U, O): they all become ``<unk>``.

Conventions: masks follow ``course_lib.masking`` (bool, True = may attend / real token);
shapes (B, T) for token ids, (B, H, L, d) for heads.
"""
from __future__ import annotations

import re
import weakref
from collections import Counter
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.blocks import Decoder, Encoder
from course_lib.efficient import swap_attention
from course_lib.positional import SinusoidalPositionalEncoding

from course_lib import solutions

_solution = solutions.of("course_lib.proteins")  # the exercises' bodies: course_lib/solutions/proteins.py

__all__ = [
    "AMINO_ACIDS", "SPECIALS", "AA_VOCAB", "PAD", "CLS", "EOS", "UNK", "MASK",
    "encode_proteins", "decode_proteins", "kmer_vectors", "favor_padded_attention",
    "NameTokenizer", "name_tokens", "name_words", "token_f1", "naming_scores",
    "ProteinNamer", "greedy_decode", "seq2seq_loss", "ProteinMLM", "mask_residues", "mlm_loss", "peak_tensor_memory",
    "MLM_WEIGHTS", "MLM_CONFIG", "load_protein_mlm", "mean_embeddings", "consensus_names", "paired_bootstrap",
    "kmer_idf", "tfidf_weight", "TF_VARIANTS", "csls_scores", "commonest_word",
    "cluster_paired_test", "composition_guess",
]

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
SPECIALS = ("<pad>", "<cls>", "<eos>", "<unk>", "<mask>")
PAD, CLS, EOS, UNK, MASK = range(5)
AA_VOCAB = SPECIALS + tuple(AMINO_ACIDS)
_AA_ID = {a: i + len(SPECIALS) for i, a in enumerate(AMINO_ACIDS)}


# ---------------------------------------------------------------- residue tokens
def encode_proteins(sequences: Sequence[str], max_len: int | None = None):
    """Token ids of a batch of protein sequences, padded, and the mask of real tokens.

    Each sequence becomes ``<cls>`` (id 1), one id per residue, ``<eos>`` (id 2).
    Residues are case-insensitive: the 20 standard amino acids "ACDEFGHIKLMNPQRSTVWY"
    get ids 5..24 in that order; any other letter (X, B, Z, U, O, ...) is ``<unk>``
    (id 3). A sequence longer than ``max_len - 2`` residues keeps its first
    ``max_len - 2`` residues, so ``<eos>`` is always there. Shorter sequences are
    padded at the end with ``<pad>`` (id 0) to T = the longest encoded sequence in
    the batch (at most ``max_len``).

    Args:
        sequences: B strings; max_len: None (no truncation) or an int >= 2.
        The input list is not changed.

    Returns:
        (ids, keep): ids int64 torch tensor (B, T); keep bool (B, T), True at real
        tokens (``<cls>``, residues, ``<eos>``), False at padding.
        Raises ValueError when max_len < 2.

    >>> ids, keep = encode_proteins(["MK", "w"])
    >>> ids
    tensor([[ 1, 15, 13,  2],
            [ 1, 23,  2,  0]])
    >>> keep[1]
    tensor([ True,  True,  True, False])
    """
    return _solution.encode_proteins(sequences, max_len)


def decode_proteins(ids) -> list[str]:
    """Sequences of a batch of ids (B, T): residues only, ``<unk>`` as "X", every other special dropped.

    >>> decode_proteins(torch.tensor([[1, 15, 13, 2, 0]]))
    ['MK']
    """
    out = []
    for row in torch.as_tensor(ids).tolist():
        out.append("".join("X" if i == UNK else AA_VOCAB[i] for i in row if i == UNK or i >= len(SPECIALS)))
    return out


# ---------------------------------------------------------------- k-mer baseline
def kmer_vectors(sequences: Sequence[str], k: int = 3) -> torch.Tensor:
    """Overlapping k-mer counts of each sequence, as unit-length float32 vectors (B, 20**k).

    A k-mer is every window of k consecutive residues (step 1: a sequence of length
    n has n - k + 1 of them). Upper and lower case are the same residue. A window that
    holds any letter outside "ACDEFGHIKLMNPQRSTVWY" is skipped. The k-mer
    a_1 ... a_k has index sum_i idx(a_i) * 20**(k - i) (the first residue is the most
    significant digit, idx(A)=0, idx(C)=1, ..., idx(Y)=19). Each row of counts is
    divided by its Euclidean norm; a sequence without any k-mer gives a row of zeros.

    >>> v = kmer_vectors(["AAC"], k=2)   # k-mers AA (index 0) and AC (index 1)
    >>> v.shape, v[0, :3]
    (torch.Size([1, 400]), tensor([0.7071, 0.7071, 0.0000]))
    """
    return _solution.kmer_vectors(sequences, k)


TF_VARIANTS = ("raw", "binary")


def kmer_idf(database_vectors: torch.Tensor) -> torch.Tensor:
    """Inverse document frequency of every k-mer in a database, from its k-mer vectors (N, 20**k)
    (counts or the unit vectors of ``kmer_vectors``: only which entries are non-zero matters):
    ``ln((1 + N) / (1 + df)) + 1``, df = the number of database sequences holding the k-mer (the
    smoothed form: a k-mer seen nowhere gets the largest weight, none gets 0). Returns float32 (20**k,).

    >>> [round(float(x), 3) for x in kmer_idf(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8]]))]
    [1.0, 1.693]
    """
    if database_vectors.ndim != 2 or database_vectors.shape[0] == 0:
        raise ValueError(f"database_vectors must be (N, 20**k) with N >= 1, got {tuple(database_vectors.shape)}")
    df = (database_vectors != 0).sum(dim=0).to(torch.float32)
    return torch.log((1 + database_vectors.shape[0]) / (1 + df)) + 1


def tfidf_weight(vectors: torch.Tensor, idf: torch.Tensor, tf: str = "raw") -> torch.Tensor:
    """k-mer vectors (B, 20**k) re-weighted by ``idf`` (from :func:`kmer_idf` on the DATABASE only), unit length.

    The term frequency is the k-mer count (``tf="raw"``; a row scaled by any factor, e.g. the unit
    vectors of ``kmer_vectors``, gives the same result) or 1 where the k-mer is present
    (``"binary"``). Common k-mers (those of low-complexity stretches, of every long protein) weigh
    less, so a long protein holding nearly every k-mer stops looking like everyone's neighbour.
    Returns float32 (B, 20**k); a row of zeros stays zeros.
    """
    if tf not in TF_VARIANTS:
        raise ValueError(f"tf must be one of {TF_VARIANTS}, got {tf!r}")
    if vectors.ndim != 2 or idf.shape != (vectors.shape[1],):
        raise ValueError(f"need vectors (B, V) and idf (V,), got {tuple(vectors.shape)} and {tuple(idf.shape)}")
    c = vectors.float() if tf == "raw" else (vectors != 0).float()
    c = c * idf.to(c.device)
    return c / c.norm(dim=1, keepdim=True).clamp(min=1e-12)


def csls_scores(similarity: torch.Tensor, database_similarity: torch.Tensor, k: int = 10) -> torch.Tensor:
    """Hubness-corrected scores (CSLS, Conneau et al. 2018): ``2 cos(q, x) - r_q - r_x``.

    similarity: (Q, N) cosine similarities of Q queries to N database items; database_similarity:
    (N, N) similarities among the database items (its diagonal, an item with itself, is ignored).
    r_q = mean of the query's k largest similarities to the database; r_x = mean of database item
    x's k largest similarities to the OTHER database items (the queries are not used, so one
    query's answer does not depend on the others). A hub, similar to everything, has a large r_x
    and is pushed down. r_q does not change a query's ranking; it makes scores comparable across
    queries. Returns (Q, N) float32.
    """
    n = similarity.shape[1]
    if similarity.ndim != 2 or database_similarity.shape != (n, n):
        raise ValueError(f"need similarity (Q, N) and database_similarity (N, N), got "
                         f"{tuple(similarity.shape)} and {tuple(database_similarity.shape)}")
    if not 1 <= k < n:
        raise ValueError(f"need 1 <= k < {n} (database items), got k={k}")
    db = database_similarity.float().clone()
    db.fill_diagonal_(float("-inf"))
    r_x = db.topk(k, dim=1).values.mean(dim=1)  # (N,)
    r_q = similarity.float().topk(k, dim=1).values.mean(dim=1)  # (Q,)
    return 2 * similarity.float() - r_q[:, None] - r_x[None, :]


def commonest_word(names: Iterable[str]) -> str:
    """The most frequent word (``name_words``) over a list of names, ties alphabetical: the constant-word floor.

    >>> commonest_word(["50S ribosomal protein L2", "Protein RecA", "DNA ligase"])
    'protein'
    """
    counts = Counter(w for n in names for w in name_words(n))
    if not counts:
        raise ValueError("no words in the names")
    return min(counts, key=lambda w: (-counts[w], w))


# ---------------------------------------------------------------- Performer on padded proteins
def favor_padded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor,
                           keep: torch.Tensor) -> torch.Tensor:
    """FAVOR+ self-attention over a padded batch, never building an (L, L) matrix.

    With phi = ``course_lib.efficient.favor_features_torch`` (queries: is_query=True,
    keys: is_query=False and keep = the key padding mask, so padded keys get zero
    features and stay out of the stabiliser):

        out = phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)

    and the rows of padded queries (keep False) are set to 0.

    Args:
        q, k, v: (B, H, L, d); w: (m, d) projection from ``course_lib.efficient.draw_projection``;
        keep: bool (B, L), True at real tokens.

    Returns:
        out (B, H, L, d) in the dtype of v; memory O(B H L (m + d)).

    Tiny example: with one real key (keep = [True, False]) every real query returns
    that key's value: out[..., 0, :] = v[..., 0, :] and out[..., 1, :] = 0.
    """
    return _solution.favor_padded_attention(q, k, v, w, keep)


# ---------------------------------------------------------------- names: tokens and scores
_NAME_TOKEN = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]")


def name_tokens(name: str) -> list[str]:
    """Words and single punctuation marks of a protein name, lower-cased.

    >>> name_tokens("DNA-directed RNA polymerase subunit beta'")
    ['dna', '-', 'directed', 'rna', 'polymerase', 'subunit', 'beta', "'"]
    """
    return [t.lower() for t in _NAME_TOKEN.findall(name)]


class NameTokenizer:
    """Name words <-> ids: 0 ``<pad>``, 1 ``<bos>``, 2 ``<eos>``, 3 ``<unk>``, then the vocabulary.

    >>> tok = NameTokenizer.fit(["30S ribosomal protein S6", "50S ribosomal protein L2"], min_freq=2)
    >>> tok.vocab[4:], tok.encode("ribosomal protein X")
    (['protein', 'ribosomal'], [1, 5, 4, 3, 2])
    """

    PAD, BOS, EOS, UNK = 0, 1, 2, 3
    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, vocab: Sequence[str]):
        if tuple(vocab[:4]) != self.SPECIALS:
            raise ValueError(f"a vocabulary starts with {self.SPECIALS}")
        self.vocab = list(vocab)
        self.index = {t: i for i, t in enumerate(self.vocab)}

    def __len__(self) -> int:
        return len(self.vocab)

    @classmethod
    def fit(cls, names: Iterable[str], min_freq: int = 2) -> "NameTokenizer":
        """Tokens seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
        counts = Counter(t for n in names for t in name_tokens(n))
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        return cls(list(cls.SPECIALS) + words)

    def encode(self, name: str) -> list[int]:
        """[<bos>, word ids..., <eos>]."""
        return [self.BOS] + [self.index.get(t, self.UNK) for t in name_tokens(name)] + [self.EOS]

    def decode(self, ids: Iterable[int]) -> str:
        """Words up to the first ``<eos>``, specials dropped, joined by spaces."""
        words = []
        for i in ids:
            i = int(i)
            if i == self.EOS:
                break
            if i >= len(self.SPECIALS):
                words.append(self.vocab[i])
        return " ".join(words)

    def encode_batch(self, names: Sequence[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing pair (tgt_in, tgt_out), both (B, max_len - 1), padded with 0.

        tgt_in = [<bos>, w1, ..., wn], tgt_out = [w1, ..., wn, <eos>]; names longer than
        max_len - 2 words are cut (then tgt_out has no <eos>).
        """
        seqs = [self.encode(n)[:max_len] for n in names]
        tgt = torch.full((len(seqs), max_len), self.PAD, dtype=torch.long)
        for b, s in enumerate(seqs):
            tgt[b, : len(s)] = torch.tensor(s)
        return tgt[:, :-1], tgt[:, 1:]


def name_words(name: str) -> list[str]:
    """The words of a name, lower-cased: its alphanumeric tokens, punctuation left out.

    >>> name_words("DNA-directed RNA polymerase subunit beta'")
    ['dna', 'directed', 'rna', 'polymerase', 'subunit', 'beta']
    """
    return [t for t in name_tokens(name) if t.isalnum()]


def token_f1(predicted: str, true: str) -> float:
    """F1 of the two names' word multisets (``name_words``: punctuation is not a word):
    2 |common| / (|pred| + |true|). A prediction of punctuation only scores 0.

    >>> round(token_f1("30S ribosomal protein S2", "50S ribosomal protein L2"), 3)
    0.5
    >>> token_f1("- - - -", "DNA-directed RNA polymerase")
    0.0
    """
    p, t = Counter(name_words(predicted)), Counter(name_words(true))
    common = sum((p & t).values())
    n = sum(p.values()) + sum(t.values())
    return 0.0 if n == 0 else 2.0 * common / n


def naming_scores(predicted: Sequence[str], true: Sequence[str]) -> dict:
    """{"exact": fraction with identical token lists (``name_tokens``: case and spacing ignored,
    punctuation kept), "token_f1": mean word F1 (``token_f1``)} over pairs."""
    if len(predicted) != len(true) or not true:
        raise ValueError("need two lists of the same, non-zero length")
    exact = sum(name_tokens(p) == name_tokens(t) for p, t in zip(predicted, true)) / len(true)
    f1 = sum(token_f1(p, t) for p, t in zip(predicted, true)) / len(true)
    return {"exact": exact, "token_f1": f1}


# ---------------------------------------------------------------- the encoder-decoder
class ProteinNamer(nn.Module):
    """Sequence-to-name transformer: lesson 05's Encoder and Decoder (pre-norm, GELU).

    src ids (B, S) -> Embedding + sinusoidal positions -> Encoder -> memory (B, S, d)
    tgt ids (B, T) -> Embedding + sinusoidal positions -> Decoder(causal self-attention,
    cross-attention to memory) -> ``generator`` Linear -> logits (B, T, name vocab).

    Parts used by :func:`greedy_decode`: ``encode(src_ids, src_keep)``,
    ``embed_target(tgt_ids)``, ``decoder`` (a ``course_lib.blocks.Decoder``:
    ``decoder(x, memory, tgt_mask, memory_mask)``), ``generator``, and the ids
    ``pad_id``, ``bos_id``, ``eos_id``.

    ``attention="favor"`` swaps the encoder's heads for lesson 07's FAVOR+ heads
    (``course_lib.efficient.swap_attention``, ``num_features`` random features).
    """

    def __init__(self, name_vocab_size: int, d_model: int = 64, num_heads: int = 4, num_encoder_layers: int = 2,
                 num_decoder_layers: int = 2, d_ff: int = 128, dropout: float = 0.1, max_src_len: int = 4096,
                 max_tgt_len: int = 64, attention: str = "exact", num_features: int | None = None, seed: int = 0):
        super().__init__()
        self.pad_id, self.bos_id, self.eos_id = NameTokenizer.PAD, NameTokenizer.BOS, NameTokenizer.EOS
        self.src_embed = nn.Embedding(len(AA_VOCAB), d_model, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(name_vocab_size, d_model, padding_idx=self.pad_id)
        self.src_pos = SinusoidalPositionalEncoding(d_model, max_src_len)
        self.tgt_pos = SinusoidalPositionalEncoding(d_model, max_tgt_len)
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout, "gelu", norm_first=True)
        if attention == "favor":
            swap_attention(self.encoder, "favor", num_features, seed=seed)
        elif attention != "exact":
            raise ValueError(f"attention must be 'exact' or 'favor', got {attention!r}")
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout, "gelu", norm_first=True)
        self.generator = nn.Linear(d_model, name_vocab_size)

    def encode(self, src_ids: torch.Tensor, src_keep: torch.Tensor) -> torch.Tensor:
        """src_ids (B, S), src_keep bool (B, S) -> memory (B, S, d_model)."""
        x = self.dropout(self.src_pos(self.src_embed(src_ids)))  # (B, S, d)
        return self.encoder(x, src_keep[:, None, None, :])

    def embed_target(self, tgt_ids: torch.Tensor) -> torch.Tensor:
        """tgt_ids (B, T) -> decoder input (B, T, d_model)."""
        return self.dropout(self.tgt_pos(self.tgt_embed(tgt_ids)))

    def forward(self, src_ids: torch.Tensor, src_keep: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits (B, T, V) for the next name token at every target position."""
        memory = self.encode(src_ids, src_keep)
        T = tgt_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()  # (T, T)
        h = self.decoder(self.embed_target(tgt_in), memory, causal, src_keep[:, None, None, :])
        return self.generator(h)  # (B, T, V)


def seq2seq_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over non-padding target tokens: logits (B, T, V), target (B, T)."""
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=NameTokenizer.PAD)


def greedy_decode(model: "ProteinNamer", src_ids: torch.Tensor, src_keep: torch.Tensor,
                  max_len: int) -> torch.Tensor:
    """Generate one name per protein, always taking the most likely next token.

    Encode once (``model.encode``). Start every row with ``model.bos_id``. At each step
    run the whole prefix through ``model.decoder(model.embed_target(prefix), memory,
    tgt_mask, memory_mask)`` with a causal mask (T, T) (True = may attend, lower
    triangle) and the source padding as memory_mask (B, 1, 1, S), take
    ``model.generator`` of the LAST position and its argmax (ties: the lowest id).
    A row that has produced ``model.eos_id`` is finished: it gets ``model.pad_id`` from
    then on. Stop when every row is finished or after ``max_len`` generated tokens.

    Args:
        model: a :class:`ProteinNamer` (put in eval mode by the caller);
        src_ids (B, S) int64, src_keep bool (B, S); max_len >= 1.

    Returns:
        int64 tensor (B, T_out) on src_ids' device, WITHOUT the start token:
        T_out <= max_len is the number of steps taken; a finished row ends with
        eos_id followed by pad_id; a row that reached max_len has no eos_id.
        Raises ValueError when max_len < 1.

    Example: if the argmax tokens are [7, 2(eos)] for row 0 and [5, 6, 2] for row 1,
    the result is [[7, 2, 0], [5, 6, 2]]; with max_len=2 it is [[7, 2], [5, 6]].
    """
    return _solution.greedy_decode(model, src_ids, src_keep, max_len)


# ---------------------------------------------------------------- masked-residue model
def mask_residues(ids: torch.Tensor, keep: torch.Tensor, rate: float = 0.15,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT-style corruption: each residue (not specials, not padding) is chosen with prob. ``rate``
    and replaced by ``<mask>``. Returns (corrupted ids, targets): targets hold the original id at
    chosen positions and -100 (ignored by cross-entropy) elsewhere. The input is not changed."""
    is_residue = keep & (ids >= len(SPECIALS))
    chosen = (torch.rand(ids.shape, generator=generator) < rate).to(ids.device) & is_residue
    corrupted = ids.masked_fill(chosen, MASK)
    targets = torch.where(chosen, ids, torch.full_like(ids, -100))
    return corrupted, targets


class ProteinMLM(nn.Module):
    """Masked-residue model: Embedding + positions + lesson 05 Encoder + Linear over ``AA_VOCAB``.

    ``forward(ids, keep) -> logits (B, T, 25)``; ``attention_maps(ids, keep)`` gives the
    per-layer self-attention weights (B, T, T) averaged over heads; ``embed(ids, keep)``
    the per-residue representations (B, T, d_model).
    """

    def __init__(self, d_model: int = 64, num_heads: int = 4, num_layers: int = 2, d_ff: int = 128,
                 dropout: float = 0.1, max_len: int = 4096):
        super().__init__()
        self.embedding = nn.Embedding(len(AA_VOCAB), d_model, padding_idx=PAD)
        self.pos = SinusoidalPositionalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, "gelu", norm_first=True)
        self.head = nn.Linear(d_model, len(AA_VOCAB))

    def embed(self, ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.dropout(self.pos(self.embedding(ids))), keep[:, None, None, :])

    def forward(self, ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids, keep))  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, ids: torch.Tensor, keep: torch.Tensor) -> list[torch.Tensor]:
        was = self.training
        self.eval()
        try:
            x = self.pos(self.embedding(ids))
            return self.encoder.forward_with_weights(x, keep[:, None, None, :])[1]
        finally:
            self.train(was)


def mlm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the masked positions only (targets -100 elsewhere)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)



# ---------------------------------------------------------------- the shipped model and naming by retrieval
MLM_WEIGHTS = "protein_mlm_10.pt"  # in course_lib/data/, made by tests/data_scripts/protein_mlm_weights.py
MLM_CONFIG = dict(d_model=128, num_heads=4, num_layers=4, d_ff=256, dropout=0.1, max_len=1024)


def load_protein_mlm(device: str | torch.device = "cpu") -> ProteinMLM:
    """The course's pretrained masked-residue model (``course_lib/data/protein_mlm_10.pt``), in eval mode.

    A ``ProteinMLM(**MLM_CONFIG)`` (537k float32 parameters) trained offline on 17,416 UniProt
    sequences that have no hit among the lesson's test proteins at >= 50 % identity; how, with
    which settings and to what validation accuracy: ``course_lib/data/README.md`` and
    ``tests/data_scripts/protein_mlm_weights.py``. Inputs up to 1,024 tokens.
    """
    import pathlib

    path = pathlib.Path(__file__).resolve().parent / "data" / MLM_WEIGHTS
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: it ships with the course (rebuild it with "
                                f"tests/data_scripts/protein_mlm_weights.py)")
    model = ProteinMLM(**MLM_CONFIG)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.to(device).eval()


@torch.no_grad()
def mean_embeddings(model: ProteinMLM, ids: torch.Tensor, keep: torch.Tensor, batch_size: int = 64) -> torch.Tensor:
    """One vector per protein: the model's per-residue representations averaged over the residues
    (not ``<cls>``, ``<eos>`` nor padding), divided by its Euclidean norm. ids, keep (B, T) as made by
    an ``encode_proteins``; returns float32 (B, d_model) on the model's device."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    rows = []
    for i in range(0, ids.shape[0], batch_size):
        b_ids, b_keep = ids[i:i + batch_size].to(device), keep[i:i + batch_size].to(device)
        h = model.embed(b_ids, b_keep)  # (b, T, d)
        residue = (b_keep & (b_ids >= len(SPECIALS))).unsqueeze(-1).to(h.dtype)  # (b, T, 1)
        rows.append((h * residue).sum(1) / residue.sum(1).clamp(min=1.0))
    model.train(was)
    out = torch.cat(rows).float()
    return out / out.norm(dim=1, keepdim=True).clamp(min=1e-12)


def consensus_names(similarity: torch.Tensor, names: Sequence[str], k: int = 20, temperature: float = 0.02,
                    thresholds: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.7)) -> list[str]:
    """Name each query by retrieval plus minimum-Bayes-risk choice among its k nearest database proteins.

    similarity: (Q, N) scores of Q queries against the N database proteins whose names are
    ``names`` (cosine similarities, or hubness-corrected scores from :func:`csls_scores`). For each
    query, the k most similar get weights softmax(similarity / temperature).
    Candidates are the k neighbours' names and, for each threshold t, the words (``name_words``)
    whose summed weight over the neighbours holding them is >= t, ordered by their weighted mean
    relative position in those names (so "50S ribosomal protein", not "ribosomal protein 50S").
    The answer is the candidate with the highest expected token F1 against the neighbours' names
    (sum of weight x ``token_f1``; ties: the first candidate): a close neighbour's name wins when one
    neighbour dominates; with many weak neighbours the words they share win (e.g. "ribosomal protein").
    The expected F1 of all candidates against all neighbours is one array operation per query.
    """
    import numpy as np

    if similarity.ndim != 2 or similarity.shape[1] != len(names):
        raise ValueError(f"similarity must be (Q, {len(names)}), got {tuple(similarity.shape)}")
    if not 1 <= k <= len(names) or temperature <= 0:
        raise ValueError(f"need 1 <= k <= {len(names)} and temperature > 0, got k={k}, temperature={temperature}")
    top = similarity.float().cpu().topk(k, dim=1)
    weights = torch.softmax(top.values.double() / temperature, dim=1).numpy()
    word_lists = {}  # name -> its words, computed once per distinct name
    out = []
    for row, w in zip(top.indices.tolist(), weights):
        neighbours = [names[j] for j in row]
        for n in neighbours:
            if n not in word_lists:
                word_lists[n] = name_words(n)
        votes: dict[str, float] = {}
        place: dict[str, float] = {}  # weighted mean relative position of the word in the names holding it
        for wi, n in zip(w.tolist(), neighbours):
            words = word_lists[n]
            for pos, t in reversed(list(enumerate(words))):  # a repeated word counts once, at its first place
                if words.index(t) == pos:
                    votes[t] = votes.get(t, 0.0) + wi
                    place[t] = place.get(t, 0.0) + wi * pos / len(words)
        order = sorted(votes, key=lambda t: place[t] / max(votes[t], 1e-300))
        candidates = list(dict.fromkeys(neighbours))
        for th in thresholds:
            words = " ".join(t for t in order if votes[t] >= th)
            if words and words not in candidates:
                candidates.append(words)
        vocab = {t: i for i, t in enumerate(order)}  # every word of a candidate is a neighbour's word
        counts = np.zeros((len(candidates), len(vocab)))
        for c, cand in enumerate(candidates):
            for t in (word_lists[cand] if cand in word_lists else name_words(cand)):
                counts[c, vocab[t]] += 1
        nb = counts[[candidates.index(n) for n in neighbours]]  # (k, V): each neighbour's word counts
        common = np.minimum(counts[:, None, :], nb[None, :, :]).sum(-1)  # (C, k)
        total = counts.sum(1)[:, None] + nb.sum(1)[None, :]
        f1 = np.where(total > 0, 2 * common / np.maximum(total, 1), 0.0)  # token_f1 of candidate c vs neighbour j
        expected = (f1 * w[None, :]).sum(1)  # (C,)
        out.append(candidates[int(np.flatnonzero(expected >= expected.max() - 1e-12)[0])])  # ties: the first
    return out


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_resamples: int = 10_000,
                     seed: int = 0) -> tuple[float, float, float, float]:
    """Paired bootstrap of mean(a) - mean(b) over the same items (e.g. per-protein token F1 of two
    methods): (difference, 2.5th and 97.5th percentiles of the resampled differences, the fraction
    of resamples where the difference is <= 0, a one-sided bootstrap p-value)."""
    import numpy as np

    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_.shape != b_.shape or a_.ndim != 1 or a_.size == 0:
        raise ValueError(f"need two 1-d sequences of the same, non-zero length, got {a_.shape} and {b_.shape}")
    d = a_ - b_
    idx = np.random.default_rng(seed).integers(0, d.size, (n_resamples, d.size))
    means = d[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi), float((means <= 0).mean())


def cluster_paired_test(a: Sequence[float], b: Sequence[float], clusters: Sequence[object],
                        n_resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float, float]:
    """Paired comparison of two methods scored on the same items, with the CLUSTER as the unit.

    Items of one cluster (proteins of one family) are not independent, so both the interval and the
    p-value resample whole clusters. d = a - b per item; S_c = the sum of d over cluster c.

    * difference: mean(d) over the items;
    * 95 % interval: 2.5th and 97.5th percentiles of the cluster bootstrap (draw as many clusters as
      there are, with replacement; the difference is sum of their S_c / sum of their sizes);
    * p: two-sided sign-flip permutation test: under "no difference" each cluster's S_c is as likely
      to be -S_c, so p = (1 + #{|sum_c s_c S_c| >= |sum_c S_c|}) / (1 + n_resamples) over random signs s_c.

    Returns (difference, low, high, p). With one item per cluster it is a paired bootstrap and a
    paired sign-flip test over items.

    >>> diff, lo, hi, p = cluster_paired_test([1, 1, 0, 1], [0, 0, 0, 0], ["x", "x", "y", "z"], 2000)
    >>> diff, p > 0.05   # three clusters cannot show a difference at 5 %: 2 ** -3 is the smallest p
    (0.75, True)
    """
    import numpy as np

    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_.shape != b_.shape or a_.ndim != 1 or a_.size == 0 or len(clusters) != a_.size:
        raise ValueError(f"need a, b and clusters of the same, non-zero length, got {a_.shape}, {b_.shape} "
                         f"and {len(clusters)}")
    _, unit = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    d = a_ - b_
    sums = np.bincount(unit, weights=d)  # (C,)
    sizes = np.bincount(unit).astype(float)  # (C,)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, sums.size, (n_resamples, sums.size))
    boot = sums[pick].sum(1) / sizes[pick].sum(1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    signs = rng.choice(np.array([-1.0, 1.0]), (n_resamples, sums.size))
    observed = abs(sums.sum())
    p = (1 + int((np.abs(signs @ sums) >= observed - 1e-12).sum())) / (1 + n_resamples)
    return float(d.mean()), float(lo), float(hi), float(p)


def composition_guess(ids: torch.Tensor, keep: torch.Tensor, background: torch.Tensor | None = None) -> torch.Tensor:
    """The per-protein composition floor of masked-residue prediction: each protein's most frequent
    UNMASKED residue (residue ids 5..24; ``<mask>`` and the other specials are not counted).

    ids, keep (B, T) as corrupted by :func:`mask_residues`; background: None or 20 non-negative
    frequencies in ``AMINO_ACIDS`` order that break ties (and name the guess of a protein with no
    unmasked residue): the residue more frequent in the background wins. Without it, the lower id.
    Returns int64 (B,) residue ids; predict it at every masked position of that protein.

    >>> ids, keep = encode_proteins(["MKKAK"])
    >>> AA_VOCAB[int(composition_guess(ids, keep)[0])]
    'K'
    """
    is_residue = keep & (ids >= len(SPECIALS))
    counts = torch.zeros(ids.shape[0], len(AA_VOCAB), dtype=torch.float64, device=ids.device)
    counts.scatter_add_(1, ids.clamp(min=0), is_residue.to(torch.float64))
    counts = counts[:, len(SPECIALS):]  # (B, 20)
    if background is not None:
        bg = torch.as_tensor(background, dtype=torch.float64, device=ids.device)
        if bg.shape != (20,) or (bg < 0).any():
            raise ValueError(f"background must be 20 non-negative frequencies, got shape {tuple(bg.shape)}")
        counts = counts + 0.5 * bg / bg.sum().clamp(min=1e-300)  # < 1 count: only breaks ties
    return counts.argmax(dim=1) + len(SPECIALS)


# ---------------------------------------------------------------- memory measurement
def _tensors(x):
    """The tensors inside a result (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _tensors(item)]
    return []


def peak_tensor_memory(fn, *args, **kwargs) -> tuple[object, int]:
    """(fn's result, the largest number of bytes held at once by tensors created during the call).

    Every torch function and tensor method called inside the call is watched
    (``torch.overrides.TorchFunctionMode``): each new storage it returns adds its size,
    and a finaliser subtracts it when the storage is freed. Inputs and tensors that
    existed before the call are not counted, nor the scratch memory a single kernel uses
    internally (e.g. inside one softmax call). Works on CPU and GPU (on CPU,
    ``tracemalloc`` cannot see torch's allocations).
    """
    from torch.overrides import TorchFunctionMode

    state = {"live": {}, "current": 0, "peak": 0}

    def free(key):
        state["current"] -= state["live"].pop(key, 0)

    class _Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            for t in _tensors(result):
                if isinstance(t, torch.Tensor):
                    storage = t.untyped_storage()
                    key = (storage.device.type, storage.data_ptr())
                    if storage.nbytes() > 0 and key not in state["live"]:
                        state["live"][key] = storage.nbytes()
                        state["current"] += storage.nbytes()
                        state["peak"] = max(state["peak"], state["current"])
                        weakref.finalize(storage, free, key)
            return result

    with _Watch():
        result = fn(*args, **kwargs)
    return result, state["peak"]
