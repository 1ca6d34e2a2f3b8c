"""The suite's cost map (tests/cost_map_plugin.py): totals per file, longest first, read back for the order."""
import json

import cost_map_plugin


def test_the_map_sums_each_file_orders_them_and_reads_back(tmp_path):
    files = {"tests/a.py": {"tests": 2, "setup": 10.04, "call": 1.0, "teardown": 0.5, "failed": 0},
             "tests/b.py": {"tests": 1, "setup": 0.0, "call": 30.0, "teardown": 0.0, "failed": 0}}
    path = tmp_path / "cost_map.json"
    cost_map_plugin.write(str(path), files, [(10.0, "tests/a.py::test_x")], wall=42.0)
    data = json.loads(path.read_text())
    assert list(data["files"]) == ["tests/b.py", "tests/a.py"], "longest file first"
    assert data["files"]["tests/a.py"]["total"] == 11.5 and data["test_seconds"] == 41.5
    assert cost_map_plugin.file_seconds(str(path)) == {"tests/b.py": 30.0, "tests/a.py": 11.5}
    table = (tmp_path / "cost_map.md").read_text()
    assert "| `tests/b.py` | 1 | 0.0 | 30.0 | 0.0 | 30.0 |" in table and "10.0 s `tests/a.py::test_x`" in table


def test_no_map_reads_as_no_order(tmp_path):
    assert cost_map_plugin.file_seconds(str(tmp_path / "missing.json")) == {}
    (tmp_path / "bad.json").write_text("not json")
    assert cost_map_plugin.file_seconds(str(tmp_path / "bad.json")) == {}
