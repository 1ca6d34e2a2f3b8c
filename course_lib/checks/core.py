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
import hashlib
import importlib
import math
import os
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from course_lib.checks import transcript as _transcript
from course_lib.arrays import to_numpy
from course_lib.checks.errors import IntegrityError, NotImplementedYet

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
    "Exact",
    "forbidden_calls",
    "forbid",
    "BUILTIN_DOORS",
    "tolerance",
    "dtype_problem",
    "inputs_changed",
    "assert_raises",
    "leading_dims_cases",
    "compare_over_leading_dims",
    "run_hidden_from_feed",
    "HIDDEN_NOT_SHIPPED",
    "judge",
    "hidden_part",
    "wrongs",
    "graded",
]




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
    variant: str = ""  # tells apart implementations of one misconception that share its message too

    @property
    def key(self) -> str:
        """The stored values' key: the name and a digest of the message and the variant (variants share a name,
        and some the message too: each needs its own stored outputs). Never the implementation: the students'
        edition replaces it by a stub, and its stored outputs must be found under the same key."""
        text = self.message if not self.variant else f"{self.message}\n{self.variant}"
        return f"{self.name} #{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def _describe(x: Any) -> str:
    if hasattr(x, "shape"):
        return f"{type(x).__name__} of shape {tuple(x.shape)}"
    return type(x).__name__


# ---------------------------------------------------------------- tolerances: the one rule
# A floating answer is compared in ITS OWN precision, so a correct answer computed in
# float32 (torch's default, or np.float32 inputs) passes, and so does another order of
# operations (einsum, a loop, another valid formula):
#     float64 / complex128:  rtol = 1e-9, atol = 1e-9 * s
#     float32 / complex64:   rtol = 1e-5, atol = 1e-5 * s       (about 100 float32 ulps)
#     float16 / bfloat16:    rtol = 1e-2, atol = 1e-2 * s       (only where the exercise asks for it)
# with s = max(1, largest finite |expected|), so the absolute part scales with the answer.
# Integers, booleans and strings are compared exactly. A dtype the exercise does not allow
# (half precision or integers where the reference is floating) fails on its own, with a
# message that says so (:func:`dtype_problem`); it is never "close enough".
# Checks pass atol/rtol only where the computation is inherently approximate (training,
# random features); then those values are used as given.
_RTOL = {8: 1e-9, 16: 1e-9, 4: 1e-5, 2: 1e-2}  # by itemsize of the (real) float type


def _float_bits(x: Any) -> int | None:
    """Itemsize of x's real floating type (8 for float64, 4 for float32, 2 for half), else None."""
    try:
        import torch

        if _isinstance(x, torch.Tensor):
            if x.is_complex():
                return {torch.complex64: 4, torch.complex128: 8}.get(x.dtype, 8)
            return {torch.float64: 8, torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}.get(x.dtype)
    except ImportError:  # pragma: no cover
        pass
    if _isinstance(x, float):
        return 8
    if _isinstance(x, (np.ndarray, np.generic)):
        kind, size = x.dtype.kind, x.dtype.itemsize
        return size if kind == "f" else size // 2 if kind == "c" else None
    return None


def tolerance(actual: Any, expected: Any = None) -> tuple[float, float]:
    """(atol, rtol) for comparing ``actual`` (the student's value) with ``expected``: the rule above."""
    bits = _float_bits(actual)
    rtol = _RTOL.get(bits, 1e-9)
    scale = 1.0
    if expected is not None:
        try:
            e = to_numpy(expected)
            if e.dtype.kind in "fc" and e.size:
                finite = _abs(e[_isfinite(e)])
                if finite.size:
                    scale = builtins.max(1.0, float(finite.max()))
        except Exception:
            pass
    return rtol * scale, rtol


def dtype_problem(actual: Any, expected: Any) -> str | None:
    """What is wrong with the student's dtype, or None: half precision or integers where the
    reference is floating (float32 and float64 are both accepted for a floating answer)."""
    if _transcript.is_pending(expected):
        return None
    if _isinstance(expected, (tuple, list)) and _isinstance(actual, (tuple, list)):
        for a, e in zip(actual, expected):
            problem = dtype_problem(a, e)
            if problem:
                return problem
        return None
    e_bits = _float_bits(expected)
    if e_bits is None or not hasattr(actual, "dtype"):
        return None
    a_bits = _float_bits(actual)
    if a_bits is None:
        return (f"you returned dtype {actual.dtype} (integers or booleans) where the answer is floating point; "
                "do not round or cast the result")
    if a_bits < 4 and e_bits >= 4:
        return (f"you returned half precision ({actual.dtype}), which loses about 3 of the 7 significant digits "
                "this answer needs; compute in float32 or float64")
    return None


def assert_promised_dtype(x: Any, dtype: str, exercise: str, where: str, why: str = "") -> None:
    """A docstring's promise of the output's dtype (``"float64"``): ``x`` must be a numpy array of exactly it.

    The comparisons accept float32 for a floating answer (:func:`dtype_problem`); where the docstring names
    the dtype, the answer keeps that promise too (issue 34: float32 where float64 is documented)."""
    got = getattr(x, "dtype", None)
    if not (_isinstance(x, np.ndarray) and str(got) == dtype):
        kind = f"{type(x).__module__}.{type(x).__name__}" if not _isinstance(x, np.ndarray) else "a numpy array"
        raise _AssertionError(f"{exercise} on input '{where}': the docstring promises a numpy array of dtype "
                              f"{dtype}; you returned {kind}{f' of dtype {got}' if got is not None else ''}."
                              f"{' ' + why if why else ''}")


def _is_close(a: Any, b: Any, atol: float | None, rtol: float | None) -> bool:
    """True when a and b (arrays or tuples of arrays) agree elementwise, NaNs in the same places.

    ``atol``/``rtol`` None: the tolerance follows a's dtype (:func:`tolerance`)."""
    if _isinstance(a, (tuple, list)) or _isinstance(b, (tuple, list)):
        if not (_isinstance(a, (tuple, list)) and _isinstance(b, (tuple, list))):
            return False
        return _len(a) == _len(b) and builtins.all(_is_close(x, y, atol, rtol) for x, y in zip(a, b))
    if atol is None or rtol is None:
        auto_atol, auto_rtol = tolerance(a, b)
        atol = auto_atol if atol is None else atol
        rtol = auto_rtol if rtol is None else rtol
    try:
        a, b = to_numpy(a), to_numpy(b)
    except Exception:
        return False
    if a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        try:
            return bool(_np_all(a == b))
        except Exception:
            return False
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


