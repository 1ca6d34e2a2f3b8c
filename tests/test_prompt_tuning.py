"""course_lib.prompt_tuning and the SmolLM2 loader: the references' properties, the cached option scorer
against the plain computation, and the real frozen model: the gradient reaches the soft prompt only."""
from __future__ import annotations

import pytest
import torch

from course_lib import prompt_tuning as pt
from course_lib.checks.prompt_tuning import tiny_llama


def test_prepend_shapes_mask_and_gradient():
    x, m = torch.randn(3, 4, 5), torch.tensor([[1, 1, 1, 0]] * 3)
    p = torch.randn(2, 5, requires_grad=True)
    e, mask = pt.prepend_soft_prompt(x, m, p)
    assert e.shape == (3, 6, 5) and torch.equal(e[:, :2], p.detach().expand(3, 2, 5)) and torch.equal(e[:, 2:], x)
    assert torch.equal(mask, torch.tensor([[1, 1, 1, 1, 1, 0]] * 3)) and mask.dtype == m.dtype
    e.sum().backward()
    assert torch.equal(p.grad, torch.full((2, 5), 3.0))


def test_labels_and_loss_shift_once():
    ids = torch.tensor([[7, 8, 9, 0]])
    lab = pt.answer_only_labels(ids, torch.tensor([[1, 1, 1, 0]]), 1, torch.tensor([1]))
    assert lab.tolist() == [[-100, -100, 8, 9, -100]]
    # a model that puts all its mass on the right next token has loss 0 and log-likelihood 0
    logits = torch.full((1, 5, 10), -1e4)
    for t in range(4):
        if lab[0, t + 1] != -100:
            logits[0, t, lab[0, t + 1]] = 0.0
    assert pt.lm_loss(logits, lab).item() == pytest.approx(0.0, abs=1e-6)
    assert pt.option_log_likelihood(logits, lab).item() == pytest.approx(0.0, abs=1e-6)


def test_option_log_likelihood_matches_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 11, (3, 6), generator=g)
    labels[:, :2] = -100
    labels[1, 4:] = -100
    ce = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none",
                                           ignore_index=-100)
    assert torch.allclose(pt.option_log_likelihood(logits, labels), -ce.sum(1))
    n = (labels[:, 1:] != -100).sum(1)
    assert torch.allclose(pt.option_log_likelihood(logits, labels, normalise=True), -ce.sum(1) / n)


def test_freeze_model_counts_tied_weights_once():
    m = tiny_llama(0, tied=True)
    n = pt.freeze_model(m)
    assert n == sum(p.numel() for p in m.parameters()) < sum(v.numel() for v in m.state_dict().values())
    assert not any(p.requires_grad for p in m.parameters()) and not m.training


def test_wilson_interval():
    lo, hi = pt.wilson_interval(10, 40)
    assert lo < 0.25 < hi and 0 <= lo and hi <= 1
    assert pt.wilson_interval(0, 10)[0] == 0.0


class _Tok:
    """Whitespace 'tokenizer' over a tiny vocabulary, for the tiny model."""
    pad_token_id = 0

    def __call__(self, text):
        return {"input_ids": [1 + (sum(map(ord, w)) % 38) for w in text.split()]}


@pytest.mark.parametrize("normalise", [False, True])
def test_cached_option_scores_equal_the_plain_computation(normalise):
    lm = tiny_llama(5, tied=True).eval()
    tok = _Tok()
    prefix = torch.randn(3, 16, generator=torch.Generator().manual_seed(1))
    prompts = ["a b c", "d e", "f g h i j"]
    options = [["x", "y z", "u v w", "q"]] * 3
    got = pt.option_scores(lm, tok, prefix, prompts, options, normalise=normalise, batch_size=2)
    emb = lm.get_input_embeddings()
    with torch.no_grad():
        for i, p in enumerate(prompts):
            for k, o in enumerate(options[i]):
                q, a = tok(p)["input_ids"], tok(o)["input_ids"]
                x = torch.cat([prefix, emb(torch.tensor(q + a))]).unsqueeze(0)
                labels = torch.tensor([[-100] * (3 + len(q)) + a])
                want = pt.option_log_likelihood(lm(inputs_embeds=x).logits, labels, normalise)
                assert got[i, k].item() == pytest.approx(want.item(), abs=1e-5), (i, k)


