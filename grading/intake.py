"""Intake: what grading takes from ``submitted/``, and every submission that it cannot take whole, by name.

Two jobs, run by the pipeline before any worker starts:

1. **Submissions are data** (:func:`intake`). A submission folder keeps regular files with one
   name only, at most ``COURSE_INTAKE_MAX_FILES`` (100) of at most ``COURSE_INTAKE_MAX_BYTES``
   (50 MB) in total, counted as grading keeps them: a notebook counts without its outputs (grading
   clears them), the assignment's notebook first, then the other notebooks, then the rest by
   name. Nothing is followed: entries are examined with lstat relative to an O_NOFOLLOW directory
   descriptor, and a file is opened (to measure a notebook) only once lstat and fstat both say it
   is a regular file. **Nothing in** ``submitted/`` **is ever moved, rewritten or deleted**; what is
   kept out of grading is *held*: it stays where it is, and nbgrader neither copies it
   (``CourseDirectory.ignore`` names it, through :func:`held_patterns` in ``nbgrader_config.py``)
   nor reads it as a notebook (:func:`skip_held_notebooks`):

   * a regular file over a bound is also **copied** to ``logs/intake/<assignment>/<student>/`` for
     the instructor. Raising the bound and grading again takes it back, with nothing to move by hand;
   * an entry that is not a plain file (a symbolic link, a FIFO, a device, a socket, a folder nested
     deeper than 6) is never opened or followed: a link can point anywhere on the grading machine,
     and grading runs as root. A symbolic link *as the assignment's notebook* therefore leaves the
     notebook ungraded, with the fix (replace the link by the file it points to);
   * a file with a second hard link (a ``cp -al`` or ``rsync --link-dest`` snapshot of the class) is
     the same bytes under two names: the assignment's notebook is read as any notebook (nbgrader
     copies it; it is parsed as a notebook and nothing else); any other hard-linked file is held,
     as its other name may be a file of the host's.

2. **Every notebook is accounted for** (:func:`check_notebooks`, :func:`intake_class`). For each
   (student, assignment) the notebooks the assignment expects are looked for; each problem is a
   finding ``{student, assignment, kind, message, fix}``:

   ``missing``    no folder for an assignment others submitted ("no submission for 06_bpe"), or a
                  folder without the notebook;
   ``misnamed``   the notebook is there under another name or in a subfolder ("found
                  'attention (1).ipynb', expected 'attention.ipynb': rename it"). It is not graded
                  under that name: a grade never rests on a guess of which file was meant;
   ``extra``      another notebook beside the graded one (``attention-Copy1.ipynb``): not graded,
                  and the finding says which of the two holds more answers;
   ``unreadable`` empty, a folder named like the notebook, not UTF-8, JSON that ends early
                  ("the JSON ends at line 40"), JSON that is not a notebook;
   ``dropped``    intake held a file or an entry back (above); it stays in ``submitted/``;
   ``repaired``   a byte-order mark before the JSON: read past (``grading.worker.accept_byte_order_mark``
                  in the process that grades), the file left as it is, and the notebook graded as any other.
   ``undated``    a ``timestamp.txt`` that cannot be read as a time (not UTF-8, not a date): the notebook
                  is graded as one handed in without a time (``read_timestamp``).

   The findings are returned, written to ``logs/intake/findings.json`` and printed by the
   pipeline in its report of submissions not graded completely.

Does NOT cover: what a notebook's code does (grading/integrity.py, the sandbox), or how a
finding reaches grades.csv (the pipeline's status column).
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import stat

from grading import GRADING_DIR, NOTEBOOKS_DIR

SUBMITTED = os.path.join(GRADING_DIR, "submitted")
INTAKE_DIR = os.path.join(GRADING_DIR, "logs", "intake")
HELD_FILE = "held.json"  # in INTAKE_DIR: files intake holds back from grading (they stay in submitted/)
FINDINGS_FILE = "findings.json"  # in INTAKE_DIR: the last run's findings
DOWNLOAD_AGAIN = "ask the student to download it again from JupyterLab (File > Download) and regrade"


def _limit(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _kind(mode: int, nlink: int) -> str | None:
    """Why an entry is not a plain file of the submission (None: it is one)."""
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if nlink > 1:
        return f"hard link ({nlink} names)"
    return None


@dataclasses.dataclass
class Dropped:
    """One entry intake kept out of grading. It stays in ``submitted/`` as it is (held)."""

    path: str  # relative to the submission folder
    why: str
    copied: bool  # True: a copy is in the intake folder (a regular file over a bound); False: not a file, not read

    def __str__(self) -> str:
        return f"{self.path} ({self.why})"


def _open_regular(dir_fd: int, name: str, one_name: bool = True) -> int | None:
    """A read descriptor of ``name`` if it is (still) a regular file (with one name, unless ``one_name``
    is False), else None."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (one_name and st.st_nlink > 1):
        os.close(fd)
        return None
    return fd


