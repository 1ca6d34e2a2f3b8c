"""Fair to the student (issue 65): hidden tests grade what the exercise promises, hints teach without handing
over the solution's line, and no function shipped in the students' edition holds an unreleased solution.

* a message that says what "the docstring" promises quotes a promise the exercise's docstring makes
  (the reference's or the notebook stub's);
* each declared promise (``Breaks.promise``) is made in those docstrings, in most of its words;
* a promise the hidden test checks fails the visible test too, so the student learns it before grading
  (the few left hidden-only are listed, with the reason);
* no message (a misconception's, or any string of the lesson's checks module) shares more than
  ``MAX_MESSAGE_RUN`` code tokens in a row with the reference's body (tests/fair_tokens.py);
* no function of the students' edition shares more than ``MAX_SHIPPED_RUN`` tokens in a row with the solution
  of an exercise not yet released.
"""
import importlib
import inspect
import re

import pytest

from course_lib.checks import registry
from fair_tokens import (key_words, longest_shared_run, notebook_docstring, object_tokens, string_constants,
                         words)

EXERCISES = registry.exercises()
MAX_MESSAGE_RUN = 6


def _ref(e):
    mod, name = e.reference.rsplit(".", 1)
    return getattr(importlib.import_module(mod), name)


def _docstrings(e) -> str:
    return (inspect.getdoc(_ref(e)) or "") + "\n" + notebook_docstring(e.assignment, e.name)


def _ids(e):
    return f"{e.assignment}.{e.name}"


# ---------------------------------------------------------------- item 1: promises
_CLAIM = re.compile(r"docstring (?:promises|says|asks for|asks|requires|wants|forbids)([^.;:(),]*)")


def _messages(e) -> list[str]:
    return [w.message for w in e.misconceptions]


@pytest.mark.parametrize("e", EXERCISES, ids=_ids)
def test_a_message_cites_only_promises_the_docstring_makes(e):
    """'the docstring promises X' in a misconception's message: X's words are in the exercise's docstrings."""
    doc = set(key_words(_docstrings(e)))
    bad = []
    for message in _messages(e):
        for claim in _CLAIM.finditer(message):
            missing = [w for w in key_words(claim.group(1)) if w not in doc]
            if missing:
                bad.append(f"{claim.group(0)!r} (not in the docstrings: {missing})")
    assert not bad, f"{e.assignment}.{e.name}: messages cite promises its docstrings do not make: {bad}"


def test_the_torch_attention_message_that_was_unfair_would_be_caught():
    """The check above fails on the message issue 65 found (the torch exercise promised no zero rows)."""
    e = registry.exercise("01_attention", "scaled_dot_product_attention_torch")
    doc = set(key_words(_docstrings(e)))
    old = ("a query whose keys are ALL masked gets NaN weights; the docstring promises all-zero weights for "
           "such a row")
    claim = _CLAIM.search(old)
    assert [w for w in key_words(claim.group(1)) if w not in doc]


# promises made in other words than the declaration's short form (checked by hand: where the docstring says it)
_SAID_OTHERWISE = {
    ("08_clinical_text", "cosine_top_k", "cosine, not the raw dot product"): "'highest cosine similarity'",
    ("08_clinical_text", "cosine_top_k", "k outside 1..N raises ValueError"): "'1 <= k <= N (else ValueError)'",
    ("09_prompt_tuning", "option_log_likelihood", "(B,) shape"): "'(B,)' in Returns",
    ("12_long_range_dna", "receptive_field", "returns an int"): "the signature's '-> int'",
    ("12_long_range_dna", "in_silico_mutagenesis", "mutant minus reference"): "'predict(sequence with base b ...) - predict(sequence)'",
    ("09_prompt_tuning", "option_log_likelihood", "shift by one"): "'position t predicts the token at t + 1'",
    ("12_long_range_dna", "reverse_complement", "returns a string"): "the signature's '-> str'",
}
# "inputs unchanged": a rule of every exercise, not yet written in these docstrings (issue 65: debt, listed;
# none left)
_UNWRITTEN: set[tuple[str, str, str]] = set()


