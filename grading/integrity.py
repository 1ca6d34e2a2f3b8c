"""Integrity checks in proportion: what could change a test's verdict costs that test, nothing more.

Two nbgrader preprocessors, wired in ``nbgrader_config.py``:

``ScanSubmission`` (first step of autograde's sanitize pass, before nbgrader
restores the locked cells) compares the submission with the gradebook and the
instructor's source notebook, puts the notebook's structure back as released, and
reads the code a student could write.

*Restored, at no cost* (the release notebook tells students "grading restores test
cells"; each restoration is a note in the feedback, never an accusation):

* a locked cell (setup, tests) that was edited: nbgrader's ``OverwriteCells`` puts the
  released source back and it runs;
* a locked or graded cell that was deleted: inserted again where the release has it;
* nbgrader metadata that was changed (points, a test turned into a solution, the cell
  type): put back as released;
* cells whose nbgrader metadata is gone (copied into a fresh notebook): matched to the
  release by their content (a locked cell by its text, an answer by the functions it
  defines, a written answer by the prompt above it) and graded as those cells;
* a cell with a grade id of no cell of this assignment: graded as a plain cell.

*A cell is the instructor's* when it matches one of the source notebook's cells up to
whitespace and line endings; in a cell the student edited (the clinical-sentence cell
of lesson 01 invites it), every top-level statement equal to one of the instructor's
(same syntax tree) stays the instructor's, and only the rest is read as the student's.

*Costs points* (found in code the student wrote): monkeypatching (assigning attributes
of imported names: ``np.allclose = ...``, ``checks.attention.check_softmax = ...``),
rebinding names the setup cell imported (``checks = ...``), ``setattr``/``delattr`` on
anything but self/cls, redefining exception classes (``AssertionError``),
``builtins``/``__builtins__``, ``sys.modules``, ``ctypes``, ``gc``, ``importlib``,
``eval``/``exec``/``compile``/``__import__``, frame and history introspection
(``inspect``, ``sys._getframe``, ``get_ipython``, ``_ih``), shell escapes and magics
other than display and timing ones, importing the checks, ``course_lib`` itself or a
``course_lib`` module that holds a graded exercise's reference (:func:`reference_modules`),
calling PyTorch's built-in attention, ``__code__``/``__globals__``/``__dict__``/``__setattr__``
(also by ``getattr`` with the name as a string; a computed name in ``getattr`` is a finding), and
importing a module the grading environment lacks (one the submission wrote into its folder).
Every copy of a grade id's cell but the last is read as the student's (nbgrader's DeduplicateIds
keeps the last; the others run as plain cells). Allowed: ``%matplotlib``, ``%time``/``%timeit``
(their code is read), ``obj?``, ``help(...)`` (a display magic whose argument holds ``{...}`` or
``$`` is not: IPython evaluates it), and importing the ``course_lib`` modules
that hold no graded reference (``plotting``, ``pretrained``, the data loaders).

``ApplyIntegrity`` (autograde pass, right after execution) turns every autograded test
that runs after the first cell with a finding into 0 with an ``IntegrityError`` output
naming the finding (cells run in order: code can only change the tests after it), and
puts a note at the top of the notebook listing the findings and the restorations.
Calling the course's reference implementation at run time is caught separately by
``course_lib.checks`` (that test scores 0, ``IntegrityError``).

The scan itself (what a cell is read for, and the findings' wording) is ``course_lib.checks.scan``, shipped with
the students' edition: every visible test runs it on the code its kernel ran, so a finding that grading will
charge fails the visible test in JupyterLab first (``tests/test_kernel_scan.py``). Every test after the cell
is zeroed, not only the finding's own, because each finding is a capability over later code (a rewritten
``__code__`` or ``globals()`` reaches any function, the checks' too); the visible test says so.

Static checks cannot see everything a determined student could write; together
with the sandbox (grading/kernel/launcher.py) and the verifier outside the kernel
(grading/verify.py) they close the routes that need no effort to take.
"""
from __future__ import annotations

import functools
import os

from nbformat.v4 import new_markdown_cell, new_output
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor

from course_lib.checks.scan import (  # noqa: F401 - one scan, shared with the visible tests
    MATPLOTLIB_RUN, _imports_in, _installed, _normalise, _solution_defs, _without_hidden_tests, _written_names,
    exercise_names, habit_note, imported_names, instructor_statements, neutralise_habits, reference_modules,
    scan_code, unavailable_imports)
from grading import NOTEBOOKS_DIR

META_KEY = "course_integrity"
NOTES_KEY = "course_integrity_notes"  # restorations: shown in the feedback, cost nothing
HABITS_KEY = "course_integrity_habits"  # habits not run (!pip, %config, ...), unavailable imports: cost nothing
CELL_KEY = "course_integrity"  # on the cell where a finding is: the autograded tests after it score 0


def _source_notebook(assignment: str, notebook: str) -> list:
    """The instructor's notebook's cells (unlocked instructor cells are not the student's)."""
    import nbformat

    path = os.path.join(NOTEBOOKS_DIR, assignment, f"{notebook}.ipynb")
    if not os.path.exists(path):
        return []
    return list(nbformat.read(path, as_version=4).cells)


@functools.lru_cache(maxsize=1)
def _lessons_by_grade_id() -> dict:
    """grade id -> (assignment, notebook) of every source notebook (read as plain JSON)."""
    import json

    out: dict = {}
    for folder in sorted(os.listdir(NOTEBOOKS_DIR)) if os.path.isdir(NOTEBOOKS_DIR) else []:
        path = os.path.join(NOTEBOOKS_DIR, folder)
        for f in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            if f.endswith(".ipynb"):
                with open(os.path.join(path, f), encoding="utf-8") as fh:
                    for cell in json.load(fh).get("cells", []):
                        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                        if gid:
                            out.setdefault(gid, (folder, f[:-6]))
    return out


def _lesson_of(grade_ids, assignment: str):
    """(assignment, notebook) of another lesson whose cells these mostly are, or None."""
    import collections

    known = _lessons_by_grade_id()
    counts = collections.Counter(known[g] for g in grade_ids if g in known and known[g][0] != assignment)
    if not counts:
        return None
    lesson, n = counts.most_common(1)[0]
    return lesson if n * 2 > len(grade_ids) else None


def _gid(cell):
    meta = cell.metadata.get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