def assert_close(actual: Any, expected: Any, what: str, *, atol: float | None = None,
                 rtol: float | None = None) -> None:
    """Fail with the shape, the worst element and its two values when arrays differ.

    Tolerances follow the dtype of ``actual`` (the rule above) unless given."""
    if _transcript.is_pending(expected) or _transcript.is_pending(actual):
        return  # record mode: the verifier compares, outside the kernel
    if atol is None or rtol is None:
        auto_atol, auto_rtol = tolerance(actual, expected)
        atol = auto_atol if atol is None else atol
        rtol = auto_rtol if rtol is None else rtol
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        raise _AssertionError(f"{what}: expected shape {e.shape}, got {a.shape}")
    if _is_close(a, e, atol, rtol):
        return
    if a.dtype.kind not in "fc" or e.dtype.kind not in "fc":
        bad = ~(a == e)
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
        raise _AssertionError(f"{what}: values differ from the reference ({int(bad.sum())} of {a.size} "
                              f"differ; first at index {idx}: yours {a[idx]!r}, expected {e[idx]!r})")
    diff = _abs(a - e)
    diff = np.where(_isnan(diff), np.inf, diff)
    idx = _unravel(int(_argmax(diff)), diff.shape) if diff.ndim else ()
    extra = ""
    n_nan = int(_isnan(a).sum()) - int((_isnan(a) & _isnan(e)).sum())
    if n_nan:
        extra = f"; yours has {n_nan} NaN where the reference has a number"
    raise _AssertionError(
        f"{what}: values differ from the reference (max |difference| {float(diff[idx]):.3g} at index "
        f"{tuple(int(i) for i in idx)}: yours {a[idx]!r}, expected {e[idx]!r}; tolerance atol={atol:.3g}, "
        f"rtol={rtol:.3g}{extra})"
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


# ---------------------------------------------------------------- every door of a forbidden built-in
# One table, the only place where the doors of a torch built-in are listed: a lesson's FORBIDDEN_*
# tuple names the built-in once (any of its doors) and :func:`forbid` adds all the others: its
# aliases, its ``torch._C`` bindings, its ``torch.ops.aten`` entry points and the lower-level aten ops
# it dispatches to. ``tests/test_forbidden_doors.py`` lists them per exercise and calls each one.
_SDPA_KERNELS = ("_scaled_dot_product_attention_math", "_scaled_dot_product_attention_math_for_mps",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward",
                 "_efficient_attention_forward")
BUILTIN_DOORS: dict[str, tuple[str, ...]] = {
    "softmax": (
        "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
        "torch._C._VariableFunctions.softmax", "torch._C._special.special_softmax",
        "torch.ops.aten.softmax", "torch.ops.aten._softmax", "torch.ops.aten._safe_softmax"),
    "scaled_dot_product_attention": (
        "torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
        "torch.ops.aten.scaled_dot_product_attention", "torch.ops.aten._safe_softmax",
        *(f"torch.ops.aten.{k}" for k in _SDPA_KERNELS)),
    "multi_head_attention": (
        "torch.nn.functional.multi_head_attention_forward", "torch.nn.MultiheadAttention.forward",
        "torch._native_multi_head_attention", "torch.ops.aten._native_multi_head_attention"),
    "layer_norm": (
        "torch.nn.functional.layer_norm", "torch.layer_norm", "torch._C._VariableFunctions.layer_norm",
        "torch.native_layer_norm", "torch.ops.aten.layer_norm", "torch.ops.aten.native_layer_norm"),
    "rms_norm": ("torch.nn.functional.rms_norm", "torch.rms_norm", "torch.ops.aten.rms_norm",
                 "torch.ops.aten._fused_rms_norm"),
    "gelu": ("torch.nn.functional.gelu", "torch._C._nn.gelu", "torch.ops.aten.gelu"),
    "elu": ("torch.nn.functional.elu", "torch.nn.functional.elu_", "torch._C._nn.elu", "torch._C._nn.elu_",
            "torch.ops.aten.elu", "torch.ops.aten.elu_"),
    "cosine_similarity": ("torch.nn.functional.cosine_similarity", "torch.cosine_similarity",
                          "torch.ops.aten.cosine_similarity"),
    "cross_entropy": ("torch.nn.functional.cross_entropy", "torch._C._nn.cross_entropy_loss",
                      "torch.ops.aten.cross_entropy_loss"),
    "nll_loss": ("torch.nn.functional.nll_loss", "torch._C._nn.nll_loss", "torch._C._nn.nll_loss_nd",
                 "torch._C._nn.nll_loss2d", "torch.ops.aten.nll_loss", "torch.ops.aten.nll_loss_nd",
                 "torch.ops.aten.nll_loss_forward", "torch.ops.aten.nll_loss2d",
                 "torch.ops.aten.nll_loss2d_forward"),
    "transformer_encoder_layer": (
        "torch.nn.TransformerEncoderLayer.forward", "torch._transformer_encoder_layer_fwd",
        "torch.ops.aten._transformer_encoder_layer_fwd"),
}
# a door that several built-ins dispatch to (aten._safe_softmax: softmax and attention) names no family
_DOOR_FAMILIES: dict[str, list[str]] = {}
for _family, _doors in BUILTIN_DOORS.items():
    for _door in _doors:
        _DOOR_FAMILIES.setdefault(_door, []).append(_family)
_DOOR_FAMILY = {door: families[0] for door, families in _DOOR_FAMILIES.items() if len(families) == 1}


def forbid(*paths: str) -> tuple[str, ...]:
    """An exercise's forbidden paths with every door of each torch built-in among them, and, beside a topic
    module's function (``course_lib.attention.softmax``), the body it hands its calls to
    (``course_lib.solutions.attention.softmax``, :mod:`course_lib.solutions`): in order, once each. A path an
    edition does not hold (a solutions file left out) is skipped by :func:`forbidden_calls`."""
    out = []
    for path in paths:
        out.append(path)
        parts = path.split(".")
        if len(parts) == 3 and parts[0] == "course_lib" and parts[1] != "solutions":
            out.append(f"course_lib.solutions.{parts[1]}.{parts[2]}")
        family = _DOOR_FAMILY.get(path)
        if family is not None:
            out += BUILTIN_DOORS[family]
    return tuple(dict.fromkeys(out))


def _op_name(func) -> str:
    """The name a torch function mode sees, without the module and the overload: ``aten._softmax.default``,
    ``torch._C._special.special_softmax``, ``Tensor.softmax`` -> ``_softmax``, ``special_softmax``, ``softmax``."""
    name = getattr(func, "__name__", None) or str(func)
    schema = getattr(func, "_schema", None)  # an OpOverload / OpOverloadPacket
    if schema is not None:
        name = str(getattr(schema, "name", name)).split("::")[-1]
    return str(name).split(".")[0]


def _door_names(paths: tuple) -> tuple[frozenset, frozenset]:
    """(names a torch function mode matches, aten op names a dispatch mode matches) of the torch doors in ``paths``."""
    function_names, aten_names = set(), set()
    for path in paths:
        if not path.startswith("torch."):
            continue
        last = path.rsplit(".", 1)[-1]
        if last in ("forward", "__call__"):  # a module's method: its code is swapped (aliases trip too)
            continue
        function_names.add(last)
        if path.startswith("torch.ops.aten."):
            aten_names.add(last)
    return frozenset(function_names), frozenset(aten_names)


@contextlib.contextmanager
def _torch_doors(paths: tuple, exercise: str, tripped: list):
    """While the student's function runs, every call of a forbidden torch built-in raises IntegrityError,
    whatever name reached it: a torch function mode sees the public call (``torch.softmax``, an alias
    bound before the check, ``Tensor.softmax``, ``torch.ops.aten._safe_softmax``), a dispatch mode sees
    the aten op it dispatches to (also with ``torch._C.DisableTorchFunction``). A door tried and then
    caught by the student's code still fails the call: the finding is kept and raised when it returns."""
    function_names, aten_names = _door_names(paths)
    if not function_names:
        yield
        return
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    def trip(name):
        message = (f"{exercise}: your code calls torch's {name} (a door to a built-in this exercise asks you "
                   "to implement yourself). Write the computation with basic operations (exp, sum, matmul, "
                   "...); this test scores 0 otherwise.")
        tripped.append(message)
        return IntegrityError(message)

    class _FunctionDoors(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = _op_name(func)
            if name in function_names:
                raise trip(name)
            return func(*args, **(kwargs or {}))

    class _AtenDoors(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = _op_name(func)
            if name in aten_names:
                raise trip(f"aten.{name}")
            return func(*args, **(kwargs or {}))

    with _AtenDoors() if aten_names else contextlib.nullcontext(), _FunctionDoors():
        yield


@contextlib.contextmanager
def forbidden_calls(paths: Iterable[str], exercise: str):
    """Inside the block, calling any of ``paths`` raises IntegrityError.

    Used while the student's function runs, so a submission that simply calls the
    reference (or the torch built-in the exercise asks to implement) scores 0 with
    a reason instead of full marks. Python functions get their code object swapped
    (catching every alias); built-ins are replaced on their module, and every torch door
    (:data:`BUILTIN_DOORS`, through :func:`forbid`) is caught by name in torch's function and
    dispatch modes (:func:`_torch_doors`), aliases bound earlier included. Paths whose
    module is not installed are skipped.
    """
    saved_code, saved_attr = [], []
    paths = forbid(*paths)
    tripped: list = []

    def _trip(message):
        tripped.append(message)
        return IntegrityError(message)
    try:
        for path in paths:
            try:
                owner, attr = _resolve(path)
                original = getattr(owner, attr)
            except (ValueError, AttributeError, RuntimeError):
                continue
            message = (
                f"{exercise}: your code calls {path}, which this exercise asks you to implement "
                "yourself. Write the computation with basic array operations; this test scores 0 otherwise."
            )
            code = getattr(original, "__code__", None)
            # a Python function's code is swapped; a compiled one (Cython's edlib.align has a read-only __code__)
            # is replaced on its module, as a built-in is
            if code is not None and not code.co_freevars and type(original).__name__ == "function" \
                    and hasattr(original, "__globals__"):
                # one tripwire per module globals: name every forbidden function of that module
                glb = original.__globals__
                # every forbidden name whose code shares these globals (a module's functions and its classes'
                # methods): they share one tripwire message
                names = [p for p in paths if p.startswith(getattr(original, "__module__", "") + ".")] or [path]
                module_message = (
                    f"{exercise}: your code calls the course's reference implementation "
                    f"({' or '.join(names)}), which this exercise asks you to write yourself; "
                    "this test scores 0 otherwise."
                ) if path.startswith("course_lib.") else (
                    f"{exercise}: your code calls {' or '.join(names)}, which this exercise asks you to implement "
                    "yourself. Write the computation with basic array operations; this test scores 0 otherwise.")
                if any(fn is original for fn, _, _ in saved_code):
                    continue
                saved_code.append((original, code, glb.get("__course_integrity_error__")))
                glb["__course_integrity_error__"] = lambda m=module_message: _trip(m)
                original.__code__ = _tripwire.__code__
            elif path.startswith("torch.ops.") or path.startswith("torch.Tensor."):
                continue  # caught by name in torch's modes (an op namespace or Tensor is not patched)
            else:
                def tripwire(*args, _m=message, **kwargs):
                    raise _trip(_m)

                try:
                    setattr(owner, attr, tripwire)
                except (AttributeError, TypeError):
                    continue  # a read-only binding (torch._C._VariableFunctions): the modes catch it by name
                saved_attr.append((owner, attr, original))
        try:
            with _torch_doors(paths, exercise, tripped):
                yield
        except IntegrityError:
            raise
        except Exception as err:  # a door was tried, its IntegrityError caught and something else raised
            if tripped:
                raise IntegrityError(tripped[0]) from err
            raise
        if tripped:  # a door was tried and its IntegrityError caught by the student's code: the finding stands
            raise IntegrityError(tripped[0])
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
                 observe: Callable | None = None, *, again: bool = False):
    """Call the student's function on one case, turning its exceptions into clear failures.

    ``observe``: for a function that returns something other than plain data (a module,
    a trained model), a function of the output that returns plain data (numbers, strings,
    arrays, tensors and tuples/lists/dicts of them); the check then works on that.
    ``again``: this input is one the check calls in its own sequence too (a mismatch looking at the other
    inputs to tell two misconceptions apart): the verifier answers it from that call's record wherever it is,
    not from the next one.
    """
    __tracebackhide__ = True  # noqa: F841 - IPython: the student's frames stay, this one is hidden
    if not callable(fn):
        raise _AssertionError(f"{exercise}: expected a function, got {type(fn).__name__}")
    if _FEED.capturing is not None:  # the judge writing the hidden tests' inputs (grading.feed), never a kernel
        _FEED.capturing(fn, exercise, case, tuple(forbidden), observe)
    out = None
    try:
        out = _transcript.student_call(lambda: _call_student_live(fn, case, exercise, forbidden, observe),
                                       exercise, case.label, case.args, case.kwargs, again=again)
        return out
    finally:
        if _FEED.outputs is not None:  # a hidden check from the feed, or its capture: later inputs may be made of it
            _FEED.outputs.append(out)  # None for a call that raised: the calls keep their numbers


def _call_student_live(fn: Callable, case: Case, exercise: str, forbidden: Iterable[str], observe):
    __tracebackhide__ = True  # noqa: F841
    try:
        before = _snapshot_inputs(case)
        with forbidden_calls(forbidden, exercise):
            out = fn(*case.args, **case.kwargs)
            result = out if observe is None else observe(out)
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
        _trim_traceback(err)
        raise _AssertionError(
            f"{exercise}: your function raised {type(err).__name__}: {err} on input '{case.label}' "
            f"({', '.join(_describe(a) for a in case.args)})"
        ) from err
    where = _changed_input(before, case)
    if where is not None:
        # in the kernel, so the finding is recorded as this call's outcome and replayed as it is
        raise _AssertionError(
            f"{exercise}: likely misconception 'input modified in place': your function changed its input "
            f"({where}) on input '{case.label}'; the inputs must stay unchanged (callers still need them): compute on a copy or build a new "
            "array/list (e.g. `x = x + 1`, not `x += 1`; `sorted(...)`/`list(...)`, not in-place edits)."
        )
    return result


# ---------------------------------------------------------------- the judge's material: course_lib/judge/
# A lesson's checks module (course_lib/checks/<topic>.py) holds what students receive: the checks, their messages
# and the visible cases. Its judge module (course_lib/judge/<topic>.py, the same topic) holds what they never
# receive: the hidden cases, the known wrong answers (``WRONG_*`` tables), the right alternatives, the answers
# that break a promise and the ``EXERCISES`` declaration. The editions (grading.bundle, grading.edition) copy
# course_lib and leave the judge package out; a checks module reaches its judge module only through the three
# functions below, which in an edition without it fall back on data: the hidden feed (the grading kernel) or the
# stored values (the students' bundle).
JUDGE_PACKAGE = "course_lib.judge"


_JUDGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "judge")


def judge(module: str):
    """The judge module of the checks module ``module`` ("course_lib.checks.masking" -> course_lib.judge.masking),
    or None in an edition that leaves the judge package out.

    Only the file beside this very copy of ``course_lib`` counts (``course_lib/judge/<topic>.py``): an edition
    run where the repository's package is installed too (an editable install's finder resolves submodules it
    does not hold) must not reach the repository's judge."""
    topic = module.rsplit(".", 1)[1]
    path = os.path.join(_JUDGE_DIR, topic + ".py")
    if not os.path.isfile(path):
        return None
    found = importlib.import_module(f"{JUDGE_PACKAGE}.{topic}")
    if os.path.abspath(getattr(found, "__file__", "") or "") != path:
        raise ImportError(f"{JUDGE_PACKAGE}.{topic} was imported from {getattr(found, '__file__', None)}, "
                          f"expected {path} (beside this course_lib's checks)")
    return found


def hidden_part(module: str):
    """The judge module of ``module``, for a check's hidden branch (its hidden cases); in an edition without it a
    RuntimeError saying the hidden tests are run by the instructor (:func:`graded` sends a hidden check there to
    the feed before it gets here)."""
    found = judge(module)
    if found is None:
        raise RuntimeError(HIDDEN_NOT_SHIPPED)
    return found


def wrongs(module: str, table: str) -> list:
    """The known wrong answers of table ``table`` of checks module ``module`` (the judge module's ``WRONG_<table>``).

    Where the judge module is absent: in the students' bundle (stored mode) the misconceptions' names and messages
    from the stored values, each with no implementation (their outputs are stored too); elsewhere (the grading
    kernel, whose verdicts the verifier gives) none."""
    found = judge(module)
    key = f"{module}.{table}"
    if found is not None:
        table_ = getattr(found, "WRONG_" + table)
        _transcript.keep_misconceptions(key, table_)
        return table_
    if _transcript.mode() == "stored":
        return [Wrong(name, _not_shipped, message, variant)
                for name, message, variant in _transcript.stored_misconceptions(key)]
    return []


def _not_shipped(*args, **kwargs):
    raise RuntimeError("the known wrong answers are not in the students' edition (only their stored outputs)")


def graded(check: Callable) -> Callable:
    """A public check with a ``hidden`` flag: called with ``hidden=True`` in an edition that holds no judge module
    (the grading kernel, the students' bundle), it runs the hidden inputs the grader hands over as data
    (:func:`run_hidden_from_feed`), or says the hidden tests are not here; with the judge module it runs itself."""
    import functools
    import inspect

    signature = inspect.signature(check)
    if "hidden" not in signature.parameters or "student" not in signature.parameters:
        raise TypeError(f"{check.__qualname__}: @graded needs a check with `student` and `hidden` parameters")

    @functools.wraps(check)
    def run(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841
        bound = signature.bind(*args, **kwargs)
        if bound.arguments.get("hidden", False) and judge(check.__module__) is None:
            return run_hidden_from_feed(f"{check.__module__}.{check.__name__}", bound.arguments["student"])
        return check(*args, **kwargs)

    return run


# ---------------------------------------------------------------- hidden tests: their inputs come as data
HIDDEN_NOT_SHIPPED = ("the hidden tests are not in the students' edition: your instructor runs them "
                      "when grading; call the check without hidden=True")
FEED_FOLDER = "hidden_feed"  # beside the grading kernel's course_lib folder (grading.edition writes it)


class _FEED:
    capturing: Callable | None = None  # set by the judge only (grading.feed.capture)
    entries: dict = {}  # the feed of each checks module, read once per kernel
    used: dict = {}  # how many times each check ran its hidden cases in this process
    student: Callable | None = None  # the student's function the feed's calls are made with
    outputs: list | None = None  # what each call of the running hidden check returned, in order


def output_path(outputs: list, obj) -> tuple | None:
    """Where ``obj`` is in the earlier calls' outputs (the very object: call j's output, or an element of it up
    to two levels down), or None. A check that feeds a call's output into the next call (lesson 07's step over
    a sequence threads the state) is recorded with this place, never the solution's value: the kernel hands
    the student's own output there, as the check does."""
    for j, out in enumerate(outputs):
        if obj is out:
            return (j,)
        if isinstance(out, (tuple, list)):
            for a, x in enumerate(out):
                if obj is x:
                    return (j, a)
                if isinstance(x, (tuple, list)):
                    for b, y in enumerate(x):
                        if obj is y:
                            return (j, a, b)
    return None


def _from_output(outputs: list, path: tuple):
    x = outputs[path[0]]
    for i in path[1:]:
        if not isinstance(x, (tuple, list)) or i >= len(x):
            raise _AssertionError("your function's output does not have the parts the next call needs "
                                  "(see the docstring for what it returns)")
        x = x[i]
    return x


def _the_student() -> Callable:
    """The student's function of the hidden check now running from the feed (what a StudentSlot unpickles to)."""
    return _FEED.student


class StudentSlot:
    """Stands for the student's function while the judge records a hidden check's calls (``grading.feed``):
    it calls the instructor's solution, and is pickled as a reference to whatever function the kernel's
    hidden check is given, so a check's own wrapper around the student (an outcome observer, a gradient)
    travels with the call and wraps the student's function in the kernel."""

    def __init__(self, fn: Callable):
        self._fn = fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._fn, name)

    def __reduce__(self):
        return (_the_student, ())


def _feed_file(module: str) -> str:
    import os

    lib = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../course_lib
    return os.path.join(os.path.dirname(lib), FEED_FOLDER, module + ".pkl")


def run_hidden_from_feed(check: str, student: Callable) -> None:
    """A hidden test in the students' edition, which holds no hidden input (a check is sent here by :func:`graded`
    where there is no judge module).

    In the grading kernel (record mode) the inputs come as data: the judge ran the hidden check on the
    instructor's solutions and wrote, for each call of the student's function, the exercise, the input, the
    forbidden built-ins and the observer (``grading.feed``: files beside the kernel's ``course_lib``,
    read-only, one per checks module). Each is called here through :func:`call_student` and recorded; the
    verifier then runs the judge's check with its own inputs and the reference, and answers each call from
    this record, input fingerprints compared. Anywhere else (JupyterLab, the students' bundle) it says that
    the hidden tests are run by the instructor."""
    import os
    import pickle

    module = check.rsplit(".", 1)[0]
    path = _feed_file(module)
    if _transcript.mode() != "record" or not os.path.isfile(path):
        raise RuntimeError(HIDDEN_NOT_SHIPPED)
    if module not in _FEED.entries:
        with open(path, "rb") as fh:
            _FEED.entries[module] = pickle.load(fh)  # written by the grader, read-only to this kernel
    n = _FEED.used.get(check, 0)
    _FEED.used[check] = n + 1
    runs = _FEED.entries[module].get(check, [])
    if not runs:
        raise _transcript.RecordError(f"{check}: the grader holds no hidden inputs for this check "
                                      "(a hidden test cell the source notebook does not have?)")
    # the n-th hidden call of a check in the notebook gets the n-th run; a call the student added in a cell of
    # their own (it raised in their lab, so they wrapped it in try) must not shift the real test off its inputs:
    # with one hidden call per check, as in every lesson, each call gets the same inputs
    _run_feed_calls(runs[min(n, len(runs) - 1)], student)


def _run_feed_calls(blobs: list, student: Callable) -> None:
    """Make one hidden check's recorded calls with the student's function (see :func:`run_hidden_from_feed`)."""
    import pickle

    import io

    outputs: list = []

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):  # ("output", path): the student's own earlier output (output_path)
            return _from_output(outputs, tuple(pid[1]))

    _FEED.student, _FEED.outputs = student, outputs
    stopped: _AssertionError | None = None
    try:
        for blob, goes_on in blobs:
            try:
                fn, exercise, label, args, kwargs, forbidden, observe = _Unpickler(io.BytesIO(blob)).load()
            except Exception:  # noqa: BLE001 - an input made of an earlier output that the student's crash left out
                if stopped is None:
                    raise
                break
            try:
                call_student(fn, Case(label, args, kwargs), exercise, forbidden, observe)
            except (NotImplementedYet, IntegrityError):
                raise
            except _AssertionError as failure:
                if not goes_on and stopped is None:
                    # the check stops here (recorded): the verifier's replay says why. The calls after it are
                    # still made and recorded: the verifier names a crash from the outputs on the other inputs
                    # (name_crash)
                    stopped = failure
    finally:
        _FEED.student, _FEED.outputs = None, None
    if stopped is not None:
        raise stopped