def _read_regular(dir_fd: int, name: str, limit: int, one_name: bool = True) -> bytes | None:
    fd = _open_regular(dir_fd, name, one_name)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    finally:
        os.close(fd)


def kept_size(data: bytes) -> int:
    """Bytes of a notebook as grading keeps it (outputs cleared); its raw size when it is no notebook."""
    try:
        nb = json.loads(data.decode("utf-8-sig"))
        for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                cell["outputs"], cell["execution_count"] = [], None
        return len(json.dumps(nb, indent=1, ensure_ascii=False).encode("utf-8"))
    except (ValueError, AttributeError, TypeError, RecursionError):
        return len(data)


def intake(folder: str, quarantine: str, max_files: int | None = None, max_bytes: int | None = None,
           max_depth: int = 6, first: tuple[str, ...] = ()) -> list[Dropped]:
    """Find what of one submission folder grading must not take; return it (every entry is held).

    ``first``: the assignment's own notebook names, counted before everything else; at the top of the
    folder such a notebook is read even when it has a second hard link. Nothing is moved or deleted:
    regular files over a bound are copied to ``quarantine``; entries that are not plain files are
    neither opened nor followed. :func:`intake_class` writes the held paths (:func:`held_patterns`)."""
    max_files = _limit("COURSE_INTAKE_MAX_FILES", 100) if max_files is None else max_files
    max_bytes = _limit("COURSE_INTAKE_MAX_BYTES", 50_000_000) if max_bytes is None else max_bytes
    raw_limit = max(max_bytes * 20, 1)  # a notebook larger than this is not read to measure it
    dropped: list[Dropped] = []
    keep: list[tuple[int, str, int, str, int]] = []  # (rank, relpath, dir fd, name, size)
    fds: list[int] = []
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

    def hold(dir_fd: int, name: str, rel: str, why: str, copy: bool) -> None:
        fd = _open_regular(dir_fd, name) if copy else None
        dropped.append(Dropped(rel, why, copied=fd is not None))
        if fd is None:
            return
        os.makedirs(quarantine, exist_ok=True)
        try:
            with os.fdopen(fd, "rb", closefd=False) as src, \
                    open(os.path.join(quarantine, rel.replace(os.sep, "__")), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError:
            dropped[-1].copied = False
        finally:
            os.close(fd)

    def walk(dir_fd: int, prefix: str, depth: int) -> None:
        for name in sorted(os.listdir(dir_fd)):
            rel = os.path.join(prefix, name) if prefix else name
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if depth >= max_depth:
                    hold(dir_fd, name, rel, f"folder nested deeper than {max_depth}", copy=False)
                    continue
                sub = os.open(name, flags, dir_fd=dir_fd)
                fds.append(sub)
                walk(sub, rel, depth + 1)
                continue
            why = _kind(st.st_mode, st.st_nlink)
            linked_notebook = why and why.startswith("hard link") and not prefix and name in first
            if why and not linked_notebook:
                hold(dir_fd, name, rel, why, copy=False)
                continue
            size = st.st_size
            if name.endswith(".ipynb") and size <= raw_limit:
                data = _read_regular(dir_fd, name, raw_limit, one_name=not linked_notebook)
                size = kept_size(data) if data is not None else size
            rank = 0 if (not prefix and name in first) else 1 if name.endswith(".ipynb") else 2
            keep.append((rank, rel, dir_fd, name, size))

    top = os.open(folder, flags)
    fds.append(top)
    try:
        walk(top, "", 0)
        count = total = 0
        for _, rel, dir_fd, name, size in sorted(keep, key=lambda k: (k[0], k[1])):
            if count + 1 > max_files:
                hold(dir_fd, name, rel, f"more than {max_files} files", copy=True)
            elif total + size > max_bytes:
                what = "bytes without its outputs" if name.endswith(".ipynb") else "bytes"
                hold(dir_fd, name, rel, f"{size:,} {what}: the submission would exceed {max_bytes:,} bytes", copy=True)
            else:
                count, total = count + 1, total + size
    finally:
        for fd in fds:
            os.close(fd)
    return dropped


# ------------------------------------------------------------------ files held back from grading
def _held_path(root: str) -> str:
    return os.path.join(root, "logs", "intake", HELD_FILE)


def write_held(paths: list[str], root: str = GRADING_DIR) -> None:
    target = _held_path(root)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = target + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(sorted(paths), fh, indent=1)
    os.replace(tmp, target)


def held_patterns(root: str = GRADING_DIR) -> list[str]:
    """Patterns for nbgrader's ``CourseDirectory.ignore`` naming each file intake holds back.

    nbgrader matches an ignore pattern with ``glob(join(folder, pattern))``; an absolute pattern
    (escaped) therefore names exactly one file, and nbgrader copies neither it nor, for a folder,
    anything under it."""
    return [glob.escape(p) for p in _read_held(root)]


def skip_held_notebooks(root: str = GRADING_DIR) -> None:
    """nbgrader reads every top-level ``*.ipynb`` of a submission by a glob, whatever its ignore list says:
    make the glob's result leave out the notebooks intake holds (a link to another student's notebook, a
    FIFO named ``extra.ipynb``), in this process. Called by ``nbgrader_config.py``; idempotent."""
    from nbgrader.converters.base import BaseConverter

    original = getattr(BaseConverter.init_notebooks, "_course_original", BaseConverter.init_notebooks)

    def init_notebooks(self) -> None:
        original(self)
        held = {os.path.normpath(p) for p in _read_held(self.coursedir.root or root)}
        if not held:
            return
        for folder, found in list(self.assignments.items()):
            kept = [f for f in found if os.path.normpath(os.path.abspath(f)) not in held]
            if kept:
                self.assignments[folder] = kept
            else:
                del self.assignments[folder]

    init_notebooks._course_original = original
    BaseConverter.init_notebooks = init_notebooks


def _read_held(root: str) -> list[str]:
    try:
        with open(_held_path(root)) as fh:
            paths = json.load(fh)
    except (OSError, ValueError):
        return []
    return [p for p in paths if isinstance(p, str) and os.path.isabs(p)] if isinstance(paths, list) else []


# ------------------------------------------------------------------ every notebook accounted for
def expected_notebooks(assignment: str) -> list[str]:
    """The notebook file names an assignment's release holds (its source notebooks')."""
    folder = os.path.join(NOTEBOOKS_DIR, assignment)
    return sorted(f for f in os.listdir(folder) if f.endswith(".ipynb")) if os.path.isdir(folder) else []


_COPY_MARKS = re.compile(r"(?i)(^copy of |^copy_of_|[ _-]*\(\d+\)|[ _-]*copy\d*|[ _-]+\d+$|[ _-]*final|[ _-]*v\d+)")


def _stem(name: str) -> str:
    """'attention (1).ipynb', 'Attention-Copy1.ipynb', 'Copy of attention.ipynb' -> 'attention'."""
    base = name[:-6] if name.lower().endswith(".ipynb") else name
    prev = None
    while prev != base:
        prev, base = base, _COPY_MARKS.sub("", base).strip(" _-.")
    return base.lower()


def _json_problem(name: str, data: bytes) -> tuple[str, str] | None:
    """(problem, fix) when ``data`` is not a notebook nbgrader can read, else None."""
    if not data.strip():
        return (f"{name} is empty ({len(data)} bytes)",
                "the notebook was not saved before it was handed in: " + DOWNLOAD_AGAIN)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return (f"{name} is not a notebook: not UTF-8 text (byte {err.start:,} of {len(data):,})",
                "it may be another kind of file renamed .ipynb (a PDF, a zip): " + DOWNLOAD_AGAIN)
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as err:
        body = text.rstrip()
        if err.pos >= len(body) - 1 or err.msg.startswith("Unterminated string") or not body.endswith("}"):
            return (f"{name} is not a valid notebook: the JSON ends early, at line {body.count(chr(10)) + 1} "
                    "(the file was cut short while saving, copying or downloading)", DOWNLOAD_AGAIN)
        return (f"{name} is not a valid notebook: broken JSON at line {err.lineno}, column {err.colno} "
                f"({err.msg}; edited by hand?)", DOWNLOAD_AGAIN)
    import nbformat

    try:
        nbformat.reads(text, as_version=4)
    except Exception as err:  # noqa: BLE001 - any reason nbformat refuses it
        return (f"{name} is JSON but not a notebook ({type(err).__name__}: {str(err)[:120]})", DOWNLOAD_AGAIN)
    if not isinstance(nb, dict):
        return f"{name} is JSON but not a notebook", DOWNLOAD_AGAIN
    return None


def _answers(data: bytes | None) -> int | None:
    """How many answer cells of a notebook are filled in (no longer the release's stub)."""
    try:
        nb = json.loads((data or b"").decode("utf-8-sig"))
    except (ValueError, AttributeError):
        return None
    n = 0
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("solution"):
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else str(src)
            if "raise NotImplementedError()" not in src and "YOUR ANSWER HERE" not in src and src.strip():
                n += 1
    return n


def _from_logs(path: str) -> str:
    """'.../logs/intake/01_attention/ana' -> 'logs/intake/01_attention/ana' (whatever the course root)."""
    parts = os.path.normpath(path).split(os.sep)
    return os.path.join(*parts[len(parts) - 1 - parts[::-1].index("logs"):]) if "logs" in parts else path


def check_notebooks(folder: str, expected: list[str], originals: str) -> list[tuple[str, str, str]]:
    """(kind, message, fix) for each way ``folder`` departs from holding exactly ``expected``.

    A byte-order mark before an expected notebook's JSON is read past, the file left as it is (grading
    reads it the same way: ``grading.worker.accept_byte_order_mark``): a ``repaired`` finding, and the
    notebook is graded."""
    out: list[tuple[str, str, str]] = []
    try:
        entries = sorted(os.listdir(folder))
    except OSError as err:
        return [("unreadable", f"the folder cannot be read ({err.strerror})", "check its permissions and regrade")]
    top_notebooks = [e for e in entries if e.lower().endswith(".ipynb")]
    nested = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != ".ipynb_checkpoints"
                             and not os.path.islink(os.path.join(dirpath, d)))
        if dirpath != folder:
            nested += [os.path.relpath(os.path.join(dirpath, f), folder) for f in sorted(filenames)
                       if f.endswith(".ipynb")]
    candidates = [n for n in top_notebooks if n not in expected and os.path.isfile(os.path.join(folder, n))
                  and not os.path.islink(os.path.join(folder, n))]
    data: dict[str, bytes | None] = {}
    for name in expected:
        path = os.path.join(folder, name)
        if not os.path.lexists(path) or os.path.islink(path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            out.append(("unreadable", f"{name} is a folder, not a notebook file",
                        f"put the notebook file itself at {name} (not a folder of that name) and regrade"))
            continue
        fd = None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue  # intake's business (held: a link, a pipe...)
            with os.fdopen(fd, "rb", closefd=False) as fh:
                raw = fh.read()
        except OSError as err:
            out.append(("unreadable", f"{name} cannot be read ({err.strerror})", "check its permissions and regrade"))
            continue
        finally:
            if fd is not None:
                os.close(fd)
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # read past it (grading.worker.accept_byte_order_mark); the file is not rewritten
            out.append(("repaired", f"{name} begins with a byte-order mark (an editor's UTF-8 signature); it was "
                        "read past and the notebook graded", "nothing to do"))
        data[name] = raw
        problem = _json_problem(name, raw)
        if problem:
            out.append(("unreadable", *problem))
    for name in expected:
        if name in data or os.path.lexists(os.path.join(folder, name)):
            continue
        alike = [n for n in candidates if _stem(n) == _stem(name)]
        deeper = [n for n in nested if os.path.basename(n) == name or _stem(os.path.basename(n)) == _stem(name)]
        if len(alike) == 1:
            out.append(("misnamed", f"found {alike[0]!r}, expected {name!r}: not graded",
                        f"rename it to {name} and regrade"))
            candidates.remove(alike[0])
        elif alike:
            listed = ", ".join(repr(n) for n in alike)
            out.append(("misnamed", f"found {listed}, expected {name!r}: none graded",
                        f"rename the one with the work to {name} and regrade"))
            candidates = [c for c in candidates if c not in alike]
        elif deeper:
            out.append(("misnamed", f"found {deeper[0]!r} in a subfolder, expected {name!r} at the top of the "
                        "assignment's folder: not graded", f"move it to {name} and regrade"))
        elif candidates:
            listed = ", ".join(repr(n) for n in candidates)
            out.append(("misnamed", f"found {listed}, expected {name!r}: not graded",
                        f"if it holds the work for {name}, rename it and regrade"))
            candidates = []
        else:
            found = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "") if entries else "nothing"
            out.append(("missing", f"no {name} in the submission (found: {found})",
                        f"if the student handed it in, put it at submitted/<student>/<assignment>/{name} "
                        "and regrade"))
    graded = [n for n in expected if n in data]
    for extra in candidates:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            extra_answers = _answers(_read_regular(top, extra, 200_000_000))
        finally:
            os.close(top)
        mine = {n: _answers(data[n]) for n in graded}
        counts = ", ".join(f"{n} {c}" for n, c in [(extra, extra_answers), *mine.items()] if c is not None)
        more = extra_answers is not None and mine and all(c is not None and extra_answers > c for c in mine.values())
        message = (f"{extra} was not graded (only {', '.join(graded) or 'the expected notebook'} is)"
                   + (f"; answers filled in: {counts}" if counts else ""))
        fix = (f"the work seems to be in {extra}: rename it to {graded[0]} (replacing the other) and regrade"
               if more and graded else "nothing, unless the work is in it: then rename it and regrade")
        out.append(("extra", message, fix))
    return out


