"""The instructor's graded path of every source notebook, run once, and what its graded test cells pass.

    python tests/graded_cells.py OUT        (OUT: torch.save of the record below)

Two tests read what the graded test cells (visible and hidden) give the student's functions when they meet
the instructor's solutions (checks in live mode): tests/test_kernel_edition.py (the inputs its sweep calls
every function of the kernel's edition on) and tests/test_bundle.py (the hidden cases' seeds, labels and
literal strings that must not ship in the students' bundle). One pass records both, in a fresh process
(:func:`shared_record` makes it once per test session; pytest-xdist workers share the file):

* ``inputs``: {exercise: [(args, kwargs), ...]}, the first ``PER_EXERCISE`` calls of each exercise whose
  arguments can be pickled (what cannot travel to another process is not recorded);
* ``seen``: {"visible" | "hidden": {"seeds", "labels", "strings"}}: the seeds given to ``core.seeded`` and
  ``torch.Generator().manual_seed``, the Cases' labels and their literal string inputs (12 characters or
  more), by the kind of test cell that made them.
"""
from __future__ import annotations

import copy
import os
import pickle
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PER_EXERCISE = 4  # cases per exercise in the sweep (enough to rule out a coincidence, few enough to be quick)
_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def _walk_strings(x, out, depth=0):
    if depth > 6:
        return
    if isinstance(x, str):
        if len(x) >= 12:
            out.add(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _walk_strings(y, out, depth + 1)
    elif isinstance(x, dict):
        for k, v in x.items():
            _walk_strings(k, out, depth + 1)
            _walk_strings(v, out, depth + 1)


def record() -> dict:
    """Run the graded path of every source notebook in this process and return the record (see above)."""
    import matplotlib

    matplotlib.use("Agg")
    import nbformat
    import torch

    sys.path[:0] = [p for p in (REPO, HERE) if p not in sys.path]
    import course_lib.checks as checks_pkg
    from conftest import source_notebooks
    from course_lib.checks import core, registry, transcript

    inputs: dict = {}
    seen = {k: {"seeds": set(), "labels": set(), "strings": set()} for k in ("visible", "hidden")}
    current = ["visible"]
    seeded, case_init, generator, student_call = core.seeded, core.Case.__init__, torch.Generator, \
        transcript.student_call

    def rec_seeded(seed):
        seen[current[0]]["seeds"].add(int(seed))
        return seeded(seed)

    class RecGenerator(generator):
        def manual_seed(self, seed):
            seen[current[0]]["seeds"].add(int(seed))
            return super().manual_seed(seed)

    def rec_case(self, label, args, kwargs=None, **more):
        case_init(self, label, args, {} if kwargs is None else kwargs, **more)
        seen[current[0]]["labels"].add(label)
        _walk_strings(args, seen[current[0]]["strings"])
        _walk_strings(kwargs or {}, seen[current[0]]["strings"])

    def rec_call(run, exercise, label, args, kwargs, **more):
        runs = inputs.setdefault(exercise, [])
        if len(runs) < PER_EXERCISE:
            try:
                pickle.dumps((args, kwargs))  # what cannot travel to another process is not recorded
                runs.append(copy.deepcopy((tuple(args), dict(kwargs))))
            except Exception:  # noqa: BLE001
                pass
        return student_call(run, exercise, label, args, kwargs, **more)

    modules = {getattr(checks_pkg, e.checks[0].split(".")[2]) for e in registry.exercises()}
    patched = [(m, m.seeded) for m in modules if hasattr(m, "seeded")]
    try:
        for m, _ in patched:
            m.seeded = rec_seeded
        core.seeded, core.Case.__init__, torch.Generator = rec_seeded, rec_case, RecGenerator
        transcript.student_call = rec_call
        for _, path in source_notebooks():
            nb = nbformat.read(path, as_version=4)
            cwd = os.getcwd()
            os.chdir(os.path.dirname(path))
            try:
                ns = {"__name__": "__notebook__"}
                for cell in nb.cells:
                    meta = cell.metadata.get("nbgrader", {})
                    if cell.cell_type != "code":
                        continue
                    if meta.get("grade_id") == "setup" or meta.get("solution"):
                        exec(compile(_MARKERS.sub("", cell.source), f"<{meta.get('grade_id')}>", "exec"), ns)
                    elif meta.get("grade") and "checks." in cell.source:
                        current[0] = "hidden" if "hidden=True" in cell.source else "visible"
                        exec(compile(cell.source, f"<{meta.get('grade_id')}>", "exec"), dict(ns))
            finally:
                os.chdir(cwd)
    finally:
        for m, original in patched:
            m.seeded = original
        core.seeded, core.Case.__init__, torch.Generator = seeded, case_init, generator
        transcript.student_call = student_call
    return {"inputs": inputs, "seen": seen}


def shared_record(root: str) -> dict:
    """:func:`record`, made once under ``root`` (in a fresh interpreter) and read by every process that asks."""
    import torch
    from bundle_student import _locked

    out = os.path.join(root, "graded-cells-record.pt")
    with _locked(out + ".lock"):
        if not os.path.exists(out):
            env = {k: v for k, v in os.environ.items() if k != "COURSE_CHECK_MODE"}  # live mode, as in the repo
            proc = subprocess.run([sys.executable, __file__, out + ".tmp"], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=1200)
            if proc.returncode:
                raise RuntimeError(f"running the notebooks' graded path failed:\n{proc.stderr[-4000:]}")
            os.replace(out + ".tmp", out)
    return torch.load(out, weights_only=False)


if __name__ == "__main__":
    import torch

    torch.save(record(), sys.argv[1])
