"""Lesson 12 teaches its point with a seed other than 0 too (issue 35).

Before the stems' poolings started near max pooling (``course_lib.dna.POOL_INIT_SCALE``), the default
run found the enhancer with seed 0 only of seeds 0-2: with seeds 1 and 2 the dilated CNN and the CNN +
transformer stayed at the promoter-only level. This trains the three default models with seed 1 exactly
as the notebook does (``LESSON12_RUN``: 450 steps each, one thread, CPU) and checks, on the notebook's
test data, that

* both long-range models are far above the promoter-only level (accuracy > 0.9);
* knocking out the enhancer flips most of their expressed calls, the decoy and a background window
  almost none (the decoy is not a shortcut); knocking out, randomising or reversing the promoter flips
  most of them too, and sequences with the enhancer but no promoter are not called expressed (issue 59:
  the promoter is read as "forward present", not as "not reversed");
* the CNN, whose field ends inside the sequence, uses a near enhancer (|d| < 96) and cannot see one
  outside its field (|d| >= 176): knocking that out leaves its score unchanged, and it calls those
  sequences expressed no more often than forward-promoter sequences without an enhancer.

About 35 s on one free core (three models of 450 steps).
"""
import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from course_lib import dna
from course_lib.bio import regulatory as R
from course_lib.training import TrainConfig, predict, train

SEED = 1


@pytest.fixture(scope="module")
def trained():
    run = dna.LESSON12_RUN
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the notebook
    try:
        train_data = R.regulatory_dataset(run["n_train"], seed=1, region="train")  # the notebook's data
        test_data = R.regulatory_dataset(2000, seed=2, region="test")
        x_train = torch.from_numpy(np.stack([dna.one_hot_dna(s) for s in train_data.sequences]))
        x_test = torch.from_numpy(np.stack([dna.one_hot_dna(s) for s in test_data.sequences]))
        models = dna.lesson12_models(seed=SEED, channels=24)
        for m in models.values():
            train(m, TensorDataset(x_train, torch.from_numpy(train_data.labels)),
                  TrainConfig(epochs=run["epochs"], batch_size=run["batch_size"], lr=run["lr"], seed=SEED,
                              progress=False, device="cpu"))
    finally:
        torch.set_num_threads(threads)
    return models, test_data, x_test


def _score(model, x):
    with torch.no_grad():
        out = torch.cat([model(c) for c in x.split(512)])
    return out[:, 1] - out[:, 0]


@pytest.mark.parametrize("name", ["dilated CNN", "CNN + transformer"])
def test_long_range_models_find_the_enhancer_with_seed_1(trained, name):
    models, test_data, x_test = trained
    model = models[name]
    pred = predict(model, TensorDataset(x_test, torch.from_numpy(test_data.labels))).argmax(-1).numpy()
    acc = float((pred == test_data.labels).mean())
    blind = float(np.where(test_data.promoter_forward, 0.5, 1.0).mean())  # promoter only, expected
    assert acc > 0.9, f"{name}, seed {SEED}: test accuracy {acc:.3f}, promoter-only level {blind:.3f}"

    both = np.flatnonzero(test_data.promoter_forward & test_data.has_enhancer & test_data.has_decoy)
    x = x_test[both]
    ref = _score(model, x)
    called = ref > 0
    assert called.float().mean() > 0.9, f"{name}: calls only {called.float().mean():.0%} of them expressed"
    flips = {}
    for what, spans in (("enhancer", R.element_spans(test_data, "enhancer")[both]),
                        ("decoy", R.element_spans(test_data, "decoy")[both]),
                        ("background", R.background_spans(test_data, 15, seed=SEED)[both])):
        flips[what] = float((called & (_score(model, R.knock_out(x, spans)) <= 0)).sum() / called.sum())
    prom = R.element_spans(test_data, "promoter")[both]
    for what, changed in (("promoter", R.knock_out(x, prom)), ("promoter randomised", R.randomise(x, prom, seed=SEED)),
                          ("promoter reversed", R.reverse_in_place(x, prom))):
        flips[what] = float((called & (_score(model, changed) <= 0)).sum() / called.sum())
    assert flips["enhancer"] > 0.8, f"{name}: removing the enhancer flips only {flips['enhancer']:.0%}"
    for what in ("promoter", "promoter randomised", "promoter reversed"):  # issue 59
        assert flips[what] > 0.8, f"{name}: changing the {what} flips only {flips[what]:.0%}: {flips}"
    # a sequence with the enhancer and no promoter is not called expressed
    no_promoter = np.isin(test_data.promoter_state, ["absent", "mutated"]) & test_data.has_enhancer
    assert float(pred[no_promoter].mean()) < 0.1, f"{name}: calls {pred[no_promoter].mean():.0%} of them expressed"
    assert flips["decoy"] < 0.05 and flips["background"] < 0.05, f"{name}: decoy/background flip calls: {flips}"
    # the forward GC box moved to the decoy's place: by the rule not expressed; a long-range model reads its place
    moved = _moved_promoter(test_data, both, x)
    flips["promoter moved"] = float((called & (_score(model, moved) <= 0)).sum() / called.sum())
    assert flips["promoter moved"] > 0.8, f"{name}: moving the GC box flips only {flips['promoter moved']:.0%}"