def _plain_scores(lm, tok, prefix, prompts, options, normalise):
    """Every [prefix; prompt; option] run alone from scratch: what option_scores must reproduce."""
    emb = lm.get_input_embeddings()
    out = torch.empty(len(prompts), len(options[0]))
    with torch.no_grad():
        for i, p in enumerate(prompts):
            for k, o in enumerate(options[i]):
                q, a = tok(p)["input_ids"], tok(o)["input_ids"]
                x = torch.cat([prefix, emb(torch.tensor(q + a))]).unsqueeze(0)
                labels = torch.tensor([[-100] * (prefix.shape[0] + len(q)) + a])
                out[i, k] = pt.option_log_likelihood(lm(inputs_embeds=x).logits, labels, normalise)
    return out


@pytest.mark.parametrize("with_prefix", [True, False])
def test_option_scores_with_shared_leading_tokens_and_options_of_many_lengths(with_prefix):
    """Prompts that all start with the same tokens (moved into the shared cache), of unsorted lengths (sorted
    into batches), options of 1 to 4 tokens (one-token options need no forward pass; the others run by
    length, unpadded): the same scores as each sequence run alone."""
    lm = tiny_llama(5, tied=True).eval()
    tok = _Tok()
    prefix = torch.randn(2, 16, generator=torch.Generator().manual_seed(2)) if with_prefix else torch.zeros(0, 16)
    prompts = ["a b c d e f g", "a b", "a b c x y", "a b q", "a b c d e f g h i", "a b z z z z"]
    options = [["x", "y z", "u v w t", "q"], ["r s", "q", "m", "n o p"]] * 3
    summed, normed = pt.option_scores(lm, tok, prefix if with_prefix else None, prompts, options,
                                      normalise=(False, True), batch_size=4)
    for got, flag in ((summed, False), (normed, True)):
        want = _plain_scores(lm, tok, prefix, prompts, options, flag)
        assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_option_scores_refuses_ragged_options_and_empty_texts():
    lm = tiny_llama(5, tied=True).eval()
    with pytest.raises(ValueError, match="same number of options"):
        pt.option_scores(lm, _Tok(), None, ["a b", "c d"], [["x", "y"], ["x"]])
    with pytest.raises(ValueError, match="at least one token"):
        pt.option_scores(lm, _Tok(), None, ["a b", ""], [["x", "y"], ["x", "y"]])


def test_trim_padding_keeps_the_loss_and_the_gradient():
    """Batches without their common trailing padding: the same loss and the same prompt gradient (causal model)."""
    lm = tiny_llama(5, tied=True)
    pt.freeze_model(lm)
    data = pt.encode_examples(_Tok(), ["a b c d e f g h", "a", "b c", "d e f"], ["x y", "z", "y", "x"], 2)
    batch = [data[i] for i in (1, 2, 3)]  # the long example is left out: its columns are padding here
    ids, mask, labels = pt.trim_padding(batch)
    assert ids.shape[1] == 4 < data.tensors[0].shape[1] and labels.shape[1] == 2 + ids.shape[1]
    full = [torch.stack(t) for t in zip(*batch)]
    grads = []
    for inputs in (full, (ids, mask, labels)):
        prompt = pt.SoftPrompt(torch.ones(2, 16))
        loss = pt.lm_loss(pt.PromptedLM(lm, prompt)(*inputs[:2]), inputs[2])
        loss.backward()
        grads.append((loss.detach(), prompt.weight.grad))
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-6) and torch.allclose(grads[0][1], grads[1][1], atol=1e-6)
    # a column some row still labels is kept, even where the mask says padding
    odd = [(i, m, l.clone()) for i, m, l in batch]
    odd[0][2][-1] = 7
    assert pt.trim_padding(odd)[2].shape[1] == labels.shape[1] + (data.tensors[0].shape[1] - ids.shape[1])


# ---------------------------------------------------------------- the real model, offline
@pytest.fixture(scope="module")
def smollm():
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from course_lib.bio import smollm2

    try:
        smollm2.gguf_path()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    return smollm2.load_frozen_lm()