class ScanSubmission(NbGraderPreprocessor):
    """Put the notebook's structure back as released (restorations are notes), and record what in the
    student's code could change a later test's verdict (findings, on the cell where each is).
    Runs before nbgrader restores the locked cells' sources."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        try:
            with Gradebook(info["db_url"]) as gb:
                stored = gb.find_notebook(info["notebook"], info["assignment"])
                source_cells = {c.name: (c.locked, c.source, c.cell_type) for c in stored.source_cells}
                grade_cells = {c.name: c.max_score for c in stored.grade_cells}
                solution_cells = {c.name for c in stored.solution_cells}
        except MissingEntry:  # a notebook beside the assignment's own: nothing of it is graded, no accusation
            other = _lesson_of({_gid(c) for c in nb.cells} - {None}, info["assignment"])
            nb.metadata[META_KEY] = []
            nb.metadata[NOTES_KEY] = [f"notebook {info['notebook']!r} is not part of assignment {info['assignment']!r}"
                                      + (f" (it is {other[0]}'s {other[1]}.ipynb: the wrong assignment's notebook)"
                                         if other else "") + "; it is not graded"]
            return nb, resources
        source_nb = _source_notebook(info["assignment"], info["notebook"])
        order = [g for g in (_gid(c) for c in source_nb) if g in source_cells] or list(source_cells)
        notes: list[str] = []
        self._adopt_cells_without_metadata(nb, source_nb, source_cells, grade_cells, solution_cells, notes)

        instructor = [c for c in source_nb if c.cell_type == "code"]
        ids = {_gid(c) for c in nb.cells} - {None}
        foreign = ids - set(source_cells)  # ("setup" is every lesson's)
        other = _lesson_of(foreign, info["assignment"]) if len(foreign) > len(ids - foreign) else None
        if other:
            # the wrong assignment's notebook: that lesson's own cells are an instructor's, not the student's
            # code; this assignment's cells are put back as released below and score what they earn
            notes.append(f"this is {other[0]}'s notebook ({other[1]}.ipynb), not {info['assignment']}'s: the wrong "
                         f"assignment's notebook was handed in, so none of {info['assignment']}'s answers are in it; "
                         f"its cells were put back as released and scored as they ran (hand in {info['notebook']}"
                         f".ipynb of {info['assignment']} and ask for a regrade)")
            instructor = instructor + [c for c in _source_notebook(*other) if c.cell_type == "code"]
        instructor_sources = {_normalise(c.source) for c in instructor}
        instructor_sources |= {_normalise(_without_hidden_tests(c.source)) for c in instructor}  # as released
        # the statements of the instructor's own cells (not answers): an edited demo cell keeps them
        shared = instructor_statements([c.source for c in instructor if not c.metadata.get("nbgrader", {}).get("solution")])
        # what the locked cells import as released (they are restored so): an import a student added to the
        # setup cell is not run, so it protects nothing
        locked_sources = [src for locked, src, kind in source_cells.values() if locked and kind == "code"]
        protected = imported_names([c.source for c in instructor] + locked_sources)
        imported = set(protected) | set(imported_names([c.source for c in nb.cells if c.cell_type == "code"]))
        findings: list[str] = []
        habits_noted: list[str] = []
        # the words of the student's string constants: an unavailable module named there may be one a cell writes
        written = _written_names([c.source for c in nb.cells if c.cell_type == "code"
                                  and _normalise(c.source) not in instructor_sources])
        seen = set()
        # nbgrader's DeduplicateIds (after this scan) keeps the last cell of a grade id and turns the
        # others into plain cells, which nbgrader neither restores nor grades: they are read as the student's
        last = {_gid(c): i for i, c in enumerate(nb.cells)}
        for i, cell in enumerate(nb.cells):
            meta = cell.metadata.get("nbgrader", {})
            gid = _gid(cell)
            editable, solution = False, False
            if gid is not None and last.get(gid) != i:
                editable = _normalise(cell.source) not in instructor_sources  # an exact copy runs as released
            elif gid is not None and gid in source_cells:
                seen.add(gid)
                locked, stored_source, cell_type = source_cells[gid]
                if bool(meta.get("solution", False)) != (gid in solution_cells) or \
                        bool(meta.get("grade", False)) != (gid in grade_cells) or bool(meta.get("locked", False)) != locked:
                    notes.append(f"cell {gid}: its nbgrader metadata (grade/solution/locked) had changed; "
                                 "it was put back as released")
                elif gid in grade_cells and meta.get("points") is not None and \
                        float(meta["points"]) != float(grade_cells[gid]):
                    notes.append(f"cell {gid}: its points had been changed to {meta['points']}; "
                                 f"graded out of {grade_cells[gid]:g} as released")
                if locked and _normalise(cell.source) != _normalise(_without_hidden_tests(stored_source)):
                    notes.append(f"cell {gid}: this locked cell was edited; the released cell was restored and run")
                if cell.cell_type != cell_type:
                    notes.append(f"cell {gid}: its type had been changed from {cell_type} to {cell.cell_type}; "
                                 "put back as released")
                editable, solution = not locked, gid in solution_cells
            elif gid is not None and other:  # said once, above
                editable = _normalise(cell.source) not in instructor_sources
            elif gid is not None:
                notes.append(f"cell {gid}: not a cell of this assignment (a notebook from elsewhere?); "
                             "run as an ordinary cell")
                editable = True
            else:
                editable = _normalise(cell.source) not in instructor_sources  # a cell the student added or changed
            if editable and cell.cell_type == "code":
                where = f"cell {gid or i}"
                cell.source, habits = neutralise_habits(cell.source)
                habits_noted += [habit_note(where, line) for line in habits]
                cell.source, missing = unavailable_imports(cell.source)
                found = scan_code(cell.source, where, imported, protected, frozenset() if solution else shared)
                for m in missing:
                    if m.lstrip(".").split(".")[0] in written or m.startswith("."):
                        found.append(f"{where}: imports {m}, which is not installed: a module written by the "
                                     "submission, whose code this check cannot read")
                    else:
                        habits_noted.append(f"{where}: imports {m}, which the grading environment does not have: "
                                            "the import raised ModuleNotFoundError there, so that cell failed and "
                                            "the cells after it ran; this costs only what that cell earns")
                if found:
                    cell.metadata[CELL_KEY] = found
                    findings += found
        self._restore_deleted(nb, order, source_cells, grade_cells, solution_cells, seen, notes)
        nb.metadata[META_KEY] = findings
        nb.metadata[NOTES_KEY] = notes
        nb.metadata[HABITS_KEY] = habits_noted
        self._repair_metadata(nb, source_cells, grade_cells, solution_cells)
        return nb, resources

    @staticmethod
    def _adopt_cells_without_metadata(nb, source_nb, source_cells, grade_cells, solution_cells, notes) -> None:
        """Cells copied into a fresh notebook lose their nbgrader metadata: give each graded, locked or
        answer cell of the release that is missing the cell that matches it by content (a locked cell
        by its text, an answer by the functions it defines, a written answer by the prompt above it)."""
        present = {_gid(c) for c in nb.cells}
        missing = [g for g in source_cells if g not in present]
        if not missing:
            return
        bare = [c for c in nb.cells if _gid(c) is None]
        taken = set()
        source_by_gid = {_gid(c): (k, c) for k, c in enumerate(source_nb) if _gid(c)}
        for gid in missing:
            locked, stored_source, cell_type = source_cells[gid]
            match = None
            for cell in bare:
                if id(cell) in taken or cell.cell_type != cell_type:
                    continue
                if locked and _normalise(cell.source) == _normalise(_without_hidden_tests(stored_source)):
                    match = cell
                elif gid in solution_cells and cell_type == "code":
                    names = _solution_defs(stored_source)
                    if names and names <= _solution_defs(cell.source):
                        match = cell
                if match is not None:
                    break
            if match is None and gid in solution_cells and cell_type == "markdown" and gid in source_by_gid:
                k = source_by_gid[gid][0]
                prompt = _normalise(source_nb[k - 1].source) if k > 0 else None
                for j, cell in enumerate(nb.cells[:-1]):
                    after = nb.cells[j + 1]
                    if prompt and _normalise(cell.source) == prompt and _gid(after) is None \
                            and after.cell_type == "markdown" and id(after) not in taken:
                        match = after
                        break
            if match is not None:
                taken.add(id(match))
                match.metadata["nbgrader"] = {"grade_id": gid, "grade": gid in grade_cells,
                                              "solution": gid in solution_cells, "locked": bool(locked)}
                if gid in grade_cells:
                    match.metadata["nbgrader"]["points"] = float(grade_cells[gid])
                notes.append(f"cell {gid}: it had lost its nbgrader metadata (copied into a new notebook?); "
                             "matched to the release by its content and graded as that cell")

    @staticmethod
    def _restore_deleted(nb, order, source_cells, grade_cells, solution_cells, seen, notes) -> None:
        """Insert every deleted locked or graded cell again, as released, after the cell that precedes it
        in the release (nbgrader then restores its full source, hidden tests included)."""
        from nbformat.v4 import new_code_cell

        for k, gid in enumerate(order):
            locked, stored_source, cell_type = source_cells[gid]
            if gid in seen or not (locked or gid in grade_cells):
                continue
            source = _without_hidden_tests(stored_source)
            cell = new_code_cell(source) if cell_type == "code" else new_markdown_cell(source)
            cell.metadata["nbgrader"] = {"grade_id": gid, "grade": gid in grade_cells,
                                         "solution": gid in solution_cells, "locked": bool(locked)}
            before = {g for g in order[:k]}
            at = 0
            for i, c in enumerate(nb.cells):
                if _gid(c) in before:
                    at = i + 1
            nb.cells.insert(at, cell)
            seen.add(gid)
            what = "written answer (left blank)" if gid in solution_cells else "cell"
            notes.append(f"cell {gid}: this {'graded ' if gid in grade_cells else ''}{what} was deleted; "
                         "the released cell was put back" + (" and run" if cell_type == "code" else ""))

    @staticmethod
    def _repair_metadata(nb, source_cells, grade_cells, solution_cells) -> None:
        """Put nbgrader's metadata back as released, so nbgrader grades (and shows the findings)
        instead of stopping on "Inconsistent checksums" or a cell without grade_id."""
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if meta is None:
                continue
            gid = meta.get("grade_id") if isinstance(meta, dict) else None
            if gid not in source_cells:
                del cell.metadata["nbgrader"]  # unknown or broken: a plain cell, never graded
                continue
            meta["grade"] = gid in grade_cells
            meta["solution"] = gid in solution_cells
            meta["locked"] = bool(source_cells[gid][0])
            meta["schema_version"] = 3
            if gid in grade_cells:
                meta["points"] = float(grade_cells[gid])
            else:
                meta.pop("points", None)
            if cell.cell_type != source_cells[gid][2]:
                cell.cell_type = source_cells[gid][2]
                if cell.cell_type == "markdown":
                    cell.pop("outputs", None)
                    cell.pop("execution_count", None)
                else:
                    cell["outputs"], cell["execution_count"] = [], None


class DropEmptyMetadata(NbGraderPreprocessor):
    """nbgrader's DeduplicateIds leaves ``nbgrader: {}`` on a copied cell, which later fails the
    schema check: a copy-pasted test cell is a plain cell, not a reason to lose the grade."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", None) == {}:
                del cell.metadata["nbgrader"]
        return nb, resources


