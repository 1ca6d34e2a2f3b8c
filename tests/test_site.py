"""The rendered edition (grading/site.py): one lesson's pages in both variants, and alt text everywhere.

The full build (twelve notebooks executed) is `make site`, outside `make test`; here lesson 01 is
executed and built in both variants (once per session, by the command: tests/shared_runs.py ``lesson01_site``,
shared with tests/test_browser.py), which exercises every step of the full build, then built again
with nothing changed (issue 64: nothing is executed, as the cache's log of executions shows). Three
tiny notebooks of the test's own (one fine, one raising, one past the time limit) show that a failing
notebook is reported and the others still build. MathJax is served by the site itself (the browser
test, tests/test_browser.py, opens a page offline and finds the formulas typeset).
"""
import glob
import html as html_lib
import json
import os
import re
import shutil

from pathlib import Path

import nbformat
import pytest

from conftest import REPO, source_notebooks

_FIGURE = re.compile(r"plt\.show\(\)")


def _figure_cells():
    for a, path in source_notebooks():
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and _FIGURE.search(cell.source):
                yield f"{a} cell {i}", cell


def test_every_figure_has_alt_text():
    """Issue 39 item 5: every figure says what it shows in one sentence (MyST-NB writes it into <img alt>)."""
    missing, bad = [], []
    cells = list(_figure_cells())
    assert len(cells) > 20, "the notebooks draw more figures than this: the figure pattern is broken"
    for where, cell in cells:
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
        if not alt:
            missing.append(where)
        elif not (40 <= len(alt) <= 400 and alt.rstrip().endswith(".")):
            bad.append(f"{where}: {alt!r}")
    assert not missing, f"figure cells without alt text (cell metadata mystnb.image.alt): {missing}"
    assert not bad, f"alt text should be one sentence of 40-400 characters: {bad}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Lesson 01's site in both variants: the session's one build (tests/shared_runs.py ``lesson01_site``, read by
    tests/test_browser.py too). Read only here; the second build below builds a copy."""
    pytest.importorskip("myst_nb", reason="the site's packages (the `site` extra) are not installed")
    from shared_runs import lesson01_site

    out, run = lesson01_site(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def _cache_state(out) -> tuple[list[dict], dict[str, float]]:
    """The cache's log of executions and {cached notebook: mtime}."""
    from grading import site as site_mod

    cache = site_mod.Cache(str(out / ".cache"))
    return cache.executions(), {p.name: p.stat().st_mtime_ns for p in (out / ".cache").glob("*.ipynb")}


def _solution_lines(path: str) -> list[str]:
    """Long lines between ### BEGIN SOLUTION and ### END SOLUTION of a source notebook."""
    nb = nbformat.read(path, as_version=4)
    lines = []
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            parts = re.split(r"^[ \t]*### (?:BEGIN|END) SOLUTION[ \t]*$", cell.source, flags=re.MULTILINE)
            for part in parts[1::2]:
                lines += [ln.strip() for ln in part.splitlines() if len(ln.strip()) > 30
                          and not ln.strip().startswith(("#", '"""'))]
    return lines


def test_lesson_pages_with_navigation_search_and_alt_text(site):
    for variant in ("instructor", "students"):
        html = site / variant / "html"
        index = (html / "index.html").read_text()
        page = html / "01_attention" / "attention.html"
        assert page.is_file(), f"no page for lesson 01 in the {variant} site"
        assert 'href="01_attention/attention.html"' in index, "the index does not link the lesson"
        assert (html / "search.html").is_file() and (html / "searchindex.js").is_file(), "no search"
        text = page.read_text()
        assert 'rel="prev"' in text or 'rel="next"' in text, "no navigation between pages"
        imgs = re.findall(r"<img [^>]*>", text)
        assert imgs, f"the {variant} page of lesson 01 shows no figure: were the outputs kept?"
        for img in imgs:
            alt = re.search(r'alt="([^"]*)"', img)
            assert alt and not alt.group(1).endswith(".png"), f"an image without alt text: {img[:200]}"


