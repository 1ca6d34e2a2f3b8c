"""The shared training loop (seeding, history, budget, evaluate) and the word tokenizer."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib.training import History, TrainConfig, WordTokenizer, evaluate, predict, resolve_device, train


def blobs(n=200, seed=0):
    """Two Gaussian blobs in 2-D, linearly separable: a task any working loop learns."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.randn(n, 2, generator=g) * 0.5 + (y[:, None] * 2 - 1) * 2.0
    return TensorDataset(x, y)


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))


def quiet(**kw):
    return TrainConfig(progress=False, device="cpu", **kw)


def test_learns_a_separable_task_and_records_history():
    data = blobs()
    h = train(mlp(), data, quiet(epochs=5, lr=1e-2), eval_data=blobs(seed=1))
    assert isinstance(h, History) and h.epochs == [1, 2, 3, 4, 5]
    assert len(h.train_loss) == len(h.train_acc) == len(h.eval_loss) == len(h.eval_acc) == len(h.seconds) == 5
    assert h.steps == 5 * math.ceil(200 / 32)
    assert h.train_loss[-1] < h.train_loss[0]
    assert h.eval_acc[-1] > 0.95, f"a separable task should be learned, got accuracy {h.eval_acc[-1]}"
    assert h.seconds == sorted(h.seconds) and not h.stopped_early


def test_same_seed_same_run_and_global_rng_untouched():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    m1, m2 = mlp(), mlp()
    torch.set_rng_state(before)
    h1 = train(m1, blobs(), quiet(epochs=3, seed=7))
    h2 = train(m2, blobs(), quiet(epochs=3, seed=7))
    assert h1.train_loss == h2.train_loss, "same seed (shuffling and dropout) must give the same run"
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(p1, p2, rtol=0, atol=0)
    assert torch.equal(torch.get_rng_state(), before), "train() must not change the caller's global RNG state"
    h3 = train(mlp(), blobs(), quiet(epochs=3, seed=8))
    assert h3.train_loss != h1.train_loss, "another seed must shuffle differently"


def test_time_budget_stops_early():
    h = train(mlp(), blobs(n=2000), quiet(epochs=1000, batch_size=8, max_seconds=0.2))
    assert h.stopped_early
    assert len(h.train_loss) < 1000 and h.seconds[-1] < 5.0


def test_evaluate_and_predict_restore_mode_and_are_deterministic():
    model, data = mlp(), blobs()
    model.train()
    a = evaluate(model, data, batch_size=64)
    b = evaluate(model, data, batch_size=7)
    assert model.training, "evaluate must restore train mode"
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6), "loss is a mean over examples, not batches"
    assert a["accuracy"] == pytest.approx(b["accuracy"])
    out = predict(model, data, batch_size=33)
    assert out.shape == (200, 2) and model.training
    manual = (out.argmax(-1) == data.tensors[1]).float().mean().item()
    assert a["accuracy"] == pytest.approx(manual)


def test_accuracy_is_nan_for_non_classification():
    data = TensorDataset(torch.randn(20, 2), torch.randn(20, 1))
    h = train(nn.Linear(2, 1), data, quiet(epochs=1), loss_fn=nn.functional.mse_loss, eval_data=data)
    assert math.isnan(h.train_acc[0]) and math.isnan(h.eval_acc[0]) and h.train_loss[0] > 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="lr must be > 0"):
        TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="max_seconds"):
        TrainConfig(max_seconds=-1)
    with pytest.raises(ValueError, match="not a DataLoader"):
        train(mlp(), DataLoader(blobs()), quiet())
    with pytest.raises(ValueError, match="tuple \\(\\*inputs, target\\)"):
        train(mlp(), TensorDataset(torch.randn(4, 2)), quiet())
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        data = TensorDataset(torch.full((4, 2), float("nan")), torch.zeros(4, dtype=torch.long))
        train(mlp(), data, quiet(epochs=1))
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")


# ---------------------------------------------------------------- tokenizer
def test_tokenize():
    assert WordTokenizer.tokenize("Took 20mg, didn't help!!") == ["took", "20mg", ",", "didn't", "help", "!", "!"]
    assert WordTokenizer.tokenize("  ") == []


def test_vocab_is_deterministic_and_ordered():
    texts = ["b a a", "c b a", "d"]
    tok = WordTokenizer.fit(texts, min_freq=1)
    assert tok.vocab == ["<pad>", "<unk>", "a", "b", "c", "d"], "by count, then alphabetically"
    assert WordTokenizer.fit(list(reversed(texts)), min_freq=1).vocab == tok.vocab
    assert WordTokenizer.fit(texts, min_freq=2).vocab == ["<pad>", "<unk>", "a", "b"]
    assert WordTokenizer.fit(texts, min_freq=1, max_size=3).vocab == ["<pad>", "<unk>", "a"]
    assert len(tok) == 6


def test_encode_decode_batch():
    tok = WordTokenizer.fit(["no chest pain", "chest pain"], min_freq=1)
    assert tok.decode(tok.encode("chest pain, no")) == ["chest", "pain", "<unk>", "no"]
    ids, keep = tok.encode_batch(["no chest pain", "pain", ""], max_len=2)
    assert ids.shape == (3, 2) and ids.dtype == torch.long
    assert ids[0].tolist() == tok.encode("no chest")
    assert keep.tolist() == [[True, True], [True, False], [True, False]], "an empty text gets one UNK"
    assert ids[2, 0] == WordTokenizer.UNK and ids[1, 1] == WordTokenizer.PAD


def test_tokenizer_bad_input():
    with pytest.raises(ValueError, match="must start with"):
        WordTokenizer(["a", "b"])
    with pytest.raises(ValueError, match="min_freq"):
        WordTokenizer.fit(["a"], min_freq=0)
    with pytest.raises(ValueError, match="max_len"):
        WordTokenizer.fit(["a"], min_freq=1).encode_batch(["a"], max_len=0)


def test_learning_curve_plot_smoke():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import plotting

    h = train(mlp(), blobs(), quiet(epochs=2), eval_data=blobs(seed=1))
    fig, axes = plotting.learning_curve(h, baselines={"majority": 0.5})
    assert len(axes[0].get_lines()) == 2 and len(axes[1].get_lines()) == 3
    assert axes[1].get_ylabel().startswith("accuracy")
    with pytest.raises(ValueError, match="empty"):
        plotting.learning_curve(History())
    plt.close("all")
