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