def _text(path: str) -> str:
    """A file's text as a reader sees it: HTML without its tags (highlighting splits code into spans)."""
    text = open(path, encoding="utf-8", errors="replace").read()
    return html_lib.unescape(re.sub(r"<[^>]+>", "", text)) if path.endswith(".html") else text


def _site_text(folder) -> str:
    return "\n".join(_text(p) for p in glob.glob(str(folder / "**" / "*"), recursive=True)
                     if os.path.isfile(p) and p.endswith((".html", ".ipynb", ".txt", ".js", ".md")))


def test_students_site_holds_no_solution(site):
    src = os.path.join(REPO, "notebooks", "01_attention", "attention.ipynb")
    solution = _solution_lines(src)
    assert solution, "lesson 01 has solution lines: the scan below would prove nothing without them"
    joined = _site_text(site / "students")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
        assert marker not in joined, f"{marker!r} in the students' site"
    leaked = [ln for ln in solution if ln in joined or json.dumps(ln)[1:-1] in joined]
    assert not leaked, f"solution lines in the students' site: {leaked[:3]}"
    assert "YOUR CODE HERE" in joined, "the students' site should show the exercise stubs"
    # the same scan finds them in the instructor's variant (so it is able to find a leak)
    page = _text(str(site / "instructor" / "html" / "01_attention" / "attention.html"))
    assert all(ln in page for ln in solution), "the instructor's page should show every solution line"