# ---------------------------------------------------------------- inputs unchanged (a promise of every exercise)
_SKIP = object()


def _snapshot(x: Any, _depth: int = 0) -> Any:
    """A deep copy of the mutable plain data in x (arrays, tensors, lists, dicts, modules' tensors)."""
    if _depth > 8:
        return _SKIP
    if type(x) is np.ndarray:
        return ("ndarray", x.copy())
    try:
        import torch

        if _isinstance(x, torch.Tensor):
            return ("tensor", torch.Tensor.detach(x).clone())
        if _isinstance(x, torch.nn.Module):
            return ("module", {k: torch.Tensor.detach(v).clone() for k, v in x.state_dict().items()})
    except ImportError:  # pragma: no cover
        pass
    if type(x) in (list, tuple):
        return (type(x).__name__, [_snapshot(v, _depth + 1) for v in x])
    if type(x) is dict:
        return ("dict", [(k, _snapshot(v, _depth + 1)) for k, v in x.items()])
    if type(x) is set:
        return ("set", set(x))
    return _SKIP


def _arrays_equal(a, b) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(_np_all((a == b) | (_isnan(a) & _isnan(b))))
    return bool(_np_all(a == b))


def inputs_changed(before: Any, now: Any, where: str = "the input") -> str | None:
    """Where ``now`` differs from the :func:`_snapshot` ``before`` (``where``, or a part of it), or None."""
    if before is _SKIP:
        return None
    kind, saved = before
    if kind == "ndarray":
        return None if type(now) is np.ndarray and _arrays_equal(saved, now) else where
    if kind == "tensor":
        import torch

        return None if _isinstance(now, torch.Tensor) and torch_equal(now, saved) else where
    if kind == "module":
        state = now.state_dict()
        for k, v in saved.items():
            if k not in state or not torch_equal(state[k], v):
                return f"{where}: the module's {k}"
        return None
    if kind == "set":
        return None if type(now) is set and now == saved else where
    if kind == "dict":
        if type(now) is not dict or _len(now) != _len(saved) or builtins.any(k not in now for k, _ in saved):
            return where
        for k, v in saved:
            found = inputs_changed(v, now[k], f"{where}[{k!r}]")
            if found:
                return found
        return None
    if type(now).__name__ != kind or _len(now) != _len(saved):  # list / tuple
        return where
    for i, (v, cur) in enumerate(zip(saved, now)):
        found = inputs_changed(v, cur, f"{where}[{i}]")
        if found:
            return found
    return None