@pytest.mark.slow
def test_first_conversion_says_what_it_does_where_and_how_much_disk(smollm, tmp_path, monkeypatch, capsys):
    """A cold cache (a temporary COURSE_CACHE): the conversion prints its source, destination and disk use,
    shows a five-step progress bar, and writes the same weights as the usual cache; a warm cache says nothing."""
    from course_lib.bio import smollm2

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    dest = smollm2.model_dir()
    assert str(dest).startswith(str(tmp_path)) and not dest.exists()
    lm, _ = smollm2.load_frozen_lm()
    out, err = capsys.readouterr()
    assert "First use of SmolLM2-135M-Instruct" in out and str(smollm2.gguf_path()) in out, out
    assert f"float32 checkpoint in {dest}" in out and "GB of disk" in out and "GB free there" in out, out
    assert f"MB written to {dest}" in out, out
    assert "converting SmolLM2 (once)" in err and "5/5" in err, err  # the progress bar, on stderr
    assert (dest / "model.safetensors").is_file() and not list(dest.parent.glob(dest.name + ".*"))
    real_lm, _ = smollm
    for name, p in real_lm.state_dict().items():
        assert torch.equal(lm.state_dict()[name], p), name
    del lm
    smollm2.load_frozen_lm()  # warm: loads, converts nothing, prints nothing
    out, err = capsys.readouterr()
    assert "First use" not in out and "converting" not in err


def test_a_second_process_waits_for_the_first_conversion_and_converts_nothing(tmp_path, monkeypatch, capsys):
    """Two kernels starting lesson 09 at once with an empty cache (nbval's and the bundle's on a fresh machine):
    the second waits on the first's lock, then finds the checkpoint and converts nothing. Without the lock both
    converted, and the second to finish deleted and wrote again the folder the first could be loading from.
    (Two threads: each opens the lock file itself, so they lock each other as two processes do.)"""
    import threading
    import time

    from course_lib.bio import smollm2

    calls, started = [], threading.Event()

    def slow_convert(*, dest, progress=True):  # convert's signature: the destination by keyword only
        calls.append(dest)
        started.set()
        time.sleep(0.5)
        dest.mkdir(parents=True)
        (dest / "model.safetensors").write_bytes(b"weights")
        (dest / "tokenizer.json").write_text("{}")
        return dest

    monkeypatch.setattr(smollm2, "convert", slow_convert)
    dest = tmp_path / "cache" / smollm2.model_dir().name
    first = threading.Thread(target=smollm2._convert_once, args=(dest, False))
    first.start()
    assert started.wait(30), "the first conversion did not start"
    smollm2._convert_once(dest, True)  # while the first one converts
    first.join()
    assert calls == [dest], f"converted {len(calls)} times"
    assert f"Another process is converting SmolLM2 into {dest}: waiting for it." in capsys.readouterr().out


def test_real_model_is_smollm2_and_runs_offline(smollm, monkeypatch):
    lm, tok = smollm
    assert type(lm).__name__ == "LlamaForCausalLM" and lm.config.num_hidden_layers == 30
    assert lm.config.hidden_size == 576 and lm.config.vocab_size == 49152
    assert lm.lm_head.weight is lm.get_input_embeddings().weight  # tied
    assert 130e6 < sum(p.numel() for p in lm.parameters()) < 140e6
    ids = tok("Phenotype: Retinal detachment\nSystem:")["input_ids"]
    scores = pt.option_scores(lm, tok, None, [tok.decode(ids)], [[" eye", " blood", " ear", " immune system"]])
    assert torch.isfinite(scores).all()


def test_real_model_gradient_reaches_only_the_soft_prompt(smollm):
    """One AdamW step: the soft prompt gets a nonzero gradient and changes; every frozen weight is bit-identical."""
    lm, tok = smollm
    pt.freeze_model(lm)
    before = {n: p.detach().clone() for n, p in lm.named_parameters()}
    prompt = pt.SoftPrompt.from_token_ids(lm.get_input_embeddings(), tok("Organ system:")["input_ids"])
    model = pt.PromptedLM(lm, prompt)
    data = pt.encode_examples(tok, ["Phenotype: Retinal detachment\nSystem:", "Phenotype: Anemia\nSystem:"],
                              [" eye", " blood"], prompt.weight.shape[0])
    ids, mask, labels = data.tensors
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    loss = pt.lm_loss(model(ids, mask), labels)
    loss.backward()
    assert prompt.weight.grad is not None and prompt.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in lm.parameters())
    start = prompt.weight.detach().clone()
    opt.step()
    assert not torch.equal(prompt.weight, start)
    for n, p in lm.named_parameters():
        assert torch.equal(p, before[n]), f"frozen weight {n} changed"


