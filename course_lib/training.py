"""The one training loop of the course, and a tiny word tokenizer for the first classifier.

Covers
    * :class:`TrainConfig`: every knob of a training run in one dataclass.
    * :func:`train`: mini-batch AdamW with a tqdm progress bar, a time budget and a
      per-epoch :class:`History` (loss and accuracy on the training and evaluation
      data) for a learning curve. Reproducible: the shuffling uses its own
      ``torch.Generator(seed)``, and dropout draws from torch's global generator
      seeded with the same seed inside ``torch.random.fork_rng``, so the caller's
      random state is left as it was.
    * :func:`evaluate`: mean loss and accuracy of a model on a data set, in eval mode.
    * :func:`predict`: the model's outputs on a data set, batched, in eval mode.
    * :class:`WordTokenizer`: lowercase words and punctuation, a vocabulary built from
      training texts (pad id 0, unknown id 1), encoding to padded id tensors.

Does NOT cover
    * learning-rate schedules, mixed precision, gradient accumulation, checkpoints;
    * subword tokenisation (byte-pair encoding is lesson 06, ``course_lib.bpe``).

Data: any ``torch.utils.data.Dataset`` whose items are tuples ``(*inputs, target)``,
e.g. ``TensorDataset(ids, key_padding, labels)``. A batch calls ``model(*inputs)``;
the loss is ``loss_fn(output, target)`` (default: cross-entropy on class logits
(B, C) and integer targets (B,)). Accuracy is reported when the output is (B, C)
logits and the target holds class indices; otherwise it is NaN.
"""
from __future__ import annotations

import dataclasses
import math
import re
import time
from collections import Counter
from typing import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

__all__ = ["TrainConfig", "History", "train", "evaluate", "predict", "resolve_device", "WordTokenizer"]


@dataclasses.dataclass
class TrainConfig:
    """Settings of one training run (defaults: a small CPU run)."""

    epochs: int = 10                   # passes over the training data
    batch_size: int = 32               # examples per optimiser step
    lr: float = 1e-3                   # AdamW learning rate
    weight_decay: float = 0.01         # AdamW decoupled weight decay (0 = plain Adam)
    seed: int = 0                      # seeds shuffling and dropout, independent of the global RNG
    device: str = "auto"               # "cpu", "cuda", "cuda:1", ... or "auto": cuda when available
    max_seconds: float | None = None   # wall-clock budget: stop after the batch that exceeds it
    grad_clip: float | None = 1.0      # clip the global gradient norm to this value (None: no clipping)
    eval_batch_size: int = 256         # batch size of evaluate() and predict()
    progress: bool = True              # show a tqdm progress bar (one step per batch)

    def __post_init__(self):
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"epochs must be a positive integer, got {self.epochs!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0 or None, got {self.max_seconds!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip!r}")


