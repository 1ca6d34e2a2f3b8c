"""Checks for lesson 07 (efficient attention): elu+1, linear attention, its causal and
recurrent forms, and the FAVOR+ positive random features.

Each ``check_*`` compares the student's numpy function with ``course_lib.efficient``
on fixed and seeded inputs (always passing the feature map explicitly, so one
exercise never fails because of another), checks properties, and names these
misconceptions when it sees them:

* ``elu without +1``            elu(x) alone: features can be negative, the normaliser can vanish
* ``relu feature map``          max(x, 0) (+1): not elu, zero/constant for negative inputs
* ``x + 1 everywhere``          the exp branch for x <= 0 is missing (negative features)
* ``exp feature map``           exp(x) for every x (positive, but not elu + 1)
* ``forgot the normaliser``     phi(Q)(phi(K)^T V) without dividing by phi(Q)(phi(K)^T 1)
* ``no feature map``            raw q, k used instead of phi(q), phi(k)
* ``ignores feature_map``       elu+1 hard-coded although another feature map was passed
* ``quadratic (phi(Q) phi(K)^T) V``  the (L, L) matrix is built. Where the verdict counts
                                (grading: record and replay modes) no memory figure is taken
                                from the kernel: the function runs on a sequence so long that an
                                (L, L) array of even one byte per entry exceeds the address space
                                the sandbox gives the whole kernel (``RLIMIT_AS``, set by
                                ``grading.kernel.launcher`` before the kernel starts; the kernel can only
                                lower it), and the verifier checks the recorded output against the
                                reference: a quadratic form cannot produce it (MemoryError), a
                                linear one needs a few MB. See :func:`assert_not_quadratic`.
                                In JupyterLab (live) and the students' bundle (stored) the function
                                runs on L = 3000 under tracemalloc instead (the student's own
                                kernel; nothing is graded there), failing when the peak exceeds
                                L^2 / 2 bytes.
* ``causal form sees future keys``  the non-causal sums used for every position
* ``causal form skips the current key``  prefix sums that stop at j < i (row 0 is 0/0)
* ``prefix sum over the wrong axis``  cumulative sum over features instead of positions
* ``read before update``        the recurrent step answers from the old state
* ``state overwritten``         the recurrent step replaces the state instead of adding to it
* ``state modified in place``   the recurrent step changes the arrays it was given
* ``forgot exp(-|x|^2/2)``      phi(x) = exp(w x) / sqrt(m): estimates exp(x.y + |x|^2/2 + |y|^2/2)
* ``|x|^2 not halved``          exp(w x - |x|^2): estimates exp(x.y - |x|^2/2 - |y|^2/2)
* ``forgot 1/sqrt(m)`` / ``divided by m``   the estimate grows (shrinks) with m
* ``x @ w instead of x @ w.T``  the projection multiplied the wrong way round

What this does NOT catch: one that loops over queries or over blocks of keys (O(L^2)
time, O(L) memory: it passes, slowly); in live mode only, a function that converts to
torch inside (tracemalloc does not see torch's allocator; the graded run's address-space
bound sees every allocator); in graded runs, an (L, L) mask packed to one bit per entry
(np.packbits: L^2 / 8 bytes, 0.9 GiB at L = 88,000) fits the bound, a float (L, L) matrix
never does. The graded bound assumes the kernel runs in the sandbox
(``python -m grading preflight``) with no GPU (bubblewrap's ``--dev /dev`` shows none):
GPU memory is outside RLIMIT_AS. ``hidden=True`` selects other, larger inputs for the
hidden tests.

The hidden cases, the known wrong answers behind these names and the exercises' declarations are the judge's
(``course_lib/judge/efficient.py``), which the students' and the grading kernel's editions leave out.
"""
from __future__ import annotations

import dataclasses
import math
import os
import tracemalloc

import numpy as np