# ---------------------------------------------------------------- cache API, paired test, step budget, shipped prompts
def test_option_scores_uses_the_current_cache_api():
    """transformers 5.24 deprecates ``past_key_values`` (removed in 5.40) with a FutureWarning: none may be raised."""
    import warnings

    lm = tiny_llama(5, tied=True).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        pt.option_scores(lm, _Tok(), torch.randn(2, 16), ["a b", "c d e"], [["x", "y z"]] * 2, batch_size=1)


def _binom_two_sided(b, c):
    """The exact McNemar p-value by summing the binomial probability of every table at most as likely."""
    import math

    d = b + c
    probs = [math.comb(d, i) / 2 ** d for i in range(d + 1)]
    return min(1.0, sum(p for p in probs if p <= probs[b] * (1 + 1e-12)))


@pytest.mark.parametrize("b,c", [(10, 0), (3, 9), (7, 7), (0, 0), (1, 0), (20, 8), (12, 30)])
def test_mcnemar_exact_matches_the_binomial(b, c):
    a = [1] * b + [0] * c + [1] * 5 + [0] * 4
    other = [0] * b + [1] * c + [1] * 5 + [0] * 4
    r = pt.mcnemar_exact(a, other)
    assert (r["a_only"], r["b_only"], r["both"], r["neither"], r["n"]) == (b, c, 5, 4, len(a))
    assert r["p"] == pytest.approx(_binom_two_sided(b, c) if b + c else 1.0)
    assert pt.mcnemar_exact(other, a)["p"] == pytest.approx(r["p"])  # symmetric


def test_mcnemar_exact_rejects_unpaired_answers():
    with pytest.raises(ValueError, match="same questions"):
        pt.mcnemar_exact([1, 0, 1], [1, 0])


def test_step_budget_gives_exactly_that_many_steps():
    from course_lib.training import TrainConfig, train

    data = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.randint(0, 2, (10,)))
    for steps, bs in ((3, 4), (7, 4), (1, 10)):  # 7 * 4 = 28 > 10 examples: permutations are appended
        sub = pt.step_budget(data, steps, bs, seed=1)
        assert len(sub) == steps * bs
        assert sub.indices == pt.step_budget(data, steps, bs, seed=1).indices  # seeded
        assert sorted(sub.indices[:10]) == list(range(10)) or steps * bs < 10
        h = train(torch.nn.Linear(3, 2), sub, TrainConfig(epochs=1, batch_size=bs, progress=False, device="cpu"))
        assert h.steps == steps
    with pytest.raises(ValueError):
        pt.step_budget(data, 0, 4)


def test_instruction_prompt_trains_the_soft_part_only():
    """[soft; hard]: the hard prompt's embeddings are a buffer in front of the question, never trained."""
    lm = tiny_llama(5, tied=True)
    pt.freeze_model(lm)
    emb = lm.get_input_embeddings()
    prompt = pt.InstructionPrompt.from_token_ids(emb, [1, 2], hard_ids=[3, 4, 5])
    assert [n for n, _ in prompt.named_parameters()] == ["weight"] and prompt().shape == (5, 16)
    assert torch.equal(prompt()[2:], emb(torch.tensor([3, 4, 5])))
    model = pt.PromptedLM(lm, prompt)
    data = pt.encode_examples(_Tok(), ["a b c"], ["x"], prompt_len=5)
    ids, mask, labels = data.tensors
    hard_before = prompt.hard.clone()
    loss = pt.lm_loss(model(ids, mask), labels)
    loss.backward()
    assert prompt.weight.grad.abs().sum() > 0 and torch.equal(prompt.hard, hard_before)
    with pytest.raises(ValueError, match="hard prompt"):
        pt.InstructionPrompt(torch.zeros(2, 16), torch.zeros(3, 8))


