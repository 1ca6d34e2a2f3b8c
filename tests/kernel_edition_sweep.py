"""Call every function of a course_lib edition on the graded exercises' inputs; print those that compute an answer.

    python -P tests/kernel_edition_sweep.py CASES OUT [ONLY]    (with PYTHONPATH = the edition's folder only)

``CASES`` (``torch.save``): {exercise: [(args, kwargs, reference output), ...]}, made by
``tests/test_kernel_edition.py`` in the judge's process. For every function defined in a module of the
``course_lib`` on the import path (the grading kernel's edition: ``grading/edition.py``), every case whose
inputs its signature accepts is run (a few seconds at most each); ``OUT`` gets, as JSON, each
(function, exercise) whose output equals the reference's on the first such case and on most of them (a function a blank answer could
call instead of writing the exercise), and the functions too slow to sweep (``slow``: a call stopped after ``CALL_SECONDS``,
stopped ``MAX_SLOW_CALLS`` times: data loaders and training loops). Outputs that say little (None, a bool) never count. A function that gets
an exercise's first input wrong is not tried on the rest. ``ONLY`` (optional, JSON): the qualified names to sweep, no
other (the test's control run, which only has to show that the references are recognised).
"""
from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import pkgutil
import shutil
import signal
import sys
import tempfile
import time

CALL_SECONDS = 5.0  # one call; longer is not an answer a kernel would use in its test
MAX_SLOW_CALLS = 3  # a function stopped this often (a data loader, a training loop) is named as not swept


class _Slow(BaseException):
    pass


def _alarm(signum, frame):
    raise _Slow()


def same(a, b) -> bool:
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    if isinstance(b, torch.Tensor):
        b = b.detach().cpu().numpy()
    if isinstance(b, np.ndarray) or isinstance(a, np.ndarray):
        try:
            a, b = np.asarray(a), np.asarray(b)
        except Exception:  # noqa: BLE001
            return False
        if a.shape != b.shape or a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
            return a.shape == b.shape and a.dtype == b.dtype and bool(np.all(a == b)) if a.dtype.kind == "U" else False
        if a.size == 0:
            return False
        return bool(np.allclose(a.astype(float), b.astype(float), rtol=1e-5, atol=1e-6, equal_nan=True))
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(same(a[k], b[k]) for k in b)
    if isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and len(a) == len(b) and len(b) > 0 and all(same(x, y) for x, y in zip(a, b))
    if isinstance(b, float) or isinstance(a, float):
        try:
            return abs(float(a) - float(b)) <= 1e-6 + 1e-5 * abs(float(b))
        except (TypeError, ValueError):
            return False
    return type(a) is type(b) and a == b


def telling(ref) -> bool:
    """Does an output say enough that equality is not a coincidence?"""
    return ref is not None and not isinstance(ref, bool)


def functions(only=None):
    import course_lib

    names = ["course_lib"] + [m.name for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")]
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that does not import offers nothing to call
            continue
        for attr, obj in sorted(vars(module).items()):
            if inspect.isfunction(obj) and obj.__module__ == name and (only is None or f"{name}.{attr}" in only):
                yield f"{name}.{attr}", obj


def main(cases_path: str, out_path: str, only_path: str | None = None) -> None:
    import torch

    cases = torch.load(cases_path, weights_only=False)
    signal.signal(signal.SIGALRM, _alarm)
    scratch = tempfile.mkdtemp(prefix="sweep-")
    os.chdir(scratch)  # anything a function writes goes here (a model converter given a path, say), then is removed
    try:
        only = None
        if only_path:
            with open(only_path) as fh:
                only = set(json.load(fh))
        _sweep(cases, out_path, only)
    finally:
        os.chdir("/")
        shutil.rmtree(scratch, ignore_errors=True)


def _sweep(cases: dict, out_path: str, only=None) -> None:
    found, slow, called = [], [], 0
    for qualname, fn in functions(only):
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        stopped = 0
        for exercise, runs in cases.items():
            if stopped >= MAX_SLOW_CALLS:
                slow.append(qualname)  # a data loader or a training loop: never a quick answer; named in OUT
                break
            agreed = tried = 0
            for args, kwargs, ref in runs:
                try:
                    sig.bind(*args, **kwargs)
                except TypeError:
                    continue
                tried += 1
                called += 1
                signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
                try:
                    out = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                    ok = telling(ref) and same(out, ref)
                except _Slow:
                    ok, stopped = False, stopped + 1
                except BaseException:  # noqa: BLE001 - a stub, a wrong input: not an answer
                    ok = False
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if not ok and tried == 1:
                    break  # wrong on the first input: the rest are only tried on a match
                agreed += ok
            if tried and agreed > tried / 2:  # the first and most: a case with random dropout may differ
                found.append({"function": qualname, "exercise": exercise, "cases": tried})
    with open(out_path, "w") as fh:
        json.dump({"found": found, "called": called, "slow": slow}, fh, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
