"""Where a check's verdict is decided: in the student's kernel, or outside it.

A graded test cell calls ``checks.<lesson>.check_<exercise>(student)``. The same
check code runs in one of three modes (environment variable ``COURSE_CHECK_MODE``):

``live`` (default: JupyterLab, self-study, pytest)
    the check calls the student's function, computes the reference, compares, and
    raises ``AssertionError`` with the message that names the misconception.

``record`` (the grading kernel; set by ``grading.kernel.client`` when it starts a kernel)
    the check calls the student's function on the test's inputs and records every
    output as plain data (numbers, strings, arrays of plain numeric dtypes; nothing
    that needs pickle or runs code when loaded). No reference is computed
    (:func:`course_lib.checks.core.reference` returns :data:`PENDING` and every
    comparison against it is skipped), so no expected value exists in the kernel for
    the student's code to find. Each call is published at once as a ``display_data``
    output of MIME type :data:`RECORD_MIME` in the test cell's outputs, with a
    fingerprint of its inputs.

``capture`` and ``stored`` (the students' bundle: ``grading.bundle``)
    capture runs the visible checks live on the instructor's solutions and keeps every
    reference output and every known wrong implementation's output, keyed by a
    fingerprint of the inputs; the bundle ships those (``_stored.json``) instead of the
    references, and its checks run in stored mode: the student's function live, the
    expected values from the store. Hidden tests' values are never captured.

``replay`` (the verifier: ``grading.verify``, a trusted process outside the sandbox,
after the kernel has exited)
    the same check runs again: the inputs are regenerated, the reference is
    computed, and each call of the student's function is answered from the record,
    in order. Its verdict (pass, or the AssertionError's message) sets the cell's
    points. A record can only say what the student's function returned; whatever
    the kernel did to itself (patching numpy, tracing the checker, rewriting its
    own replies) changes at most what was recorded, and only right outputs pass.

So the rule for writing a check (every check in ``course_lib.checks`` follows it):
inputs come from seeds and literals; the student is called only through
``core.call_student`` / ``core.compare_with_reference`` (with ``observe=`` when it
returns something that is not plain data); references only through
``core.reference`` / ``core.compare_with_reference``.

Does NOT cover: which cells are verified and how points are set (``grading.verify``),
or sandboxing the kernel (``grading.kernel.launcher``).
"""
from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import json
import math
import os
from typing import Any, Callable

import numpy as np

from course_lib.checks.errors import IntegrityError, NotImplementedYet

RECORD_MIME = "application/vnd.course-check-record+json"
MODES = ("live", "record", "replay", "capture", "stored")
MAX_RECORD_BYTES = 32 * 1024 * 1024  # one check's record, encoded (the grader's intake has its own, smaller bound)
MAX_ARRAY_BYTES = 16 * 1024 * 1024  # one array or tensor's data, decoded (strings: 4 bytes per character)
MAX_RECORD_DEPTH = 24  # nesting of one record (encode marks an output nested more than 20 levels as not plain)
MAX_RECORD_ELEMENTS = 200_000  # values (numbers, strings, containers; an array counts as one) in one record
MAX_STRING_CHARS = 4 * 1024 * 1024  # one string value of a record
MAX_EQUAL_HASHES = 8  # dict keys / set elements of a record that may share one hash (see _hash_bounded)

# dtypes a record may hold; anything else is "not plain data"
_NUMPY_DTYPES = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"}
_TORCH_DTYPES = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"}
_EXCEPTIONS = {name: obj for name, obj in vars(builtins).items()
               if isinstance(obj, type) and issubclass(obj, Exception)}


class RecordError(AssertionError):
    """The record does not hold what the verifier needs (no output for a call, not plain data)."""


