"""The adversarial class of lesson 01: broken and hostile submissions, each with its exact expected grade.

``cases.py`` holds the table (:data:`cases.CASES`): the four honest demo students
(s01_correct 9, s02_blank 0, s03_misconception 6, s04_crash 3) and the hostile ones
(``x01_...`` to ``x52_...``). One row says:

    Case(student, what, score, reasons, where, build, absent=(), integrity=False, xfail=None)

* ``score``: the exact autograded points (of 9) that ``grades.csv`` must show;
* ``reasons``: substrings that must be visible, in the student's feedback HTML
  (``where="feedback"``), in the report that ``python -m grading grade`` prints
  (``"report"``), or in both (``"both"``): the student and the instructor both learn why;
* ``absent``: substrings that must not be in the feedback (a secret the sandbox must
  keep, "ESCAPED", "LEAK", an injected ``<script>``);
* ``integrity``: the expectation rests on ``grading/integrity.py`` (cheating = 0 with a
  visible ``IntegrityError``); otherwise on the sandbox (``grading/sandbox.py``), the
  resilient executor (``grading/execute.py``) or nbgrader itself;
* ``xfail``: grading lacks the behaviour; the outcome test is ``xfail(strict=True)`` with
  that reason (it fails loudly once grading gains the behaviour, so the mark gets removed).

How the expectations were decided:

* not cheating, just broken or abusive (loops, sleep, exit, segfault, memory, fork,
  output floods, recursion, odd exceptions, deleting one's own answer): graded on
  what ran; the cells it broke score 0, everything else counts;
* cheating (patching the checks or np.allclose, rebinding ``checks`` or AssertionError,
  hiding errors through IPython, exec/ctypes/sys.modules, calling the reference or
  PyTorch's built-in attention, editing locked cells or nbgrader metadata, deleting or
  adding graded cells, another assignment's notebook): 0 for the whole notebook, with
  the reason in the feedback and in the report. A segfault through ``ctypes`` is both
  a crash and a finding: the finding wins (0);
* not gradable (corrupt, empty, not a notebook, wrong file name, empty folder): 0, and
  the report names the student;
* the sandbox must keep every secret (source notebook, gradebook, release, demo answers,
  .git, other students) and every folder but the student's own unreadable/unwritable,
  refuse sockets at once, and bound memory, processes and file size.

``classrun.py`` builds the class in a course root and grades it with the real command;
``tests/test_adversarial.py`` has a fast part (the table, the builders, the static
integrity scan against a real gradebook, the sandbox probed directly) and the slow class run.
"""
