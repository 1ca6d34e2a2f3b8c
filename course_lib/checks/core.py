"""The assertion machinery every graded test cell uses.

A graded test calls a lesson helper (``checks.attention.check_softmax(softmax)``),
which calls :func:`compare_with_reference` here. It runs the student's function
and the reference on the same cases and, when they differ, runs a list of
*known wrong implementations* (each a named misconception) on the same input.
If the student's output equals one of them, the AssertionError names that
misconception and how to fix it; otherwise it reports where the outputs differ.

Every failure is an ``AssertionError`` (nbgrader scores a test cell 0 when it
raises), never a print. The student's function is called inside
:func:`forbidden_calls`, which makes the reference implementation and the
torch built-in that an exercise asks to re-implement raise :class:`IntegrityError`.

Does NOT cover: static inspection of a submission's source (``course_lib.integrity``)
or sandboxing the kernel (``grading``).
"""
from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib
import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from course_lib.checks import transcript as _transcript

# Comparison primitives are bound at import time, so a submission that later
# monkeypatches np.allclose or builtins cannot change what the checks compute.
_isclose = np.isclose
_asarray = np.asarray
_abs = np.abs
_isnan = np.isnan
_isfinite = np.isfinite
_argmax = np.argmax
_unravel = np.unravel_index
_np_all = np.all
_float64 = np.float64
_isinstance = builtins.isinstance
_len = builtins.len
_AssertionError = builtins.AssertionError

__all__ = [
    "IntegrityError",
    "NotImplementedYet",
    "Case",
    "Wrong",
    "to_numpy",
    "assert_close",
    "assert_shape",
    "assert_finite",
    "call_student",
    "reference",
    "compare_with_reference",
    "forbidden_calls",
]


class IntegrityError(AssertionError):
    """The submission called something the exercise asks it to implement itself."""


class NotImplementedYet(AssertionError):
    """The stub still raises NotImplementedError."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One input to a checked function: positional args, keyword args and a label."""

    label: str
    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Wrong:
    """A known wrong implementation and the message that names its misconception."""

    name: str
    fn: Callable
    message: str


def to_numpy(x: Any) -> np.ndarray:
    """Array view of a numpy array, torch tensor, list or scalar, as float64 where numeric."""
    try:
        import torch

        if _isinstance(x, torch.Tensor):
            x = x.detach().to("cpu")
            if x.is_floating_point():
                x = x.to(torch.float64)
            return x.numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    arr = _asarray(x)
    if arr.dtype.kind in "iuf":
        arr = arr.astype(_float64)
    return arr


def _describe(x: Any) -> str:
    if hasattr(x, "shape"):
        return f"{type(x).__name__} of shape {tuple(x.shape)}"
    return type(x).__name__


def _is_close(a: Any, b: Any, atol: float, rtol: float) -> bool:
    """True when a and b (arrays or tuples of arrays) agree elementwise, NaNs in the same places."""
    if _isinstance(a, (tuple, list)) or _isinstance(b, (tuple, list)):
        if not (_isinstance(a, (tuple, list)) and _isinstance(b, (tuple, list))):
            return False
        return _len(a) == _len(b) and builtins.all(_is_close(x, y, atol, rtol) for x, y in zip(a, b))
    try:
        a, b = to_numpy(a), to_numpy(b)
    except Exception:
        return False
    if a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        return bool(_np_all(a == b))
    return bool(_np_all(_isclose(a, b, atol=atol, rtol=rtol, equal_nan=True)))


def assert_shape(x: Any, shape: Sequence[int], what: str) -> None:
    """Fail with a message naming both shapes when ``x.shape != shape``."""
    if _transcript.is_pending(x) or _transcript.is_pending(shape):
        return
    got = tuple(getattr(x, "shape", ()))
    if got != tuple(shape):
        raise _AssertionError(f"{what}: expected shape {tuple(shape)}, got {got}")


def assert_finite(x: Any, what: str, hint: str = "") -> None:
    """Fail when x holds NaN or inf."""
    arr = to_numpy(x)
    if arr.dtype.kind in "fc" and not bool(_np_all(_isfinite(arr))):
        n_nan = int(_isnan(arr).sum())
        n_inf = int((~_isfinite(arr)).sum()) - n_nan
        raise _AssertionError(f"{what}: contains {n_nan} NaN and {n_inf} inf values. {hint}".strip())