from course_lib import efficient as ref
from course_lib.checks import core
from course_lib.checks.core import (
    forbid,
    Case,
    IntegrityError,
    assert_close,
    assert_finite,
    assert_shape,
    call_student,
    compare_with_reference,
    reference,
    seeded,
)
from course_lib.checks import core as _core
from course_lib.checks import transcript as _transcript
from course_lib.checks.transcript import is_pending

__all__ = [
    "check_elu_feature_map",
    "check_linear_attention",
    "check_causal_linear_attention",
    "check_linear_attention_step",
    "check_positive_random_features",
    "assert_not_quadratic",
    "sandbox_memory_bytes",
    "bound_length"
]


_REFERENCES = ("elu_feature_map", "elu_feature_map_torch", "linear_attention", "causal_linear_attention",
               "linear_attention_step", "recurrent_linear_attention", "quadratic_linear_attention",
               "attention_from_features_torch", "prefix_sum_causal_attention_torch",
               "chunked_causal_attention_torch", "linear_attention_torch", "positive_random_features",
               "trig_random_features", "softmax_kernel_estimate", "favor_features_torch", "favor_attention_torch",
               "_causal_chunks")

FORBIDDEN = tuple(f"course_lib.efficient.{name}" for name in _REFERENCES) + forbid(
    # the library's linear-attention layer computes phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1) itself: with identity
    # projections (and torch's elu replaced by phi - 1) it is lesson 07's exercise under another name
    "course_lib.efficient.EfficientMultiHeadAttention.forward",
    "torch.nn.functional.elu",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
)


QUADRATIC_NAME = "quadratic (phi(Q) phi(K)^T) V"


def _softplus(x):
    """Another positive feature map, so a function that ignores `feature_map` is seen."""
    x = np.asarray(x, dtype=np.float64)
    return np.logaddexp(0.0, x)


def _feature_map_16(w):
    """A positive feature map with as many outputs as ``w`` has rows (16 here, more than d): softplus of a
    projection. It stands for FAVOR+'s features in the linear-attention checks (what matters there is a map
    that changes the width) without being lesson 07's positive_random_features under another name."""
    w = np.asarray(w, dtype=np.float64)

    def feature_map(x):
        return np.logaddexp(0.0, np.asarray(x, dtype=np.float64) @ w.T)

    feature_map.__name__ = "softplus_projection_map"
    return feature_map


# ---------------------------------------------------------------- inputs
def _qkv(rng, T, S, d, dv, lead=(), scale=1.0):
    return (rng.normal(size=lead + (T, d)) * scale, rng.normal(size=lead + (S, d)) * scale,
            rng.normal(size=lead + (S, dv)))


def linear_cases_from(rng, shapes, T: int, projection_seed: int, more=None) -> list[Case]:
    """The (causal_)linear_attention cases drawn from ``rng``: one per (T, S, d, dv, leading dims) of ``shapes`` with
    softplus features; then one (T, 3) q, k, v twice, with softplus and with 16 features per token (softplus of a
    projection seeded ``projection_seed``); then ``more(rng)``'s."""
    cases = []
    for t, s, d, dv, lead in shapes:
        q, k, v = _qkv(rng, t, s, d, dv, lead, scale=1.5)
        cases.append(
            Case(f"random q{q.shape}, k{k.shape}, v{v.shape}, softplus features", (q, k, v), {"feature_map": _softplus})
        )
    q, k, v = _qkv(rng, T, T, 3, 2)
    cases.append(Case(f"q{q.shape} with feature_map=softplus", (q, k, v), {"feature_map": _softplus}))
    w = np.asarray(ref.draw_projection(16, 3, seed=projection_seed), dtype=np.float64)
    cases.append(
        Case(
            f"q{q.shape} with 16 features per token (softplus of a projection, m=16 > d)",
            (q, k, v),
            {"feature_map": _feature_map_16(w)},
        )
    )
    if more is not None:
        cases += more(rng)
    return cases


# (T, S, d, dv, leading dims) of the visible cases, non-causal (False) and causal (True)
_LINEAR_SHAPES = {False: [(3, 5, 4, 2, ()), (4, 4, 3, 3, ())], True: [(4, 4, 3, 2, ()), (6, 6, 5, 3, ())]}


