"""The adversarial class of lesson 01: broken and hostile submissions, each with its exact expected grade.

``cases.py`` holds the table (:data:`cases.CASES`): the four honest demo students
(s01_correct 9, s02_blank 0, s03_misconception 6, s04_crash 3) and the hostile ones
(``x01_...`` to ``x50_...``). One row says:

    Case(student, what, score, feedback=(), report=(), build=..., absent=(), absent_html=(),
         integrity=False, scan_gap=None, xfail=None)

* ``score``: the exact autograded points (of 9) that ``grades.csv`` must show;
* ``feedback``: substrings the student's feedback HTML must show in its outputs and notes
  (text inside the code cells' source does not count: the student wrote that);
* ``report``: substrings on the lines of ``python -m grading grade``'s report that name the
  student (so the instructor learns why, by name);
* ``absent`` / ``absent_html``: what must not be in the feedback's outputs / raw HTML (a
  secret the sandbox must keep, "ESCAPED", "LEAK", an injected ``<script>``);
* ``integrity``: the expectation rests on a finding of ``grading/integrity.py`` (the tests that
  run after the cell with the finding score 0, with "integrity check failed" in the feedback and
  "IntegrityError: " in the report); otherwise on the sandbox, the resilient executor or nbgrader;
* ``restored``: grading put the notebook's structure back as released (a deleted or edited test
  cell, edited nbgrader metadata, a cell of no assignment): no cost, "restored as released" in
  the feedback;
* ``scan_gap`` / ``xfail``: grading lacks the behaviour; the static-scan test / the class-run
  test of that case is ``xfail(strict=True)`` with that reason, so it fails loudly once
  grading gains the behaviour (then the mark is removed).

How the expectations were decided:

* not cheating, just broken or abusive (loops, sleep, exit, segfault, memory, fork,
  output floods, recursion, odd exceptions, deleting one's own answer): graded on
  what ran; the cells it broke score 0, everything else counts;
* cheating (patching the checks or np.allclose, rebinding ``checks`` or AssertionError,
  hiding errors through IPython, exec/ctypes/sys.modules, calling the reference or
  PyTorch's built-in attention): the tests after that code score 0 (code changes only the
  tests after it), with the reason in the feedback and in the report;
* what grading restores (editing or deleting test cells, editing nbgrader metadata, adding
  graded cells, another assignment's notebook): graded as released, with a note; the score is
  what the student's own code earns (issue 43);
* not gradable (corrupt, empty, not a notebook, wrong file name, empty folder): 0, and
  the report names the student;
* the sandbox must keep every secret (source notebook, gradebook, release, demo answers,
  .git, other students) and every folder but the student's own unreadable/unwritable,
  refuse sockets at once, and bound memory, processes and file size.

``classrun.py`` builds the class in a course root and grades it with the real command;
``tests/test_adversarial.py`` has a fast part (the table, the builders, the static
integrity scan against a real gradebook, the sandbox probed directly) and the slow class run.
"""
