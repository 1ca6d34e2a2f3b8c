"""The lesson 07 checks (right alternatives and promise-breaking answers are declared in
course_lib/checks/efficient.py: tests/test_exercises.py): every known wrong answer fails
with its misconception named, the quadratic form is caught by its memory, calling the
reference is an IntegrityError, and a blank stub reports "not implemented yet"."""
from __future__ import annotations

import math

import numpy as np
import pytest

from course_lib import efficient as ref
from course_lib.checks import IntegrityError, NotImplementedYet
from course_lib.checks import efficient as C
from course_lib.judge import efficient as J
from named import assert_named_alone, declared_wrong_answers


# the independent right answers are declared with the exercises (course_lib/checks/efficient.py; each keeps full
# marks: tests/test_exercises.py); the tests below build their wrong answers from them
elu_feature_map = J._right_elu_feature_map
linear_attention = J._right_linear_attention
causal_linear_attention = J._right_causal_linear_attention
linear_attention_step = J._right_linear_attention_step
positive_random_features = J._right_positive_random_features


# ---------------------------------------------------------------- every known wrong answer is named
WRONGS = declared_wrong_answers("07_efficient")


# the visible test; every declared misconception's hidden test: tests/test_exercises.py
@pytest.mark.parametrize("check, wrong", WRONGS)
def test_wrong_answers_are_named(check, wrong):
    assert_named_alone(check, wrong.fn, wrong.name)


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, quadratic", [
    (C.check_linear_attention, J._linear_quadratic),
    (C.check_causal_linear_attention, J._causal_quadratic),
])
def test_quadratic_form_is_caught_by_its_memory(check, quadratic, hidden):
    with pytest.raises(AssertionError, match=r"likely misconception 'quadratic \(phi\(Q\) phi\(K\)\^T\) V'.*MB"):
        check(quadratic, hidden=hidden)


def test_quadratic_written_independently_is_caught_too():
    def quadratic(q, k, v, feature_map=elu_feature_map):
        a = feature_map(q) @ np.swapaxes(feature_map(k), -1, -2)  # (..., T, S): any leading dims, as promised
        return a @ v / a.sum(-1, keepdims=True)

    with pytest.raises(AssertionError, match="quadratic"):
        C.check_linear_attention(quadratic)


def test_a_causal_mask_of_size_L_by_L_counts_as_quadratic():
    def masked_but_linear_otherwise(q, k, v, feature_map=elu_feature_map):
        T = q.shape[-2]
        mask = np.tril(np.ones((T, T), dtype=bool))  # L^2 bytes: not allowed
        assert mask[-1, 0]
        return causal_linear_attention(q, k, v, feature_map)

    with pytest.raises(AssertionError, match="quadratic"):
        C.check_causal_linear_attention(masked_but_linear_otherwise)


def test_future_keys_found_by_the_property_when_values_do_not_match_a_wrong():
    """A causal form that leaks only the NEXT key is not in WRONG_CAUSAL; the check still says why."""
    def leaks_next(q, k, v, feature_map=elu_feature_map):
        fq, fk = feature_map(np.asarray(q, float)), feature_map(np.asarray(k, float))
        T = fq.shape[-2]
        out = np.empty(fq.shape[:-1] + (v.shape[-1],))
        for t in range(T):
            j = min(t + 2, T)
            w_ = fq[..., t, None, :] @ np.swapaxes(fk[..., :j, :], -1, -2)
            out[..., t, :] = (w_ @ v[..., :j, :])[..., 0, :] / w_.sum(-1)
        return out

    with pytest.raises(AssertionError, match="causal_linear_attention"):
        C.check_causal_linear_attention(leaks_next)


def test_step_that_modifies_its_state_in_place_is_named():
    def in_place(state, q_t, k_t, v_t, feature_map=elu_feature_map):
        fq, fk = feature_map(np.asarray(q_t, float)), feature_map(np.asarray(k_t, float))
        if state is None:
            state = (np.zeros(fk.shape + (np.shape(v_t)[-1],)), np.zeros(fk.shape))
        s, z = state
        s += np.einsum("...r,...v->...rv", fk, v_t)
        z += fk
        return np.einsum("...r,...rv->...v", fq, s) / (fq * z).sum(-1)[..., None], (s, z)

    with pytest.raises(AssertionError, match="input modified in place"):
        C.check_linear_attention_step(in_place)


