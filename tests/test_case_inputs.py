"""tests/case_inputs.py, the before/after comparison of the inputs a lesson's checks build: it gives the same
digests twice, and it names the check, the stream and the case where one hidden input changes."""
import case_inputs
import numpy as np
from course_lib.judge import positional as judge


def test_the_same_inputs_give_the_same_digests():
    first = case_inputs.inputs(["04_positional"])
    assert len(first) == 6 and not any(run["error"] for run in first.values()), first
    assert all(run["cases"] and run["calls"] for run in first.values())
    assert case_inputs.differences(first, case_inputs.inputs(["04_positional"])) == []


def test_a_changed_hidden_input_is_named(monkeypatch):
    """One float of one hidden case one step (one unit in the last place) away, its label kept."""
    before = case_inputs.inputs(["04_positional"])
    exponential_cases = judge.exponential_cases

    def one_changed():
        cases = exponential_cases()
        [i] = [i for i, c in enumerate(cases) if c.label == "float distances, min_half_life=0.5"]
        distances = cases[i].args[0]
        distances[1] = np.nextafter(distances[1], np.inf)
        return cases

    monkeypatch.setattr(judge, "exponential_cases", one_changed)
    lines = case_inputs.differences(before, case_inputs.inputs(["04_positional"]))
    # the case was changed after it was made (its digest is taken then): the call of the answer on it shows it
    assert len(lines) == 1 and lines[0].startswith(
        "course_lib.checks.positional.check_exponential_basis hidden: calls["), lines