def _linear_cases(causal: bool) -> list[Case]:
    def batched(rng) -> list[Case]:
        q, k, v = _qkv(rng, 4, 4 if causal else 6, 3, 2, (2,), scale=1.5)
        return [Case(f"random q{q.shape}, k{k.shape}, v{v.shape}, softplus features (a leading batch dim, as "
                     "the docstring's (..., T, d) allows)", (q, k, v), {"feature_map": _softplus})]

    return linear_cases_from(seeded(7), _LINEAR_SHAPES[causal], 5, 7, batched)


def _native(x):
    """An array in the student's own dtype (so tolerances follow it): numpy as is, torch via .numpy()."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _with_peak_memory(student):
    """``student`` wrapped so that its result is (output, peak bytes traced during the call): the
    measurement is made in the kernel, around the student's call, and recorded with its output."""
    def measured(*args, **kwargs):
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            out = student(*args, **kwargs)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            if not was_tracing:
                tracemalloc.stop()
        return out, int(peak - before)
    return measured


_DEFAULT_SANDBOX_MB = 6144  # grading.kernel.launcher's default for COURSE_SANDBOX_MEMORY_MB


def sandbox_memory_bytes() -> int:
    """The address space the grading sandbox gives one kernel, as the grader configures it.

    ``grading.kernel.launcher`` sets ``RLIMIT_AS`` (soft and hard) to ``COURSE_SANDBOX_MEMORY_MB``
    MiB before it starts the kernel; the verifier reads the same setting from its own
    environment, never from the kernel.
    """
    try:
        mb = int(os.environ.get("COURSE_SANDBOX_MEMORY_MB", _DEFAULT_SANDBOX_MB))
    except ValueError:
        mb = _DEFAULT_SANDBOX_MB
    return max(mb, 1) * 2 ** 20


def _kernel_memory_bytes() -> int:
    """Record mode: this kernel's hard address-space limit (what the sandbox set; a process can lower
    its hard limit, never raise it), or the configured bound where the kernel has none (not sandboxed)."""
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    except (ImportError, OSError, ValueError):  # pragma: no cover - no RLIMIT_AS on this platform
        return sandbox_memory_bytes()
    return sandbox_memory_bytes() if hard == resource.RLIM_INFINITY or hard <= 0 else int(hard)


def bound_length(limit_bytes: int) -> int:
    """The sequence length whose (L, L) array of ONE byte per entry (a boolean mask; float64 is 8x)
    is at least 1.2x ``limit_bytes``, rounded up to a multiple of 1000.

    >>> bound_length(6144 * 2 ** 20)   # the sandbox's default 6 GiB: L^2 = 7.7e9 bytes
    88000
    """
    return 1000 * math.ceil(math.sqrt(1.2 * limit_bytes) / 1000)


_OUT_OF_MEMORY = ("MemoryError", "Unable to allocate", "can't allocate memory", "not enough memory",
                  "out of memory")


def _ran_out_of_memory(failure: AssertionError) -> bool:
    cause = failure.__cause__
    if isinstance(cause, MemoryError):
        return True
    return any(word in str(failure) for word in _OUT_OF_MEMORY)


def _quadratic_message(exercise: str, causal: bool, what: str) -> str:
    return (f"{exercise}: likely misconception '{QUADRATIC_NAME}': {what} Linear attention never forms the (L, L) "
            "matrix phi(Q) phi(K)^T: "
            + ("multiply phi(K)^T V first (an r x d_v matrix) and then phi(Q) by it." if not causal else
               "use cumulative sums over positions of phi(k_j) v_j^T (an (L, r, d_v) array) and of phi(k_j), "
               "with no (L, L) mask."))