def test_step_returning_the_wrong_structure_says_what_to_return():
    def only_output(state, q_t, k_t, v_t, feature_map=elu_feature_map):
        return linear_attention_step(state, q_t, k_t, v_t, feature_map)[0]

    with pytest.raises(AssertionError, match=r"must return \(out_t, \(s, z\)\)"):
        C.check_linear_attention_step(only_output)


def test_negative_features_fail_the_positivity_property():
    def elu_plus_one_but_negative_far_left(x):
        out = elu_feature_map(x)
        return np.where(np.asarray(x) < -20, -1.0, out)

    with pytest.raises(AssertionError, match="> 0|<= 0"):
        C.check_elu_feature_map(elu_plus_one_but_negative_far_left)


def test_biased_features_fail_the_unbiasedness_property():
    def biased(x, w):
        return positive_random_features(x, w) * (1.0 + 1e-10)  # within compare tolerance...

    C.check_positive_random_features(biased)  # ...and within the statistical bound: passes

    def clearly_biased(x, w):
        out = positive_random_features(x, w)
        return out * (1.3 if w.shape[0] > 1000 else 1.0)

    with pytest.raises(AssertionError, match="without bias"):
        C.check_positive_random_features(clearly_biased)


# ---------------------------------------------------------------- integrity and blanks
@pytest.mark.parametrize("check, name", [
    (C.check_elu_feature_map, "elu_feature_map"),
    (C.check_linear_attention, "linear_attention"),
    (C.check_causal_linear_attention, "causal_linear_attention"),
    (C.check_linear_attention_step, "linear_attention_step"),
    (C.check_positive_random_features, "positive_random_features"),
])
def test_calling_the_reference_is_an_integrity_error(check, name):
    reference = getattr(ref, name)

    def calls_reference(*args, **kwargs):
        return reference(*args, **kwargs)

    with pytest.raises(IntegrityError, match="reference implementation"):
        check(calls_reference)
    with pytest.raises(IntegrityError):
        check(reference)


def _through_the_efficient_layer(q, k, v, feature_map=None):
    """Lesson 07's linear attention (elu + 1 features) from the library's EfficientMultiHeadAttention with identity
    projections: one head, v padded to d columns (issue 33: an equivalent that is a configured class)."""
    import torch

    q, k, v = (torch.as_tensor(np.asarray(x, dtype=np.float64)) for x in (q, k, v))
    d, dv = q.shape[-1], v.shape[-1]
    width = max(d, dv)
    pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[-1]))  # noqa: E731
    layer = ref.EfficientMultiHeadAttention(width, 1, kind="linear", batch_first=True).double()
    # torch's elu is a forbidden door of this exercise: the layer is given phi - 1 for the asked feature map phi
    if feature_map is None:
        torch.nn.functional.elu = lambda x, alpha=1.0: torch.where(x > 0, x, torch.expm1(x))
    else:
        torch.nn.functional.elu = lambda x, alpha=1.0: torch.as_tensor(
            np.asarray(feature_map(x.numpy()), dtype=np.float64)) - 1.0
    with torch.no_grad():
        for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj):
            proj.weight.copy_(torch.eye(width, dtype=torch.float64))
            proj.bias.zero_()
        out, _ = layer(pad(q)[None], pad(k)[None], pad(v)[None])
    return out[0, :, :dv].numpy()


def test_the_efficient_layer_with_identity_weights_is_a_door_to_linear_attention(monkeypatch):
    import torch

    monkeypatch.setattr(torch.nn.functional, "elu", torch.nn.functional.elu)  # the answer replaces it
    v = np.arange(10.0).reshape(5, 2)
    q, k = np.random.default_rng(1).normal(size=(3, 4)), np.random.default_rng(2).normal(size=(5, 4))
    np.testing.assert_allclose(_through_the_efficient_layer(q, k, v), ref.linear_attention(q, k, v), atol=1e-10)
    with pytest.raises(IntegrityError, match="EfficientMultiHeadAttention"):
        C.check_linear_attention(_through_the_efficient_layer)


def test_torch_elu_is_forbidden_for_the_elu_exercise():
    import torch

    def via_torch(x):
        return (torch.nn.functional.elu(torch.as_tensor(x, dtype=torch.float64)) + 1).numpy()

    with pytest.raises(IntegrityError, match="torch.nn.functional.elu"):
        C.check_elu_feature_map(via_torch)


