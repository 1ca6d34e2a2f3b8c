"""pytest plugin for the nbval runs of the notebooks (`make test` runs them with --nbval-lax): after a
notebook's last cell, one more item, "prose numbers", checks that every result number its markdown
states is one its outputs in this run show (tests/prose_numbers.py; issue 42). It reuses the
outputs nbval has just produced, so no notebook is executed twice.

A plugin module, not notebooks/conftest.py: two conftest modules are both named ``conftest``, and the
last one pytest imports replaces the other in ``sys.modules`` (the tests' ``from conftest import REPO``
then failed). tests/conftest.py registers it for every run that collects tests/ (`make test`); on its
own: ``PYTHONPATH=tests pytest -p prose_numbers_plugin --nbval-lax notebooks/...``."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import prose_numbers  # noqa: E402  (tests/prose_numbers.py)

_OUTPUTS: dict[str, dict[int, list]] = {}  # notebook path -> {code cell number: outputs of this run}


def _is_nbval_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item, "cell_num")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.when == "call" and _is_nbval_cell(item):
        _OUTPUTS.setdefault(str(item.parent.fspath), {})[item.cell_num] = list(item.test_outputs or [])


class ProseNumbers(pytest.Item):
    """Runs after the notebook's cells: the prose's result numbers against this run's outputs."""

    def runtest(self):
        path = str(self.parent.fspath)
        nb = prose_numbers.read(path)
        code = [c for c in nb.cells if c.cell_type == "code"]
        ran = _OUTPUTS.get(path, {})
        if len(ran) < len(code):
            pytest.skip(f"only {len(ran)} of {len(code)} code cells ran in this session: nothing to compare with")
        for n, cell in enumerate(code):
            cell.outputs = ran[n]
        lesson = pathlib.Path(path).parent.name
        problems = prose_numbers.stale_claims(nb, prose_numbers.ALLOWED.get(lesson))
        if problems:
            raise AssertionError(f"{lesson}: the prose states result numbers this run did not print (type them "
                                 "from the outputs with an f-string, or say which run they come from):\n"
                                 + "\n".join(problems))

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::prose numbers"


def pytest_collection_modifyitems(session, config, items):
    last = {}
    for i, item in enumerate(items):
        if _is_nbval_cell(item):
            last[item.parent] = i
    for parent, i in sorted(last.items(), key=lambda kv: -kv[1]):
        items.insert(i + 1, ProseNumbers.from_parent(parent, name="prose numbers"))