# ---------------------------------------------------------------- issue 64: offline MathJax, the execution cache
def test_the_pages_load_mathjax_from_the_site_itself(site):
    """Issue 64 item 1: the pages typeset formulas with the MathJax the site serves, never a CDN's."""
    for variant in ("instructor", "students"):
        html = site / variant / "html"
        page = (html / "01_attention" / "attention.html").read_text()
        assert page.count('class="math notranslate nohighlight"') > 5, "lesson 01's page holds no formula to typeset"
        scripts = re.findall(r'<script [^>]*src="([^"]*)"', page)
        mathjax = [s for s in scripts if "mathjax" in s.lower() or "tex-" in s]
        assert len(mathjax) == 1 and mathjax[0].split("?")[0] == "../_static/mathjax/tex-mml-chtml.js", \
            f"the {variant} page should load MathJax from _static/mathjax/ only, it loads {mathjax}"
        assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").stat().st_size > 500_000, "MathJax was not copied"
        assert list((html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff")), \
            "MathJax's fonts were not copied"
        for p in html.rglob("*.html"):
            text = p.read_text()  # what a page loads: scripts, images, stylesheets (links to follow are fine)
            remote = re.findall(r'src="(https?://[^"]+)"', text) + re.findall(r'<link [^>]*href="(https?://[^"]+)"', text)
            assert not remote, f"{p.relative_to(html)} loads from the network: {remote}"


def test_a_second_build_with_nothing_changed_executes_nothing(site, capsys, tmp_path):
    """Issue 64 item 2: lesson 01 built again into the same folder (a copy of the session's build, timestamps
    kept): nothing is executed (the cache's log has no new entry, the cached notebook is not rewritten) and the
    pages still show the outputs."""
    from grading import site as site_mod

    site = Path(shutil.copytree(site, tmp_path / "site", symlinks=True))
    runs, cached = _cache_state(site)
    assert [r["notebook"] for r in runs] == ["01_attention/attention.ipynb"] and runs[0]["ok"], runs
    assert len(cached) == 1, f"one executed notebook should be cached, found {sorted(cached)}"
    pages = {p: p.stat().st_mtime_ns for p in site.glob("*/html/**/*.html")}
    capsys.readouterr()
    assert site_mod.main(["--lessons", "01", "--out", str(site)]) == 0
    printed = capsys.readouterr().out
    assert "01_attention/attention.ipynb: cached (not executed" in printed, printed
    assert "executing" not in printed, f"the second build executed a notebook:\n{printed}"
    for variant in ("instructor", "students"):
        assert f"{variant}: pages up to date" in printed, f"the {variant} pages were built again:\n{printed}"
    assert {p: p.stat().st_mtime_ns for p in site.glob("*/html/**/*.html")} == pages, "pages were rewritten"
    assert _cache_state(site) == (runs, cached), "the second build executed lesson 01 again (cache log or file changed)"
    text = (site / "students" / "html" / "01_attention" / "attention.html").read_text()
    assert re.findall(r"<img [^>]*>", text), "the cached outputs did not reach the rebuilt page"


def _tiny_notebook(folder, name: str, cells) -> str:
    v4 = nbformat.v4
    nb = v4.new_notebook(cells=[v4.new_markdown_cell(c[3:]) if c.startswith("md:") else v4.new_code_cell(c)
                                for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / name))
    return str(folder / name)


def test_cache_key_follows_the_code_and_course_lib_only(tmp_path):
    """The key changes with a code cell or a file of course_lib (or of the lesson folder), not with prose or outputs."""
    from grading import site as site_mod

    lib = tmp_path / "course_lib"
    (lib / "sub").mkdir(parents=True)
    (lib / "sub" / "attention.py").write_text("def f():\n    return 1\n")
    path = _tiny_notebook(tmp_path / "01_x", "x.ipynb", ["md:# Title", "print(1)"])
    key = site_mod.cache_key(path, str(lib))
    assert site_mod.cache_key(path, str(lib)) == key, "the key is not deterministic"

    nb = nbformat.read(path, 4)
    nb.cells[0].source = "# Another title, the prose edited"
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nbformat.write(nb, path)
    assert site_mod.cache_key(path, str(lib)) == key, "prose or outputs changed the key: edits would re-execute"

    (lib / "sub" / "attention.py").write_text("def f():\n    return 2\n")
    key_lib = site_mod.cache_key(path, str(lib))
    assert key_lib != key, "a change in course_lib did not change the key: a stale run would be shown"

    nb.cells[1].source = "print(2)"
    nbformat.write(nb, path)
    assert site_mod.cache_key(path, str(lib)) != key_lib, "a changed code cell did not change the key"

    key_code = site_mod.cache_key(path, str(lib))
    (tmp_path / "01_x" / "data.csv").write_text("a,b\n")
    assert site_mod.cache_key(path, str(lib)) != key_code, "a data file of the lesson did not change the key"


def test_a_failing_or_timed_out_notebook_is_reported_and_the_others_build(tmp_path, capsys):
    """Issue 64 item 2: one notebook raises, one runs past --timeout: both are named, their pages say so, the
    good one builds; nothing of theirs is cached, so the next build tries them again and reuses the good one."""
    pytest.importorskip("myst_nb", reason="the site's packages (the `site` extra) are not installed")
    from grading import site as site_mod

    nbs, out = tmp_path / "notebooks", tmp_path / "out"
    _tiny_notebook(nbs / "01_ok", "ok.ipynb", ["md:# Fine\n\nThe scale $1/\\sqrt{d_k}$.", "print('fine output')"])
    _tiny_notebook(nbs / "02_fails", "fails.ipynb", ["md:# Fails", "print('ran before')",
                                                     "raise ValueError('boom on purpose')", "print('never ran')"])
    _tiny_notebook(nbs / "03_slow", "slow.ipynb", ["md:# Slow", "import time\ntime.sleep(120)"])
    args = ["--notebooks", str(nbs), "--out", str(out), "--timeout", "5"]
    assert site_mod.main(args) == 1, "a build with failed notebooks should exit 1"
    captured = capsys.readouterr()
    assert "02_fails/fails.ipynb: CellExecutionError (ValueError: boom on purpose)" in captured.err, captured.err
    assert "03_slow/slow.ipynb: CellTimeoutError" in captured.err, captured.err
    assert "01_ok/ok.ipynb: done in" in captured.out, captured.out
    for variant in ("instructor", "students"):
        html = out / variant / "html"
        ok = _text(str(html / "01_ok" / "ok.html"))
        assert "fine output" in ok and "did not execute completely" not in ok, f"the good lesson's {variant} page"
        fails = _text(str(html / "02_fails" / "fails.html"))
        assert "did not execute completely" in fails and "boom on purpose" in fails, fails[:2000]
        assert "ran before" in fails, "the failed page should show what ran before the failure"
        slow = _text(str(html / "03_slow" / "slow.html"))
        assert "did not execute completely" in slow and "timed out" in slow, slow[:2000]
    runs, cached = _cache_state(out)
    assert [(r["notebook"], r["ok"]) for r in runs] == [("01_ok/ok.ipynb", True), ("02_fails/fails.ipynb", False),
                                                       ("03_slow/slow.ipynb", False)], runs
    assert len(cached) == 1, f"only the good notebook may be cached: {sorted(cached)}"

    capsys.readouterr()
    assert site_mod.main(args[:-2] + ["--timeout", "5", "--lessons", "01,02"]) == 1
    printed = capsys.readouterr().out
    assert "instructor: pages built" in printed and "students: pages built" in printed, \
        f"another set of lessons must build the pages again:\n{printed}"
    assert not (out / "students" / "html" / "03_slow").exists(), "a lesson left out of the build kept its page"
    again, _ = _cache_state(out)
    assert [r["notebook"] for r in again[len(runs):]] == ["02_fails/fails.ipynb"], \
        f"the second build should execute the failed notebook again and reuse the good one: {again[len(runs):]}"


def test_every_docs_page_is_in_one_part_of_the_site():
    """Each page of grading/docs/ is placed in one part (Students, Instructors, Contributors) of the site's
    index: a new page is placed on purpose, never left out of the rendered course."""
    from grading import site as site_mod

    pages = {p[:-3] for p in os.listdir(site_mod.DOCS_DIR) if p.endswith(".md")}
    placed = [n for names in site_mod.DOCS.values() for n in names]
    assert len(placed) == len(set(placed)), f"a page in two parts: {placed}"
    assert pages <= set(placed), f"pages of grading/docs/ in no part of the site (grading/site.py DOCS): " \
                                 f"{sorted(pages - set(placed))}"
    students = site_mod.doc_pages("students")
    assert list(students) == ["Students"] and "students" in students["Students"]


def test_the_docs_are_pages_of_the_site(site):
    index = (site / "instructor" / "html" / "index.html").read_text()
    for part in ("Students", "Instructors", "Contributors"):
        assert part in index, f"the instructor's site has no {part} part"
    assert (site / "instructor" / "html" / "docs" / "threat-model.html").is_file()
    assert (site / "students" / "html" / "docs" / "students.html").is_file()
    assert not (site / "students" / "html" / "docs" / "threat-model.html").exists(), \
        "the students' site carries the instructors' pages"


# ------------------------------------------------------------------ the Benchmarks page: tables from the result files
def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans (file names, commands)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def test_the_benchmarks_page_types_no_number():
    """Issue 58 item 1: benchmark figures come from the kept result files, never typed. The typed page
    (grading/docs/benchmarks.md) keeps prose: no digit outside its code spans (paths, commands)."""
    from grading import site as site_mod

    with open(os.path.join(site_mod.DOCS_DIR, site_mod.GENERATED_TABLES_PAGE + ".md"), encoding="utf-8") as fh:
        typed = _prose(fh.read())
    assert not re.findall(r".{0,30}\d.{0,30}", typed), re.findall(r".{0,30}\d.{0,30}", typed)
    assert _prose("a `cpu_2026-11-26/` and\n```\n12 s\n```\nno number") == "a  and\n\nno number"


def test_the_benchmark_tables_hold_figures_read_from_the_result_files():
    """The generated tables carry the figures each kept file prints, read here by the test's own reading of
    the files, and name every kept file: in a table, or in the list of files not read."""
    import doctest

    from grading import benchmark_tables as bt

    assert doctest.testmod(bt).failed == 0
    page = bt.markdown()
    rows = page.splitlines()
    results = bt.RESULTS_DIR
    checked = 0
    for path in sorted(glob.glob(os.path.join(results, "**", "bench_report_*.txt"), recursive=True)):
        with open(path) as fh:
            cpu = re.search(r"^report\.write:.*?([\d.]+) s CPU", fh.read(), re.M)
        rel = os.path.relpath(path, results)
        assert cpu, f"{rel}: the test cannot read its CPU seconds either"
        assert any(f"`{rel}`" in r and f"{cpu[1]} s CPU" in r for r in rows), (rel, cpu[1])
        checked += 1
    for path in sorted(glob.glob(os.path.join(results, "**", "*breakdown*.txt"), recursive=True)):
        with open(path) as fh:
            overheads = re.findall(r"^fixed overhead[^:\n]*: ([\d.]+) s per submission", fh.read(), re.M)
        rel = os.path.relpath(path, results)
        ours = [r for r in rows if r.startswith(f"| `{rel}`")]
        assert [re.search(r"fixed overhead ([\d.]+) s", r)[1] for r in ours] == overheads, rel
        checked += len(overheads)
    assert checked >= 10, "the kept results hold more readable figures than this: the test's reading is broken"
    kept = [os.path.relpath(os.path.join(d, f), results) for d, _, fs in os.walk(results) for f in fs
            if f != bt.MACHINE_FILE]
    missing = [f for f in kept if f"`{f}`" not in page]
    assert not missing, f"kept result files the Benchmarks page does not name: {missing}"
    numbers_in_rows = [r for r in rows if r.startswith("| `")]
    assert numbers_in_rows and all(re.search(r"\d", r.split("|")[-2]) for r in numbers_in_rows)


def test_a_result_file_the_generator_cannot_read_is_listed_by_name(tmp_path):
    from grading import benchmark_tables as bt

    run = tmp_path / "cpu_test"
    run.mkdir()
    (run / "bench_report_100_abcdef1_seed0.txt").write_text(
        "$ python tests/benchmarks/bench_report.py --submissions 100 --seed 0\n"
        "report.write: 1.25 s CPU, 3.50 s wall (target); load average 0.4 on 2 CPU(s): ...\n"
        "index.html: 0.10 MB (target), report.json: 0.20 MB\n")
    (run / "bench_report_broken.txt").write_text("report.write: nothing measured\n")
    (run / "first_run_broken.json").write_text("{not json")
    (run / "notes.txt").write_text("a note someone kept\n")
    (run / "bench_grading_abcdef2.txt").write_text("machine: x86_64, 2 cores\n\n== demo class\nno figure\n")
    tables, unread = bt.collect(str(tmp_path))
    assert [(r.file, r.commit, r.load, r.figures) for r in tables["bench_report.py"]] == [
        ("cpu_test/bench_report_100_abcdef1_seed0.txt", "abcdef1", "0.4",
         "report.write 1.25 s CPU, 3.50 s wall; index.html 0.10 MB; report.json 0.20 MB")]
    why = dict(unread)
    assert set(why) == {"cpu_test/bench_report_broken.txt", "cpu_test/first_run_broken.json", "cpu_test/notes.txt",
                        "cpu_test/bench_grading_abcdef2.txt"}, why
    assert "no CPU or wall seconds" in why["cpu_test/bench_report_broken.txt"]
    assert "not valid JSON" in why["cpu_test/first_run_broken.json"]
    assert "no parser knows" in why["cpu_test/notes.txt"]
    assert "no figure" in why["cpu_test/bench_grading_abcdef2.txt"]
    page = bt.markdown(str(tmp_path))
    assert "| `cpu_test/bench_report_100_abcdef1_seed0.txt` | 100 submissions | 2 CPUs | abcdef1 | 0.4 |" in page
    assert "- `cpu_test/notes.txt`: no parser knows this kind of file" in page
    assert bt.main(["--results", str(tmp_path / "nowhere")]) == 2


def test_the_sites_benchmarks_page_carries_the_generated_tables():
    """The page the site builds (its Sphinx source; the build itself is test_the_docs_are_pages_of_the_site's)
    is the typed prose followed by the tables generated from the kept result files."""
    from grading import benchmark_tables as bt
    from grading import site as site_mod

    page = site_mod._source_files("instructor", {}, None)["docs/benchmarks.md"]
    with open(os.path.join(site_mod.DOCS_DIR, "benchmarks.md"), encoding="utf-8") as fh:
        assert page.startswith(fh.read().rstrip("\n"))
    assert page.endswith(bt.markdown()) and "### `bench_grading.py`" in page
    assert "docs/benchmarks.md" not in site_mod._source_files("students", {}, None)
