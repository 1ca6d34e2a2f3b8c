"""Student text written so that writing it cannot fail, and CSV cells no spreadsheet runs as formulas.

Every CSV the grader writes (``grades.csv``, ``report/similarity.csv``, the LMS import files) takes its
rows through :func:`safe_row` or :func:`writer`; status text and log lines that may hold a file name or
another piece of student text go through :func:`safe_text`.

* :func:`safe_text`: any value as text that encodes to UTF-8 without error. A file name read from the
  disk in bytes that are not UTF-8 (Latin-1 ``caf\\xe9.ipynb``, which Python holds as the lone surrogate
  ``\\udce9``) shows as its bytes escaped (``caf\\xe9.ipynb``); any other lone surrogate as ``\\udXXX``.
* :func:`safe_cell`: :func:`safe_text`, and a cell that a spreadsheet would read as a formula (it starts
  with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) prefixed with ``'``, e.g.
  ``=HYPERLINK("x")`` -> ``'=HYPERLINK("x")``; a plain number (``-1.5``) is left as it is.

Does NOT cover: HTML (the feedback pages' sanitiser does), or what a spreadsheet does with a cell it was
told is text.
"""
from __future__ import annotations

import csv
import re

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def safe_text(value) -> str:
    """``value`` as text that always encodes to UTF-8; e.g. ``"caf\\udce9"`` -> ``"caf\\\\xe9"``."""
    text = value if isinstance(value, str) else str(value)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    out = []
    for ch in text:  # one character at a time: a name's undecodable bytes as \xNN, other surrogates as \udXXX
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def safe_cell(value) -> str | int | float:
    """One CSV cell: numbers as they are, text through :func:`safe_text` and neutralised when a
    spreadsheet would take it for a formula (``'`` in front)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = "" if value is None else safe_text(value)
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def safe_row(row):
    """A row (a list, or a dict of a ``DictWriter``) with every cell through :func:`safe_cell`."""
    if isinstance(row, dict):
        return {k: safe_cell(v) for k, v in row.items()}
    return [safe_cell(v) for v in row]


class _SafeWriter:
    def __init__(self, inner):
        self._inner = inner

    def writerow(self, row):
        return self._inner.writerow(safe_row(row))

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)

    def writeheader(self):
        return self._inner.writerow({k: safe_cell(k) for k in self._inner.fieldnames})


def writer(fh, **kw) -> _SafeWriter:
    """``csv.writer(fh)`` whose every row goes through :func:`safe_row`."""
    return _SafeWriter(csv.writer(fh, **kw))


def dict_writer(fh, fieldnames, **kw) -> _SafeWriter:
    """``csv.DictWriter(fh, fieldnames)`` whose header and rows go through :func:`safe_row`."""
    return _SafeWriter(csv.DictWriter(fh, fieldnames=fieldnames, **kw))