@dataclasses.dataclass
class History:
    """What :func:`train` measured, one entry per epoch (a partial last epoch counts)."""

    train_loss: list = dataclasses.field(default_factory=list)   # mean loss over the epoch's batches
    train_acc: list = dataclasses.field(default_factory=list)    # running accuracy over the epoch's batches
    eval_loss: list = dataclasses.field(default_factory=list)    # evaluate() on eval_data after the epoch
    eval_acc: list = dataclasses.field(default_factory=list)
    seconds: list = dataclasses.field(default_factory=list)      # wall-clock time since the start
    steps: int = 0                                               # optimiser steps taken
    stopped_early: bool = False                                  # True when max_seconds ran out

    @property
    def epochs(self) -> list[int]:
        """1, 2, ... for the x axis of a learning curve."""
        return list(range(1, len(self.train_loss) + 1))


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """"auto" -> cuda when available, else cpu; anything else is passed to torch.device."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _to(batch, device):
    return [b.to(device) if isinstance(b, torch.Tensor) else b for b in batch]


def _split(batch):
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("each item of the data set must be a tuple (*inputs, target) with at least one input")
    return batch[:-1], batch[-1]


def _default_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)


def _n_correct(output, target) -> float:
    """Number of correct argmax predictions, or NaN when the output is not (B, C) class logits."""
    if (isinstance(output, torch.Tensor) and output.dim() == 2 and isinstance(target, torch.Tensor)
            and target.dim() == 1 and not target.is_floating_point() and len(target) == len(output)):
        return float((output.argmax(dim=-1) == target).sum())
    return math.nan


def _loader(data, batch_size: int, shuffle: bool, generator: torch.Generator | None = None,
            collate_fn: Callable | None = None) -> DataLoader:
    if isinstance(data, DataLoader):
        raise ValueError("pass a Dataset (e.g. TensorDataset), not a DataLoader: train() builds its own "
                         "loader so that the shuffling is seeded")
    if len(data) == 0:
        raise ValueError("the data set is empty")
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=generator, collate_fn=collate_fn)


@torch.no_grad()
def evaluate(model: nn.Module, data: Dataset, *, loss_fn: Callable | None = None, batch_size: int = 256,
             device: str | torch.device | None = None, collate_fn: Callable | None = None) -> dict:
    """Mean loss and accuracy of ``model`` on ``data`` in eval mode -> {"loss": .., "accuracy": ..}.

    The loss is averaged over examples (batch means weighted by batch size). The
    model's train/eval mode is restored afterwards. ``device`` defaults to the
    device of the model's first parameter.
    """
    loss_fn = loss_fn or _default_loss
    if device is None:
        p = next(model.parameters(), None)
        device = p.device if p is not None else torch.device("cpu")
    was_training = model.training
    model.eval()
    total_loss, correct, n = 0.0, 0.0, 0
    try:
        for batch in _loader(data, batch_size, shuffle=False, collate_fn=collate_fn):
            inputs, target = _split(_to(batch, device))
            output = model(*inputs)
            total_loss += float(loss_fn(output, target)) * len(target)
            correct += _n_correct(output, target)
            n += len(target)
    finally:
        model.train(was_training)
    return {"loss": total_loss / n, "accuracy": correct / n}


@torch.no_grad()
def predict(model: nn.Module, data: Dataset, *, batch_size: int = 256, device: str | torch.device | None = None,
            collate_fn: Callable | None = None) -> torch.Tensor:
    """The model's outputs on every item of ``data`` (targets ignored), concatenated, on the CPU."""
    if device is None:
        p = next(model.parameters(), None)
        device = p.device if p is not None else torch.device("cpu")
    was_training = model.training
    model.eval()
    outs = []
    try:
        for batch in _loader(data, batch_size, shuffle=False, collate_fn=collate_fn):
            inputs, _ = _split(_to(batch, device))
            outs.append(model(*inputs).cpu())
    finally:
        model.train(was_training)
    return torch.cat(outs)


def train(model: nn.Module, train_data: Dataset, config: TrainConfig, *, eval_data: Dataset | None = None,
          loss_fn: Callable | None = None, collate_fn: Callable | None = None,
          optimizer: torch.optim.Optimizer | None = None) -> History:
    """Train ``model`` in place on ``train_data``; returns the per-epoch :class:`History`.

    Each epoch shuffles the data with a generator seeded by ``config.seed`` (the
    same order on every run), takes one AdamW step per batch (gradient norm clipped
    to ``config.grad_clip``), and, when ``eval_data`` is given, evaluates on it.
    Training stops after the batch that exceeds ``config.max_seconds``; the partial
    epoch is recorded and ``history.stopped_early`` is set. The model is left in
    eval mode on ``config.device``.

    ``optimizer`` replaces the default ``AdamW(lr, weight_decay)`` (for a model whose
    parameters need separate groups).
    """
    loss_fn = loss_fn or _default_loss
    device = resolve_device(config.device)
    model.to(device)
    history = History()
    gen = torch.Generator().manual_seed(config.seed)
    loader = _loader(train_data, config.batch_size, shuffle=True, generator=gen, collate_fn=collate_fn)
    if optimizer is None:
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    cuda_devices = [device.index or 0] if device.type == "cuda" else []
    start = time.perf_counter()
    bar = tqdm(total=config.epochs * len(loader), disable=not config.progress, desc="training", unit="batch")
    with torch.random.fork_rng(devices=cuda_devices):
        torch.manual_seed(config.seed)  # dropout masks; fork_rng restores the caller's state afterwards
        try:
            for _ in range(config.epochs):
                model.train()
                total_loss, correct, n, n_batches = 0.0, 0.0, 0, 0
                for batch in loader:
                    inputs, target = _split(_to(batch, device))
                    output = model(*inputs)
                    loss = loss_fn(output, target)
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"the loss became {float(loss.detach())} at step {history.steps}; "
                                                 "lower the learning rate or check the inputs")
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if config.grad_clip is not None:
                        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                    optimizer.step()
                    history.steps += 1
                    total_loss += float(loss.detach()) * len(target)
                    correct += _n_correct(output.detach(), target)
                    n += len(target)
                    n_batches += 1
                    bar.update(1)
                    bar.set_postfix(loss=f"{total_loss / n:.3f}")
                    if config.max_seconds is not None and time.perf_counter() - start > config.max_seconds:
                        history.stopped_early = True
                        break
                history.train_loss.append(total_loss / n)
                history.train_acc.append(correct / n)
                if eval_data is not None:
                    ev = evaluate(model, eval_data, loss_fn=loss_fn, batch_size=config.eval_batch_size,
                                  device=device, collate_fn=collate_fn)
                    history.eval_loss.append(ev["loss"])
                    history.eval_acc.append(ev["accuracy"])
                    bar.set_postfix(loss=f"{total_loss / n:.3f}", eval_acc=f"{ev['accuracy']:.3f}")
                history.seconds.append(time.perf_counter() - start)
                if history.stopped_early:
                    break
        finally:
            bar.close()
    model.eval()
    return history