def _moved_promoter(test_data, both, x):
    """As the notebook's 'promoter moved' probe: slot and decoy set to N, the forward GC box at the decoy's start."""
    decoy = R.element_spans(test_data, "decoy")[both]
    moved = R.knock_out(R.knock_out(x, R.element_spans(test_data, "promoter")[both]), decoy)
    box = torch.from_numpy(dna.one_hot_dna(R.load_motifs()["SP1"].consensus))
    for row, start in enumerate(decoy[:, 0]):
        moved[row, start:start + len(box)] = box
    return moved


def test_the_bag_of_kmers_is_as_accurate_but_blind_to_where_the_promoter_is(trained):
    """Issue 59: the notebook's bag-of-k-mers baseline (its own cell, run as tests/data_scripts/lesson12_kmer.py
    runs it, with LESSON12_KMER) is at least as accurate as the promoter-only level by far, reads the promoter
    and the enhancer (knock-outs flip its calls), and keeps its calls when the GC box is moved out of its slot."""
    import importlib.util
    import pathlib
    spec = importlib.util.spec_from_file_location(
        "lesson12_kmer", pathlib.Path(__file__).resolve().parent / "data_scripts" / "lesson12_kmer.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    nb = script.notebook_baseline()
    _, test_data, x_test = trained
    train_data = R.regulatory_dataset(dna.LESSON12_RUN["n_train"], seed=1, region="train")
    x_train = torch.from_numpy(np.stack([dna.one_hot_dna(s) for s in train_data.sequences]))
    k = dna.LESSON12_KMER["k"]
    w, b = nb["fit_kmer_logreg"](nb["kmer_ids"](x_train, k), train_data.labels, **dna.LESSON12_KMER)
    score = lambda x: nb["kmer_scores"](nb["kmer_ids"](x, k), w, b)
    acc = float(((score(x_test) > 0).numpy() == test_data.labels).mean())
    assert acc > 0.95, f"bag of k-mers: test accuracy {acc:.3f}"
    both = np.flatnonzero(test_data.promoter_forward & test_data.has_enhancer & test_data.has_decoy)
    x = x_test[both]
    called = score(x) > 0
    assert called.float().mean() > 0.9
    flip = lambda changed: float((called & (score(changed) <= 0)).sum() / called.sum())
    assert flip(R.knock_out(x, R.element_spans(test_data, "promoter")[both])) > 0.8
    assert flip(R.knock_out(x, R.element_spans(test_data, "enhancer")[both])) > 0.8
    assert flip(R.knock_out(x, R.element_spans(test_data, "decoy")[both])) < 0.05
    assert flip(_moved_promoter(test_data, both, x)) < 0.1, "a bag of k-mers cannot see where the GC box is"


def test_the_short_field_cnn_uses_a_near_enhancer_and_cannot_see_a_distant_one(trained):
    """The CNN's field (238 bases) ends inside the sequence: an enhancer at |d| >= 176 lies wholly outside it."""
    models, test_data, x_test = trained
    cnn = models["CNN"]
    fwd, enh, dist = test_data.promoter_forward, test_data.has_enhancer, np.abs(test_data.enhancer_distance)
    called = (_score(cnn, x_test) > 0).numpy()
    near, far, none = fwd & enh & (dist < 96), fwd & enh & (dist >= 176), fwd & ~enh
    assert min(near.sum(), far.sum(), none.sum()) > 100
    # it learned the rule where it can see: a near enhancer (all labelled expressed) is called expressed
    assert called[near].mean() > 0.9, f"CNN calls only {called[near].mean():.0%} of near-enhancer sequences expressed"
    # a distant enhancer is invisible: its knock-out does not move the score, and such sequences are called
    # expressed no more often than forward-promoter sequences without an enhancer
    idx = np.flatnonzero(far)
    x = x_test[idx]
    change = (_score(cnn, R.knock_out(x, R.element_spans(test_data, "enhancer")[idx])) - _score(cnn, x)).abs()
    assert float(change.max()) < 1e-4, f"knocking out an enhancer outside the CNN's field changed its score by {change.max():.2g}"
    assert abs(called[far].mean() - called[none].mean()) < 0.1, (called[far].mean(), called[none].mean())