def quote(text: str) -> str:
    """A finding quoted in the grader's markdown note: HTML-escaped and markdown-inert (it quotes
    grade ids, names and code a student wrote)."""
    import html
    import re

    text = html.escape(str(text), quote=False).replace("\n", " ")
    return re.sub(r"([\\`*_{}\[\]()#+!|~$<>-])", r"\\\1", text)


class ApplyIntegrity(NbGraderPreprocessor):
    """Zero the autograded tests that run after a cell with a finding, with the finding shown there; a
    note at the top lists the findings (what they cost) and the cells grading restored (no cost)."""

    def preprocess(self, nb, resources):
        findings = list(nb.metadata.get(META_KEY, []))
        notes = list(nb.metadata.get(NOTES_KEY, []))
        habits = list(nb.metadata.get(HABITS_KEY, []))
        if not findings and not notes and not habits:
            return nb, resources
        whole = findings and not any(c.metadata.get(CELL_KEY) for c in nb.cells)  # not of this assignment
        seen: list[str] = []
        zeroed: list[str] = []
        for cell in nb.cells:
            seen += [f for f in cell.metadata.get(CELL_KEY, []) if f not in seen]
            if (seen or whole) and cell.cell_type == "code" and utils.is_grade(cell):
                shown = seen or findings
                reason = "; ".join(shown[:6]) + (f"; and {len(shown) - 6} more" if len(shown) > 6 else "")
                cell.outputs = list(cell.get("outputs", [])) + [new_output(
                    "error", ename="IntegrityError", evalue=f"integrity check failed: {reason}",
                    traceback=[f"IntegrityError: integrity check failed: {reason}",
                               "This test runs after that code, which can change how it runs, so it scores 0."])]
                zeroed.append(str(cell.metadata.get("nbgrader", {}).get("grade_id", "?")))
        parts = []
        if findings:
            parts.append(
                "**Grading note: integrity check failed for the tests after this code, so they score 0** "
                f"({', '.join(quote(z) for z in zeroed) or 'none'}). The check reads the code you wrote for "
                "what can change how a later test runs (patching a module or the checks, redefining names "
                "the setup cell imported, reaching the course's reference implementation); the tests before "
                "it count as they ran.\n\n" + "\n".join(f"- {quote(f)}" for f in findings)
                + "\n\nIf you believe this is a mistake, talk to your instructor; they can review and regrade.")
        if notes:
            parts.append("**Grading note: restored as released** (test and locked cells are always graded as "
                         "released; this costs nothing).\n\n" + "\n".join(f"- {quote(n)}" for n in notes))
        if habits:
            parts.append("**Grading note: not run while grading** (lines a notebook commonly holds, such as package "
                         "installs and display settings; this costs nothing, except that a cell whose import failed "
                         "scores what it earned).\n\n" + "\n".join(f"- {quote(h)}" for h in habits))
        nb.cells.insert(0, new_markdown_cell("\n\n".join(parts)))
        return nb, resources