def _promise_missing(e, promise: str) -> bool:
    doc_text = _docstrings(e)
    doc = set(key_words(doc_text))
    words_ = key_words(promise)
    missing = [w for w in words_ if w not in doc]
    if "(..." in promise and "..." in doc_text:  # "any leading dims (..., T, d)": the docstring's shapes say it
        missing = [w for w in missing if w not in ("leadi", "dims", "axes")]
    return 2 * len(missing) > len(words_)


BREAKS = [pytest.param(e, b.promise, id=f"{e.assignment}.{e.name}:{b.promise}") for e in EXERCISES
          for b in e.breaks]


@pytest.mark.parametrize("e, promise", BREAKS)
def test_each_declared_promise_is_made_by_the_docstring(e, promise):
    key = (e.assignment, e.name, promise)
    missing = _promise_missing(e, promise)
    if key in _SAID_OTHERWISE or key in _UNWRITTEN:
        assert missing, f"{key}: now found in the docstrings in its own words; drop it from the lists"
        return
    assert not missing, (f"{e.assignment}.{e.name}: the promise {promise!r} is checked, but most of its words are "
                         "in neither the reference's docstring nor the notebook stub's")


# promises only the hidden test checks, with why no visible case holds them yet (issue 65 item 1: debt, listed;
# none left: a promise the hidden test grades now needs a visible case before it is declared)
HIDDEN_ONLY: set[tuple[str, str, str]] = set()
HIDDEN_BREAKS = [pytest.param(e, check, b, id=f"{e.assignment}.{e.name}:{b.promise}") for e in EXERCISES
                 for check in e.checks for b in e.breaks if b.hidden]


@pytest.mark.parametrize("e, check, b", HIDDEN_BREAKS)
def test_a_promise_the_hidden_test_checks_has_a_visible_case(e, check, b):
    key = (e.assignment, e.name, b.promise)
    try:
        registry.resolve(check)(b.fn, hidden=False)
    except AssertionError:
        assert key not in HIDDEN_ONLY, f"{key}: the visible test now catches it; drop it from HIDDEN_ONLY"
        return
    assert key in HIDDEN_ONLY, (f"{e.assignment}.{e.name}: the promise {b.promise!r} is graded by the hidden test "
                                "only; add a visible case showing it")


# ---------------------------------------------------------------- item 2: hints
# messages not rewritten yet (issue 65 item 2: debt, listed; none left)
_MESSAGE_DEBT: set[tuple[str, str]] = set()


def _counted(run: list[str]) -> bool:
    """A run of only names, ``...`` and ``( ) ,`` is a call's signature (``f(q, k, v, ...)``) or a shape
    (``(..., H, T, d_head)``), not a solution's line."""
    return any(not (t.isidentifier() or t in ("(", ")", ",", "...")) for t in run)


def _shown_messages(e) -> set[str]:
    promises = {b.promise for x in EXERCISES for b in x.breaks}
    module = importlib.import_module(e.checks[0].rsplit(".", 1)[0])
    return (set(string_constants(module)) - promises) | set(_messages(e))


@pytest.mark.parametrize("e", EXERCISES, ids=_ids)
def test_no_message_hands_over_a_line_of_the_solution(e):
    body = object_tokens(_ref(e))
    bad = []
    for message in _shown_messages(e):
        n, run = longest_shared_run(words(message), body)
        if n > MAX_MESSAGE_RUN and _counted(run):
            bad.append(f"{' '.join(run)!r} in {message[:80]!r}")
    if (e.assignment, e.name) in _MESSAGE_DEBT:
        assert bad, f"{e.assignment}.{e.name}: its messages are clean now; drop it from _MESSAGE_DEBT"
        return
    assert not bad, (f"{e.assignment}.{e.name}: messages repeat more than {MAX_MESSAGE_RUN} tokens of the "
                     f"reference's body in a row (name the mistake and the idea, not the line): {bad}")