def test_soft_prompt_file_round_trip(tmp_path):
    w = torch.randn(8, 16)
    path = pt.save_soft_prompt(tmp_path / "p.safetensors", w, {"steps": 3, "seed": 0})
    got, meta = pt.load_soft_prompt(path)
    assert got.dtype == torch.float32 and torch.allclose(got, w, atol=2e-3, rtol=1e-3)  # float16 on disk
    assert meta == {"steps": "3", "seed": "0"}
    with pytest.raises(FileNotFoundError, match="soft_prompts_09"):
        pt.load_soft_prompt(tmp_path / "missing.safetensors")
    with pytest.raises(ValueError):
        pt.save_soft_prompt(tmp_path / "q.safetensors", torch.zeros(3))


@pytest.mark.parametrize("which", ["plain", "instruction"])
def test_shipped_prompts_are_small_and_say_how_they_were_made(which):
    import json

    path = pt.SHIPPED_PROMPTS[which]
    assert path.is_file() and path.stat().st_size < 16_000, path
    w, meta = pt.load_soft_prompt(path)
    assert w.shape == (8, 576) and torch.isfinite(w).all()
    for key in ("steps", "seed", "lr", "batch_size", "command", "machine", "val_summed", "test_summed"):
        assert meta.get(key), f"{path.name}: metadata {key!r} missing"
    assert "soft_prompts_09.py" in meta["command"] and meta["which"] == which
    figures = json.loads((path.parent / "soft_prompt_09_figures.json").read_text())
    assert figures[which]["steps"] == meta["steps"]
    assert f"{figures[which]['test_summed']}/96" == meta["test_summed"]


@pytest.mark.slow
def test_shipped_plain_prompt_reproduces_its_recorded_test_answers(smollm):
    """The default run's figure for the shipped prompt is the one recorded offline (same questions, same file)."""
    import json

    from course_lib.bio import hpo_questions

    lm, tok = smollm
    w, _ = pt.load_soft_prompt(pt.SHIPPED_PROMPTS["plain"])
    test = hpo_questions.load_questions("test")
    summed, normed = pt.option_scores(lm, tok, w, [f"Phenotype: {q.phenotype}\nSystem:" for q in test],
                                      [[" " + o for o in q.options] for q in test], normalise=(False, True))
    gold = torch.tensor([q.answer for q in test])
    rec = json.loads((pt.SHIPPED_PROMPTS["plain"].parent / "soft_prompt_09_figures.json").read_text())["plain"]
    for scores, how in ((summed, "summed"), (normed, "normalised")):
        got = (scores.argmax(1) == gold).int().tolist()
        assert sum(a != b for a, b in zip(got, rec[f"correct_{how}"])) <= 1, how  # float rounding may flip a tie


# ---------------------------------------------------------------- contextual calibration and the validation-picked rule
def test_content_free_priors_are_the_log_mean_probability_over_the_content_free_inputs():
    """content_free_scores = log mean_c exp(score of the label after the content-free question c), each rule."""
    lm = tiny_llama(5, tied=True).eval()
    tok = _Tok()
    prefix = torch.randn(2, 16, generator=torch.Generator().manual_seed(3))
    labels = ["x", "y z", "u v w"]
    content_free = ("N/A", "", "[MASK]")
    summed, normed = pt.content_free_scores(lm, tok, prefix, labels, template="Phenotype: {} System:",
                                            content_free=content_free, normalise=(False, True))
    for got, flag in ((summed, False), (normed, True)):
        plain = _plain_scores(lm, tok, prefix, [f"Phenotype: {c} System:" for c in content_free],
                              [labels] * 3, flag).double()  # (3 inputs, 3 labels)
        want = torch.log(plain.exp().mean(dim=0))
        assert sorted(got) == sorted(labels)
        for k, lab in enumerate(labels):
            assert got[lab] == pytest.approx(float(want[k]), abs=1e-5), (flag, lab)


