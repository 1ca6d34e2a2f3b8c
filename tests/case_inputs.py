"""Every input a lesson's checks build, visible and hidden, as digests: what shows that a change of the case
builders (``course_lib/checks/<topic>.py``'s ``*_cases_from`` and the judge's calls of them) leaves the inputs
bit-identical.

    python tests/case_inputs.py save /tmp/before.json 02_masking 07_efficient   # before the change
    python tests/case_inputs.py compare /tmp/before.json                        # after it: exit 1 on a difference

Each check of each exercise (the registry's declarations) runs twice, visible and hidden, on the exercise's first
right alternative wrapped in a recorder. Two streams are kept, in order:

* ``cases``: every :class:`~course_lib.checks.core.Case` made while the check runs (its label, args and kwargs, digested
  when it is made, before anything can touch it): the visible and hidden cases and the property tests' inputs;
* ``calls``: the arguments of every call of the answer (digested before the call) and its output.

A digest covers the bytes of every array and tensor (dtype, shape, and ``requires_grad`` too), the parameters and
settings of a module, and for a function its code, defaults and closure (so a feature map or a ``predict`` closure
over random weights is compared by its weights). The global random generators are reseeded before each check, so
a check that draws from them draws the same. What it does NOT cover: record and replay modes (the same builders,
called from the same checks) and the students' bundle (its stored values are written from these inputs).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import sys
import types

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from course_lib.checks import core, registry  # noqa: E402

_SCALARS = (bool, int, str, bytes, type(None))


def _plain(x, depth: int = 0):
    """``x`` as nested plain data (str, int, tuples) whose repr is the same exactly when the inputs are."""
    if depth > 40:
        raise RecursionError("an input nested more than 40 levels deep")
    d = depth + 1
    if isinstance(x, float):
        return ("float", x.hex())
    if isinstance(x, complex):
        return ("complex", x.real.hex(), x.imag.hex())
    if isinstance(x, _SCALARS):
        return (type(x).__name__, x)
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ("ndarray[object]", x.shape, tuple(_plain(v, d) for v in x.ravel()))
        data = np.ascontiguousarray(x).tobytes()
        return ("ndarray", x.dtype.str, x.shape, hashlib.sha256(data).hexdigest())
    if isinstance(x, np.generic):
        return ("npscalar", x.dtype.str, hashlib.sha256(x.tobytes()).hexdigest())
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return ("tensor", str(t.dtype), tuple(t.shape), bool(x.requires_grad), hashlib.sha256(data).hexdigest())
    if isinstance(x, torch.dtype):
        return ("torch.dtype", str(x))
    if isinstance(x, np.dtype):
        return ("np.dtype", x.str)
    if isinstance(x, type):
        return ("type", x.__module__, x.__qualname__)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_plain(v, d) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((_plain(k, d), _plain(v, d)) for k, v in x.items()))
    if isinstance(x, (set, frozenset)):
        return (type(x).__name__, tuple(sorted(repr(_plain(v, d)) for v in x)))
    if isinstance(x, torch.nn.Module):
        settings = tuple((k, _plain(v, d)) for k, v in sorted(vars(x).items())
                         if not k.startswith("_") and isinstance(v, (float,) + _SCALARS))
        return ("module", type(x).__module__, type(x).__qualname__, x.training, repr(x), settings,
                tuple((k, _plain(v, d)) for k, v in x.state_dict(keep_vars=True).items()))
    if isinstance(x, functools.partial):
        return ("partial", _plain(x.func, d), _plain(x.args, d), _plain(x.keywords, d))
    if isinstance(x, types.FunctionType):
        code = x.__code__
        cells = tuple(_plain(c.cell_contents, d) for c in (x.__closure__ or ()))
        return ("function", x.__module__, x.__qualname__, hashlib.sha256(code.co_code).hexdigest(),
                _plain(x.__defaults__, d), _plain(x.__kwdefaults__, d), cells)
    if isinstance(x, (types.BuiltinFunctionType, types.MethodType)):
        return ("callable", getattr(x, "__module__", None), getattr(x, "__qualname__", repr(x)))
    if hasattr(x, "__dict__"):
        return ("object", type(x).__module__, type(x).__qualname__, _plain(vars(x), d))
    return ("repr", type(x).__qualname__, repr(x))


def digest(x) -> str:
    return hashlib.sha256(repr(_plain(x)).encode()).hexdigest()[:20]


def _recorded(answer, calls: list):
    @functools.wraps(answer)
    def student(*args, **kwargs):
        entry = {"in": digest((args, kwargs))}
        calls.append(entry)
        out = answer(*args, **kwargs)
        entry["out"] = digest(out)
        return out
    return student


def run_check(qualified: str, answer, hidden: bool) -> dict:
    """The cases made and the calls of ``answer`` while the check ``qualified`` runs (visible or hidden)."""
    cases: list = []
    calls: list = []
    made = core.Case.__init__

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        cases.append({"label": self.label, "digest": digest((self.label, self.args, self.kwargs))})

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    core.Case.__init__ = init
    error = None
    try:
        registry.resolve(qualified)(_recorded(answer, calls), hidden=hidden)
    except Exception as failure:  # noqa: BLE001 - a right answer must pass: recorded, and the comparison shows it
        error = f"{type(failure).__name__}: {failure}"[:500]
    finally:
        core.Case.__init__ = made
    return {"cases": cases, "calls": calls, "error": error}


def inputs(assignments) -> dict:
    """{"<check> visible|hidden": run_check(...)} for every check of every exercise of ``assignments``."""
    out = {}
    for assignment in assignments:
        for e in registry.exercises(assignment):
            if not e.right:
                raise LookupError(f"{assignment}.{e.name} declares no right alternative to record the inputs with")
            for qualified in e.checks:
                for hidden in (False, True):
                    key = f"{qualified} {'hidden' if hidden else 'visible'}"
                    if key not in out:
                        out[key] = run_check(qualified, e.right[0].fn, hidden)
    return out


def differences(before: dict, after: dict) -> list[str]:
    """What differs, one line each (empty when every input is identical)."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in after or key not in before:
            lines.append(f"{key}: only {'before' if key in before else 'after'}")
            continue
        b, a = before[key], after[key]
        if a["error"] or b["error"]:
            lines.append(f"{key}: error before {b['error']!r}, after {a['error']!r}")
        for stream in ("cases", "calls"):
            if len(b[stream]) != len(a[stream]):
                lines.append(f"{key}: {len(b[stream])} {stream} before, {len(a[stream])} after")
            for i, (x, y) in enumerate(zip(b[stream], a[stream])):
                if x != y:
                    lines.append(f"{key}: {stream}[{i}] differs: before {x}, after {y}")
    return lines


def main(argv) -> int:
    if len(argv) < 2 or argv[0] not in ("save", "compare"):
        print(__doc__)
        return 2
    command, path, assignments = argv[0], argv[1], argv[2:]
    if command == "save":
        if not assignments:
            print("name the assignments whose inputs to save, e.g. 02_masking 07_efficient")
            return 2
        found = inputs(assignments)
        with open(path, "w") as f:
            json.dump({"assignments": assignments, "inputs": found}, f, indent=1)
        errors = [k for k, v in found.items() if v["error"]]
        print(f"saved {len(found)} check runs, {sum(len(v['cases']) for v in found.values())} cases, "
              f"{sum(len(v['calls']) for v in found.values())} calls to {path}; errors in {errors}")
        return 1 if errors else 0
    with open(path) as f:
        saved = json.load(f)
    found = inputs(saved["assignments"])
    lines = differences(saved["inputs"], found)
    print("\n".join(lines) if lines else
          f"identical: {len(found)} check runs, {sum(len(v['cases']) for v in found.values())} cases, "
          f"{sum(len(v['calls']) for v in found.values())} calls ({', '.join(saved['assignments'])})")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
