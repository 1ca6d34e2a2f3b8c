"""The mess of a real class never costs an honest student (issues 43 and 40): lesson 01.

Fast part: the integrity scan on honest edits (grading/integrity.py), intake and the accounting
of every notebook (grading/intake.py) on folders built here. Slow part: the class of messy
submissions (tests/adversarial/messy.py) graded with the real command beside a correct control student, each
with its exact grade and the finding the report names. That class is graded once per test session beside
tests/test_adversarial.py's hostile class (tests/shared_runs.py ``lesson01_class``); the assertions here read the
messy students' part of it.
"""
from __future__ import annotations

import copy
import json
import os
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shared_runs  # noqa: E402
from adversarial import classrun  # noqa: E402
from adversarial.cases import ASSIGNMENT, NOTEBOOK  # noqa: E402
from adversarial.messy import (BOM, _gid, _explorer, big_outputs, correct, edit_sentence,  # noqa: E402,F401
                               fresh_copy, honest_extras, late_reference, restored_setup_with_import, scratch_import)
from adversarial.messy import write as _write  # noqa: E402
from adversarial import messy  # noqa: E402

from grading import integrity  # noqa: E402
from grading import intake as intake_mod  # noqa: E402


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    """A course root with lesson 01's release and its tests in a gradebook (~5 s), made once per test session and
    shared with tests/test_adversarial.py (tests/shared_runs.py ``lesson01_release``); the tests only read it."""
    return shared_runs.lesson01_release(tmp_path_factory)


@pytest.fixture(scope="module")
def messy_run(tmp_path_factory):
    """(the messy class: student -> (files, score, words), the outcome of the shared class run, with
    ``submitted_before``: the messy students' folders before grading)."""
    run = shared_runs.lesson01_class(tmp_path_factory)
    run.outcome.submitted_before = run.submitted_before
    return messy.messy_class(run.ctx), run.outcome


def _scan(ctx, nb):
    resources = {"nbgrader": {"db_url": f"sqlite:///{os.path.join(ctx.root, 'gradebook.db')}",
                              "notebook": NOTEBOOK[:-6], "assignment": ASSIGNMENT}}
    nb, _ = integrity.ScanSubmission().preprocess(copy.deepcopy(nb), resources)
    return nb, list(nb.metadata[integrity.META_KEY]), list(nb.metadata[integrity.NOTES_KEY])


# ====================================================================== integrity in proportion (43.1, 40.4)
@pytest.mark.parametrize("edit", [edit_sentence, honest_extras, lambda nb: (edit_sentence(nb), honest_extras(nb))],
                         ids=["sentence", "magic-and-help", "both"])
def test_honest_edits_are_no_finding(ctx, edit):
    nb = correct(ctx)
    edit(nb)
    _, findings, notes = _scan(ctx, nb)
    assert findings == [] and notes == [], (findings, notes)


def test_an_edited_instructor_cell_still_reads_the_students_statements(ctx):
    nb = correct(ctx)
    cell = nb.cells[_explorer(nb)]
    cell.source += "\nimport ctypes"  # the instructor's statements stay the instructor's, this one is not
    _, findings, _ = _scan(ctx, nb)
    assert len(findings) == 1 and "ctypes" in findings[0], findings


def test_a_fresh_notebook_is_matched_to_the_release_by_content(ctx):
    nb = correct(ctx)
    fresh_copy(nb)
    scanned, findings, notes = _scan(ctx, nb)
    assert findings == [], findings
    assert not [n for n in notes if "deleted" in n], notes
    release_ids = [_gid(c) for c in ctx.release.cells if _gid(c)]
    assert [_gid(c) for c in scanned.cells if _gid(c)] == release_ids, "every graded, locked and answer cell found"
    assert all("matched to the release by its content" in n for n in notes) and len(notes) == len(release_ids)


def test_a_deleted_test_cell_is_put_back_where_it_was(ctx):
    nb = correct(ctx)
    nb.cells = [c for c in nb.cells if _gid(c) != "attention_numpy_visible"]
    scanned, findings, notes = _scan(ctx, nb)
    assert findings == [] and notes == ["cell attention_numpy_visible: this graded cell was deleted; "
                                        "the released cell was put back and run"], notes
    ids = [_gid(c) for c in scanned.cells if _gid(c)]
    assert ids == [_gid(c) for c in ctx.release.cells if _gid(c)]
    restored = next(c for c in scanned.cells if _gid(c) == "attention_numpy_visible")
    assert restored.metadata.nbgrader["points"] == 1.0 and restored.metadata.nbgrader["locked"]


