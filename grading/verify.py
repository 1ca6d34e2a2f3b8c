"""Verdicts decided outside the student's process.

The judge is not in the dock: when grading, each graded test cell's checks run in the
student's kernel in *record* mode (``course_lib.checks.transcript``): they call the
student's functions on the test's inputs and publish every output as plain data (a
``display_data`` output of MIME type ``RECORD_MIME``). They compute no reference, so no
expected value exists in the kernel to be read.

``VerifyOutsideKernel`` runs in nbgrader's own process right after the kernel has
finished (``c.Autograde.autograde_preprocessors``, after ``ResilientExecute``). For each
graded test cell it

1. takes the checks the cell calls from the cell's *source* (restored from the
   gradebook by nbgrader before execution, so the submission cannot change it):
   every ``checks.<lesson>.check_<exercise>(..., hidden=...)`` call, in order;
2. takes the records from the cell's outputs (data only: decoded without pickle,
   arrays of an allowlist of plain dtypes);
3. replays each check here: inputs regenerated, the reference computed, every call of
   the student's function answered from the record; the first failing check's message
   is the verdict;
4. removes the records from the outputs and, when the verdict is a failure, appends
   it as an ``AssertionError`` output, which nbgrader's ``SaveAutoGrades`` scores 0.

So a cell scores its points only when the kernel ran it without an error *and* the
verifier accepts what it recorded. The kernel can lower its score (a cell that raised
scores 0, a cell without a record scores 0), never raise it: patching numpy, tracing
the checker, forging replies or objects that compare equal to anything change at most
what is recorded, and only right outputs pass. Students see the verifier's message in
their feedback; in JupyterLab nothing changes for them (checks run live there).

Does NOT cover: the sandbox (``grading.sandbox``), static integrity findings
(``grading.integrity``), or how the student's function reaches the record (core).
"""
from __future__ import annotations

import ast
import importlib
import re

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from traitlets import Bool

from course_lib.checks import transcript

_CHECK_MODULE = re.compile(r"^[a-z_][a-z0-9_]*$")


def check_calls(source: str) -> list[tuple[str, str, dict]]:
    """(lesson module, check name, literal keyword arguments) of every check call, in order.

    Raises ValueError when the source cannot be parsed or a call's keywords are not literals.
    """
    tree = ast.parse(re.sub(r"^[ \t]*[%!].*$", "", source, flags=re.M))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr.startswith("check_") and isinstance(f.value, ast.Attribute)
                and isinstance(f.value.value, ast.Name) and f.value.value.id == "checks"):
            kwargs = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise ValueError("a check call with **kwargs cannot be verified")
                kwargs[kw.arg] = ast.literal_eval(kw.value)
            found.append((node.lineno, node.col_offset, f.value.attr, f.attr, kwargs))
    return [(m, name, kw) for _, _, m, name, kw in sorted(found)]


def verify_cell(source: str, records: list) -> str | None:
    """The verifier's verdict for one test cell: None (pass) or the failure message."""
    try:
        calls = check_calls(source)
    except (SyntaxError, ValueError) as err:
        return f"this test cell could not be verified outside the kernel ({err})"
    if not calls:
        return "this test cell calls no course check, so it cannot be verified outside the kernel"
    position = 0
    for module_name, check_name, kwargs in calls:
        if not _CHECK_MODULE.match(module_name):
            return f"unknown check module {module_name!r}"
        try:
            module = importlib.import_module(f"course_lib.checks.{module_name}")
            check = getattr(module, check_name)
        except (ImportError, AttributeError):
            return f"unknown check checks.{module_name}.{check_name}"
        verdict, used = transcript.replay(check, kwargs, records[position:])
        position += used
        if verdict is not None:
            return verdict
    return None


def records_of(cell) -> list:
    """The recorded calls in a cell's outputs, in order (decoded later, as data)."""
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "display_data" and transcript.RECORD_MIME in output.get("data", {}):
            entry = output["data"][transcript.RECORD_MIME]
            out.append(entry if isinstance(entry, dict) else {})
    return out


class VerifyOutsideKernel(Preprocessor):
    """Replay every graded test cell's checks on its record; a failing verdict scores the cell 0."""

    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        records = records_of(cell)
        cell.outputs = [o for o in cell.get("outputs", [])
                        if not (o.get("output_type") == "display_data"
                                and transcript.RECORD_MIME in o.get("data", {}))]
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not (meta.get("grade") and not meta.get("solution")):
            return cell, resources
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            # the kernel's failure already scores 0; when its checks failed on recorded outputs, the
            # verifier's message (which names misconceptions from the reference) replaces the kernel's
            if records and all("AssertionError" in str(o.get("ename")) or o.get("ename") == "NotImplementedYet"
                               for o in errors):
                try:
                    verdict = verify_cell(cell.source, records)
                except Exception:
                    verdict = None
                if verdict is not None:
                    cell.outputs = [o for o in cell.outputs if o.get("output_type") != "error"]
                    cell.outputs.append(new_output("error", ename="AssertionError", evalue=verdict,
                                                   traceback=[f"AssertionError: {verdict}"]))
            return cell, resources
        try:
            verdict = verify_cell(cell.source, records)
        except Exception as err:  # fail closed: a cell the verifier cannot judge earns nothing
            verdict = f"this test could not be verified ({type(err).__name__}: {err})"
        if verdict is not None:
            # what the kernel printed ("visible tests passed") is not the verdict: only the verifier's message stays
            cell.outputs = [o for o in cell.outputs if o.get("output_type") != "stream"]
            cell.outputs.append(new_output("error", ename="AssertionError", evalue=verdict,
                                           traceback=[f"AssertionError: {verdict}"]))
            resources.setdefault("course_verifier", []).append(
                {"grade_id": meta.get("grade_id"), "message": verdict[:500]})
        return cell, resources