def assert_not_quadratic(student, exercise: str, *, causal: bool, L: int = 3000, d: int = 4, dv: int = 3,
                         seed: int = 17) -> None:
    """Fail, naming the quadratic misconception, when ``student`` builds an (L, L) array.

    Graded (record and replay modes): nothing the kernel says about its memory is used.
    The function runs on a sequence of ``bound_length(limit)`` tokens, where ``limit`` is the
    address space of the whole grading kernel (the sandbox's ``RLIMIT_AS``): an (L, L) array
    of one byte per entry or more does not fit there, so a quadratic form raises MemoryError, while the linear
    forms need O(L r d_v) bytes (a few MB at the default 6 GiB, L = 88,000; d_v = 1 keeps the
    recorded output at 0.7 MB). The verifier regenerates the same inputs from the grader's
    own setting (:func:`sandbox_memory_bytes`; a kernel that ran under another bound
    recorded other inputs and fails) and compares the recorded output with the reference.
    The kernel cannot raise its hard limit, so a right output on L tokens in the record was
    computed by code that never held an (L, L) array.

    Live (JupyterLab, pytest) and stored (the students' bundle): the function runs on
    ``L`` tokens under tracemalloc (numpy reports every array it allocates there) and the
    peak traced during the call is compared with L^2 / 2 bytes: an (L, L) float64 matrix
    needs 8 L^2, a boolean (L, L) mask L^2, the linear forms O(L r d_v) (about 0.3 MB).
    Also checks the long output against the reference.
    """
    if _transcript.mode() in ("record", "replay"):
        _assert_fits_the_sandbox(student, exercise, causal=causal, d=d, seed=seed)
        return
    rng = seeded(seed)
    q, k, v = _qkv(rng, L, L, d, dv)
    case = Case(f"a long sequence, L={L}", (q, k, v), {"feature_map": _softplus})
    result = call_student(_with_peak_memory(student), case, exercise, FORBIDDEN)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise AssertionError(f"{exercise}: could not observe the output on '{case.label}'")
    out, used = result
    limit = L * L // 2
    if used > limit:
        raise AssertionError(_quadratic_message(
            exercise, causal, f"on a sequence of L={L} tokens your function allocated {used / 1e6:.0f} MB at its "
            f"peak, more than an L x L array needs ({L * L * 8 / 1e6:.0f} MB in float64)."))
    expected = reference(ref.causal_linear_attention if causal else ref.linear_attention, q, k, v, feature_map=_softplus)
    assert_close(out, expected, f"{exercise} on '{case.label}'")


def _assert_fits_the_sandbox(student, exercise: str, *, causal: bool, d: int, seed: int, dv: int = 1) -> None:
    # the kernel's own bound; the grader's setting in the verifier and when the grader writes the hidden inputs
    limit = _kernel_memory_bytes() if _transcript.mode() == "record" and _core._FEED.capturing is None \
        else sandbox_memory_bytes()
    L = bound_length(limit)
    rng = seeded(seed)
    q, k, v = _qkv(rng, L, L, d, dv)
    case = Case(f"a long sequence, L={L:,} (an L x L array does not fit in the grading kernel's "
                f"{limit / 2 ** 30:.1f} GiB)", (q, k, v), {"feature_map": _softplus})
    try:
        out = call_student(student, case, exercise, FORBIDDEN)
    except AssertionError as failure:
        if _ran_out_of_memory(failure):
            raise AssertionError(_quadratic_message(
                exercise, causal, f"on a sequence of L={L:,} tokens your function ran out of memory (the grading "
                f"kernel has {limit / 2 ** 30:.1f} GiB in all; an L x L array needs {L * L / 2 ** 30:.1f} GiB even at "
                f"one byte per entry, {8 * L * L / 2 ** 30:.0f} GiB in float64).")) from None
        raise
    expected = reference(ref.causal_linear_attention if causal else ref.linear_attention, q, k, v, feature_map=_softplus)
    assert_close(_native(out), expected, f"{exercise} on '{case.label}'")


# ---------------------------------------------------------------- checks
def elu_cases_from(rng) -> list[Case]:
    """The elu_feature_map cases every test has (the random one drawn from ``rng``)."""
    return [Case("[-2, -0.5, 0, 0.5, 2]", (np.array([-2.0, -0.5, 0.0, 0.5, 2.0]),)),
            Case("a (3, 4) array of random values", (rng.normal(size=(3, 4)) * 2,))]