class _Pending:
    """Stands for a reference value in record mode: comparisons against it are skipped."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __getitem__(self, item):
        return self

    # a check that compares a reference value directly (``if got != expected: raise``) passes in
    # record mode: the comparison belongs to the verifier, which has the real value
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

    def __iter__(self):
        raise TypeError("a reference value is PENDING in record mode: pass it to a core assertion helper "
                        "or index it; do not unpack it")

    def __repr__(self):
        return "PENDING"


PENDING = _Pending()


def is_pending(x: Any) -> bool:
    if x is PENDING:
        return True
    if isinstance(x, (tuple, list)):
        return any(is_pending(v) for v in x)
    return False


class Unplain:
    """A recorded output that was not plain data (a module, a generator, a hostile object)."""

    def __init__(self, type_name: str, why: str = ""):
        self.type_name, self.why = type_name, why

    def __repr__(self):
        return f"<{self.type_name}: not plain data{': ' + self.why if self.why else ''}>"


# ---------------------------------------------------------------- state
STORE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_stored.json")


def _default_mode() -> str:
    m = os.environ.get("COURSE_CHECK_MODE", "")
    if m in MODES:
        return m
    # the students' bundle (grading/bundle.py) ships stored reference outputs instead of references
    return "stored" if os.path.exists(STORE_FILE) else "live"


class _State:
    mode = _default_mode()
    store: dict | None = None   # capture: what is being stored; stored: what was shipped
    calls: list = []          # record mode: this check's calls so far
    replay: list | None = None  # replay mode: the recorded calls, consumed in order
    position = 0


def mode() -> str:
    m = _State.mode
    return m if m in MODES else "live"


@contextlib.contextmanager
def using(mode_name: str, calls: list | None = None):
    """Run a block in one mode (tests and the verifier); the previous mode is restored."""
    if mode_name not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode_name!r}")
    saved = (_State.mode, _State.calls, _State.replay, _State.position, _State.store)
    _State.mode, _State.calls, _State.replay, _State.position = mode_name, [], calls, 0
    if mode_name == "capture":
        _State.store = {}
    try:
        yield _State
    finally:
        _State.mode, _State.calls, _State.replay, _State.position, _State.store = saved


# ---------------------------------------------------------------- plain data
def encode(x: Any, _depth: int = 0) -> Any:
    """Plain data -> JSON-able structure; anything else -> an 'unplain' marker."""
    if _depth > 20:
        return {"__unplain__": "nesting", "why": "nested more than 20 levels"}
    if type(x) is str:
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not valid in the kernel's UTF-8 messages
            return {"__str__": base64.b64encode(x.encode("utf-8", "surrogatepass")).decode("ascii")}
        return x
    if x is None or type(x) is bool:
        return x
    if type(x) is int:
        return x if abs(x) < 2 ** 53 else {"__int__": str(x)}
    if type(x) is float:
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if type(x) in (np.bool_,) or isinstance(x, np.generic) and type(x).__module__ == "numpy":
        return {"__npscalar__": _encode_array(np.asarray(x))}
    if type(x) is np.ndarray:
        return {"__ndarray__": _encode_array(x)}
    try:
        import torch

        if type(x) is torch.Tensor or type(x) is torch.nn.Parameter:
            return _encode_tensor(x)
    except ImportError:  # pragma: no cover
        pass
    if type(x) is tuple:
        return {"__tuple__": [encode(v, _depth + 1) for v in x]}
    if type(x) is list:
        return {"__list__": [encode(v, _depth + 1) for v in x]}
    if type(x) is dict:
        return {"__dict__": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in x.items()]}
    if type(x) in (set, frozenset):
        return {"__set__": type(x).__name__, "items": [encode(v, _depth + 1) for v in x]}
    return {"__unplain__": type(x).__qualname__[:80]}


def _encode_array(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    if a.dtype.str not in _NUMPY_DTYPES:
        if a.dtype.kind in "US":
            if a.size * max(a.dtype.itemsize, 1) > MAX_ARRAY_BYTES * 4:
                raise _NotPlain(f"array of {a.size:,} strings of up to {a.dtype.itemsize:,} bytes")
            strings = [str(v) for v in a.ravel().tolist()]
            try:
                for v in strings:
                    v.encode("utf-8")
            except UnicodeEncodeError:
                raise _NotPlain("array of strings that are not valid Unicode (a lone surrogate)") from None
            return {"strings": strings, "shape": list(a.shape), "dtype": a.dtype.str}
        raise _NotPlain(f"array of dtype {a.dtype}")
    if a.nbytes > MAX_ARRAY_BYTES:
        raise _NotPlain(f"array of {a.nbytes:,} bytes (more than {MAX_ARRAY_BYTES:,})")
    return {"dtype": a.dtype.str, "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def _encode_tensor(t) -> dict:
    import torch

    name = str(t.dtype).replace("torch.", "")
    if name not in _TORCH_DTYPES:
        raise _NotPlain(f"tensor of dtype {t.dtype}")
    plain = torch.Tensor.detach(t).to("cpu")
    arr = plain.to(torch.float32).numpy() if name == "bfloat16" else plain.numpy()
    return {"__tensor__": _encode_array(arr), "dtype": name, "requires_grad": bool(t.requires_grad),
            "device": str(t.device.type)}


class _NotPlain(Exception):
    pass


def safe_encode(x: Any) -> Any:
    try:
        return encode(x)
    except _NotPlain as err:
        return {"__unplain__": type(x).__qualname__[:80], "why": str(err)}
    except Exception as err:  # a hostile object: record that it was not plain data
        return {"__unplain__": type(x).__qualname__[:80], "why": f"could not be read ({type(err).__name__})"}


def record_bounds(x: Any) -> str | None:
    """Why an untrusted record (parsed JSON) is over a record's bounds, or None: its nesting
    (:data:`MAX_RECORD_DEPTH`), its number of values (:data:`MAX_RECORD_ELEMENTS`), a string
    (:data:`MAX_STRING_CHARS`) or its encoded size (:data:`MAX_RECORD_BYTES`). One pass, without
    recursion, stops at the first bound: linear in the record, whatever it holds."""
    todo, elements, size = [(x, 0)], 0, 0
    while todo:
        value, depth = todo.pop()
        elements += 1
        if elements > MAX_RECORD_ELEMENTS:
            return f"it holds more than {MAX_RECORD_ELEMENTS:,} values"
        if depth > MAX_RECORD_DEPTH:
            return f"it is nested more than {MAX_RECORD_DEPTH} levels deep"
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                return f"it holds a string of {len(value):,} characters (more than {MAX_STRING_CHARS:,})"
            size += len(value) + 2
        elif isinstance(value, dict):
            size += 2
            for k, v in value.items():
                size += len(k) + 3 if isinstance(k, str) else 8
                todo.append((v, depth + 1))
        elif isinstance(value, list):
            size += 2
            todo.extend((v, depth + 1) for v in value)
        else:
            size += 8
        if size > MAX_RECORD_BYTES:
            return f"it is larger than {MAX_RECORD_BYTES:,} bytes"
    return None


def _hash_bounded(items: list, what: str):
    """``items`` (decoded keys or elements, plain data: str, int, float, bool, None, tuples of them) when at
    most :data:`MAX_EQUAL_HASHES` of them share one hash, else Unplain: a dict or set built from keys made
    to collide costs a quadratic number of comparisons to build. The hashes are counted in a dict keyed by
    the hash values themselves (ints below 2**61, whose hashes are themselves: they never collide), so
    the count is linear, and so is building the dict or set afterwards."""
    counts: dict = {}
    for item in items:
        try:
            h = hash(item)
        except TypeError:
            return Unplain(what, "a key or element that is not hashable")
        counts[h] = counts.get(h, 0) + 1
        if counts[h] > MAX_EQUAL_HASHES:
            return Unplain(what, f"more than {MAX_EQUAL_HASHES} keys or elements with one hash (built to collide)")
    return items


def _plain_key(k) -> bool:
    """A dict key or set element decoded from a record: plain immutable data only (hash computed by Python itself)."""
    if k is None or type(k) in (str, int, float, bool):
        return True
    if type(k) is tuple:
        return all(_plain_key(v) for v in k)
    return False


def decode(x: Any, _depth: int = 0) -> Any:
    """The inverse of :func:`encode`, for data from an untrusted record: never runs code, linear in its size.

    Strings and arrays are decoded by their declared size (checked against the bounds before any
    memory is taken); dict keys and set elements are plain data only, and a record whose keys were
    built to collide in their hashes is not plain (:func:`_hash_bounded`). A record over
    :func:`record_bounds` is refused before decoding (``replay``); a deeper one here is not plain."""
    if _depth > MAX_RECORD_DEPTH:
        return Unplain("value", f"nested more than {MAX_RECORD_DEPTH} levels")
    if x is None or isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, str):
        return x if len(x) <= MAX_STRING_CHARS else Unplain("str", "a string longer than a record may hold")
    if isinstance(x, list):  # plain JSON lists only appear inside our markers
        return [decode(v, _depth + 1) for v in x]
    if not isinstance(x, dict) or len(x) == 0:
        return Unplain(type(x).__name__, "malformed record")
    if "__str__" in x:
        raw = str(x["__str__"])
        if len(raw) > MAX_STRING_CHARS * 4 // 3 + 4:
            return Unplain("str", "a string longer than a record may hold")
        try:
            return base64.b64decode(raw, validate=True).decode("utf-8", "surrogatepass")
        except ValueError:
            return Unplain("str", "malformed string in the record")
    if "__int__" in x:
        digits = str(x["__int__"])[:400]
        try:
            return int(digits)
        except ValueError:
            return Unplain("int", "malformed integer in the record")
    if "__float__" in x:
        return float({"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(str(x["__float__"]), "nan"))
    if "__npscalar__" in x:
        return _decode_array(x["__npscalar__"])[()]
    if "__ndarray__" in x:
        return _decode_array(x["__ndarray__"])
    if "__tensor__" in x:
        import torch

        name = x.get("dtype")
        if name not in _TORCH_DTYPES:
            return Unplain("Tensor", f"dtype {name!r}")
        t = torch.from_numpy(_decode_array(x["__tensor__"]).copy())
        t = t.to(getattr(torch, name))
        if x.get("requires_grad") and t.is_floating_point():
            t.requires_grad_(True)
        return t
    if "__tuple__" in x:
        items = x["__tuple__"]
        return tuple(decode(v, _depth + 1) for v in items) if isinstance(items, list) else Unplain("tuple", "malformed")
    if "__list__" in x:
        items = x["__list__"]
        return [decode(v, _depth + 1) for v in items] if isinstance(items, list) else Unplain("list", "malformed")
    if "__dict__" in x:
        pairs = x["__dict__"]
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            return Unplain("dict", "malformed record")
        keys = [decode(p[0], _depth + 1) for p in pairs]
        if not all(_plain_key(k) for k in keys):
            return Unplain("dict", "a key that is not plain data (a string, a number or a tuple of them)")
        keys = _hash_bounded(keys, "dict")
        if isinstance(keys, Unplain):
            return keys
        return {k: decode(p[1], _depth + 1) for k, p in zip(keys, pairs)}
    if "__set__" in x:
        items = x.get("items", [])
        if not isinstance(items, list):
            return Unplain("set", "malformed record")
        items = [decode(v, _depth + 1) for v in items]
        if not all(_plain_key(v) for v in items):
            return Unplain("set", "an element that is not plain data (a string, a number or a tuple of them)")
        items = _hash_bounded(items, "set")
        if isinstance(items, Unplain):
            return items
        return frozenset(items) if x["__set__"] == "frozenset" else set(items)
    if "__unplain__" in x:
        return Unplain(str(x["__unplain__"])[:80], str(x.get("why", ""))[:200])
    return Unplain("dict", "malformed record")


def _decode_array(d: dict) -> np.ndarray:
    if not isinstance(d, dict):
        raise RecordError("malformed array in the record")
    raw_shape = d.get("shape", [])
    if not isinstance(raw_shape, list) or len(raw_shape) > 32:
        raise RecordError("malformed array shape in the record")
    shape = tuple(int(s) for s in raw_shape)
    if any(s < 0 for s in shape):
        raise RecordError("malformed array shape in the record")
    count = 1
    for s_ in shape:  # the declared size, in Python ints (np.prod would overflow to a small number)
        count *= s_
    if "strings" in d:
        strings = d["strings"]
        if not isinstance(strings, list) or len(strings) != count or not all(isinstance(v, str) for v in strings):
            raise RecordError("array strings do not match its shape in the record")
        width = max((len(v) for v in strings), default=0)
        if count * max(width, 1) * 4 > MAX_ARRAY_BYTES:  # numpy stores count x the longest string, 4 bytes a character
            raise RecordError(f"an array of {count:,} strings of up to {width:,} characters is larger than "
                              f"{MAX_ARRAY_BYTES:,} bytes (a record's array bound)")
        return np.array(strings, dtype=f"<U{max(width, 1)}").reshape(shape)
    dtype = d.get("dtype")
    if dtype not in _NUMPY_DTYPES:
        raise RecordError(f"array dtype {dtype!r} is not allowed in a record")
    nbytes = count * np.dtype(dtype).itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise RecordError(f"an array of {nbytes:,} bytes is larger than {MAX_ARRAY_BYTES:,} (a record's array bound)")
    encoded = str(d.get("b64", ""))
    if len(encoded) > (nbytes + 2) // 3 * 4 + 4:
        raise RecordError("array bytes do not match its shape in the record")
    raw = base64.b64decode(encoded, validate=True)
    if len(raw) != nbytes:
        raise RecordError("array bytes do not match its shape in the record")
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def fingerprint(args: tuple, kwargs: dict) -> str:
    """A short hash of a call's inputs, so a record is never used for another input."""
    def named(x, depth=0):  # functions (a feature map, an activation) by name, so two inputs never collide
        if depth < 4 and isinstance(x, (tuple, list)):
            return type(x)(named(v, depth + 1) for v in x)
        if depth < 4 and isinstance(x, dict):
            return {k: named(v, depth + 1) for k, v in x.items()}
        if callable(x) and not isinstance(x, type) and hasattr(x, "__qualname__"):
            return f"<function {getattr(x, '__module__', '')}.{x.__qualname__}>"
        return x

    h = hashlib.sha256()
    h.update(json.dumps(safe_encode((named(tuple(args)), named(dict(sorted(kwargs.items()))))),
                        sort_keys=True).encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- the hooks core.py calls
def student_call(run: Callable[[], Any], exercise: str, label: str, args: tuple, kwargs: dict,
                 again: bool = False) -> Any:
    """Call the student (live, record) or answer from the record (replay).

    ``run`` calls the student's function and turns its failures into AssertionErrors
    (``core.call_student``). In record mode the output, or the failure's message, is
    appended to this check's record; the live output is returned so the check's
    properties still run in the kernel. ``again`` (replay): a call of an input the check's own sequence
    makes too, answered from the first record of this exercise with the same inputs, wherever it is; the
    position in the record does not move.
    """
    m = mode()
    if m in ("live", "capture", "stored"):
        return run()
    if m == "record":
        entry = {"exercise": exercise, "label": label, "inputs": fingerprint(args, kwargs)}
        try:
            out = run()
        except AssertionError as failure:
            cause = failure.__cause__
            entry["raised"] = {"message": str(failure)[:2000], "class": type(failure).__name__,
                               "cause": type(cause).__name__ if cause is not None else None,
                               "cause_message": str(cause)[:1000] if cause is not None else None}
            publish(entry)
            raise
        entry["output"] = safe_encode(out)
        publish(entry)
        return out
    # replay
    calls = _State.replay or []
    if again:
        inputs = fingerprint(args, kwargs)
        found = [c for c in calls if isinstance(c, dict) and c.get("exercise") == exercise and c.get("inputs") == inputs]
        if not found:
            raise RecordError(f"{exercise}: no recorded output for input '{label}'")
        return _answer(found[0], exercise, label, args, kwargs)
    if _State.position >= len(calls):
        raise RecordError(f"{exercise}: no recorded output for input '{label}': the test did not get that far "
                          "in the grading kernel, or its record was removed")
    entry = calls[_State.position]
    _State.position += 1
    return _answer(entry, exercise, label, args, kwargs)


def _answer(entry: Any, exercise: str, label: str, args: tuple, kwargs: dict) -> Any:
    """A recorded call's outcome: its output, or the failure it raised (replay)."""
    over = record_bounds(entry)
    if over is not None:
        raise RecordError(f"{exercise}: the record of input '{label}' is over a record's bounds ({over}); "
                          "this test scores 0")
    if not isinstance(entry, dict) or entry.get("inputs") != fingerprint(args, kwargs):
        raise RecordError(f"{exercise}: the recorded call does not match input '{label}' (the record was "
                          "changed, or the test's inputs are not deterministic)")
    if "raised" in entry:
        raised = entry["raised"] if isinstance(entry["raised"], dict) else {}
        cls = {"IntegrityError": IntegrityError, "NotImplementedYet": NotImplementedYet}.get(
            raised.get("class"), AssertionError)
        failure = cls(str(raised.get("message", f"{exercise}: your function raised on input '{label}'")))
        if raised.get("cause"):
            failure.course_cause = str(raised["cause"])  # the type the student's code raised (core.raised_type)
        cause_cls = _EXCEPTIONS.get(str(raised.get("cause")))
        if cause_cls is not None:
            try:
                cause = cause_cls(str(raised.get("cause_message", "")))
            except Exception:
                cause = RuntimeError(str(raised.get("cause_message", "")))
            raise failure from cause
        raise failure
    out = decode(entry.get("output"))
    if isinstance(out, Unplain):
        raise AssertionError(f"{exercise}: on input '{label}' your function returned {out.type_name}"
                             f"{' (' + out.why + ')' if out.why else ''}, which is not what this exercise asks "
                             "for (an array, a tensor, numbers or strings, as the docstring says)")
    return out


def _key(kind: str, name: str, args: tuple, kwargs: dict) -> str:
    return f"{kind}:{name}:{fingerprint(args, kwargs)}"


def _stored(key: str, what: str) -> Any:
    if _State.store is None:
        try:
            with open(STORE_FILE) as fh:
                _State.store = json.load(fh)
        except OSError:
            _State.store = {}
    if key not in _State.store:
        raise AssertionError(f"this edition of the course holds no expected output for {what} on this input: "
                             "the visible tests only know the inputs they ship with (your instructor's checks "
                             "cover the rest when grading)")
    return _State.store[key]


def reference_value(fn: Callable, args: tuple, kwargs: dict, name: str | None = None) -> Any:
    m = mode()
    if m == "record":
        return PENDING
    name = name or f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', 'reference')}"
    if m == "stored":
        return decode(_stored(_key("ref", name, args, kwargs), name))
    value = fn(*args, **kwargs)
    if m == "capture":
        _State.store[_key("ref", name, args, kwargs)] = encode(value)
    return value


def wrong_value(name: str, fn: Callable, args: tuple, kwargs: dict, key: str | None = None) -> Any:
    """A known wrong implementation's output (raises what it raises); stored in the bundle.

    ``key``: what the store knows it by (default ``name``; two variants of one misconception, with
    one name and two messages, need two keys)."""
    m = mode()
    shown, name = name, key or name
    if m == "stored":
        entry = _stored(_key("wrong", name, args, kwargs), f"the misconception '{shown}'")
        if isinstance(entry, dict) and "__raised__" in entry:
            cls = _EXCEPTIONS.get(entry["__raised__"], RuntimeError)
            try:
                err = cls("stored")
            except TypeError:  # UnicodeDecodeError and kin take several arguments
                err = cls.__new__(cls)
            err.course_type = str(entry["__raised__"])  # its type's name (a class outside builtins is not rebuilt)
            raise err
        return decode(entry)
    try:
        value = fn(*args, **kwargs)
    except Exception as err:
        if m == "capture":
            _State.store[_key("wrong", name, args, kwargs)] = {"__raised__": type(err).__name__,
                                                               "message": str(err)[:2000]}
        raise
    if m == "capture":
        _State.store[_key("wrong", name, args, kwargs)] = safe_encode(value)
    return value


def _text(value: str) -> str:
    """A message for the record as valid UTF-8 text (a lone surrogate from the student's str() shown escaped)."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _publishable(entry: dict) -> dict:
    """The entry as the kernel can send it: strict UTF-8 JSON within :data:`MAX_RECORD_BYTES`. An output
    that cannot be sent becomes a marker saying why, so the test fails with a note; it is never dropped."""
    keep = {k: entry[k] for k in ("exercise", "label", "inputs") if k in entry}
    if "raised" in entry and isinstance(entry["raised"], dict):
        entry = dict(entry, raised={k: (_text(v) if isinstance(v, str) else v) for k, v in entry["raised"].items()})
    try:
        text = json.dumps(entry, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (UnicodeEncodeError, ValueError, TypeError, RecursionError) as err:
        return dict(keep, output={"__unplain__": "output", "why": f"the record could not be published "
                                                                  f"({type(err).__name__}): not plain data"})
    if len(text) > MAX_RECORD_BYTES:
        return dict(keep, output={"__unplain__": "output",
                                  "why": f"{len(text):,} bytes, more than a record may hold"})
    return entry


def publish(entry: dict) -> None:
    """Put one call's record in the running cell's outputs (record mode only).

    A record that cannot be published raises :class:`RecordError` in the kernel, so its test fails
    with that note in its output (the verifier then finds no record for it): a record is never
    dropped silently."""
    entry = _publishable(entry)
    _State.calls.append(entry)  # also kept here, for tests that record in-process
    try:
        from IPython import get_ipython
        from IPython.display import publish_display_data
    except ImportError:  # pragma: no cover - not in a kernel: nothing to publish to
        return
    if get_ipython() is None:
        return
    try:
        publish_display_data({RECORD_MIME: entry, "text/plain": f"[recorded: {entry.get('exercise')} on "
                                                               f"'{entry.get('label')}']"})
    except Exception as err:
        raise RecordError(f"{entry.get('exercise')}: the record of input '{entry.get('label')}' could not be "
                          f"published ({type(err).__name__}: {_text(err)[:200]}); this test scores 0") from None


def replay(check: Callable, kwargs: dict, calls: list) -> tuple[str | None, int]:
    """Run ``check`` in replay mode on recorded calls.

    Returns (None, calls used) when it passes, else (the failure's message, calls used).
    Several checks in one cell share the cell's record: each starts where the last stopped.
    """
    target = check

    def student(*args, **kw):  # never called: core answers every call from the record
        raise RecordError("the check called the student's function outside core.call_student")

    with using("replay", calls) as state:
        try:
            target(student, **kwargs)
        except AssertionError as failure:
            return (str(failure) or type(failure).__name__), state.position
        except Exception as err:  # the verifier's own check crashed on this record: fail closed
            return (f"the verifier could not check this record ({type(err).__name__}: {err})"), state.position
        return None, state.position


# ---------------------------------------------------------------- the misconceptions' names in the store
def keep_misconceptions(table: str, wrongs: list) -> None:
    """Capture mode: keep the names, messages and variants of one table of known wrong answers (never their
    implementations), so that a checks module of the students' edition names them from the store."""
    if mode() == "capture" and _State.store is not None:
        _State.store[f"misconceptions:{table}"] = [[w.name, w.message, w.variant] for w in wrongs]


def stored_misconceptions(table: str) -> list:
    """Stored mode: [[name, message, variant], ...] of one table (:func:`keep_misconceptions`); [] if none."""
    if _State.store is None:
        try:
            with open(STORE_FILE) as fh:
                _State.store = json.load(fh)
        except OSError:
            _State.store = {}
    return list(_State.store.get(f"misconceptions:{table}", []))
