"""The course being graded: one frozen value, passed down, instead of module globals reassigned.

A course is a folder (nbgrader's course root): ``release/``, ``submitted/``, ``autograded/``,
``feedback/``, ``logs/``, ``gradebook.db``, ``grades.csv``. The grading command decides once which
course it grades (the real class, or the demo class in its own folder) and hands the same
:class:`Course` to every step; nothing reassigns another module's paths.

Processes the run starts (nbgrader's commands, the forked workers, a Dask worker's private course,
the kernel launcher) learn the root from the environment variable ``COURSE_ROOT``, as nbgrader's
config (``grading/nbgrader_config.py``) does: :meth:`Course.from_env` reads it at call time.
"""
from __future__ import annotations

import dataclasses
import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Course:
    """A course root and the folders grading reads and writes in it (all absolute paths).

    >>> c = Course("/srv/course")
    >>> c.submitted, c.results
    ('/srv/course/submitted', '/srv/course/logs/results')
    >>> c.task_folder("feedback", "ana", "01_attention")
    '/srv/course/feedback/ana/01_attention'
    """

    root: str

    def __post_init__(self) -> None:
        if not isinstance(self.root, str) or not self.root:
            raise ValueError(f"a course root must be a folder path (a non-empty string), got {self.root!r}")
        object.__setattr__(self, "root", os.path.abspath(self.root))

    @classmethod
    def from_env(cls) -> Course:
        """The course of this process: ``COURSE_ROOT`` when set, else the folder ``grading/`` itself."""
        return cls(os.environ.get("COURSE_ROOT") or PACKAGE_DIR)

    @property
    def submitted(self) -> str:
        return os.path.join(self.root, "submitted")

    @property
    def autograded(self) -> str:
        return os.path.join(self.root, "autograded")

    @property
    def feedback(self) -> str:
        return os.path.join(self.root, "feedback")

    @property
    def release(self) -> str:
        return os.path.join(self.root, "release")

    @property
    def logs(self) -> str:
        return os.path.join(self.root, "logs")

    @property
    def results(self) -> str:
        """One JSON result per graded task: ``results/<assignment>/<student>.json``."""
        return os.path.join(self.root, "logs", "results")

    @property
    def intake_dir(self) -> str:
        return os.path.join(self.root, "logs", "intake")

    @property
    def grades_csv(self) -> str:
        return os.path.join(self.root, "grades.csv")

    @property
    def roster_csv(self) -> str:
        return os.path.join(self.root, "roster.csv")

    @property
    def demo(self) -> Course:
        """The demo class's course: a folder of its own inside this one, so it never touches the real class."""
        return Course(os.path.join(self.root, "demo_class"))

    def task_folder(self, kind: str, student: str, assignment: str) -> str:
        """``<root>/<kind>/<student>/<assignment>`` for kind submitted, autograded or feedback."""
        if kind not in ("submitted", "autograded", "feedback"):
            raise ValueError(f"unknown folder kind {kind!r}: expected submitted, autograded or feedback")
        return os.path.join(self.root, kind, student, assignment)

    def result_path(self, assignment: str, student: str) -> str:
        return os.path.join(self.results, assignment, f"{student}.json")
