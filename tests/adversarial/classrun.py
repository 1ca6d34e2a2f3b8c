"""Build the hostile class of 01_attention in a course root, grade it with the real command, read the outcome.

    root = tmp folder
    ctx = prepare(root)            # nbgrader generate_assignment 01_attention (the release to build from)
    write_class(ctx, CASES)        # the four honest demo students + every hostile submission
    outcome = grade(root)          # python -m grading grade --demo no --assignment 01_attention --workers 2

Usable by hand too: ``python tests/adversarial/classrun.py /tmp/adv-root`` builds, grades and
prints a table of expected vs observed scores (from the repository root, venv active).
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import html
import html.parser
import json
import os
import shutil
import subprocess
import sys
import time

import nbformat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
if __package__:
    from .cases import ASSIGNMENT, CASES, MARKER, NOTEBOOK, Case, Context, Special
else:  # run as a script: python tests/adversarial/classrun.py ROOT
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from adversarial.cases import ASSIGNMENT, CASES, MARKER, NOTEBOOK, Case, Context, Special

CELL_TIMEOUT = "10"
NOTEBOOK_TIMEOUT = "150"
# files a hostile submission aims at; none may change during the run
GUARDED = [
    "course_lib/__init__.py", "course_lib/attention.py", "course_lib/checks/__init__.py",
    "course_lib/checks/core.py", "course_lib/checks/attention.py", "notebooks/01_attention/attention.ipynb",
    "grading/demo/01_attention.py",
]


# credentials a grader's environment may hold: none may reach a kernel (x54_env_secrets)
SECRETS = {"COURSE_GRADEBOOK_PASSWORD": "x54-secret-gradebook", "PGPASSWORD": "x54-secret-pg",
           "AWS_SECRET_ACCESS_KEY": "x54-secret-aws", "COURSE_API_TOKEN": "x54-secret-token",
           # not a secret by its name or value: the kernel's environment is a fixed list of names (x71)
           "COURSE_X71_SETTING": "plain-words"}


def env_for(root: str) -> dict:
    env = dict(os.environ, COURSE_ROOT=str(root), COURSE_CELL_TIMEOUT=CELL_TIMEOUT,
               COURSE_NOTEBOOK_TIMEOUT=NOTEBOOK_TIMEOUT, PYTHONPATH=REPO, **SECRETS)
    env.pop("COURSE_KERNEL", None)
    return env


def generate_release(root: str) -> str:
    """The release notebook of 01_attention in ``root`` (and its tests in root's gradebook)."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
                          cwd=os.path.join(REPO, "grading"), env=env_for(root), capture_output=True, text=True)
    path = os.path.join(root, "release", ASSIGNMENT, NOTEBOOK)
    if proc.returncode != 0 or not os.path.exists(path):
        raise RuntimeError(f"generate_assignment failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return path


def prepare(root: str) -> Context:
    generate_release(root)
    return context(root)


def context(root: str) -> Context:
    """The context of a course root whose release of 01_attention is made (``prepare``)."""
    from grading.demo import solutions_from_source

    release = nbformat.read(os.path.join(root, "release", ASSIGNMENT, NOTEBOOK), as_version=4)
    source = nbformat.read(os.path.join(REPO, "notebooks", ASSIGNMENT, NOTEBOOK), as_version=4)
    return Context(release=release, solutions=solutions_from_source(source), root=str(root), repo=REPO)


def write_class(ctx: Context, cases=CASES) -> None:
    from grading import demo

    submitted = ctx.path("submitted")
    demo.generate(ASSIGNMENT, submitted, release_dir=ctx.path("release"))
    honest = {c.student for c in cases if c.honest}
    for student in set(demo.STUDENTS) - honest:  # only the demo students the table names
        shutil.rmtree(os.path.join(submitted, student))
    for case in cases:
        if case.honest:
            continue
        folder = os.path.join(submitted, case.student, ASSIGNMENT)
        os.makedirs(folder, exist_ok=True)
        for name, text in case.build(dataclasses.replace(ctx, student=case.student)).items():
            path = os.path.join(folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if isinstance(text, Special):
                {"symlink": lambda: os.symlink(text.target, path), "hardlink": lambda: os.link(text.target, path),
                 "fifo": lambda: os.mkfifo(path)}[text.kind]()
                continue
            with open(path, "w") as fh:
                fh.write(text)


def digest(paths=GUARDED) -> dict:
    out = {}
    for rel in paths:
        with open(os.path.join(REPO, rel), "rb") as fh:
            out[rel] = hashlib.sha256(fh.read()).hexdigest()
    return out


@dataclasses.dataclass
class Outcome:
    root: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    grades: dict  # student -> (score, max_score)
    results: dict  # student -> the worker's result JSON
    tmp_left: list = dataclasses.field(default_factory=list)  # what the run left in its TMPDIR

    def feedback_path(self, student: str) -> str:
        return os.path.join(self.root, "feedback", student, ASSIGNMENT, NOTEBOOK.replace(".ipynb", ".html"))

    def feedback_raw(self, student: str) -> str:
        path = self.feedback_path(student)
        if not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def feedback_text(self, student: str) -> str:
        """What the feedback shows outside the code cells' source: outputs, errors, markdown."""
        return outputs_text(self.feedback_raw(student))

    def report_lines(self, student: str) -> list[str]:
        return [line for line in self.stdout.splitlines() if student in line]

    def autograded(self, student: str):
        path = os.path.join(self.root, "autograded", student, ASSIGNMENT, NOTEBOOK)
        return nbformat.read(path, as_version=4) if os.path.exists(path) else None


def grade(root: str, workers: int = 2, timeout: float = 1500) -> Outcome:
    import tempfile

    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="adv-tmp-")  # the run's TMPDIR: it must be left empty
    try:
        proc = subprocess.run([sys.executable, "-m", "grading", "grade", "--demo", "no", "--assignment", ASSIGNMENT,
                               "--workers", str(workers)], cwd=REPO, env=dict(env_for(root), TMPDIR=tmp),
                              capture_output=True, text=True, timeout=timeout)
    finally:
        tmp_left = sorted(os.listdir(tmp))
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - t0
    grades, results = {}, {}
    csv_path = os.path.join(root, "grades.csv")
    if os.path.exists(csv_path):
        with open(csv_path, newline="") as fh:
            for row in csv.DictReader(fh):
                if row["assignment"] == ASSIGNMENT:
                    grades[row["student_id"]] = (float(row["score"]), float(row["max_score"]))
    res_dir = os.path.join(root, "logs", "results", ASSIGNMENT)
    for name in os.listdir(res_dir) if os.path.isdir(res_dir) else []:
        if name.endswith(".json") and not name.startswith("."):
            with open(os.path.join(res_dir, name)) as fh:
                results[name[:-5]] = json.load(fh)
    return Outcome(str(root), proc.returncode, proc.stdout, proc.stderr, seconds, grades, results, tmp_left)


def stray_markers(root: str, allowed_prefixes: tuple) -> list[str]:
    """Files named PWNED-* anywhere a submission could have escaped to, outside the allowed folders."""
    found = []
    places = [REPO, str(root), "/var/tmp", "/dev/shm", os.path.join(os.path.dirname(REPO), "shared")]
    for place in places:
        for dirpath, dirnames, filenames in os.walk(place):
            if dirpath == os.path.join(REPO, ".git"):
                dirnames[:] = [d for d in dirnames if d not in ("objects",)]
            for f in filenames:
                if f.startswith(MARKER):
                    p = os.path.join(dirpath, f)
                    if not any(p.startswith(a) for a in allowed_prefixes):
                        found.append(p)
    # the host's /tmp, top level only (the sandbox gives each kernel a private /tmp)
    found += [os.path.join("/tmp", f) for f in os.listdir("/tmp") if f.startswith(MARKER)]
    return found


class _OutputsOnly(html.parser.HTMLParser):
    """Text of an nbconvert HTML page without the code cells' source (class input_area / jp-InputArea):
    a reason must be said by grading, not merely appear in the student's own code."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.skip_from, self.parts, self.in_code = 0, None, [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):  # the page's own CSS and JavaScript
            self.in_code += 1
        if tag != "div":
            return
        self.depth += 1
        cls = dict(attrs).get("class") or ""
        if self.skip_from is None and ("input_area" in cls.split() or "jp-InputArea" in cls.split()):
            self.skip_from = self.depth

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self.in_code = max(0, self.in_code - 1)
        if tag != "div":
            return
        if self.skip_from == self.depth:
            self.skip_from = None
        self.depth -= 1

    def handle_data(self, data):
        if self.skip_from is None and not self.in_code:
            self.parts.append(data)


def outputs_text(page: str) -> str:
    parser = _OutputsOnly()
    parser.feed(page)
    parser.close()
    return "".join(parser.parts)


class _ScriptScan(html.parser.HTMLParser):
    """Everything in a page that could run script: <script> elements, event-handler attributes,
    javascript:/vbscript:/data: URLs in links and sources, frames, objects, forms, SVG, MathML, <base>
    and <meta http-equiv=refresh>. A static check of what a browser would execute."""

    URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "srcdoc", "data", "poster", "background",
                 "srcset", "ping", "lowsrc", "dynsrc"}
    DANGEROUS = {"iframe", "frame", "frameset", "object", "embed", "applet", "form", "base", "svg", "math",
                 "portal", "template"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.problems, self._in_script = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = [(k.lower(), v or "") for k, v in attrs]
        if tag == "script":
            self._in_script = [dict(attrs).get("src", ""), dict(attrs).get("type", ""), ""]
        if tag in self.DANGEROUS:
            self.problems.append(f"<{tag}>")
        if tag == "meta" and dict(attrs).get("http-equiv", "").lower() == "refresh":
            self.problems.append("<meta refresh>")
        for k, v in attrs:
            if k.startswith("on"):
                self.problems.append(f"<{tag} {k}=...>")
            value = "".join(v.split()).lower()
            if k in self.URL_ATTRS and (value.startswith(("javascript:", "vbscript:")) or (
                    value.startswith("data:") and not (tag == "img" and value.startswith("data:image/png")
                                                       or tag == "img" and value.startswith("data:image/jpeg")))):
                self.problems.append(f"<{tag} {k}={v[:40]!r}>")

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append(tuple(self._in_script))
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self._in_script[2] += data


def script_report(page: str) -> tuple[list, list]:
    """(the page's scripts as (src, type, text), every other way it could run script)."""
    scan = _ScriptScan()
    scan.feed(page)
    scan.close()
    return scan.scripts, scan.problems


def unsafe_markup(page: str, template_scripts: set) -> list[str]:
    """What in a feedback page could run script, beyond the template's own scripts (from an honest page)."""
    scripts, problems = script_report(page)
    return problems + [f"<script src={s[0]!r} type={s[1]!r}>{s[2][:60]!r}" for s in scripts
                       if s not in template_scripts]


MAX_FEEDBACK_BYTES = 3_000_000  # a feedback page (and an autograded notebook) stays readable


def check_case(outcome: Outcome, case: Case) -> list[str]:
    """Every way the outcome differs from the case's expectation (empty: as expected)."""
    problems = []
    row = outcome.grades.get(case.student)
    if row is None:
        problems.append("no row in grades.csv")
    elif abs(row[0] - case.score) > 1e-9:
        problems.append(f"score {row[0]:g}, expected {case.score:g}")
    raw = outcome.feedback_raw(case.student)
    shown = outputs_text(raw)
    report = "\n".join(outcome.report_lines(case.student))
    if not report:
        problems.append("not named in the report")
    for r in case.feedback:  # "a | b": either wording shows the same thing
        if not any(alt in shown for alt in r.split(" | ")):
            problems.append(f"feedback lacks {r!r}" + ("" if raw else " (no feedback at all)"))
    for r in case.report:
        if r not in report:
            problems.append(f"report lacks {r!r}")
    for a in case.absent:
        if a in shown:
            problems.append(f"feedback shows {a!r}")
    for a in case.absent_html:
        if a in raw:
            problems.append(f"feedback HTML contains {a!r}")
    if len(raw.encode()) > MAX_FEEDBACK_BYTES:
        problems.append(f"feedback is {len(raw.encode()) / 1e6:.1f} MB")
    nb_path = os.path.join(outcome.root, "autograded", case.student, ASSIGNMENT, NOTEBOOK)
    if os.path.exists(nb_path) and os.path.getsize(nb_path) > MAX_FEEDBACK_BYTES:
        problems.append(f"autograded notebook is {os.path.getsize(nb_path) / 1e6:.1f} MB")
    return problems


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["/tmp/adversarial-root"]
    root, only = args[0], set(args[1:])  # optional: grade only these students
    cases = [c for c in CASES if not only or c.student in only]
    os.makedirs(root, exist_ok=True)
    ctx = prepare(root)
    write_class(ctx, cases)
    outcome = grade(root)
    print(outcome.stdout[-6000:])
    print(f"grade exited {outcome.returncode} after {outcome.seconds:.0f} s")
    print(f"{'student':30s} {'expected':>8s} {'observed':>8s} {'seconds':>7s}  mismatches")
    for case in cases:
        score = outcome.grades.get(case.student, (float("nan"), 0))[0]
        secs = outcome.results.get(case.student, {}).get("seconds", float("nan"))
        print(f"{case.student:30s} {case.score:8g} {score:8g} {secs:7.1f}  {'; '.join(check_case(outcome, case))}"
              + ("   [xfail]" if case.xfail else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