def test_the_token_comparison_finds_the_decode_line_issue_65_quoted():
    e = registry.exercise("06_bpe", "decode_ids")
    old = "decode all the tokens' bytes TOGETHER: b''.join(vocab[i] for i in ids).decode('utf-8', 'surrogatepass')"
    n, _ = longest_shared_run(words(old), object_tokens(_ref(e)))
    assert n > MAX_MESSAGE_RUN


# ---------------------------------------------------------------- item 3: no solution in what ships
MAX_SHIPPED_RUN = 25
# building blocks that still share a run with an unreleased solution (issue 65 item 3: debt, listed with why)
_SHIPPED_DEBT = {
    # lesson 10's padded FAVOR+ reuses lesson 07's linear attention (kv = phi_k^T v, z = sum of phi_k), which
    # lesson 07 teaches and ships; the exercise's own part, the padding, is in no building block
    ("course_lib.efficient.favor_attention_torch", "course_lib.proteins.favor_padded_attention"),
    ("course_lib.efficient.EfficientMultiHeadAttention.forward", "course_lib.proteins.favor_padded_attention"),
}


def _students_edition():
    """(qualified name, tokens) of every function of the students' edition with no solution released."""
    from pathlib import Path

    from fair_tokens import shipped_functions
    for path in sorted((Path(__file__).resolve().parents[1] / "course_lib").glob("*.py")):
        module = "course_lib." + path.stem  # course_lib/solutions/ is not in that edition
        for name, tokens in shipped_functions(path.read_text()):
            yield f"{module}.{name}", tokens


def test_no_shipped_function_repeats_an_unreleased_solution():
    """Every function of the students' edition before any release, against every exercise's solution (its
    input checks left out): no run of more than MAX_SHIPPED_RUN tokens in common (a method's ``self`` and a
    function's first argument compare alike)."""
    from fair_tokens import ngrams, solution_tokens
    n = MAX_SHIPPED_RUN + 1
    solutions = {e.reference: ngrams(solution_tokens(registry.resolve(e.reference)), n) for e in EXERCISES}
    found = set()
    for qual, tokens in _students_edition():
        grams = ngrams(tokens, n)
        for ref, sol in solutions.items():
            if qual != ref and grams & sol:
                found.add((qual, ref))
    unexpected = found - _SHIPPED_DEBT
    assert not unexpected, (f"functions shipped in the students' edition repeat more than {MAX_SHIPPED_RUN} "
                            f"tokens of an unreleased solution: {sorted(unexpected)}")
    stale = _SHIPPED_DEBT - found
    assert not stale, f"no longer sharing a run: drop {sorted(stale)} from _SHIPPED_DEBT"


def test_the_shipped_comparison_finds_the_encoder_layer_issue_65_quoted():
    """The comparison above catches the EncoderLayer.forward that issue 65 found (9 of 10 lines of the
    solution, with self for layer)."""
    from fair_tokens import ngrams, solution_tokens, source_tokens
    old = '''
def forward(self, x, mask=None, need_weights=False):
    if self.norm_first:
        h = self.norm1(x)
        a, weights = self.self_attn(h, h, h, mask=mask)
        x = x + self.dropout1(a)
        x = x + self.dropout2(self.ff(self.norm2(x)))
    else:
        a, weights = self.self_attn(x, x, x, mask=mask)
        x = self.norm1(x + self.dropout1(a))
        x = self.norm2(x + self.dropout2(self.ff(x)))
    return (x, weights) if need_weights else x
'''
    ref = registry.resolve(registry.exercise("05_blocks", "encoder_layer_forward").reference)
    n = MAX_SHIPPED_RUN + 1
    assert ngrams(source_tokens(old, normalise_first=True), n) & ngrams(solution_tokens(ref), n)
