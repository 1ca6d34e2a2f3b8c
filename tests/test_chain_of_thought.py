"""Lesson 09, section 7: chain-of-thought prompts, rationale generation with the key/value cache, the vote.

Runs on a tiny randomly initialised LlamaForCausalLM and a whitespace tokenizer (no download, a few seconds).
"""
from __future__ import annotations

import pathlib
import re

import nbformat
import pytest
import torch

from course_lib import prompt_tuning as pt
from course_lib.bio import hpo_questions
from course_lib.checks.prompt_tuning import tiny_llama

from conftest import REPO  # noqa: E402  (tests/ is on sys.path under pytest)


class _Tok:
    """Whitespace tokenizer over the tiny model's 40 ids: 0 pad, 1 a line break, 2 end of sequence, 3-39 words.
    (The untied tiny model also generates the pad id as a token: it is written ``w0`` and kept.)

    ``decode`` writes an id as ``w<id>`` and ``__call__`` reads ``w<id>`` back as that id, so a decoded
    rationale tokenizes to the ids that were generated.
    """
    pad_token_id, eos_token_id = 0, 2

    def __len__(self):
        return 40

    def _id(self, word):
        if word == "\n":
            return 1
        m = re.fullmatch(r"w(\d+)", word)
        return int(m.group(1)) if m and int(m.group(1)) < 40 else 3 + sum(map(ord, word)) % 37

    def __call__(self, text):
        return {"input_ids": [self._id(w) for w in re.findall(r"\n|[^ \n]+", text)]}

    def decode(self, ids):
        return " ".join({1: "\n", 2: "</s>"}.get(i, f"w{i}") for i in ids)

    def batch_decode(self, seqs):
        return [self.decode(s) for s in seqs]


PREFIX, CUE = "solve these : a b c", "\n answer :"
PROMPTS = ["q r s", "t", "u v w x y z", "m n"]
OPTIONS = [["x", "y z", "u v w t", "q"], ["r s", "q", "m", "n o p"], ["a", "b", "c", "d e"], ["k l", "m", "n o", "p"]]


def _uncached(lm, ids):
    with torch.no_grad():
        return lm(input_ids=torch.tensor([ids])).logits


def _greedy_reference(lm, tok, prompt, max_new, stops):
    """The greedy rationale's ids, one uncached forward pass per token over the whole text."""
    ids = tok(PREFIX)["input_ids"] + tok(prompt)["input_ids"]
    out = []
    for _ in range(max_new):
        nxt = int(_uncached(lm, ids + out)[0, -1].argmax())
        if nxt in stops:
            break
        out.append(nxt)
    return out


def _scores_after(lm, tok, prompt, rationale_ids, option, normalise):
    """The option's score after [prefix; prompt; rationale; cue], from one uncached forward pass."""
    ctx = tok(PREFIX)["input_ids"] + tok(prompt)["input_ids"] + rationale_ids + tok(CUE)["input_ids"]
    o = tok(option)["input_ids"]
    labels = torch.tensor([[-100] * len(ctx) + o])
    return pt.option_log_likelihood(_uncached(lm, ctx + o), labels, normalise).item()


@pytest.mark.parametrize("stop_early", [False, True])
def test_greedy_rationales_and_their_option_scores_equal_the_uncached_computation(stop_early):
    """Greedy rationales (questions of different lengths in batches of 2, rows that stop at different steps when
    a stop token is given) and the options scored after them (in chunks of 3 rows): the same tokens and the
    same scores as one uncached forward pass over each whole text. The stop token is not part of a rationale.
    (Untied: a tiny tied model only repeats the prompt's last token.)"""
    lm = tiny_llama(5, tied=False).eval()
    tok = _Tok()
    max_new = 5
    stops = torch.tensor([1, 2])
    first_stop = None
    if stop_early:  # a token the first question's greedy rationale writes (not first) now ends every rationale
        ref = _greedy_reference(lm, tok, PROMPTS[0], max_new, {1, 2})
        first_stop = next(j for j in range(1, len(ref)) if ref[j] not in ref[:j])
        stops = torch.tensor([ref[first_stop]])
    rationales, (summed, normed) = pt.rationale_option_scores(
        lm, tok, PREFIX, PROMPTS, OPTIONS, scorer=pt.option_log_likelihood, max_new_tokens=max_new, cue=CUE,
        normalise=(False, True), batch_size=2, option_batch=3, stop_ids=stops)
    assert summed.shape == normed.shape == (len(PROMPTS), 1, 4)
    lengths = []
    for i, p in enumerate(PROMPTS):
        want = _greedy_reference(lm, tok, p, max_new, set(stops.tolist()))
        got = tok(rationales[i][0])["input_ids"]
        assert got == want, f"question {i}: generated {got}, one uncached pass per token gives {want}"
        lengths.append(len(got))
        for k, o in enumerate(OPTIONS[i]):
            for res, flag in ((summed, False), (normed, True)):
                assert res[i, 0, k].item() == pytest.approx(_scores_after(lm, tok, p, got, o, flag), abs=1e-5), (i, k)
    if stop_early:
        assert lengths[0] == first_stop and len(set(lengths)) > 1, f"rows should stop at different steps: {lengths}"


