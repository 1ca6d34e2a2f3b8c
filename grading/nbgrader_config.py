"""nbgrader configuration of the course (nbgrader 0.9.6).

The course root is this folder; the instructor's source notebooks live in
../notebooks (one folder per assignment). Generated folders (release/,
submitted/, autograded/, feedback/) and the SQLite gradebook sit here and are
git-ignored. Environment variables let one machine run several setups:

COURSE_ROOT          another course root for release/, submitted/, ... (the tests use a tmp folder)
COURSE_DB_URL        gradebook URL (default: SQLite file gradebook.db here);
                     e.g. postgresql://user@127.0.0.1:5432/gradebook for a large class
COURSE_CELL_TIMEOUT  seconds a single cell may run when grading (default 30)
COURSE_KERNEL        kernel used to grade (default "course-sandbox", see grading/kernel/launcher.py,
                     installed by `python -m grading grade` or `python -m grading sandbox-install`;
                     "python3" grades without the sandbox)
COURSE_NOTEBOOK_TIMEOUT  seconds a whole notebook may run when grading (default 600)
"""
import os

c = get_config()  # noqa: F821 - provided by traitlets when this file is loaded

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("COURSE_ROOT") or HERE)  # tests grade in a temporary root

c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "../notebooks" if ROOT == HERE else os.path.join(os.path.dirname(HERE), "notebooks")
c.CourseDirectory.course_id = "transformers-for-medicine"
# SQLite waits up to 60 s for a lock instead of failing, so parallel workers can share it.
c.CourseDirectory.db_url = os.environ.get("COURSE_DB_URL") or f"sqlite:///{os.path.join(ROOT, 'gradebook.db')}?timeout=60"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.db"]

# Executing student notebooks: one named kernel, a time limit per cell, and IPC
# sockets instead of TCP ports, so parallel workers never race for a port (nbgrader#174)
# and a kernel without network (sandbox) can still talk to its grader.
c.Execute.kernel_name = os.environ.get("COURSE_KERNEL", "course-sandbox")
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "30"))
c.Execute.startup_timeout = 60
# once a notebook has run, its kernel's state is discarded: kill it instead of asking it to
# shut down and waiting (measured in tests/benchmarks/bench_class_scale.py, run D vs B)
c.Execute.shutdown_kernel = "immediate"
# nbconvert validates the whole notebook against its schema after every preprocessor (about 25 times per
# submission graded and given feedback); once, after the last, still rejects an invalid notebook
c.Exporter.optimistic_validation = True
c.KernelManager.transport = "ipc"

# The students' bundle (python -m grading bundle, grading/bundle.py) withholds the reference of
# every exercise of the assignments not listed here; list an assignment once its solutions are out.
c.CourseBundle.solutions_released = []

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Our preprocessors (grading/kernel/client.py, grading/feedback.py) are importable by
# plain `nbgrader` commands run in this folder too.
import sys  # noqa: E402

if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

# intake (grading/intake.py) holds back files over its bounds, links and special files: they stay in
# submitted/, nbgrader copies none and reads none as a notebook
from grading.intake import held_patterns, skip_held_notebooks  # noqa: E402

c.CourseDirectory.ignore = c.CourseDirectory.ignore + held_patterns(ROOT)
skip_held_notebooks(ROOT)

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, ClearOutput, DeduplicateIds, IgnorePattern, LimitOutput,
    OverwriteCells, OverwriteKernelspec,
)

# Integrity (grading/integrity.py): the submission is scanned before nbgrader restores
# its locked cells; findings zero every autograded test with the reason shown.
c.Autograde.sanitize_preprocessors = [
    "grading.integrity.ScanSubmission", ClearOutput, DeduplicateIds, "grading.integrity.DropEmptyMetadata",
    OverwriteKernelspec, OverwriteCells, CheckCellMetadata,
]

# Verdicts are decided outside the kernel (grading/verify.py): the kernel's checks record the
# student's outputs, VerifyOutsideKernel replays them against the reference in this process.
# A kernel that dies (os._exit, segfault, memory or process limit) costs the cell
# that killed it, not the whole submission; a notebook has a total time limit.
c.Autograde.autograde_preprocessors = [
    "grading.kernel.client.ResilientExecute", "grading.verify.VerifyOutsideKernel", "grading.integrity.ApplyIntegrity", IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    "grading.kernel.client.BoundOutputs", "grading.gradebook.SaveAutoGradesOnce", AssignLatePenalties, CheckCellMetadata,
]  # BoundOutputs (output bytes per cell and notebook) runs after the verifier has read the records;
# nbgrader's SaveAutoGrades and GetGrades (below) with a notebook's grades read in one query, written in one commit
c.ResilientExecute.notebook_timeout = int(os.environ.get("COURSE_NOTEBOOK_TIMEOUT", "600"))
c.ResilientExecute.max_restarts = 3
c.LimitOutput.max_lines = 300
c.LimitOutput.max_traceback = 60

# Feedback shows which hidden test failed, its points and message, never its code.
# A written answer not graded by hand yet says "pending" instead of a score of 0.
c.GenerateFeedback.preprocessors = ["grading.gradebook.GetGradesOnce", "grading.feedback.PendingHandGrades", "grading.feedback.HideHiddenTests",
                                    "grading.feedback.FeedbackSummary",
                                    "grading.feedback.SafeOutputs", CSSHTMLHeaderPreprocessor,
                                    "grading.feedback.WrapLongLines"]
# a student's <script> in an output or markdown cell must not run when the feedback is opened:
# every markdown cell and HTML/SVG/markdown output goes through one sanitiser (nh3, grading/feedback.py)
c.HTMLExporter.sanitize_html = True
# the HTML exporter with its templates compiled once per process, not once per page (grading/feedback.py)
c.GenerateFeedback.exporter_class = "grading.feedback.FeedbackExporter"
c.HTMLExporter.filters = {"clean_html": "grading.feedback.sanitise"}
