"""Progress of a grading run, on a terminal or in a log file (issue 61), for both engines.

On a terminal (stderr is a tty): one tqdm bar for the whole run (submissions done / total, failures, ETA)
and one bar per assignment, made when the assignment's first submission starts, so its rate and ETA
count its own time only. Otherwise (``make grade > log 2>&1``, CI): plain lines, no escape sequence and no
carriage return: one when an assignment is finished, and one every ``every`` submissions, e.g.

    [progress] 01_attention: 4 of 4 graded in 12.3 s, 1 failed
    [progress] 20 of 48 graded, 1 failed, 41.0 s, about 57 s left

What it does not do: decide what failed (the caller says) or read results (the engines call it).
"""
from __future__ import annotations

import sys
import time


def _seconds(s: float) -> str:
    """``75.2`` -> ``1 min 15 s``; ``12.34`` -> ``12.3 s``."""
    return f"{int(s // 60)} min {int(s % 60)} s" if s >= 60 else f"{s:.1f} s"


class Progress:
    """``Progress({"01_attention": 4, "02_masking": 4})``; ``started(a)`` when a submission of ``a`` is
    sent or claimed, ``finished(a, failed)`` when its result is recorded, ``close()`` at the end (also on
    an interrupt). ``stream``: where to write (stderr); ``tty``: force the terminal's form or the plain one
    (default: ``stream.isatty()``)."""

    def __init__(self, totals: dict, stream=None, tty: bool | None = None, every: int | None = None,
                 clock=time.monotonic):
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.totals = {a: n for a, n in totals.items() if n}
        self.total = sum(self.totals.values())
        self.every = every or max(10, self.total // 10)
        self.clock = clock
        self.t0 = clock()
        self.done = dict.fromkeys(self.totals, 0)
        self.failed = dict.fromkeys(self.totals, 0)
        self.first = {}  # assignment -> when its first submission started
        self.bars = {}
        self.bar = None
        if self.tty and self.total:
            from tqdm import tqdm

            self._tqdm = tqdm
            self.bar = tqdm(total=self.total, desc="all", unit="sub", position=0, file=self.stream,
                            dynamic_ncols=True, mininterval=0.5)

    # ---------------------------------------------------------------- events
    def started(self, assignment: str) -> None:
        if assignment in self.first or assignment not in self.totals:
            return
        self.first[assignment] = self.clock()
        if self.bar is not None:
            self.bars[assignment] = self._tqdm(total=self.totals[assignment], desc=assignment, unit="sub",
                                               position=len(self.bars) + 1, leave=True, file=self.stream,
                                               dynamic_ncols=True, mininterval=0.5)

    def finished(self, assignment: str, failed: bool = False) -> None:
        if assignment not in self.totals:
            return
        self.started(assignment)
        self.done[assignment] += 1
        self.failed[assignment] += bool(failed)
        n, bad = sum(self.done.values()), sum(self.failed.values())
        if self.bar is not None:
            bar = self.bars[assignment]
            if failed:
                bar.set_postfix(failed=self.failed[assignment], refresh=False)
                self.bar.set_postfix(failed=bad, refresh=False)
            bar.update(1)
            self.bar.update(1)
            return
        if self.done[assignment] == self.totals[assignment]:
            took = self.clock() - self.first[assignment]
            self._line(f"{assignment}: {self.done[assignment]} of {self.totals[assignment]} graded in "
                       f"{_seconds(took)}" + (f", {self.failed[assignment]} failed" if self.failed[assignment] else ""))
        if n % self.every == 0 or n == self.total:
            self._line(self.summary())

    def summary(self) -> str:
        """``20 of 48 graded, 1 failed, 41.0 s, about 57 s left``: the ETA from the run's mean rate so far."""
        n, bad = sum(self.done.values()), sum(self.failed.values())
        took = self.clock() - self.t0
        text = f"{n} of {self.total} graded" + (f", {bad} failed" if bad else "") + f", {_seconds(took)}"
        if 0 < n < self.total:
            text += f", about {_seconds(took / n * (self.total - n))} left"
        return text

    def write(self, line: str) -> None:
        """A line of the run (a lost worker) between the bars' updates, on stdout like the command's lines."""
        if self.bar is not None:
            self._tqdm.write(line, file=sys.stdout)
        else:
            print(line, flush=True)

    def _line(self, text: str) -> None:
        self.stream.write(f"[progress] {text}\n")
        self.stream.flush()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        if self.bar is not None:
            self.bar.close()
            self.bar = None