def _snapshot_inputs(case: Case):
    return [_snapshot(a) for a in case.args], {k: _snapshot(v) for k, v in case.kwargs.items()}


def _changed_input(before, case: Case) -> str | None:
    args, kwargs = before
    for i, (v, cur) in enumerate(zip(args, case.args)):
        found = inputs_changed(v, cur, f"argument {i + 1}")
        if found:
            return found
    for k, v in kwargs.items():
        found = inputs_changed(v, case.kwargs.get(k), f"argument {k!r}")
        if found:
            return found
    return None


def torch_equal(a, b) -> bool:
    import torch

    a = torch.Tensor.detach(a)
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        ((a == b) | (a.isnan() & b.isnan())).all() if a.is_floating_point() else (a == b).all())


# ---------------------------------------------------------------- promised errors and leading dims
def assert_raises(student: Callable, case: Case, exercise: str, error: type, promise: str,
                  forbidden: Iterable[str] = ()) -> None:
    """The docstring promises ``error`` on this input: fail unless the student's function raises it.

    The outcome is observed in the kernel as plain data, ("raised", class name, is-an-``error``) or
    ("returned", type name, False), so the verdict is the same when replayed.
    """
    def outcome(*args, **kwargs):
        try:
            out = student(*args, **kwargs)
        except (NotImplementedError, IntegrityError, _AssertionError):
            raise
        except Exception as err:  # noqa: BLE001 - the exception's kind is the observation
            return ("raised", type(err).__name__, _isinstance(err, error))
        return ("returned", type(out).__name__, False)

    got = call_student(outcome, case, exercise, forbidden)
    if not (_isinstance(got, (tuple, list)) and _len(got) == 3):
        raise _AssertionError(f"{exercise}: could not observe the outcome on input '{case.label}'")
    what, name, ok = got
    if what == "raised" and ok is True:
        return
    did = f"raised {name}" if what == "raised" else f"returned a {name} without raising"
    raise _AssertionError(f"{exercise}: the docstring promises a {error.__name__} {promise}; on input "
                          f"'{case.label}' your function {did}.")