# ---------------------------------------------------------------- a tiny word tokenizer
class WordTokenizer:
    """Lowercased words and single punctuation marks, mapped to ids by a vocabulary.

    ``tokenize("Took 20mg, no pain!") -> ['took', '20mg', ',', 'no', 'pain', '!']``:
    runs of letters/digits (with inner apostrophes, "didn't") are words; every other
    non-space character is a token of its own. Id 0 is padding (``PAD``), id 1 stands
    for any word outside the vocabulary (``UNK``).

    >>> tok = WordTokenizer.fit(["no pain", "pain again"], min_freq=2)
    >>> tok.vocab
    ['<pad>', '<unk>', 'pain']
    >>> tok.encode("Pain, no")
    [2, 1, 1]
    """

    PAD, UNK = 0, 1
    SPECIALS = ("<pad>", "<unk>")
    _TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*|[^\sa-z0-9]")

    def __init__(self, vocab: Sequence[str]):
        vocab = list(vocab)
        if vocab[:2] != list(self.SPECIALS):
            raise ValueError(f"a vocabulary must start with {self.SPECIALS}, got {vocab[:2]}")
        if len(set(vocab)) != len(vocab):
            raise ValueError("the vocabulary holds duplicate tokens")
        self.vocab = vocab
        self.index = {t: i for i, t in enumerate(vocab)}

    def __len__(self) -> int:
        return len(self.vocab)

    @classmethod
    def tokenize(cls, text: str) -> list[str]:
        """Lowercase, then split into words and single punctuation characters."""
        return cls._TOKEN.findall(text.lower())

    @classmethod
    def fit(cls, texts: Iterable[str], min_freq: int = 2, max_size: int | None = None) -> "WordTokenizer":
        """Vocabulary of the tokens seen at least ``min_freq`` times, most frequent first.

        Ties are broken alphabetically, so the same texts always give the same ids.
        ``max_size`` caps the vocabulary size including the two special tokens.
        """
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        if max_size is not None and max_size < 3:
            raise ValueError(f"max_size must leave room for at least one word besides {cls.SPECIALS}, got {max_size}")
        counts = Counter(t for text in texts for t in cls.tokenize(text))
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max_size - len(cls.SPECIALS)]
        return cls(list(cls.SPECIALS) + words)

    def encode(self, text: str, max_len: int | None = None) -> list[int]:
        """Token ids of ``text``, truncated to the first ``max_len`` tokens."""
        ids = [self.index.get(t, self.UNK) for t in self.tokenize(text)]
        return ids if max_len is None else ids[:max_len]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``, padding dropped."""
        return [self.vocab[int(i)] for i in ids if int(i) != self.PAD]

    def encode_batch(self, texts: Sequence[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ids (B, max_len) and a key padding mask (B, max_len), True at real tokens.

        Texts longer than ``max_len`` tokens are truncated; an empty text becomes one
        ``UNK`` token so that every sequence has at least one position to attend to.
        """
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        ids = torch.full((len(texts), max_len), self.PAD, dtype=torch.long)
        for b, text in enumerate(texts):
            seq = self.encode(text, max_len) or [self.UNK]
            ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        return ids, ids != self.PAD  # (B, T), (B, T)
