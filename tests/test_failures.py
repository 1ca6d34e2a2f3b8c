"""grading/failures.py is the one place that classifies what went wrong with a submission (issue 34, item 5)."""
import ast
import os

from conftest import REPO

from grading import failures


def _string_constants(path):
    tree = ast.parse(open(path).read())
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_no_other_grading_module_spells_a_problem_error():
    """The error names grading.kernel.client marks cells with, and the report and worker read, come from failures."""
    spelled = {}
    folder = os.path.join(REPO, "grading")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name != "failures.py":
            found = _string_constants(os.path.join(folder, name)) & {failures.KERNEL_DIED, failures.CELL_TIMEOUT,
                                                                    failures.NOTEBOOK_TIMEOUT}
            if found:
                spelled[name] = sorted(found)
    assert not spelled, f"use grading.failures' names instead of spelling them: {spelled}"


def test_the_notebook_time_limit_gets_a_second_pass_and_a_student_problem_does_not():
    graded = {"autograded": True, "autograde_ok": True}
    assert not failures.needs_second_pass(dict(graded, problems=[]))
    assert failures.needs_second_pass(dict(graded, problems=[f"{failures.NOTEBOOK_TIMEOUT} in softmax_visible: ..."]))
    for ename in (failures.KERNEL_DIED, failures.CELL_TIMEOUT, failures.INTEGRITY):
        assert not failures.needs_second_pass(dict(graded, problems=[f"{ename} in softmax_visible: ..."])), ename
    assert failures.needs_second_pass({"autograded": False})  # no grade at all: the machinery may have failed
    assert not failures.needs_second_pass({"autograded": False, "second_pass": True})


def test_status_lines():
    assert failures.status_of(None).startswith("not graded")
    assert failures.status_of({"autograded": True, "autograde_ok": True, "problems": []}) == "graded"
    fault = failures.status_of({"grader_fault": "the disk is full (x)"})
    assert fault.startswith("not graded: the grader's failure, not the student's")
    problem = failures.status_of({"autograded": True, "autograde_ok": True,
                                  "problems": [f"{failures.KERNEL_DIED} in softmax_visible: the kernel died"]})
    assert problem.startswith("graded with problems: KernelDied")