def leading_dims_cases(label: str, make: Callable[[tuple], tuple], leads: Sequence[tuple]) -> list[Case]:
    """One Case per leading-dims shape: ``make(lead)`` returns (args, kwargs) for inputs of shape lead + (...)."""
    cases = []
    for lead in leads:
        args, kwargs = make(tuple(lead))
        cases.append(Case(f"{label} with leading dims {tuple(lead)}", tuple(args), dict(kwargs)))
    return cases


def compare_over_leading_dims(student: Callable, reference: Callable, label: str, make: Callable[[tuple], tuple],
                              leads: Sequence[tuple], *, exercise: str, **options) -> None:
    """compare_with_reference over inputs with each number of leading dims the docstring allows.

    A failure says which promise broke: the function must accept any number of leading dims."""
    cases = leading_dims_cases(label, make, leads)
    try:
        compare_with_reference(student, reference, cases, exercise=exercise, **options)
    except (NotImplementedYet, IntegrityError):
        raise
    except _AssertionError as failure:
        raise _AssertionError(f"{failure} [promise: any number of leading dims, here "
                              f"{', '.join(str(tuple(lead)) for lead in leads)}]") from failure.__cause__


@dataclasses.dataclass(frozen=True)
class Exact:
    """How :func:`compare_with_reference` compares outputs that are integers, strings and containers of them
    (lesson 06's tokenizer): exactly, after ``normalise(output, what)`` has turned each output into plain
    built-in values (exact ints, str, tuples, lists, dicts), so that an object with a rigged ``__eq__`` cannot
    pass; for an output of the wrong kind it raises an AssertionError that starts with ``what`` (the
    student's: "<exercise> on input '<label>'"; the reference's: "reference"; a wrong answer's: "").

    ``ordered``: what a dict output's keys are (``"pairs"``) when the docstring promises them in order of first
    appearance: the same items in another order then fail, with a message that says so. Every call (the
    student's, the reference's, each wrong answer's) gets its own deep copy of the case's inputs. Messages
    show the expected and the student's outputs, shortened."""

    normalise: Callable
    ordered: str = ""