def intake_class(tasks: list[tuple[str, str]], assignments: list[str] | None = None,
                 submitted: str = SUBMITTED, intake_dir: str = INTAKE_DIR) -> list[dict]:
    """Intake for every (assignment, student) task, and every notebook accounted for.

    Returns the findings, one dict per problem: ``student, assignment, kind, message, fix`` (kind:
    missing, unreadable, misnamed, extra, dropped, repaired); a ``dropped`` finding also carries
    ``entries`` (what :func:`intake` kept out). An assignment is ``missing`` for a student of the
    class (a folder in ``submitted/``) when others submitted it. Also writes the files held back
    (:func:`held_patterns`) and ``findings.json`` under ``intake_dir``."""
    findings: list[dict] = []
    held: list[str] = []
    try:  # the class: every student folder in submitted/ (not links, not hidden)
        students = sorted(e.name for e in os.scandir(submitted) if e.is_dir(follow_symlinks=False)
                          and not e.name.startswith("."))
    except OSError:
        students = sorted({s for _, s in tasks})
    submitted_by = {}
    for a, s in tasks:
        submitted_by.setdefault(a, set()).add(s)

    def add(a, s, kind, message, fix, **extra):
        findings.append({"student": s, "assignment": a, "kind": kind, "message": message, "fix": fix, **extra})

    for a in (assignments or sorted(submitted_by)):
        for s in students:
            if s not in submitted_by.get(a, set()) and submitted_by.get(a):
                add(a, s, "missing", f"no submission for {a}",
                    f"if {s} handed it in, put it in {os.path.join('submitted', s, a)}/ and regrade")
    root = os.path.dirname(os.path.dirname(intake_dir.rstrip(os.sep)))
    folders = [os.path.join(submitted, s, a) for a, s in tasks]
    for path in _read_held(root):  # files held by earlier runs, in folders this run does not take in
        if not any(path.startswith(f + os.sep) for f in folders):
            held.append(path)
    for a, s in tasks:
        folder = os.path.join(submitted, s, a)
        quarantine = os.path.join(intake_dir, a, s)
        expected = expected_notebooks(a)
        dropped = intake(folder, quarantine, first=tuple(expected))  # first: links and pipes are never opened
        held += [os.path.join(folder, d.path) for d in dropped]
        where = _from_logs(quarantine)
        for d in dropped:
            if d.copied:
                bound = "COURSE_INTAKE_MAX_FILES" if "more than" in d.why else "COURSE_INTAKE_MAX_BYTES"
                add(a, s, "dropped", f"{d} was not graded; it stays in submitted/ (a copy in {where})",
                    f"raise {bound} and regrade to include it", entries=[str(d)], path=d.path, held=True)
            else:
                add(a, s, "dropped", f"{d} was not read: grading never follows a link or opens anything but a "
                    "plain file of the submission; it stays in submitted/ as it is", _fix_for(d, expected),
                    entries=[str(d)], path=d.path, held=True)
        for kind, message, fix in check_notebooks(folder, expected, quarantine):
            add(a, s, kind, message, fix)
        if undated(folder):
            add(a, s, "undated", "timestamp.txt is not a time this grader can read; graded without a "
                "submission time", "write the submission time into timestamp.txt as "
                "'2026-11-28 07:55:00.000000 UTC' (or delete the file) and regrade if lateness matters")
    write_held(held, root)
    os.makedirs(intake_dir, exist_ok=True)
    with open(os.path.join(intake_dir, FINDINGS_FILE), "w") as fh:
        json.dump(findings, fh, indent=1)
    return findings