def _elu_cases() -> list[Case]:
    return elu_cases_from(seeded(17))


@core.graded
def check_elu_feature_map(student, hidden: bool = False) -> None:
    """Student ``elu_feature_map(x)`` is elu(x) + 1: x + 1 for x > 0, exp(x) otherwise, always > 0."""
    exercise = "elu_feature_map"
    cases = core.hidden_part(__name__).elu_cases() if hidden else _elu_cases()
    compare_with_reference(student, ref.elu_feature_map, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "ELU"), forbidden=FORBIDDEN)
    x = np.linspace(-30.0, 3.0, 67)
    out = _native(call_student(student, Case("linspace(-30, 3)", (x,)), exercise, FORBIDDEN))
    assert_shape(out, x.shape, f"{exercise}: the feature map is elementwise, the output shape")
    if not (out > 0).all():
        raise AssertionError(f"{exercise}: some features are <= 0 (at x = {x[out <= 0][:3]}); elu(x) + 1 "
                             "is strictly positive, which keeps every similarity phi(q).phi(k) > 0")


@core.graded
def check_linear_attention(student, hidden: bool = False) -> None:
    """Student ``linear_attention(q, k, v, feature_map)`` equals phi(Q)(phi(K)^T V) / normaliser,
    takes any feature map, and never builds the (T, S) matrix."""
    exercise = "linear_attention"
    cases = core.hidden_part(__name__).linear_cases(causal=False) if hidden else _linear_cases(causal=False)
    compare_with_reference(student, ref.linear_attention, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "LINEAR"), forbidden=FORBIDDEN)
    # keys and values permuted together: the output must not change
    judge = core.hidden_part(__name__) if hidden else None
    seed, (length, memory_seed) = judge.LINEAR_PROPERTIES if hidden else (27, (3000, 27))
    rng = seeded(seed)
    q, k, v = _qkv(rng, 4, 6, 3, 2)
    perm = rng.permutation(6)
    a = _native(call_student(student, Case("q, k, v", (q, k, v), {"feature_map": _softplus}), exercise, FORBIDDEN))
    b = _native(call_student(student, Case("keys and values permuted", (q, k[perm], v[perm]),
                                            {"feature_map": _softplus}), exercise, FORBIDDEN))
    assert_close(b, a, f"{exercise}: permuting keys together with their values must not change the output "
                       "(non-causal attention averages over a set of keys)")
    assert_not_quadratic(student, exercise, causal=False, L=length, seed=memory_seed)


@core.graded
def check_causal_linear_attention(student, hidden: bool = False) -> None:
    """Student ``causal_linear_attention(q, k, v, feature_map)`` equals masked linear attention
    (position i sees keys 0..i), by prefix sums, without an (L, L) matrix."""
    exercise = "causal_linear_attention"
    cases = core.hidden_part(__name__).linear_cases(causal=True) if hidden else _linear_cases(causal=True)
    compare_with_reference(student, ref.causal_linear_attention, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "CAUSAL"), forbidden=FORBIDDEN)
    # changing future keys and values must not change earlier outputs
    judge = core.hidden_part(__name__) if hidden else None
    seed, (length, memory_seed) = judge.CAUSAL_PROPERTIES if hidden else (47, (3000, 47))
    rng = seeded(seed)
    T = 8
    q, k, v = _qkv(rng, T, T, 3, 2)
    k2, v2 = k.copy(), v.copy()
    k2[5:] = rng.normal(size=(T - 5, 3)) * 3
    v2[5:] += 5.0
    a = _native(call_student(student, Case("q, k, v", (q, k, v), {"feature_map": _softplus}), exercise, FORBIDDEN))
    b = _native(call_student(student, Case("later keys changed", (q, k2, v2), {"feature_map": _softplus}),
                              exercise, FORBIDDEN))
    assert_close(b[:5], a[:5], f"{exercise}: outputs 0..4 changed when only keys/values 5..7 changed; likely "
                               "misconception 'causal form sees future keys'")
    assert_not_quadratic(student, exercise, causal=True, L=length, seed=memory_seed)