def _short(x: Any, limit: int = 160) -> str:
    text = repr(x)
    return text if _len(text) <= limit else text[:limit] + "..."


_NOT_GIVEN = object()


def _copied(case: Case) -> Case:
    import copy

    return Case(case.label, copy.deepcopy(case.args), copy.deepcopy(case.kwargs))


def compare_with_reference(
    student: Callable,
    reference: Callable,
    cases: Sequence[Case],
    *,
    exercise: str,
    wrongs: Sequence[Wrong] = (),
    forbidden: Iterable[str] = (),
    atol: float | None = None,
    rtol: float | None = None,
    output_names: Sequence[str] | None = None,
    observe: Callable | None = None,
    exact: Exact | None = None,
) -> None:
    """Assert that ``student`` equals ``reference`` on every case: the one comparison engine of every check.

    On a mismatch, each ``Wrong`` is run on the same case; if the student's output
    equals a wrong implementation's output, the AssertionError carries that
    misconception's message. Outputs may be arrays, tensors or tuples of them.
    Tolerances follow the student's dtype (the rule above) unless given; half precision
    or integers where the reference is floating fail with a message saying so.
    ``observe``: as in :func:`call_student`; applied to the student's, the reference's and
    each wrong implementation's output alike, and the comparison is on what it returns.
    ``exact``: compare exactly instead, after :class:`Exact`'s normaliser (no tolerance, no ``observe``).
    """
    if student is reference:
        raise IntegrityError(
            f"{exercise}: your function is the reference implementation from course_lib itself; "
            "write your own."
        )
    forbidden = tuple(forbidden)
    ref_name = f"{getattr(reference, '__module__', '')}.{getattr(reference, '__qualname__', 'reference')}"
    if exact is None:
        ref_fn = reference if observe is None else (lambda *a, **k: observe(reference(*a, **k)))

        def student_on(c: Case, again: bool = False):
            return call_student(student, c, exercise, forbidden, observe, again=again)

        def wrong_on(w: Wrong, c: Case):
            return _wrong_output(w, c, observe)

        def same(a, b) -> bool:
            return _is_close(a, b, atol, rtol)
    else:
        if observe is not None:
            raise ValueError("compare_with_reference: give observe= or exact=, not both")
        norm = exact.normalise

        def ref_fn(*a, **k):
            c = _copied(Case("", a, k))
            return norm(reference(*c.args, **c.kwargs), "reference")

        def student_on(c: Case, again: bool = False):
            what = f"{exercise} on input '{c.label}'"
            return call_student(student, _copied(c), exercise, forbidden,
                                observe=lambda out, what=what: norm(out, what), again=again)

        def wrong_on(w: Wrong, c: Case):
            # normalised before it is stored: the students' bundle keeps plain values (the wrong answer's own may not be)
            def run(*a, **k):
                c2 = _copied(Case("", a, k))
                return norm(w.fn(*c2.args, **c2.kwargs), "")

            return _transcript.wrong_value(w.name, run, c.args, c.kwargs, key=w.key)

        def same(a, b) -> bool:
            return a == b

    def expected_on(c: Case):
        return _transcript.reference_value(ref_fn, c.args, c.kwargs, name=ref_name)

    def fits(w: Wrong, c: Case, got, expected=_NOT_GIVEN) -> bool:
        """Does the student's output on ``c`` equal this wrong answer's (and, given ``expected``, differ from it)?"""
        try:
            wrong_out = wrong_on(w, c)
        except Exception:
            return False
        if expected is not _NOT_GIVEN and same(wrong_out, expected):
            return False
        return same(got, wrong_out)

    before: list = []  # the student's outputs on the inputs passed so far (a crash is named from them)
    for index, case in enumerate(cases):
        expected = expected_on(case)
        if _transcript.mode() == "capture":  # the bundle stores every wrong answer's output too
            for wrong in wrongs:
                try:
                    wrong_on(wrong, case)
                except Exception:
                    pass
        try:
            got = student_on(case)
        except (NotImplementedYet, IntegrityError):
            raise
        except _AssertionError as failure:
            name_crash(failure, student, cases, index, before, wrongs, exercise, call=student_on,
                       expected=expected_on, wrong_output=wrong_on, same=same)
            raise
        before.append(got)
        if _transcript.is_pending(expected):
            continue  # record mode: the verifier compares, outside the kernel
        if exact is None:
            problem = dtype_problem(got, expected)
            if problem:
                raise _AssertionError(f"{exercise} on input '{case.label}': {problem}")
        if same(got, expected):
            if exact is not None and exact.ordered:
                _assert_first_appearance(got, expected, exercise, case, exact.ordered)
            continue
        found = _one_per_name([w for w in wrongs if fits(w, case, got, expected)])
        if _len(found) > 1:  # the same output on this input: the other inputs decide, where they can
            found = _narrowed(found, cases, case, student_on, fits)
        shown = "" if exact is None else f"; expected {_short(expected)}, got {_short(got)}"
        if found:
            also = (" The same output also fits " + ", ".join(f"'{w.name}'" for w in found[1:])
                    + " on every input." if _len(found) > 1 else "")
            raise _AssertionError(f"{exercise}: likely misconception '{found[0].name}': {found[0].message}{also} "
                                  f"(input: {case.label}{shown})")
        if exact is not None:
            raise _AssertionError(f"{exercise} on input '{case.label}': expected {_short(expected)}, "
                                  f"got {_short(got)}")
        _explain_mismatch(got, expected, exercise, case, atol, rtol, output_names)