def _fix_for(d: Dropped, expected: list[str]) -> str:
    """What the instructor does about an entry intake does not read."""
    notebook = d.path in expected
    if d.why == "symbolic link":
        return (f"replace the link by the file it points to, once you have checked it is the student's work "
                f"(cp --remove-destination \"$(readlink -f {d.path})\" {d.path}, in the submission's folder) and regrade"
                if notebook else "nothing, unless the notebook needs it: then put the file itself there and regrade")
    if d.why.startswith("hard link"):
        return "nothing, unless the notebook needs it: then make it a file of its own (cp, not cp -l) and regrade"
    if notebook:
        return f"put the notebook file itself at {d.path} and regrade"
    return "nothing: grading never opens such an entry"


def linked_students(submitted: str = SUBMITTED) -> dict[str, str]:
    """{name: why it is not graded} for each symbolic link in ``submitted/`` where a student's folder belongs.

    Refused, never read: grading runs as root, and a link can point anywhere on the grading machine (another
    student's folder, the instructor's source notebooks). The link stays as it is; the student gets a row in
    grades.csv, a page and a report line with the fix. Its target is not quoted (it is a path of the host)."""
    try:
        entries = sorted(os.scandir(submitted), key=lambda e: e.name)
    except OSError:
        return {}
    return {e.name: (f"submitted/{e.name} is a symbolic link, not a folder: grading never reads through a link "
                     "(it can point anywhere on the grading machine) (fix: replace the link by a copy of the folder "
                     f"it points to, e.g. cp -r --dereference, once you have checked it is {e.name}'s work, and grade "
                     "again)")
            for e in entries if e.is_symlink() and not e.name.startswith(".")}