def _flat_step(fn, exercise):
    """(out_t, (s, z)) -> (out_t, s, z), so each part is compared and reported on its own."""
    def flat(*args, **kwargs):
        result = fn(*args, **kwargs)
        try:
            out_t, (s, z) = result
        except (TypeError, ValueError):
            raise AssertionError(f"{exercise}: must return (out_t, (s, z)): the output and the new state as a "
                                 f"pair, got {type(result).__name__}") from None
        return out_t, s, z
    return flat


def state_case(rng, label: str, d: int, dv: int, lead: tuple = ()) -> Case:
    """A linear_attention_step case whose state (s, z) (positive, as after some tokens) and token q_t, k_t, v_t (each
    with leading dims ``lead``) are drawn from ``rng``; softplus features (r = d)."""
    s = np.abs(rng.normal(size=lead + (d, dv))) + 0.5
    z = np.abs(rng.normal(size=lead + (d,))) + 1.0
    return Case(label, ((s, z), rng.normal(size=lead + (d,)), rng.normal(size=lead + (d,)),
                        rng.normal(size=lead + (dv,))), {"feature_map": _softplus})


def step_cases_from(rng, d: int, dv: int) -> tuple[list[Case], object]:
    """(The linear_attention_step cases every test has, of sizes d and dv, drawn from ``rng``; ``rng``, to draw
    more from)."""
    cases = [Case("the first token (state=None)", (None, rng.normal(size=d), rng.normal(size=d),
                                                   rng.normal(size=dv)), {"feature_map": _softplus})]
    cases.append(state_case(rng, "a state (s, z) after some tokens", d, dv))
    return cases, rng


def _step_cases() -> tuple[list[Case], object]:
    return step_cases_from(seeded(67), 3, 2)


@core.graded
def check_linear_attention_step(student, hidden: bool = False) -> None:
    """Student ``linear_attention_step(state, q_t, k_t, v_t, feature_map)`` -> (out_t, (s, z)):
    adds token t to the state, then reads; leaves its input state unchanged; run over a
    sequence it equals causal linear attention."""
    exercise = "linear_attention_step"
    if hidden:
        cases, rng, T = core.hidden_part(__name__).step_cases()
    else:
        (cases, rng), T = _step_cases(), 5
    d, dv = len(cases[0].args[1]), len(cases[0].args[3])
    s0, z0 = cases[1].args[0]
    s_pristine, z_pristine = s0.copy(), z0.copy()
    if student is ref.linear_attention_step:
        raise IntegrityError(f"{exercise}: your function is the course's reference implementation; write your own")
    compare_with_reference(_flat_step(student, exercise), _flat_step(ref.linear_attention_step, exercise), cases,
                           exercise=exercise, wrongs=[dataclasses.replace(w, fn=_flat_step(w.fn, exercise))
                                                      for w in core.wrongs(__name__, "STEP")],
                           forbidden=FORBIDDEN, output_names=("out_t", "s", "z"))
    s0, z0 = s_pristine, z_pristine
    # the input state must not change (core's guard compares the arrays after the call)
    call_student(student, Case("a state to keep", ((s0.copy(), z0.copy()), cases[1].args[1], cases[1].args[2],
                                                   cases[1].args[3]), {"feature_map": _softplus}), exercise, FORBIDDEN)
    # run over a whole sequence: equals causal linear attention
    q, k, v = _qkv(rng, T, T, d, dv)
    state, outs = None, []
    for t in range(T):
        result = call_student(student, Case(f"token {t} of a sequence", (state, q[t], k[t], v[t]),
                                            {"feature_map": _softplus}), exercise, FORBIDDEN)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise AssertionError(f"{exercise}: must return (out_t, (s, z)), got {type(result).__name__}")
        out_t, state = result
        outs.append(_native(out_t))
    expected = reference(ref.causal_linear_attention, q, k, v, feature_map=_softplus)
    assert_close(np.stack(outs), expected, f"{exercise}: running the step over a sequence of {T} tokens must "
                                           "give causal linear attention")