def _assert_first_appearance(got, expected, exercise: str, case: Case, ordered: str) -> None:
    """Equal dicts whose keys the docstring promises in order of first appearance: the order too."""
    if list(got) == list(expected):
        return
    first = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
    raise _AssertionError(
        f"{exercise} on input '{case.label}': the counts are right, but the {ordered} are not in order "
        f"of first appearance, as the docstring promises (at position {first}: expected "
        f"{list(expected)[first]!r}, got {list(got)[first]!r}). Insert each key the first time you "
        "meet it, walking the input left to right (a dict keeps that order; Counter too); sorting the "
        "keys or collecting them in a set changes it, and training breaks its ties by this order.")


def _one_per_name(wrongs: list) -> list:
    out, names = [], set()
    for w in wrongs:
        if w.name not in names:
            names.add(w.name)
            out.append(w)
    return out


def _narrowed(found: list, cases, failed: Case, student_on: Callable, fits: Callable) -> list:
    """Several wrong answers give the student's output on the failing input: keep those that also
    give it on the other inputs (a name is evidence only where the output shows it)."""
    for case in cases:
        if case is failed or _len(found) == 1:
            continue
        try:
            got = student_on(case, again=True)
        except (NotImplementedYet, IntegrityError):
            raise
        except _AssertionError:
            continue  # it crashed or broke a promise here: this input says nothing about the others
        if _transcript.is_pending(got):
            continue
        keep = [w for w in found if fits(w, case, got)]
        if keep:
            found = keep
    return found


