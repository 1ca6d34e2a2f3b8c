"""The judge's material, one module per lesson: what the graded checks use and students never receive.

``course_lib/judge/<topic>.py`` holds, one block per exercise, the hidden cases of the checks of
``course_lib/checks/<topic>.py``, the known wrong answers (``WRONG_*`` tables: the misconceptions a check names,
with an implementation of each), the right alternatives (``Right``), the answers that break one promise each
(``Breaks``) and the exercise's declaration (``EXERCISES``, gathered by :mod:`course_lib.checks.registry`).

The students' and the grading kernel's editions of ``course_lib`` are copies of the package without this folder
(``grading.bundle.write_course_lib``): a checks module reaches its judge module only through
``course_lib.checks.core.judge`` / ``hidden_part`` / ``wrongs`` / ``graded``, which fall back on data there (the
stored values, the hidden feed).

Does NOT cover: the checks themselves and their messages (``course_lib.checks``).
"""
