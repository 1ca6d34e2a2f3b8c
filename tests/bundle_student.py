"""Run the students' bundle as a student who gets everything right (issue 41's check).

    .venv/bin/python tests/bundle_student.py [--released 01_attention,02_masking] \
        [--lessons 03_multihead,05_blocks] [--out DIR]

1. release every assignment's notebooks with nbgrader's own preprocessors (solutions ->
   stubs, hidden tests removed);
2. build the bundle (``grading.bundle.build``) with ``--released`` solutions out (default:
   none, the bundle a class gets before any solution is released);
3. fill each release notebook's solution cells with the instructor's solutions (by
   ``grade_id``), next to the bundle's own data files;
4. execute every filled notebook top to bottom in a kernel that can import ``course_lib``
   only from the bundle (the repository's editable install is removed from the kernel's
   import machinery by an IPython start-up file, and the kernel checks where
   ``course_lib`` came from);
5. print every cell that raised (lesson, cell index, grade_id, error) and exit 1 when any did.

``--json FILE`` writes {notebook: [errors]} for tests. Demonstration cells count: the issue
asks for zero errors in every cell, not only the graded ones.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import nbformat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from grading import bundle  # noqa: E402

_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
# run in the kernel before any cell: course_lib may come only from the bundle
_ISOLATE = r'''
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (getattr(f, "__module__", "") or "")
                    and "editable" not in type(f).__module__ and "editable" not in getattr(f, "__name__", "")]
sys.path[:] = [p for p in sys.path if p.rstrip("/") != {repo!r}]
import course_lib, os
_where = os.path.dirname(os.path.dirname(os.path.abspath(course_lib.__file__)))
if _where != {lib!r}:
    raise SystemExit(f"course_lib imported from {{_where}}, not from the bundle {lib!r}")
'''


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def release_all(dest: str) -> None:
    """Release notebooks of every assignment into ``dest/<assignment>/`` (with their data files)."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions
    from traitlets.config import Config

    cfg = Config()
    cfg.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    for a in bundle.assignments():
        src_dir = os.path.join(bundle.NOTEBOOKS_DIR, a)
        os.makedirs(os.path.join(dest, a), exist_ok=True)
        for f in sorted(os.listdir(src_dir)):
            path = os.path.join(src_dir, f)
            if f.endswith(".ipynb"):
                nb = nbformat.read(path, as_version=4)
                for pre in (ClearSolutions(config=cfg), ClearHiddenTests(config=cfg), ClearOutput(config=cfg)):
                    nb, _ = pre.preprocess(nb, {"language": "python"})
                nbformat.write(nb, os.path.join(dest, a, f))
            elif os.path.isfile(path):
                shutil.copy(path, os.path.join(dest, a, f))


def fill(release_nb: str, source_nb: str, out_nb: str) -> None:
    """The release notebook with each solution cell replaced by the instructor's solution."""
    src = {_nbg(c).get("grade_id"): _MARKERS.sub("", c.source)
           for c in nbformat.read(source_nb, as_version=4).cells if _nbg(c).get("solution")}
    nb = nbformat.read(release_nb, as_version=4)
    for cell in nb.cells:
        gid = _nbg(cell).get("grade_id")
        if _nbg(cell).get("solution") and gid in src:
            cell.source = src[gid]
    nbformat.write(nb, out_nb)


def execute(path: str, lib_dir: str, timeout: int = 900) -> list[dict]:
    """Run a notebook top to bottom (errors allowed, so every failing cell is listed)."""
    from nbclient import NotebookClient

    ipydir = tempfile.mkdtemp(prefix="bundle-ipython-")
    startup = os.path.join(ipydir, "profile_default", "startup")
    os.makedirs(startup)
    with open(os.path.join(startup, "00-only-the-bundle.py"), "w") as fh:
        fh.write(_ISOLATE.format(repo=REPO, lib=os.path.abspath(lib_dir)))
    env_keep = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_CHECK_MODE")}
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env_keep, PYTHONPATH=os.path.abspath(lib_dir), IPYTHONDIR=ipydir, MPLBACKEND="agg")
    try:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": os.path.dirname(path)}})
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
        shutil.rmtree(ipydir, ignore_errors=True)
    errors = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                errors.append({"cell": i, "grade_id": _nbg(cell).get("grade_id"), "ename": o.get("ename"),
                               "evalue": str(o.get("evalue"))[:500]})
    nbformat.write(nb, path)
    return errors


def run(out: str, released: list[str], lessons: list[str] | None = None) -> dict:
    """Build, fill and execute; return {assignment/notebook: [errors]}."""
    release_dir = os.path.join(out, "release")
    release_all(release_dir)
    bdir = os.path.join(out, "bundle")
    bundle.build(bdir, released=released, release_dir=release_dir)
    results = {}
    for a in bundle.assignments():
        if lessons and not any(a.startswith(x) for x in lessons):
            continue
        for src in bundle.source_notebooks(a):
            name = os.path.basename(src)
            target = os.path.join(bdir, "notebooks", a, name)
            fill(target, src, target)
            results[f"{a}/{name}"] = execute(target, bdir)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--released", default="", help="comma-separated assignments whose solutions are out")
    p.add_argument("--lessons", default="", help="comma-separated assignments (or prefixes such as 03) to run")
    p.add_argument("--out", default=None, help="working folder (default: a new temporary folder)")
    p.add_argument("--json", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="bundle-student-")
    released = [x for x in args.released.split(",") if x]
    lessons = [x for x in args.lessons.split(",") if x] or None
    results = run(out, released, lessons)
    bad = 0
    for nb, errors in results.items():
        print(f"{nb}: {'ok' if not errors else f'{len(errors)} cell(s) raised'}")
        for e in errors:
            bad += 1
            print(f"    cell {e['cell']} ({e['grade_id'] or 'not graded'}): {e['ename']}: {e['evalue'][:300]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    print(f"[bundle-student] {out}: {len(results)} notebook(s), {bad} failing cell(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