def assert_close(actual: Any, expected: Any, what: str, *, atol: float = 1e-8, rtol: float = 1e-6) -> None:
    """Fail with the shape, the worst element and its two values when arrays differ."""
    if _transcript.is_pending(expected) or _transcript.is_pending(actual):
        return  # record mode: the verifier compares, outside the kernel
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        raise _AssertionError(f"{what}: expected shape {e.shape}, got {a.shape}")
    if _is_close(a, e, atol, rtol):
        return
    diff = _abs(a - e)
    diff = np.where(_isnan(diff), np.inf, diff)
    idx = _unravel(int(_argmax(diff)), diff.shape) if diff.ndim else ()
    raise _AssertionError(
        f"{what}: values differ from the reference (max |difference| {float(diff[idx]):.3g} at index "
        f"{tuple(int(i) for i in idx)}: yours {a[idx]!r}, expected {e[idx]!r}; tolerance atol={atol}, rtol={rtol})"
    )


def _resolve(path: str):
    """'torch.nn.functional.scaled_dot_product_attention' -> (owner object, attribute name)."""
    parts = path.split(".")
    for i in range(_len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:-1]:
            owner = getattr(owner, p)
        return owner, parts[-1]
    raise ValueError(f"cannot resolve {path!r}")


def _tripwire(*args, **kwargs):
    # Its code object is swapped into a forbidden Python function, so every alias
    # of that function (``from course_lib.attention import softmax as f``) trips too.
    # The name below is looked up in the forbidden function's own module globals.
    raise __course_integrity_error__()


@contextlib.contextmanager
def forbidden_calls(paths: Iterable[str], exercise: str):
    """Inside the block, calling any of ``paths`` raises IntegrityError.

    Used while the student's function runs, so a submission that simply calls the
    reference (or the torch built-in the exercise asks to implement) scores 0 with
    a reason instead of full marks. Python functions get their code object swapped
    (catching every alias); built-ins are replaced on their module. Paths whose
    module is not installed are skipped.
    """
    saved_code, saved_attr = [], []
    paths = tuple(paths)
    try:
        for path in paths:
            try:
                owner, attr = _resolve(path)
                original = getattr(owner, attr)
            except (ValueError, AttributeError):
                continue
            message = (
                f"{exercise}: your code calls {path}, which this exercise asks you to implement "
                "yourself. Write the computation with basic array operations; this test scores 0 otherwise."
            )
            code = getattr(original, "__code__", None)
            if code is not None and not code.co_freevars and hasattr(original, "__globals__"):
                # one tripwire per module globals: name every forbidden function of that module
                glb = original.__globals__
                names = [p for p in paths if p.rsplit(".", 1)[0] == path.rsplit(".", 1)[0]]
                module_message = (
                    f"{exercise}: your code calls the course's reference implementation "
                    f"({' or '.join(names)}), which this exercise asks you to write yourself; "
                    "this test scores 0 otherwise."
                )
                saved_code.append((original, code, glb.get("__course_integrity_error__")))
                glb["__course_integrity_error__"] = lambda m=module_message: IntegrityError(m)
                original.__code__ = _tripwire.__code__
            else:
                def tripwire(*args, _m=message, **kwargs):
                    raise IntegrityError(_m)

                saved_attr.append((owner, attr, original))
                setattr(owner, attr, tripwire)
        yield
    finally:
        for owner, attr, original in reversed(saved_attr):
            setattr(owner, attr, original)
        for fn, code, prev in reversed(saved_code):
            fn.__code__ = code
            if prev is None:
                fn.__globals__.pop("__course_integrity_error__", None)
            else:  # pragma: no cover - nested use
                fn.__globals__["__course_integrity_error__"] = prev


def reference(fn: Callable, *args, **kwargs):
    """The reference's value on one input: the only way a check may call course_lib's references.

    Checks never call ``course_lib.<topic>`` functions directly: when grading, the reference
    is computed by the trusted verifier outside the student's kernel, and in the students'
    bundle it comes from stored outputs. This indirection is what makes both possible.
    """
    return _transcript.reference_value(fn, args, kwargs)


def call_student(fn: Callable, case: Case, exercise: str, forbidden: Iterable[str] = (),
                 observe: Callable | None = None):
    """Call the student's function on one case, turning its exceptions into clear failures.

    ``observe``: for a function that returns something other than plain data (a module,
    a trained model), a function of the output that returns plain data (numbers, strings,
    arrays, tensors and tuples/lists/dicts of them); the check then works on that.
    """
    if not callable(fn):
        raise _AssertionError(f"{exercise}: expected a function, got {type(fn).__name__}")
    return _transcript.student_call(lambda: _call_student_live(fn, case, exercise, forbidden, observe),
                                    exercise, case.label, case.args, case.kwargs)


