"""Undeclared doors (issue 65): no function a student can call computes an exercise's answer without the
exercise refusing it.

Every exercise's visible test is run once with the reference as the student (its forbidden calls let
through), and each call of the student is kept: its inputs, and the exercise's forbidden paths. Then every
candidate is called on those inputs:

* every function of the course's modules (``course_lib.<topic>``, public and private, and the methods of
  their classes: the students' edition ships the building blocks, and a lesson's solutions once released),
  but those that draw, train, or read models and data from disk (:data:`NOT_CALLED`);
* the functions of the installed packages a student's install holds that offer finished pieces of these
  exercises (:data:`PACKAGES`: torch's functional, special and linalg namespaces, numpy's linalg, and the
  sequence tools of the students' ``data`` extra). numpy's and torch's top levels are the building material
  the exercises are written with (a forbidden built-in among them is named by its exercise, all its doors
  through ``core.forbid``), and calling them blindly would change global state (seeds, threads, dtypes).

Each input is tried as it is and adapted the way a student would adapt it in one line: a 0/1 mask as bools,
numpy as torch and torch as numpy. A candidate *computes the answer* when, on every visible input the
reference returns for, its output (or a value inside it: edlib's dict) equals the reference's output (or the
first part of a tuple answer: the distance of ``(distance, operations)``). Such a candidate must be among the
exercise's forbidden calls (so the visible test refuses it, and the grader too), or listed in
:data:`ALLOWED` with the reason it is no door.
"""
import contextlib
import copy
import importlib
import inspect
import os
import pkgutil
import signal

import numpy as np
import pytest
import torch

import course_lib
from course_lib.checks import core, registry

EXERCISES = registry.exercises()

NOT_CALLED = {
    "course_lib.plotting": "draws figures",
    "course_lib.training": "trains models and moves them between devices",
    "course_lib.pretrained": "loads the pretrained model and reads or writes its embedding cache on disk",
    "course_lib.bio": "reads the course's data files",
    "course_lib.checks": "the checks themselves",
    "course_lib.judge": "the judge's material (hidden cases, known wrong answers, right alternatives): in neither "
                        "the students' nor the kernel's edition",
}
# functions that run their first argument again and again (to time it): a call of the answer itself
NOT_CALLED.update({"course_lib.efficient.measure_torch_call": "times its first argument",
                   "course_lib.efficient.measure_numpy_call": "times its first argument"})
# pure functions of a module otherwise not called (the pooling the encoder's embeddings use)
CALLED_ANYWAY = ("course_lib.pretrained._pool_normalise",)
PACKAGES = ("torch.nn.functional", "torch.special", "torch.linalg", "numpy.linalg",
            "edlib", "Bio.Seq", "spoa")
# (exercise, candidate) -> why computing the same output on the visible inputs is no door
ALLOWED: dict[tuple[str, str], str] = {}

_SECONDS = 2  # a candidate that runs longer on a visible input is left out (none does today)


# ---------------------------------------------------------------- what the visible tests call
def _visible_calls(e):
    """[(args, kwargs, observe, reference output)] of every call of the student in the exercise's visible
    test (the reference standing for the student), and the forbidden paths those calls ran under."""
    ref = registry.resolve(e.reference)
    calls, forbidden = [], set()

    def student(*args, **kwargs):
        return ref(*args, **kwargs)

    def capture(fn, exercise, case, paths, observe):
        if fn is student:
            calls.append((copy.deepcopy(case.args), copy.deepcopy(case.kwargs), observe))
            forbidden.update(paths)

    saved = core.forbidden_calls
    core._FEED.capturing, core.forbidden_calls = capture, lambda paths, exercise: contextlib.nullcontext()
    try:
        for check in e.checks:
            registry.resolve(check)(student, hidden=False)
    finally:
        core._FEED.capturing, core.forbidden_calls = None, saved
    out = []
    for args, kwargs, observe in calls:
        try:
            value = ref(*copy.deepcopy(args), **copy.deepcopy(kwargs))
        except Exception:  # an input the docstring says raises: no answer to compare with
            continue
        out.append((args, kwargs, observe, _observed(value, observe)))
    return out, core.forbid(*sorted(forbidden))


def _observed(value, observe):
    return value if observe is None else observe(value)


# ---------------------------------------------------------------- candidates
def _course_modules():
    for info in pkgutil.walk_packages(course_lib.__path__, "course_lib."):
        if any(info.name == m or info.name.startswith(m + ".") for m in NOT_CALLED):
            continue
        yield importlib.import_module(info.name)


def _method(cls, fn):
    """A method, called only on an instance of its class as its first input (``ByteBPE.save(5, 7)`` would
    open file descriptor 7)."""
    def method(*args, **kwargs):
        if not args or not isinstance(args[0], cls):
            raise TypeError(f"not a {cls.__name__}")
        return fn(*args, **kwargs)
    method.__signature__ = inspect.signature(fn)
    method.__wrapped_method__ = fn
    return method