@pytest.mark.parametrize("source", ["from course_lib import attention", "import course_lib.plotting",
                                    "from course_lib.checks import attention", "from course_lib import *",
                                    "%env PYTHONPATH=.", "!ls", "%matplotlib module://backend_x",
                                    "import sys\nsys.path.append(\"\")", "%load_ext mymodule"])
def test_what_reaches_a_reference_or_the_kernel_is_still_a_finding(ctx, source):
    nb = correct(ctx)
    nb.cells.insert(len(nb.cells), new_code_cell(source))
    _, findings, _ = _scan(ctx, nb)
    assert findings, source


def test_allowed_course_lib_modules_hold_no_reference():
    unsafe = integrity.reference_modules()
    # course_lib.bio.pacbio imported consensus.reverse_complement until 2026-11-26 (lesson 12's exercise under
    # another name, gone since): it reaches no reference now
    for module in ("course_lib.plotting", "course_lib.pretrained", "course_lib.bio.hpo", "course_lib.training",
                   "course_lib.bio.pacbio"):
        assert module not in unsafe, module
    for module in ("course_lib", "course_lib.attention", "course_lib.checks", "course_lib.checks.attention",
                   "course_lib.masking", "course_lib.consensus"):
        assert module in unsafe, module


def _applied(ctx, nb):
    scanned, _, _ = _scan(ctx, nb)
    out, _ = integrity.ApplyIntegrity().preprocess(scanned, {})
    zeroed = [_gid(c) for c in out.cells if c.cell_type == "code"
              and any(o.get("ename") == "IntegrityError" for o in c.get("outputs", []))]
    return out, zeroed


def test_a_finding_costs_only_the_tests_after_it(ctx):
    nb = correct(ctx)
    late_reference(nb)
    out, zeroed = _applied(ctx, nb)
    assert zeroed == ["attention_numpy_visible", "attention_numpy_hidden", "attention_torch_visible",
                      "attention_torch_hidden"], zeroed
    note = out.cells[0].source
    assert "integrity check failed for the tests after this code" in note and "course\\_lib.attention" in note
    assert "cheat" not in note.lower()


def test_restorations_cost_nothing_and_say_so(ctx):
    nb = correct(ctx)
    nb.cells = [c for c in nb.cells if _gid(c) != "softmax_visible"]
    out, zeroed = _applied(ctx, nb)
    assert zeroed == []
    assert "restored as released" in out.cells[0].source and "softmax\\_visible" in out.cells[0].source
    assert "integrity check failed" not in out.cells[0].source