def test_calibrate_subtracts_each_options_prior_and_refuses_unknown_options():
    scores = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -1.0, -0.5]])
    options = [[" eye", " ear", " blood"], [" blood", " eye", " ear"]]
    prior = {" eye": -0.5, " ear": -3.0, " blood": -1.0}
    got = pt.calibrate(scores, options, prior)
    assert torch.allclose(got, torch.tensor([[-0.5, 1.0, -2.0], [-3.0, -0.5, 2.5]]))
    assert got.argmax(1).tolist() == [1, 2]  # the calibration moves the choice away from the favoured " eye"
    with pytest.raises(ValueError, match="no content-free prior"):
        pt.calibrate(scores, [[" eye", " ear", " skin"]] * 2, prior)
    with pytest.raises(ValueError, match="do not match"):
        pt.calibrate(scores[:, :2], options, prior)


@pytest.mark.parametrize("counts,want", [((63, 71), 1), ((53, 52), 0), ((60, 60), 0), ((0, 1), 1)])
def test_pick_rule_takes_the_rule_with_more_validation_questions_right_and_summed_on_a_tie(counts, want):
    assert pt.pick_rule(*counts) == want


def test_pick_rule_refuses_negative_counts():
    with pytest.raises(ValueError, match=">= 0"):
        pt.pick_rule(-1, 3)


def test_every_condition_of_the_lesson_has_validation_answers_recorded():
    """The lesson picks each condition's scoring rule from validation counts in the figures file: every
    condition it reads must have them, on the 96 validation questions, and per-question test answers."""
    import json

    figures = json.loads(pt.SHIPPED_FIGURES.read_text())
    for key in ("zero-shot", "calibrated zero-shot", "few-shot", "plain", "instruction",
                *(f"plain seed {s}" for s in pt.SHIPPED_SEEDS)):
        entry = figures[key]
        for how in ("summed", "normalised"):
            right, n = map(int, entry[f"val_{how}"].split("/"))
            assert n == 96 and 0 <= right <= n, (key, how)
            assert len(entry[f"correct_{how}"]) == 96 and sum(entry[f"correct_{how}"]) == entry[f"test_{how}"]
    assert figures["calibrated zero-shot"]["content_free"] == list(pt.CONTENT_FREE)


@pytest.mark.parametrize("seed", sorted(pt.SHIPPED_SEEDS) + [3, 4])  # 3 and 4: the check seeds (data README)
def test_the_other_training_seeds_are_small_and_say_how_they_were_made(seed):
    import json

    path = pt.SHIPPED_PROMPTS["plain"].parent / f"soft_prompt_09_plain_seed{seed}.safetensors"
    assert path.is_file() and path.stat().st_size < 16_000, path
    w, meta = pt.load_soft_prompt(path)
    assert w.shape == (8, 576) and torch.isfinite(w).all()
    assert meta["seed"] == str(seed) and meta["which"] == "plain" and f"--seed {seed}" in meta["command"]
    plain_meta = pt.load_soft_prompt(pt.SHIPPED_PROMPTS["plain"])[1]
    assert meta["steps"] == plain_meta["steps"] and meta["lr"] == plain_meta["lr"]  # only the seed differs
    entry = json.loads(pt.SHIPPED_FIGURES.read_text())[f"plain seed {seed}"]
    assert f"{entry['test_summed']}/96" == meta["test_summed"] and entry["val_normalised"] == meta["val_normalised"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(pt.SHIPPED_SEEDS))
def test_the_other_training_seeds_reproduce_their_recorded_answers(smollm, seed):
    """The default run reads seeds 1 and 2's answers from the figures file: scoring them again gives them."""
    import json

    from course_lib.bio import hpo_questions

    lm, tok = smollm
    w, _ = pt.load_soft_prompt(pt.SHIPPED_SEEDS[seed])
    test = hpo_questions.load_questions("test")
    summed, normed = pt.option_scores(lm, tok, w, [f"Phenotype: {q.phenotype}\nSystem:" for q in test],
                                      [[" " + o for o in q.options] for q in test], normalise=(False, True))
    gold = torch.tensor([q.answer for q in test])
    rec = json.loads(pt.SHIPPED_FIGURES.read_text())[f"plain seed {seed}"]
    for scores, how in ((summed, "summed"), (normed, "normalised")):
        got = (scores.argmax(1) == gold).int().tolist()
        assert sum(a != b for a, b in zip(got, rec[f"correct_{how}"])) <= 1, how  # float rounding may flip a tie