def test_sampling_with_the_same_seed_gives_the_same_paths():
    """Temperature sampling from a seeded torch.Generator: the same seed, the same rationales and scores;
    another seed, other rationales; the paths of one question differ from each other."""
    lm = tiny_llama(7, tied=True).eval()
    tok = _Tok()

    def run(seed):
        return pt.rationale_option_scores(lm, tok, PREFIX, PROMPTS, OPTIONS, scorer=pt.option_log_likelihood,
                                          paths=4, temperature=1.0, generator=torch.Generator().manual_seed(seed),
                                          max_new_tokens=6, cue=CUE, batch_size=3)
    (r1, s1), (r2, s2), (r3, _) = run(0), run(0), run(1)
    assert r1 == r2 and torch.equal(s1, s2), "the same seed must give the same paths"
    assert r1 != r3, "another seed gave the very same 16 sampled rationales"
    assert s1.shape == (len(PROMPTS), 4, 4)
    assert any(len(set(paths)) > 1 for paths in r1), "the sampled paths of every question are identical"


def test_sampling_needs_a_generator_and_valid_settings():
    lm, tok = tiny_llama(5).eval(), _Tok()
    kw = dict(scorer=pt.option_log_likelihood, cue=CUE)
    with pytest.raises(ValueError, match="torch.Generator"):
        pt.rationale_option_scores(lm, tok, PREFIX, PROMPTS, OPTIONS, temperature=0.7, **kw)
    with pytest.raises(ValueError, match="positive"):
        pt.rationale_option_scores(lm, tok, PREFIX, PROMPTS, OPTIONS, paths=0, **kw)
    with pytest.raises(ValueError, match="same number of options"):
        pt.rationale_option_scores(lm, tok, PREFIX, PROMPTS, [["a", "b"], ["a"], ["a", "b"], ["a", "b"]], **kw)


@pytest.mark.parametrize("answers, scores, want, why", [
    ([[2, 0, 2]], None, [2], "two votes beat one"),
    ([[1, 3, 0]], None, [0], "a three-way tie without scores: the lowest index"),
    ([[3, 3, 1, 1, 0]], None, [1], "a two-way tie without scores: the lower of the tied"),
    ([[0, 1, 2]], [[[0., -1., -5., -9.], [0., -1., -5., -9.], [-9., 0., -5., -9.]]], [1],
     "a tie goes to the tied option with the highest summed score (-1 - 1 + 0 beats 0 + 0 - 9)"),
    ([[0, 0, 1]], [[[-9., 0., -5., -9.], [-9., 0., -5., -9.], [-9., 0., -5., -9.]]], [0],
     "more votes win even when another option's summed score is higher"),
    ([[2, 3, 1]], [[[0., -2., -1., -1.]] * 3], [2], "equal summed scores among the tied: the lowest index"),
])
def test_majority_vote_and_its_tie_rule(answers, scores, want, why):
    got = pt.majority_vote(torch.tensor(answers), None if scores is None else torch.tensor(scores))
    assert got.tolist() == want, why


def test_majority_vote_rejects_mismatched_input():
    with pytest.raises(ValueError, match="N questions, k paths"):
        pt.majority_vote(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"\(N, k, K\)"):
        pt.majority_vote(torch.tensor([[1, 2]]), torch.zeros(1, 3, 4))


def test_cot_prompts_never_contain_a_held_out_question():
    """Every worked rationale belongs to a training question; the lesson's chain-of-thought prompt holds no
    validation or test phenotype; cot_prompt refuses a held-out example."""
    train = hpo_questions.load_questions("train")
    held_out = hpo_questions.load_questions("val") + hpo_questions.load_questions("test")
    train_ids = {q.hpo_id for q in train}
    assert set(pt.COT_RATIONALES) <= train_ids, "a rationale is written for a question outside the training split"
    assert not set(pt.COT_RATIONALES) & {q.hpo_id for q in held_out}
    shots = [q for q in train if q.hpo_id in pt.COT_RATIONALES]
    prompt = pt.cot_prompt("Which organ system does each abnormal phenotype affect?\n\n", shots)
    for q in held_out:
        assert f"Phenotype: {q.phenotype}\n" not in prompt, q.phenotype
    for q in shots:
        assert f"Phenotype: {q.phenotype}\nReasoning: {pt.COT_RATIONALES[q.hpo_id]}\nSystem: {q.answer_text}\n\n" in prompt
    with pytest.raises(ValueError, match="training split"):
        pt.cot_prompt("", [held_out[0]], {held_out[0].hpo_id: "a reason"})
    with pytest.raises(ValueError, match="no rationale"):
        pt.cot_prompt("", [q for q in train if q.hpo_id not in pt.COT_RATIONALES][:1])


def test_lesson_09_builds_its_cot_prompt_from_the_few_shot_training_examples():
    """The notebook's chain-of-thought examples are FEW_SHOT's solved training questions, each with a rationale."""
    (path,) = (pathlib.Path(REPO) / "notebooks" / "09_prompt_tuning").glob("*.ipynb")
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    m = re.search(r'shots = \[questions\["train"\]\[i\] for i in \(([\d, ]+)\)\]', code)
    assert m, "the few-shot examples are no longer picked from the training split by index"
    train = hpo_questions.load_questions("train")
    assert {train[int(i)].hpo_id for i in m.group(1).split(",")} == set(pt.COT_RATIONALES)
    assert "PT.cot_prompt(INSTRUCTION, shots)" in code
    assert "scorer=option_log_likelihood" in code and "PT.majority_vote(" in code


def test_stop_tokens_are_the_line_breaks_and_end_of_sequence():
    assert pt.stop_token_ids(_Tok()).tolist() == [1, 2]