@pytest.mark.parametrize("check", [C.check_elu_feature_map, C.check_linear_attention, C.check_causal_linear_attention,
                                   C.check_linear_attention_step, C.check_positive_random_features])
def test_blank_stub_reports_not_implemented(check):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedYet, match="not implemented yet"):
        check(stub)


def test_check_runs_even_when_tracemalloc_is_already_tracing():
    import tracemalloc

    tracemalloc.start()
    try:
        C.check_linear_attention(linear_attention)
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def test_independent_answers_agree_with_reference_sanity():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    np.testing.assert_allclose(causal_linear_attention(q, k, v), ref.causal_linear_attention(q, k, v), atol=1e-12)
    assert math.isfinite(float(linear_attention(q, k, v).sum()))


# ---------------------------------------------------------------- the graded memory bound (issue 33 item 2)
def _record(check, student, **kwargs):
    import json

    from course_lib.checks import transcript

    with transcript.using("record") as state:
        check(student, **kwargs)
        calls = list(state.calls)
    return json.loads(json.dumps(calls))


def test_bound_length_puts_any_L_by_L_array_beyond_the_sandbox(monkeypatch):
    monkeypatch.delenv("COURSE_SANDBOX_MEMORY_MB", raising=False)
    assert C.sandbox_memory_bytes() == 6144 * 2 ** 20  # grading.kernel.launcher's default
    L = C.bound_length(C.sandbox_memory_bytes())
    assert L == 88_000 and L * L > C.sandbox_memory_bytes()  # even one byte per entry does not fit
    monkeypatch.setenv("COURSE_SANDBOX_MEMORY_MB", "16384")
    assert C.bound_length(C.sandbox_memory_bytes()) ** 2 >= 1.2 * 16384 * 2 ** 20


def test_the_kernel_takes_its_length_from_its_own_hard_limit(tmp_path):
    """In the grading kernel the bound is the hard RLIMIT_AS the sandbox set (a process cannot raise it)."""
    import resource
    import subprocess
    import sys

    limit = 3000 * 2 ** 20

    def bounded():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    code = "from course_lib.checks import efficient as C; print(C._kernel_memory_bytes())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=bounded, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == limit


@pytest.mark.parametrize("check, fn", [(C.check_linear_attention, linear_attention),
                                       (C.check_causal_linear_attention, causal_linear_attention)])
def test_graded_run_checks_the_long_output_from_the_record(check, fn, monkeypatch):
    """Record then replay (in this process, no address-space bound: the correct forms need a few MB):
    passes; a record whose long output was changed does not; a kernel that ran under another bound
    recorded other inputs and does not pass either."""
    from course_lib.checks import transcript

    monkeypatch.setenv("COURSE_SANDBOX_MEMORY_MB", "1024")  # L = 36,000: quick
    calls = _record(check, fn)
    long = [c for c in calls if c["label"].startswith("a long sequence")]
    assert len(long) == 1 and "L=36,000" in long[0]["label"]
    assert transcript.replay(check, {}, calls)[0] is None
    forged = [dict(c) for c in calls]
    i = calls.index(long[0])
    out = transcript.decode(forged[i]["output"]).copy()
    out[-1] += 1e-3
    forged[i]["output"] = transcript.encode(out)
    assert "a long sequence" in transcript.replay(check, {}, forged)[0]
    monkeypatch.setenv("COURSE_SANDBOX_MEMORY_MB", "2048")
    assert "does not match input" in transcript.replay(check, {}, calls)[0]


def test_a_recorded_out_of_memory_failure_is_named_quadratic():
    """What the verifier makes of a kernel whose student's function ran out of memory on the long input."""
    from course_lib.checks import transcript

    calls = _record(C.check_linear_attention, linear_attention)
    for c in calls:
        if c["label"].startswith("a long sequence"):
            del c["output"]
            c["raised"] = {"message": "linear_attention: your function raised _ArrayMemoryError: Unable to allocate "
                                      "57.7 GiB for an array", "class": "AssertionError",
                           "cause": "_ArrayMemoryError", "cause_message": "Unable to allocate 57.7 GiB"}
    verdict, _ = transcript.replay(C.check_linear_attention, {}, calls)
    assert verdict.startswith("linear_attention: likely misconception 'quadratic (phi(Q) phi(K)^T) V'"), verdict
    assert "ran out of memory" in verdict
