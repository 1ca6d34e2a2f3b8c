"""Feedback without the hidden tests (nbgrader#917, #1363).

nbgrader's feedback HTML is the autograded notebook, so it shows the hidden
tests' source and their full tracebacks (which quote that source). This
preprocessor, run by ``generate_feedback`` before the HTML export, replaces each
hidden region with a one-line note and each hidden cell's error with its last
line: the student still sees which hidden test failed, its points and the
checks' message ("likely misconception 'missing scaling': ..."), but not the
inputs or code that the instructor kept hidden. Printed output of hidden cells
is dropped for the same reason.

It also escapes the HTML in students' written (markdown) answers; outputs are
sanitized by nbconvert (``HTMLExporter.sanitize_html`` in nbgrader_config.py).
"""
from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Unicode

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class HideHiddenTests(Preprocessor):
    enabled = Bool(True)  # nbconvert preprocessors are off unless enabled
    begin = Unicode("### BEGIN HIDDEN TESTS").tag(config=True)
    end = Unicode("### END HIDDEN TESTS").tag(config=True)

    def _strip_region(self, source: str) -> tuple[str, bool]:
        out, inside, found = [], False, False
        for line in source.splitlines():
            if self.begin in line:
                inside, found = True, True
                out.append("# hidden tests: not shown in feedback")
            elif self.end in line:
                inside = False
            elif not inside:
                out.append(line)
        return "\n".join(out), found

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("solution"):
            # a student's written answer is shown as text: nbgrader's feedback template renders
            # markdown without sanitizing, and a <script> there would run in the reader's browser
            cell.source = cell.source.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            return cell, resources
        if cell.cell_type != "code":
            return cell, resources
        source, hidden = self._strip_region(cell.source)
        if not hidden:
            return cell, resources
        cell.source = source
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                ename = output.get("ename", "Error")
                evalue = _ANSI.sub("", output.get("evalue", ""))
                output["traceback"] = [f"{ename}: {evalue}"]
                kept.append(output)
        cell.outputs = kept
        return cell, resources