def _call_student_live(fn: Callable, case: Case, exercise: str, forbidden: Iterable[str], observe):
    try:
        with forbidden_calls(forbidden, exercise):
            out = fn(*case.args, **case.kwargs)
            return out if observe is None else observe(out)
    except NotImplementedError:
        raise NotImplementedYet(
            f"{exercise}: not implemented yet (the function still raises NotImplementedError). "
            "Replace the `raise NotImplementedError()` line with your solution."
        ) from None
    except IntegrityError:
        raise
    except _AssertionError:
        raise
    except Exception as err:
        raise _AssertionError(
            f"{exercise}: your function raised {type(err).__name__}: {err} on input '{case.label}' "
            f"({', '.join(_describe(a) for a in case.args)})"
        ) from err


def compare_with_reference(
    student: Callable,
    reference: Callable,
    cases: Sequence[Case],
    *,
    exercise: str,
    wrongs: Sequence[Wrong] = (),
    forbidden: Iterable[str] = (),
    atol: float = 1e-8,
    rtol: float = 1e-6,
    output_names: Sequence[str] | None = None,
) -> None:
    """Assert that ``student`` equals ``reference`` on every case.

    On a mismatch, each ``Wrong`` is run on the same case; if the student's output
    equals a wrong implementation's output, the AssertionError carries that
    misconception's message. Outputs may be arrays, tensors or tuples of them.
    """
    if student is reference:
        raise IntegrityError(
            f"{exercise}: your function is the reference implementation from course_lib itself; "
            "write your own."
        )
    forbidden = tuple(forbidden)
    for case in cases:
        expected = _transcript.reference_value(reference, case.args, case.kwargs)
        try:
            got = call_student(student, case, exercise, forbidden)
        except (NotImplementedYet, IntegrityError):
            raise
        except _AssertionError as failure:
            cause = failure.__cause__
            if cause is not None:
                _name_crash(cause, case, wrongs, exercise)
            raise
        if _transcript.is_pending(expected) or _is_close(got, expected, atol, rtol):
            continue  # record mode: the verifier compares, outside the kernel
        for wrong in wrongs:
            try:
                wrong_out = wrong.fn(*case.args, **case.kwargs)
            except Exception:
                continue
            if not _is_close(wrong_out, expected, atol, rtol) and _is_close(got, wrong_out, atol, rtol):
                raise _AssertionError(f"{exercise}: likely misconception '{wrong.name}': {wrong.message} "
                                      f"(input: {case.label})")
        _explain_mismatch(got, expected, exercise, case, atol, rtol, output_names)


def _name_crash(cause: BaseException, case: Case, wrongs: Sequence[Wrong], exercise: str) -> None:
    """The student's code raised: if a known wrong implementation raises the same way, name it."""
    for wrong in wrongs:
        try:
            wrong.fn(*case.args, **case.kwargs)
        except Exception as err:
            if type(err) is type(cause):
                raise _AssertionError(
                    f"{exercise}: likely misconception '{wrong.name}': {wrong.message} (your code raised "
                    f"{type(cause).__name__}: {cause} on input '{case.label}')"
                ) from cause


def _explain_mismatch(got, expected, exercise, case, atol, rtol, output_names) -> None:
    where = f"{exercise} on input '{case.label}'"
    if _isinstance(expected, tuple):
        if not _isinstance(got, (tuple, list)) or _len(got) != _len(expected):
            names = output_names or [f"output {i}" for i in range(_len(expected))]
            raise _AssertionError(
                f"{where}: expected a tuple of {_len(expected)} values ({', '.join(names)}), got {_describe(got)}"
            )
        names = output_names or [f"output {i}" for i in range(_len(expected))]
        for name, g, e in zip(names, got, expected):
            assert_close(g, e, f"{where}, {name}", atol=atol, rtol=rtol)
    else:
        assert_close(got, expected, where, atol=atol, rtol=rtol)
    # close elementwise but _is_close said no: shapes/types, reported by assert_close above
    raise _AssertionError(f"{where}: output does not match the reference")  # pragma: no cover


def seeded(seed: int) -> np.random.Generator:
    """The one way checks make random inputs: an explicit numpy Generator."""
    return np.random.default_rng(seed)


def isclose_scalar(a: float, b: float, tol: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