@pytest.mark.slow
def test_no_demo_student_of_any_lesson_gets_a_finding_or_a_note(tmp_path_factory):
    """The demo class of every lesson (correct, blank, misconception, crash) reads as handed in. The releases and
    the gradebook are those of the demo class graded once per test session (tests/shared_runs.py ``demo_class``:
    every release made in one nbgrader process by the grade command, pipeline.generate_assignments); the tests
    only read them."""
    from grading import demo

    root, run = shared_runs.demo_class(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    said = {}
    lessons = sorted(demo.assignments_with_demo())
    for a in lessons:
        spec = demo.load_spec(a)
        notebooks = [f for f in sorted(os.listdir(root / "release" / a)) if f.endswith(".ipynb")]
        assert notebooks, f"the demo run released no notebook of {a}"
        for f in notebooks:
            release = nbformat.read(str(root / "release" / a / f), as_version=4)
            sols = demo.solutions_from_source(nbformat.read(os.path.join(classrun.REPO, "notebooks", a, f),
                                                            as_version=4))
            for student, answers in [("s01", sols), ("s02", {}), ("s03", {**sols, **spec.MISCONCEPTION}),
                                     ("s04", {**sols, **spec.CRASH})]:
                res = {"nbgrader": {"db_url": f"sqlite:///{root / 'gradebook.db'}", "notebook": f[:-6],
                                    "assignment": a}}
                nb, _ = integrity.ScanSubmission().preprocess(demo.build_submission(release, answers), res)
                if nb.metadata[integrity.META_KEY] or nb.metadata[integrity.NOTES_KEY]:
                    said[(a, student)] = nb.metadata[integrity.META_KEY] + nb.metadata[integrity.NOTES_KEY]
    assert said == {}, said


# ====================================================================== intake (43.4) and every notebook (43.2, 43.7)
def test_intake_counts_a_notebook_without_its_outputs(ctx, tmp_path):
    folder = tmp_path / "s" / ASSIGNMENT
    _write(str(folder / NOTEBOOK), nbformat.writes(big_outputs(ctx, 60)))
    assert os.path.getsize(folder / NOTEBOOK) > 60_000_000
    assert intake_mod.intake(str(folder), str(tmp_path / "q"), max_bytes=50_000_000, first=(NOTEBOOK,)) == []


def test_a_file_over_the_bound_stays_and_comes_back_when_the_bound_is_raised(tmp_path):
    folder = tmp_path / "s" / ASSIGNMENT
    _write(str(folder / "attention.ipynb"), "{}")
    _write(str(folder / "scan.npy"), b"x" * 3000)
    dropped = intake_mod.intake(str(folder), str(tmp_path / "q"), max_bytes=2000)
    assert [(d.path, d.copied) for d in dropped] == [("scan.npy", True)]
    assert (folder / "scan.npy").read_bytes() == b"x" * 3000 == (tmp_path / "q" / "scan.npy").read_bytes()
    assert intake_mod.intake(str(folder), str(tmp_path / "q"), max_bytes=4000) == []  # raised: graded again


def test_held_files_are_what_nbgrader_ignores(tmp_path):
    from nbgrader.utils import find_all_files

    folder = tmp_path / "submitted" / "al[ei]ce" / ASSIGNMENT
    _write(str(folder / "attention.ipynb"), "{}")
    _write(str(folder / "data" / "big [1].bin"), b"x")
    _write(str(folder / "small.txt"), b"x")
    intake_mod.write_held([str(folder / "data" / "big [1].bin")], str(tmp_path))
    files = find_all_files(str(folder), [".ipynb_checkpoints", "*.ipynb"] + intake_mod.held_patterns(str(tmp_path)))
    found = sorted(os.path.relpath(f, folder) for f in files)
    assert "small.txt" in found and os.path.join("data", "big [1].bin") not in found, found  # escaped: exact


def _check(tmp_path, files: dict, expected=(NOTEBOOK,)):
    folder = tmp_path / "sub"
    folder.mkdir(exist_ok=True)
    for name, data in files.items():
        if data is None:
            (folder / name).mkdir(parents=True)
        else:
            _write(str(folder / name), data)
    return intake_mod.check_notebooks(str(folder), list(expected), str(tmp_path / "originals"))


def test_a_byte_order_mark_is_read_past_and_the_file_left_as_it_is(ctx, tmp_path):
    text = nbformat.writes(correct(ctx))
    found = _check(tmp_path, {NOTEBOOK: b"\xef\xbb\xbf" + text.encode()})
    assert [k for k, _, _ in found] == ["repaired"], found
    assert (tmp_path / "sub" / NOTEBOOK).read_bytes() == b"\xef\xbb\xbf" + text.encode(), "never rewritten"
    from nbformat import reader as nbreader

    from grading import worker

    saved = nbreader.parse_json
    try:
        with pytest.raises(Exception):  # plain nbformat refuses it: the worker's reader is what accepts it
            nbformat.read(str(tmp_path / "sub" / NOTEBOOK), as_version=4)
        worker.accept_byte_order_mark()
        worker.accept_byte_order_mark()  # idempotent
        assert nbformat.read(str(tmp_path / "sub" / NOTEBOOK), as_version=4) == nbformat.reads(text, as_version=4)
    finally:
        nbreader.parse_json = saved


@pytest.mark.parametrize("data, words", [
    (b"", ["attention.ipynb is empty (0 bytes)", "download it again"]),
    (None, ["attention.ipynb is a folder", "put the notebook file itself"]),
    (b"%PDF-1.4\n\xff\xfe\x00", ["not UTF-8", "another kind of file"]),
    ('{"cells": [], "nbformat": 4', ["the JSON ends early, at line 1 ", "download it again"]),
    ('{"cells": "softmax", "answers": [1, 2, 3]}', ["JSON but not a notebook"]),
    ('{"cells": [],\n "metadata": {},\n oops\n}', ["broken JSON at line 3, column 2"]),
], ids=["empty", "folder", "binary", "truncated", "not-a-notebook", "broken"])
def test_an_unreadable_notebook_is_named_with_the_problem_and_the_fix(tmp_path, data, words):
    found = _check(tmp_path, {NOTEBOOK: data})
    assert [k for k, _, _ in found] == ["unreadable"], found
    text = " ".join(found[0][1:])
    for w in words:
        assert w in text, (w, text)


def test_a_truncated_notebook_names_the_line_where_the_json_ends(ctx, tmp_path):
    text = nbformat.writes(correct(ctx))
    cut = text[: len(text) // 2]
    (kind, message, fix), = _check(tmp_path, {NOTEBOOK: cut})
    assert kind == "unreadable" and f"ends early, at line {cut.rstrip().count(chr(10)) + 1} " in message, message
    assert "download it again from JupyterLab" in fix


@pytest.mark.parametrize("name", ["attention (1).ipynb", "Copy of attention.ipynb", "attention-Copy1.ipynb"])
def test_a_renamed_notebook_is_named_with_the_expected_name(ctx, tmp_path, name):
    (kind, message, fix), = _check(tmp_path, {name: nbformat.writes(correct(ctx))})
    assert kind == "misnamed" and message == f"found {name!r}, expected 'attention.ipynb': not graded", message
    assert fix == "rename it to attention.ipynb and regrade"


def test_a_notebook_in_a_subfolder_is_named(ctx, tmp_path):
    (kind, message, fix), = _check(tmp_path, {"01_attention/attention.ipynb": nbformat.writes(correct(ctx))})
    assert kind == "misnamed" and "01_attention/attention.ipynb" in message and "move it" in fix


def test_a_second_notebook_with_more_work_says_so(ctx, tmp_path):
    found = _check(tmp_path, {NOTEBOOK: nbformat.writes(ctx.release),
                              "attention-Copy1.ipynb": nbformat.writes(correct(ctx))})
    (kind, message, fix), = found
    assert kind == "extra" and message.startswith("attention-Copy1.ipynb was not graded (only attention.ipynb is)")
    assert "answers filled in: attention-Copy1.ipynb 4, attention.ipynb 0" in message, message
    assert fix.startswith("the work seems to be in attention-Copy1.ipynb: rename it to attention.ipynb")


def test_a_missing_notebook_and_a_missing_assignment_are_named(tmp_path):
    submitted = tmp_path / "submitted"
    _write(str(submitted / "ana" / "01_attention" / "attention.ipynb"), "{}")
    _write(str(submitted / "ana" / "06_bpe" / "bpe.ipynb"), "{}")
    _write(str(submitted / "ben" / "01_attention" / "notes.txt"), "my answers are on paper")
    tasks = [("01_attention", "ana"), ("01_attention", "ben"), ("06_bpe", "ana")]
    findings = intake_mod.intake_class(tasks, ["01_attention", "06_bpe"], submitted=str(submitted),
                                       intake_dir=str(tmp_path / "logs" / "intake"))
    by = {(f["assignment"], f["student"], f["kind"]): f for f in findings}
    assert by[("06_bpe", "ben", "missing")]["message"] == "no submission for 06_bpe"
    assert by[("01_attention", "ben", "missing")]["message"] == "no attention.ipynb in the submission (found: notes.txt)"
    assert {k for k in by if k[1] == "ana"} == {("01_attention", "ana", "unreadable"), ("06_bpe", "ana", "unreadable")}
    with open(tmp_path / "logs" / "intake" / "findings.json") as fh:
        assert json.load(fh) == findings
    for f in findings:
        assert set(f) >= {"student", "assignment", "kind", "message", "fix"} and f["fix"]
    lines = intake_mod.report_lines(findings)
    assert any("06_bpe/ben: missing: no submission for 06_bpe; fix:" in line for line in lines), lines


# ====================================================================== slow: the messy class, graded
@pytest.mark.slow
def test_nothing_in_submitted_changes_links_included(messy_run):
    _, outcome = messy_run
    after = messy.tree_digest(os.path.join(outcome.root, "submitted"), only=messy.STUDENTS)
    changed = sorted(k for k in set(after) | set(outcome.submitted_before)
                     if after.get(k) != outcome.submitted_before.get(k))
    assert changed == [], f"grading moved, changed or deleted in submitted/: {changed}"
    assert os.path.islink(os.path.join(outcome.root, "submitted", "m13_symlinked_notebook", ASSIGNMENT, NOTEBOOK))


@pytest.mark.slow
def test_a_linked_student_folder_has_a_row_a_page_and_a_report_line(messy_run):
    _, outcome = messy_run
    assert outcome.grades.get("m14_linked_folder") == (0.0, outcome.grades["s01_correct"][1]), outcome.grades
    page = os.path.join(outcome.root, "feedback", "m14_linked_folder", ASSIGNMENT, "not-graded.html")
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    assert "is a symbolic link" in text and "What to do:" in text and "cp -r --dereference" in text, text
    assert os.path.join(outcome.root, "elsewhere") not in text, "the link's target is a path of the grading machine"
    assert any("m14_linked_folder: not graded" in line for line in outcome.report_lines("m14_linked_folder"))


@pytest.mark.slow
def test_notebook_habits_are_noted_not_charged(messy_run):
    _, outcome = messy_run
    for student, line in [("m15_colab_pip", "!pip install -q transformers torch"), ("m16_config_magics", "%config"),
                          ("m17_scratch_import", "wandb")]:
        text = outcome.feedback_text(student)
        assert "not run while grading" in text and "integrity check failed" not in text, (student, text[:2000])
        assert line in text, (student, line)
    assert "restored as released" in outcome.feedback_text("m18_setup_import")


@pytest.mark.slow
def test_the_messy_class_gets_the_grades_a_fair_instructor_gives(messy_run):
    cls, outcome = messy_run
    assert outcome.returncode == 0, outcome.stdout[-3000:] + outcome.stderr[-3000:]
    got = {s: outcome.grades.get(s, (None,))[0] for s in cls}
    assert got == {s: score for s, (_, score, _) in cls.items()}, outcome.stdout[-4000:]


@pytest.mark.slow
def test_every_submission_not_graded_completely_is_named_with_its_fix(messy_run):
    cls, outcome = messy_run
    for student, (_, _, words) in cls.items():
        said = "\n".join(outcome.report_lines(student))
        for w in words:
            assert w in said, f"{student}: {w!r} not in its report lines:\n{said}"
    assert "01_attention/m10_missing: missing: no submission for 01_attention" in outcome.stdout
    with open(os.path.join(outcome.root, "logs", "intake", "findings.json")) as fh:
        # the hostile students graded in the same run have findings of their own (tests/test_adversarial.py's)
        kinds = {(f["student"], f["kind"]) for f in json.load(fh) if f["student"] in messy.STUDENTS}
    assert kinds == {("m03_copy1", "extra"), ("m04_renamed", "misnamed"), ("m05_bom", "repaired"),
                     ("m06_truncated", "unreadable"), ("m09_folder", "unreadable"), ("m10_missing", "missing"),
                     ("m11_big_file", "dropped"), ("m13_symlinked_notebook", "dropped")}, kinds


@pytest.mark.slow
def test_a_file_over_the_bound_stays_in_submitted_and_never_reaches_grading(messy_run):
    _, outcome = messy_run
    kept = os.path.join(outcome.root, "submitted", "m11_big_file", ASSIGNMENT, "scan.bin")
    assert os.path.getsize(kept) == 51_000_000, "never moved out of submitted/"
    assert os.path.getsize(os.path.join(outcome.root, "logs", "intake", ASSIGNMENT, "m11_big_file", "scan.bin")) \
        == 51_000_000, "a copy for the instructor"
    assert not os.path.exists(os.path.join(outcome.root, "autograded", "m11_big_file", ASSIGNMENT, "scan.bin")), \
        "held back from grading (nbgrader's ignore list)"


@pytest.mark.slow
def test_honest_edits_and_restorations_read_as_notes_not_accusations(messy_run):
    _, outcome = messy_run
    for student in ("m01_honest_edits", "m02_fresh_copy", "m05_bom", "m07_big_outputs"):
        assert "integrity check failed" not in outcome.feedback_text(student), student
        assert not [line for line in outcome.report_lines(student) if "IntegrityError" in line], student
    assert "matched to the release by its content" in outcome.feedback_text("m02_fresh_copy")
    assert os.path.getsize(os.path.join(outcome.root, "submitted", "m07_big_outputs", ASSIGNMENT, NOTEBOOK)) \
        > 60_000_000, "the notebook stays in submitted/ as handed in"
    with open(os.path.join(outcome.root, "submitted", "m05_bom", ASSIGNMENT, NOTEBOOK), "rb") as fh:
        assert fh.read(3) == BOM, "the byte-order mark is read past, never removed from the student's file"


# ====================================================================== issue 66: links, habits, partial regrades
# a student's notebook commonly holds these (Colab's first cell, an editor's settings): not run, noted, no cost
HABITS = ["!pip install -q transformers", "%pip install rapidfuzz", "%config InlineBackend.figure_format = 'retina'",
          "%load_ext autoreload\n%autoreload 2", "%env CUDA_VISIBLE_DEVICES=0", "%matplotlib widget",
          "%%capture\n!pip install -q torch", "!python -m pip install numpy\n!nvidia-smi",
          "if True:\n    !pip install -q einops"]


@pytest.mark.parametrize("habit", HABITS)
def test_a_notebook_habit_is_not_run_and_costs_nothing(ctx, habit):
    nb = correct(ctx)
    nb.cells.insert(1, new_code_cell(habit))
    out, zeroed = _applied(ctx, nb)
    assert zeroed == [], (habit, zeroed)
    assert out.metadata[integrity.META_KEY] == [], out.metadata[integrity.META_KEY]
    said = out.metadata[integrity.HABITS_KEY]
    lines = [line.strip() for line in habit.splitlines() if line.strip().startswith(("!", "%"))]
    assert len(said) == len(lines) and all("was not run" in s and "costs nothing" in s for s in said), said
    ran = next(c for c in out.cells if c.cell_type == "code" and "not run in grading" in c.source).source
    compile(ran, "cell", "exec")  # plain Python now: the kernel runs none of the habit's lines
    assert not any(line.strip().startswith(("!", "%")) for line in ran.splitlines()), ran
    assert "not run while grading" in out.cells[0].source and "integrity check failed" not in out.cells[0].source


def test_the_matplotlib_backends_grading_runs_are_an_allowlist(ctx):
    for arg in sorted(integrity.MATPLOTLIB_RUN):  # run as written, nothing noted
        nb = correct(ctx)
        nb.cells.insert(1, new_code_cell(f"%matplotlib {arg}".strip()))
        _, findings, _ = _scan(ctx, nb)
        assert findings == [], (arg, findings)
    nb = correct(ctx)
    nb.cells.insert(1, new_code_cell("%matplotlib module://my_backend"))
    _, findings, _ = _scan(ctx, nb)
    assert "module://my_backend" in findings[0] and "inline" in findings[0], findings


@pytest.mark.parametrize("source, words", [
    ("import sys\nsys.path.append('')", "edits sys.path"),
    ("import os\nos.sys.path.insert(0, '.')", "edits sys.path"),
    ("%env PYTHONPATH=.", "sets PYTHONPATH with %env"),
    ("import site\nsite.addsitedir('.')", "site.addsitedir"),
])
def test_an_import_path_edit_is_a_finding(ctx, source, words):
    nb = correct(ctx)
    at = next(i for i, c in enumerate(nb.cells) if _gid(c) == "softmax_hidden")
    nb.cells.insert(at + 1, new_code_cell(source))
    out, zeroed = _applied(ctx, nb)
    assert any(words in f for f in out.metadata[integrity.META_KEY]), out.metadata[integrity.META_KEY]
    assert zeroed and "softmax_visible" not in zeroed, zeroed  # the tests before it count


def test_an_unavailable_import_costs_only_its_cell(ctx):
    assert not integrity._installed("wandb"), "the test needs a package the grading environment lacks"
    nb = correct(ctx)
    scratch_import(nb)
    out, zeroed = _applied(ctx, nb)
    assert zeroed == [] and out.metadata[integrity.META_KEY] == [], out.metadata[integrity.META_KEY]
    cell = next(c for c in out.cells if "wandb.init" in c.source)
    assert cell.source.startswith("raise ModuleNotFoundError(") and "import wandb" not in cell.source, cell.source
    with pytest.raises(ModuleNotFoundError, match="wandb"):
        exec(compile(cell.source, "cell", "exec"), {})
    assert any("wandb" in h and "costs only what that cell earns" in h for h in out.metadata[integrity.HABITS_KEY])


def test_a_module_the_notebook_writes_is_never_imported_and_is_a_finding(ctx):
    nb = correct(ctx)
    at = next(i for i, c in enumerate(nb.cells) if _gid(c) == "softmax_hidden")
    nb.cells.insert(at + 1, new_code_cell("open('helper_m.py', 'w').write('x = 1')\nfrom helper_m import x"))
    out, zeroed = _applied(ctx, nb)
    assert any("helper_m, which is not installed" in f for f in out.metadata[integrity.META_KEY])
    assert "attention_numpy_visible" in zeroed and "softmax_visible" not in zeroed, zeroed
    assert "from helper_m import" not in next(c for c in out.cells if "helper_m.py" in c.source).source


def test_a_restored_setup_cell_with_an_added_import_costs_nothing(ctx):
    nb = correct(ctx)
    restored_setup_with_import(nb)
    out, zeroed = _applied(ctx, nb)
    assert zeroed == [] and out.metadata[integrity.META_KEY] == [], out.metadata[integrity.META_KEY]
    assert out.metadata[integrity.NOTES_KEY] == ["cell setup: this locked cell was edited; the released cell was "
                                                 "restored and run"]


def test_intake_holds_links_in_place_and_reads_a_hard_linked_notebook(ctx, tmp_path):
    snapshot = tmp_path / "snapshot"
    _write(str(snapshot / NOTEBOOK), nbformat.writes(correct(ctx)))
    _write(str(snapshot / "data.csv"), "1,2")
    submitted = tmp_path / "submitted"
    for student in ("hard", "soft"):
        (submitted / student / ASSIGNMENT).mkdir(parents=True)
    os.link(snapshot / NOTEBOOK, submitted / "hard" / ASSIGNMENT / NOTEBOOK)  # cp -al
    os.link(snapshot / "data.csv", submitted / "hard" / ASSIGNMENT / "data.csv")
    os.symlink(snapshot / NOTEBOOK, submitted / "soft" / ASSIGNMENT / NOTEBOOK)
    os.symlink(snapshot, submitted / "linked")  # a student folder that is a link
    before = messy.tree_digest(submitted)
    findings = intake_mod.intake_class([(ASSIGNMENT, "hard"), (ASSIGNMENT, "soft")], [ASSIGNMENT],
                                       submitted=str(submitted), intake_dir=str(tmp_path / "logs" / "intake"))
    assert messy.tree_digest(submitted) == before, "intake moved, changed or deleted something in submitted/"
    by = {(f["student"], f.get("path")): f for f in findings}
    assert set(by) == {("hard", "data.csv"), ("soft", NOTEBOOK)}, findings  # the hard-linked notebook is read
    soft = by[("soft", NOTEBOOK)]
    assert soft["kind"] == "dropped" and "was not read" in soft["message"] and "stays in submitted/" in soft["message"]
    assert "readlink -f attention.ipynb" in soft["fix"], soft["fix"]
    assert intake_mod.held_tasks(findings) == {(ASSIGNMENT, "soft")}, "a link as the notebook: nothing to grade"
    held = intake_mod.held_patterns(str(tmp_path))
    assert sorted(os.path.relpath(p, submitted) for p in held) == [
        os.path.join("hard", ASSIGNMENT, "data.csv"), os.path.join("soft", ASSIGNMENT, NOTEBOOK)], held
    linked = intake_mod.linked_students(str(submitted))
    assert list(linked) == ["linked"] and "symbolic link" in linked["linked"] and "(fix: " in linked["linked"]
    assert str(snapshot) not in linked["linked"], "the link's target (a path of the grading machine) is not quoted"


def test_nbgrader_reads_no_held_notebook(ctx, tmp_path):
    """nbgrader globs every top-level notebook whatever its ignore list: the held ones are left out."""
    from nbgrader.converters.base import BaseConverter

    folder = tmp_path / "submitted" / "s" / ASSIGNMENT
    _write(str(folder / NOTEBOOK), nbformat.writes(correct(ctx)))
    os.symlink(folder / NOTEBOOK, folder / "other.ipynb")
    intake_mod.write_held([str(folder / "other.ipynb")], str(tmp_path))
    original = BaseConverter.init_notebooks
    try:
        intake_mod.skip_held_notebooks(str(tmp_path))
        intake_mod.skip_held_notebooks(str(tmp_path))  # idempotent

        class Dir:
            root = str(tmp_path)

        conv = type("Conv", (), {"coursedir": Dir(), "_format_source": lambda self, a, s: str(tmp_path / "submitted"
                                                                                               / "*" / "*"),
                                 "log": None})()
        conv.coursedir.assignment_id = conv.coursedir.student_id = "*"
        conv.coursedir.notebook_id = "*"
        BaseConverter.init_notebooks(conv)
        assert {k: sorted(os.path.basename(p) for p in v) for k, v in conv.assignments.items()} == \
            {str(folder): [NOTEBOOK]}, conv.assignments
    finally:
        BaseConverter.init_notebooks = original


def wrong_lesson(ctx) -> nbformat.NotebookNode:
    """Lesson 02's notebook, answered, handed in as lesson 01's attention.ipynb."""
    return nbformat.read(os.path.join(classrun.REPO, "notebooks", "02_masking", "masking.ipynb"), as_version=4)


def test_a_wrong_lessons_notebook_is_named_so_not_called_cheating(ctx):
    out, zeroed = _applied(ctx, wrong_lesson(ctx))
    assert out.metadata[integrity.META_KEY] == [], out.metadata[integrity.META_KEY]
    notes = out.metadata[integrity.NOTES_KEY]
    assert any("this is 02_masking's notebook (masking.ipynb)" in n and "wrong assignment's notebook" in n
               for n in notes), notes
    assert not [n for n in notes if "not a cell of this assignment" in n], notes
    assert zeroed == [] and "integrity check failed" not in out.cells[0].source


def test_a_wrong_lessons_notebook_still_has_its_own_code_read(ctx):
    nb = wrong_lesson(ctx)
    nb.cells.append(new_code_cell("import ctypes"))
    _, findings, _ = _scan(ctx, nb)
    assert len(findings) == 1 and "ctypes" in findings[0], findings


def test_pages_never_show_the_grader_s_paths():
    from grading import GRADING_DIR, feedback

    out = {"output_type": "error", "ename": "FileNotFoundError",
           "evalue": f"[Errno 2] No such file: '{GRADING_DIR}/autograded/s/a/data.csv'",
           "traceback": ["File /tmp/course-grading-k2j_x9/edition/course_lib/checks/core.py:41, in check"]}
    stream = {"output_type": "stream", "name": "stdout", "text": "socket /tmp/nbg-ipc-ab12cd/kernel-1\n"}
    for o in (out, stream):
        feedback._scrub_output(o)
    shown = json.dumps([out, stream])
    assert GRADING_DIR not in shown and "course-grading-" not in shown and "nbg-ipc-" not in shown, shown
    assert "(course folder)/autograded/s/a/data.csv" in out["evalue"]
    assert out["traceback"] == ["File (grader's temporary folder)/edition/course_lib/checks/core.py:41, in check"]


@pytest.mark.slow
def test_the_page_names_the_copy_that_holds_the_work_and_no_grader_path(messy_run):
    _, outcome = messy_run
    text = outcome.feedback_text("m03_copy1")
    assert "attention-Copy1.ipynb was not graded" in text and "the work seems to be in attention-Copy1.ipynb" in text, \
        text[:3000]
    for student in ("s01_correct", "m03_copy1", "m17_scratch_import", "m13_symlinked_notebook"):
        raw = outcome.feedback_raw(student)
        assert outcome.root not in raw and "course-grading-" not in raw and "nbg-ipc-" not in raw, student


@pytest.mark.slow
def test_the_report_has_who_was_not_graded_apart_from_who_did_not_submit(messy_run):
    """Issue 66.3: refused, held and unreadable submissions are a section of their own, never "not submitted";
    every student folder is in the report, the linked one too."""
    _, outcome = messy_run
    with open(os.path.join(outcome.root, "report", "report.json"), encoding="utf-8") as fh:
        numbers = json.load(fh)
    (a,) = numbers["assignments"]
    # of the messy students (the hostile ones graded in the same run are tests/test_adversarial.py's)
    assert [s for s in a["needs_help"]["not_submitted"] if s in messy.STUDENTS] == ["m10_missing"], a["needs_help"]
    not_graded = {r["student"]: r for r in numbers["not_graded"]}
    assert {"m04_renamed", "m06_truncated", "m09_folder", "m13_symlinked_notebook", "m14_linked_folder"} \
        <= set(not_graded), sorted(not_graded)
    assert "s01_correct" not in not_graded and "m10_missing" not in not_graded
    assert "symbolic link" in not_graded["m14_linked_folder"]["reason"] and not_graded["m14_linked_folder"]["fix"]
    assert "s01_correct" not in {b["student"] for b in numbers["below_threshold"]}
    with open(os.path.join(outcome.root, "report", "index.html"), encoding="utf-8") as fh:
        page = fh.read()
    assert "<h2>Not graded</h2>" in page and "m14_linked_folder" in page