def candidates() -> dict[str, object]:
    """qualified name -> callable: every function and method of the course's modules, and of PACKAGES."""
    out: dict[str, object] = {}
    for module in _course_modules():
        for name, obj in vars(module).items():
            if inspect.isfunction(obj) and obj.__module__ == module.__name__:
                out[f"{module.__name__}.{name}"] = obj
            elif inspect.isclass(obj) and obj.__module__ == module.__name__:
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member) and (not attr.startswith("__") or attr == "__call__"):
                        out[f"{module.__name__}.{name}.{attr}"] = _method(obj, member)
    out = {q: fn for q, fn in out.items() if q not in NOT_CALLED}
    for qual in CALLED_ANYWAY:
        out[qual] = registry.resolve(qual)
    for package in PACKAGES:
        try:
            module = importlib.import_module(package)
        except ImportError:  # not in this install: nothing of it can be called
            continue
        for name in dir(module):
            obj = getattr(module, name, None)
            # functions and ufuncs only: no class, module, or callable object (numpy.linalg.test runs pytest)
            if not name.startswith("_") and (inspect.isroutine(obj) or isinstance(obj, np.ufunc)):
                out[f"{package}.{name}"] = obj
    return out


# ---------------------------------------------------------------- calling and comparing
def _is_mask(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dtype != torch.bool and x.numel() > 0 and bool(((x == 0) | (x == 1)).all())
    if isinstance(x, np.ndarray):
        return x.dtype != bool and x.dtype.kind in "iuf" and x.size > 0 and bool(np.isin(x, (0, 1)).all())
    return False


def _as_bools(a):
    return (a.bool() if isinstance(a, torch.Tensor) else a.astype(bool)) if _is_mask(a) else a


def _as_torch(a):
    return torch.from_numpy(a) if isinstance(a, np.ndarray) else a


def _as_numpy(a):
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a


# the inputs as they are, then as a student would adapt them in one line
ADAPTATIONS = {"as given": lambda a: a, "0/1 masks as bools": _as_bools, "numpy as torch": _as_torch,
               "torch as numpy": _as_numpy}


def _plain(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _same(a, b) -> bool:
    if isinstance(a, (np.ndarray, np.generic, int, float, bool)) and not isinstance(a, str):
        if not isinstance(b, (np.ndarray, np.generic, int, float, bool)):
            return False
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
            return False
        return bool(np.allclose(a.astype(float), b.astype(float), rtol=1e-5, atol=1e-6, equal_nan=True))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _holds(answer, out) -> bool:
    """``out`` is the answer, holds it (a dict's value, a tuple's part), or is the first part of a tuple answer."""
    wanted = [answer] + ([answer[0]] if isinstance(answer, tuple) and answer else [])
    found = [out] + (list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, tuple) else [])
    return any(_same(w, f) for w in wanted for f in found)


class _TooLong(Exception):
    pass


@contextlib.contextmanager
def _limit(seconds: int):
    def stop(*_):
        raise _TooLong()
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _no_descriptors():
    """``open(7)`` wraps (and on close, closes) file descriptor 7: refused while a candidate runs on integers."""
    import builtins
    import io
    real = builtins.open

    def guarded(file, *args, **kwargs):
        if isinstance(file, int):
            raise TypeError("no file descriptors here")
        return real(file, *args, **kwargs)
    builtins.open = io.open = guarded
    try:
        yield
    finally:
        builtins.open = io.open = real


_PLAIN = (torch.Tensor, np.ndarray, np.generic, int, float, bool, str, bytes, type(None))


def _plain_input(x) -> bool:
    if isinstance(x, (list, tuple)):
        return all(_plain_input(v) for v in x)
    if isinstance(x, dict):
        return all(_plain_input(v) for v in x.values())
    return isinstance(x, _PLAIN)


def _copy(x):
    """A fresh copy of an input (a candidate may change its inputs in place)."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(v) for v in x)
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    if isinstance(x, torch.nn.Module):
        return x  # copying a model for every candidate costs seconds: it is restored if changed (_models_kept)
    return copy.deepcopy(x)


def _modules(x):
    if isinstance(x, torch.nn.Module):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _modules(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _modules(v)


def _state(m: torch.nn.Module):
    return ([(n, p._version, p.requires_grad, p.data_ptr()) for n, p in m.named_parameters()],
            [(n, b._version) for n, b in m.named_buffers()], [s.training for s in m.modules()])


_PRISTINE: dict[int, tuple] = {}


@contextlib.contextmanager
def _models_kept(args, kwargs):
    """A model among the inputs is passed as it is, and put back as it was if the candidate changed it."""
    models = list(_modules((args, kwargs)))
    before = [_state(m) for m in models]
    for m in models:
        if id(m) not in _PRISTINE:
            _PRISTINE[id(m)] = (m, copy.deepcopy(m))  # the model kept alive with its copy: its id stays its own
    try:
        yield
    finally:
        for m, state in zip(models, before):
            if _state(m) != state:
                pristine = _PRISTINE[id(m)][1]
                m.load_state_dict(pristine.state_dict())
                for p, q in zip(m.parameters(), pristine.parameters()):
                    p.requires_grad_(q.requires_grad)
                for a, b in zip(m.modules(), pristine.modules()):
                    a.training = b.training


def _call(fn, args, kwargs, observe):
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return None, False
    except ValueError:  # a built-in without a signature: torch's and numpy's take arrays and numbers only
        if not (_plain_input(args) and _plain_input(kwargs)):
            return None, False
    try:
        with _models_kept(args, kwargs), _limit(_SECONDS), _no_descriptors(), np.errstate(all="ignore"), \
                torch.no_grad():
            out = fn(*_copy(args), **_copy(kwargs))
            return _plain(_observed(out, observe)), True
    except (Exception, _TooLong):
        return None, False


def _computes(fn, calls) -> bool:
    """``fn`` gives the reference's answer on the visible inputs (each adapted the same way): on two of them at
    least (one, where the test has one), and never another answer where it returns (an input it refuses is
    one a student would reshape first: lesson 08's leading dims for ``masked_mean``)."""
    for name, adapt in ADAPTATIONS.items():
        matched = 0
        for args, kwargs, observe, answer in calls:
            adapted = tuple(adapt(a) for a in args)
            if name != "as given" and all(x is a for x, a in zip(adapted, args)):
                continue  # nothing to adapt in this input: tried as given already
            out, returned = _call(fn, adapted, kwargs, observe)
            if not returned:
                continue
            if not _holds(_plain(answer), out):
                matched = -1
                break
            matched += 1
        if matched >= min(2, len(calls)):
            return True
    return False


def _refused(qual: str, fn, forbidden: tuple) -> bool:
    fn = getattr(fn, "__wrapped_method__", fn)
    for path in forbidden:
        if path == qual:
            return True
        try:
            if registry.resolve(path) is fn:
                return True
        except LookupError:
            continue
    return False


@pytest.fixture(scope="module")
def callables():
    cwd = os.getcwd()
    state = torch.get_rng_state(), np.random.get_state(), torch.get_default_dtype(), torch.get_num_threads()
    yield candidates()
    os.chdir(cwd)
    torch.set_rng_state(state[0])
    np.random.set_state(state[1])
    torch.set_default_dtype(state[2])
    torch.set_num_threads(state[3])


@pytest.mark.parametrize("e", EXERCISES, ids=lambda e: f"{e.assignment}.{e.name}")
def test_no_callable_computes_the_answer_unrefused(e, callables, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a candidate that writes a file writes it here
    calls, forbidden = _visible_calls(e)
    assert calls, f"{e.assignment}.{e.name}: its visible test calls the student on no input the reference answers"
    withheld = set(e.withheld)
    doors = []
    for qual, fn in callables.items():
        if qual in withheld or _refused(qual, fn, forbidden) or (e.assignment, qual) in _allowed_keys(e):
            continue
        if _computes(fn, calls):
            doors.append(qual)
    assert not doors, (f"{e.assignment}.{e.name}: these compute its answer on the visible inputs and are not "
                       f"refused: {doors}; add them to the exercise's forbidden calls (or to ALLOWED, with why)")


def _allowed_keys(e):
    return {(e.assignment, qual) for (name, qual) in ALLOWED if name == f"{e.assignment}.{e.name}"}


def test_the_search_finds_the_doors_issue_65_named():
    """masked_mean computes mean_pool (its mask as bools); edlib.align computes edit_distance's distance."""
    found = candidates()
    calls, _ = _visible_calls(registry.exercise("08_clinical_text", "mean_pool"))
    assert _computes(found["course_lib.blocks.masked_mean"], calls)
    pytest.importorskip("edlib")
    calls, _ = _visible_calls(registry.exercise("11_read_consensus", "edit_distance"))
    assert _computes(found["edlib.align"], calls)


def test_the_visible_test_refuses_the_doors_issue_65_named():
    """A student who pools with masked_mean, or takes edlib's distance, is told so by the visible test."""
    from course_lib.blocks import masked_mean
    from course_lib.checks import clinical, consensus

    def pooled(hidden, attention_mask):
        flat = masked_mean(hidden.reshape(-1, *hidden.shape[-2:]), attention_mask.reshape(-1, hidden.shape[-2]).bool())
        return flat.reshape(*hidden.shape[:-2], hidden.shape[-1])

    with pytest.raises(core.IntegrityError, match="masked_mean"):
        clinical.check_mean_pool(pooled)
    edlib = pytest.importorskip("edlib")

    def distance(a, b):
        return edlib.align(a, b, mode="NW")["editDistance"], []

    with pytest.raises(core.IntegrityError, match="edlib.align"):
        consensus.check_edit_distance(distance)