def _trim_traceback(err: BaseException, keep: int = 12) -> None:
    """Cut the student's traceback after ``keep`` frames (where it starts is what helps).

    A function that calls itself forever leaves ~1000 identical frames: IPython takes
    tens of seconds to render them (past a grading cell's time limit) for no insight.
    """
    tb, depth = err.__traceback__, 1
    while tb is not None and tb.tb_next is not None:
        if depth >= keep:
            tb.tb_next = None
            break
        tb, depth = tb.tb_next, depth + 1


def _wrong_output(wrong: Wrong, case: Case, observe: Callable | None):
    """A known wrong implementation's output on ``case`` (observed as the student's is); raises what it raises."""
    out = _transcript.wrong_value(wrong.name, wrong.fn, case.args, case.kwargs, key=wrong.key)
    return out if observe is None else observe(out)


def raised_type(err: BaseException) -> str | None:
    """The name of the exception type a student's (or a known wrong answer's) code raised: the cause of a
    check's failure, the type recorded by the kernel (replay) or stored with the bundle (stored); None when
    the failure was not a crash (a broken promise, an input changed in place, an output that is not data)."""
    if _isinstance(err, _AssertionError):
        recorded = getattr(err, "course_cause", None)
        if recorded:
            return str(recorded)
        err = err.__cause__
        if err is None:
            return None
    return str(getattr(err, "course_type", None) or type(err).__name__)


def name_crash(failure: BaseException, student: Callable, cases: Sequence[Case], index: int, before: list,
               wrongs: Sequence[Wrong], exercise: str, *, call: Callable, expected: Callable,
               wrong_output: Callable, same: Callable) -> None:
    """The student's code crashed on ``cases[index]``: name a known wrong answer only where the student's
    outputs on the check's other inputs show it (never from the crash's text).

    The student is called on the inputs after ``index`` too (in every mode, so that the grading kernel records
    the calls the verifier's replay of this function makes). A wrong answer is named when it raises an
    exception of the same type on ``cases[index]`` (a type alone is no evidence: unrelated answers raise
    ValueError alike) and the outputs show it: on some other input where the wrong answer's output differs
    from the reference's, the student's output equals it; or, for a mistake whose only symptom is that crash
    (right wherever it gives an output), the student's function gives its outputs on every other input.
    ``before``: the student's outputs on ``cases[:index]``; ``call(case)``: the student's output (observed as
    the check compares it); ``expected(case)``: the reference's; ``wrong_output(wrong, case)``: the wrong
    answer's, raising what it raises; ``same(a, b)``: the check's comparison. Raises the AssertionError that
    names it; returns otherwise (the caller raises ``failure``)."""
    crash = raised_type(failure)
    if crash is None:
        return
    outcomes: list = [(True, got) for got in before] + [(False, crash)]
    for case in cases[index + 1:]:
        try:
            outcomes.append((True, call(case)))
        except (NotImplementedYet, IntegrityError):
            return
        except _AssertionError as other:
            outcomes.append((False, raised_type(other)))
    if _transcript.mode() == "record":
        return  # no verdict in the kernel: the verifier names it from these calls
    if builtins.any(ok and _transcript.is_pending(got) for ok, got in outcomes):
        return
    refs: dict = {}

    def ref_on(i: int):
        if i not in refs:
            refs[i] = expected(cases[i])
        return refs[i]

    def shows(wrong: Wrong) -> bool:
        telling = shown = 0  # inputs where its output differs from the reference's; of those, the student's equals it
        everywhere, gave = True, False  # the student behaves as it on every other input; it gives an output somewhere
        for i, (case, (ok, got)) in enumerate(zip(cases, outcomes)):
            try:
                wrong_out = wrong_output(wrong, case)
            except Exception as err:  # noqa: BLE001 - what the wrong answer raises is the evidence here
                if i == index and raised_type(err) != crash:
                    return False
                everywhere = everywhere and not ok and raised_type(err) == got
                continue
            if i == index:
                return False
            gave = True
            try:
                differs = not same(wrong_out, ref_on(i))
                equal = ok and same(got, wrong_out)
            except Exception:  # noqa: BLE001
                return False
            telling += differs
            shown += differs and equal
            everywhere = everywhere and equal
        return shown > 0 or (telling == 0 and gave and everywhere)

    fits = _one_per_name([w for w in wrongs if shows(w)])  # variants share a name: any of them shows it
    if fits:
        also = (" The same output also fits " + ", ".join(f"'{w.name}'" for w in fits[1:]) + " on every input."
                if _len(fits) > 1 else "")
        raise _AssertionError(
            f"{exercise}: likely misconception '{fits[0].name}': {fits[0].message}{also} ({str(failure)[:1500]}; "
            f"this known mistake raises {crash} on that input too, and your function's outputs on the other "
            "inputs show it)") from failure.__cause__


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
