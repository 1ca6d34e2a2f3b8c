"""The messy class of lesson 01 (issues 40, 43 and 66): submissions a real class hands in (honest edits, a fresh
copy, a second notebook, a renamed or truncated one, a byte-order mark, big outputs, links, notebook habits, a
scratch import), each with its exact grade of 9 and the words its report lines show.

``tests/shared_runs.py`` (``lesson01_class``) places them beside the hostile class of ``cases.py`` and grades the
two once per test session; ``tests/test_class_mess.py`` asserts the outcome and uses the edits below in its fast
tests. The class's correct control student is the demo's ``s01_correct`` (``classrun.write_class``)."""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import stat as st

import nbformat
from nbformat.v4 import new_code_cell

from .cases import ASSIGNMENT, NOTEBOOK


def _gid(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def correct(ctx) -> nbformat.NotebookNode:
    """The release notebook with the instructor's solutions (the control student's)."""
    nb = copy.deepcopy(ctx.release)
    for cell in nb.cells:
        if _gid(cell) in ctx.solutions:
            cell.source = ctx.solutions[_gid(cell)].strip("\n")
    return nb


def _explorer(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if "from course_lib import pretrained" in c.source)


def edit_sentence(nb) -> None:
    """The clinical-sentence cell invites its sentence edited (and a trailing newline comes with it)."""
    cell = nb.cells[_explorer(nb)]
    assert 'sentence = " ".join(plotting.CLINICAL_SENTENCE)' in cell.source
    cell.source = cell.source.replace('" ".join(plotting.CLINICAL_SENTENCE)',
                                      '"The patient denies chest pain but reports shortness of breath"') + "\n"


def honest_extras(nb) -> None:
    """`%matplotlib inline` at the top and a scratch cell with help() after the softmax tests."""
    nb.cells.insert(1, new_code_cell("%matplotlib inline"))
    at = next(i for i, c in enumerate(nb.cells) if _gid(c) == "softmax_hidden")
    nb.cells.insert(at + 1, new_code_cell("from course_lib import plotting\nhelp(plotting.attention_heatmap)\nsoftmax?"))


def fresh_copy(nb) -> None:
    """Every cell copied into a new notebook: no nbgrader metadata, no tags, new ids."""
    for k, cell in enumerate(nb.cells):
        cell.metadata = {}
        cell["id"] = f"fresh-{k}"
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def late_reference(nb) -> None:
    """After the softmax tests, a cell imports the module holding the references: the later tests pay."""
    at = next(i for i, c in enumerate(nb.cells) if _gid(c) == "softmax_hidden")
    nb.cells.insert(at + 1, new_code_cell("from course_lib import attention as ref"))


def write(path, data) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def big_outputs(ctx, megabytes: int = 60) -> nbformat.NotebookNode:
    """The correct notebook with ``megabytes`` MB of saved outputs (grading clears them)."""
    nb = correct(ctx)
    cell = next(c for c in nb.cells if _gid(c) == "softmax_impl")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 1_000_000) for _ in range(megabytes)]
    return nb


def scratch_import(nb) -> None:
    """After the softmax tests, a scratch cell tries a package the grading environment lacks."""
    at = next(i for i, c in enumerate(nb.cells) if _gid(c) == "softmax_hidden")
    nb.cells.insert(at + 1, new_code_cell("import wandb  # tried at home\nwandb.init(project='x')\nprint('tried')"))


def restored_setup_with_import(nb) -> None:
    """The locked setup cell edited with an import of the student's own (grading restores the cell)."""
    cell = next(c for c in nb.cells if _gid(c) == "setup")
    cell.source += "\nfrom scipy.special import softmax\nimport torch.nn.functional as F"


BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass
class Link:
    """A notebook in the submission that is a hard link (``cp -al``) or a symbolic link to a file elsewhere."""

    kind: str  # "hard" or "soft"
    text: str


LINKED_FOLDER = "linked folder"  # the student's folder in submitted/ is a symbolic link to one elsewhere