def held_tasks(findings: list[dict]) -> set[tuple[str, str]]:
    """(assignment, student) whose assignment notebook itself intake held back (a link, a notebook over the
    bounds): there is nothing to grade, so such a task is not given to a worker."""
    return {(f["assignment"], f["student"]) for f in findings
            if f["kind"] == "dropped" and f.get("held") and f.get("path") in expected_notebooks(f["assignment"])}


def report_lines(findings: list[dict]) -> list[str]:
    """The report's lines: one per finding that leaves a submission not graded completely."""
    shown = [f for f in findings if f["kind"] != "repaired"]
    if not shown:
        return []
    lines = [f"[report] {len(shown)} intake finding(s): submissions not graded completely, or files not graded "
             f"(also in logs/intake/{FINDINGS_FILE}):"]
    for f in sorted(shown, key=lambda f: (f["assignment"], f["student"], f["kind"])):
        lines.append(f"  {f['assignment']}/{f['student']}: {f['kind']}: {f['message']}; fix: {f['fix']}")
    return lines


def read_timestamp(path: str):
    """The submission time in ``path`` (nbgrader's ``timestamp.txt``) as a datetime, or None when it is
    empty, not UTF-8 or not a date nbgrader can parse; never raises (issue 57: nbgrader's own reader
    stopped the whole notebook, scored 0 with no fix text). E.g. '2026-11-28 07:55:00 UTC' -> a datetime,
    'yesterday-ish' -> None."""
    from nbgrader.utils import parse_utc

    try:
        with open(path, "rb") as fh:
            text = fh.read(4096).decode("utf-8").strip()
        return parse_utc(text) if text else None
    except (OSError, ValueError, OverflowError, TypeError):  # UnicodeDecodeError is a ValueError
        return None


def undated(folder: str) -> bool:
    """True when ``folder`` holds a ``timestamp.txt`` (a regular file, not followed) that
    ``read_timestamp`` cannot read as a time."""
    path = os.path.join(folder, "timestamp.txt")
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    return read_timestamp(path) is None