def stack_case(rng, draws: int, note: str = "") -> Case:
    """x(3, 4) and a stack of ``draws`` projections w(draws, 5, 4), drawn from ``rng`` (w's leading dims
    broadcast with x's)."""
    return Case(f"x(3, 4) with a stack of {draws} draws w({draws}, 5, 4){note}",
                (rng.normal(size=(3, 4)), rng.normal(size=(draws, 5, 4))))


def features_cases_from(rng, sizes, square_seed: int) -> list[Case]:
    """One case per (L, d, m) of ``sizes`` (x and the seed of w drawn from ``rng``), a batch with iid w, and a square
    w (seeded ``square_seed``)."""
    cases = []
    for L, d, m in sizes:
        x = rng.normal(size=(L, d)) * 0.7
        w = np.asarray(ref.draw_projection(m, d, seed=int(rng.integers(1 << 30))), dtype=np.float64)
        cases.append(Case(f"x({L}, {d}), w({m}, {d})", (x, w)))
    x = rng.normal(size=(2, 3, 4))
    w = rng.normal(size=(6, 4))
    cases.append(Case("a batch x(2, 3, 4), iid w(6, 4)", (x, w)))
    # m = d: w and w.T have one shape, so x @ w gives (wrong) numbers where the other inputs crash it
    square = seeded(square_seed)
    cases.append(Case("x(3, 4), w(4, 4) (as many features as dimensions)",
                      (square.normal(size=(3, 4)) * 0.7, square.normal(size=(4, 4)))))
    return cases


def _features_cases() -> tuple[list[Case], object, int]:
    rng = seeded(77)
    cases = features_cases_from(rng, [(3, 4, 8), (5, 3, 5)], 777)
    cases.append(stack_case(seeded(78), 3, " (the docstring's w (..., m, d): leading dims broadcast with x's)"))
    return cases, rng, 9


@core.graded
def check_positive_random_features(student, hidden: bool = False) -> None:
    """Student ``positive_random_features(x, w)`` is exp(w x - |x|^2/2) / sqrt(m): positive,
    shape (..., L, m), and phi(x).phi(y) estimates exp(x.y) without bias."""
    exercise = "positive_random_features"
    cases, rng, iid_seed = core.hidden_part(__name__).features_cases() if hidden else _features_cases()
    compare_with_reference(student, ref.positive_random_features, cases, exercise=exercise,
                           wrongs=core.wrongs(__name__, "FEATURES"), forbidden=FORBIDDEN)
    out = _native(call_student(student, cases[0], exercise, FORBIDDEN))
    assert_finite(out, exercise)
    if not (out > 0).all():
        raise AssertionError(f"{exercise}: positive random features must all be > 0 (they are exponentials)")
    # unbiased: with many iid projections phi(x).phi(y) -> exp(x.y); the error's sd is sqrt(closed-form MSE)
    d, m = 4, 20_000
    x, y = rng.normal(size=d) * 0.3, rng.normal(size=d) * 0.3
    w_many = np.asarray(ref.draw_projection(m, d, orthogonal=False, seed=iid_seed), dtype=np.float64)
    f = _native(call_student(student, Case(f"x and y with m={m} iid projections", (np.stack([x, y]), w_many)),
                              exercise, FORBIDDEN))
    estimate = float(f[0] @ f[1])
    target = math.exp(float(x @ y))
    mse = reference(ref.positive_features_mse, x, y, m)
    if is_pending(mse):
        return  # record mode: the verifier compares, outside the kernel
    sd = math.sqrt(mse)
    if abs(estimate - target) > 6 * sd:
        raise AssertionError(f"{exercise}: with m={m} random projections phi(x).phi(y) = {estimate:.4f}, but it "
                             f"should estimate exp(x.y) = {target:.4f} without bias (allowed: 6 sd = {6 * sd:.4f})")