def messy_class(ctx) -> dict:
    """student -> (files(): the files of the submission folder, exact expected score of 9, words its report lines
    show). The files are built only when called (the grading run places them; the tests read the expectations)."""
    def ok():
        return nbformat.writes(correct(ctx))

    def edited(*edits):
        def build():
            nb = correct(ctx)
            for e in edits:
                e(nb)
            return nbformat.writes(nb)
        return build

    def one(build, name=NOTEBOOK):
        return lambda: {name: build()}

    return {
        "s01_correct": (one(ok), 9.0, ()),
        "m01_honest_edits": (one(edited(edit_sentence, honest_extras)), 9.0, ()),
        "m02_fresh_copy": (one(edited(fresh_copy)), 9.0, ()),
        "m03_copy1": (lambda: {NOTEBOOK: nbformat.writes(ctx.release), "attention-Copy1.ipynb": ok()}, 0.0,
                      ("extra: attention-Copy1.ipynb was not graded", "rename it to attention.ipynb")),
        "m04_renamed": (one(ok, "attention (1).ipynb"), 0.0,
                        ("misnamed: found 'attention (1).ipynb', expected 'attention.ipynb'", "rename it")),
        "m05_bom": (lambda: {NOTEBOOK: BOM + ok().encode()}, 9.0,
                    ("repaired: attention.ipynb begins with a byte-order mark",)),
        "m06_truncated": (lambda: {NOTEBOOK: ok()[: len(ok()) // 2]}, 0.0,
                          ("unreadable: attention.ipynb is not a valid notebook: the JSON ends early, at line",)),
        "m07_big_outputs": (lambda: {NOTEBOOK: nbformat.writes(big_outputs(ctx, 60))}, 9.0, ()),
        "m08_late_reference": (one(edited(late_reference)), 3.0, ("IntegrityError: ", "course_lib.attention")),
        "m09_folder": (one(ok, NOTEBOOK + "/attention.ipynb"), 0.0, ("unreadable: attention.ipynb is a folder",)),
        "m11_big_file": (lambda: {NOTEBOOK: ok(), "scan.bin": b"\0" * 51_000_000}, 9.0,
                         ("dropped: scan.bin (51,000,000 bytes", "it stays in submitted/", "raise COURSE_INTAKE_MAX_BYTES")),
        # issue 66: a snapshot of the class (cp -al), links, notebook habits, a scratch import
        "m12_hard_linked": (lambda: {NOTEBOOK: Link("hard", ok())}, 9.0, ()),
        "m13_symlinked_notebook": (lambda: {NOTEBOOK: Link("soft", ok())}, 0.0,
                                   ("dropped: attention.ipynb (symbolic link) was not read", "readlink -f")),
        "m14_linked_folder": (lambda: LINKED_FOLDER, 0.0, ("not graded: submitted/m14_linked_folder is a symbolic link",)),
        "m15_colab_pip": (one(edited(lambda nb: nb.cells.insert(1, new_code_cell(
            "!pip install -q transformers torch\n%pip install rapidfuzz")))), 9.0, ()),
        "m16_config_magics": (one(edited(lambda nb: nb.cells.insert(1, new_code_cell(
            "%load_ext autoreload\n%autoreload 2\n%config InlineBackend.figure_format = 'retina'\n"
            "%env TOKENIZERS_PARALLELISM=false\n%matplotlib widget")))), 9.0, ()),
        "m17_scratch_import": (one(edited(scratch_import)), 9.0, ()),
        "m18_setup_import": (one(edited(restored_setup_with_import)), 9.0, ()),
    }


MISSING = "m10_missing"  # a folder with lesson 02's notebook only: nothing for lesson 01
STUDENTS = sorted([*messy_class(None), MISSING])  # every folder of submitted/ this class places (the control too)


def _place(ctx, student: str, files) -> None:
    root, submitted = ctx.root, ctx.path("submitted")
    if files == LINKED_FOLDER:
        elsewhere = os.path.join(root, "elsewhere", student)
        write(os.path.join(elsewhere, ASSIGNMENT, NOTEBOOK), nbformat.writes(correct(ctx)))
        os.symlink(elsewhere, os.path.join(submitted, student))
        return
    for name, data in files.items():
        path = os.path.join(submitted, student, ASSIGNMENT, name)
        if isinstance(data, Link):
            target = os.path.join(root, "snapshot", student, name)
            write(target, data.text)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            (os.link if data.kind == "hard" else os.symlink)(target, path)
        else:
            write(path, data)


def place_class(ctx, control_present: bool = False) -> None:
    """Write the messy class into ``ctx.root``'s submitted/ (beside whatever is there); with ``control_present``
    the correct control student ``s01_correct`` is already placed (the demo's, by ``classrun.write_class``)."""
    os.makedirs(ctx.path("submitted"), exist_ok=True)
    for student, (files, _, _) in messy_class(ctx).items():
        if not (control_present and student == "s01_correct"):
            _place(ctx, student, files())
    write(ctx.path("submitted", MISSING, "02_masking", "masking.ipynb"), "{}")  # nothing for lesson 01


def tree_digest(root, only=None) -> dict:
    """Every entry under ``root`` (links not followed): kind, mode, link count, bytes or link target; with ``only``,
    the entries under those top-level names of ``root`` alone."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if only is not None and dirpath == str(root):
            dirnames[:] = [d for d in dirnames if d in only]
            filenames = [f for f in filenames if f in only]
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if st.S_ISLNK(info.st_mode):
                what = "link -> " + os.readlink(path)
            elif st.S_ISREG(info.st_mode):
                with open(path, "rb") as fh:
                    what = hashlib.sha256(fh.read()).hexdigest()
            else:
                what = "dir" if st.S_ISDIR(info.st_mode) else f"mode {info.st_mode:o}"
            out[os.path.relpath(path, root)] = (what, info.st_mode, info.st_nlink, info.st_ino)
    return out
