"""Progress of a run: the phases it goes through, the reports it sends, and cancelling it.

`PHASES` is the one table of phases: what each is called, what a person reads while it
lasts, and where a progress bar stands during it. The dashboard's bars, the Scaling
page's device sweep and the command line all read it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, NamedTuple

from core.coordination.budget import Budget
from core.coordination.device_queue import Cancelled  # noqa: F401 - raised by `check`; the fit path's name for it


class Phase(NamedTuple):
    """One phase of a run.

    Attributes:
        name: as reported in `Progress.phase` and on the command line's stderr.
        text: what the user reads while it lasts.
        start, end: where a progress bar of the whole run stands when the phase begins
            and when it ends (phases with steps move between the two).
    """

    name: str
    text: str
    start: float
    end: float


PHASES: dict[str, Phase] = {phase.name: phase for phase in (
    Phase("queued", "waiting for the device", 0.0, 0.0),
    Phase("data", "loading data", 0.02, 0.05),
    Phase("transfer", "copying data to the device", 0.05, 0.1),
    Phase("compile", "tracing, lowering and compiling", 0.1, 0.15),
    Phase("first_call", "first call", 0.15, 0.6),
    Phase("repeat", "timing steady state", 0.6, 1.0),
    Phase("done", "done", 1.0, 1.0),
)}


class Progress(NamedTuple):
    """A progress report.

    Attributes:
        phase: a name from `PHASES`.
        done, total: progress within the phase (iterations for "first_call" on Python
            loops and chunked compiled loops, repeats for "repeat").
        elbo: the latest ELBO when the runnable can report one mid-run, else None.
        ahead: while "queued", the device queue's entries ahead (holder first).
        waited_s: while "queued", seconds waited so far.
        member: for fits timed together (`core.run.engine.run_together`), which of them
            reports (its index in the list); 0 for a fit timed alone.
    """

    phase: str
    done: int = 0
    total: int = 0
    elbo: float | None = None
    ahead: tuple = ()
    waited_s: float = 0.0
    member: int = 0

    @property
    def fraction(self) -> float:
        """Where a progress bar of the whole run stands (0 to 1)."""
        phase = PHASES[self.phase]
        within = self.done / self.total if self.total else 0.0
        return min(1.0, phase.start + (phase.end - phase.start) * within)


ProgressCallback = Callable[[Progress], None]


def ignore(progress: Progress) -> None:
    """A `ProgressCallback` for runs nobody watches."""


def check(cancel: threading.Event | None) -> None:
    """Raise `Cancelled` when `cancel` is set: called between phases, iterations and chunks."""
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled; nothing was stored")


def live_elbo_reporter(report: ProgressCallback, total: int, cancel: threading.Event | None = None,
                       budget: Budget | None = None) -> Callable[[int, Any], bool]:
    """Per-iteration callback for a first call run from Python: about 50 ELBO reports a
    run (and at least one a second), and a cancel check every iteration; it returns True
    (stop the loop here) once `budget` has passed."""
    # Reading an ELBO back forces a device sync, so the first call of a Python-loop
    # strategy reports about 50 times per run rather than every iteration (the timed
    # repeats read nothing back: see repeat_reporter). A report also goes out at least
    # once a second: each one is where the dashboard can stop a cancelled run, and a long
    # eager fit may take minutes for 1/50 of its iterations.
    every = max(1, total // 50)
    last = [0, time.perf_counter()]  # iterations reported so far, and when

    def on_iteration(i: int, value) -> bool:
        check(cancel)
        now = time.perf_counter()
        over = budget is not None and budget.over()
        if i + 1 - last[0] >= every or now - last[1] >= 1.0 or i + 1 == total or over:
            last[0], last[1] = i + 1, now
            report(Progress("first_call", i + 1, total, float(value)))
        return over

    return on_iteration


def stop_checker(cancel: threading.Event | None, budget: Budget | None) -> Callable[[int, Any], bool]:
    """Per-iteration callback for a run nobody watches: a cancel check, and True (stop the
    loop here) once `budget` has passed. It reads nothing back from the device."""
    def on_iteration(i: int, value) -> bool:
        check(cancel)
        return budget is not None and budget.over()

    return on_iteration


def repeat_reporter(report: ProgressCallback, repeat: int, total: int, cancel: threading.Event | None,
                    budget: Budget | None = None) -> Callable[[int, Any], bool]:
    """Per-iteration (or per-chunk) callback inside a timed repeat: a cancel check, a
    progress report at most once a second (a point where the dashboard can stop the run),
    and True (stop the loop here) once `budget` has passed. It reads nothing back from
    the device, so the timing is left alone."""
    last = [time.perf_counter()]

    def on_iteration(i: int, value) -> bool:
        check(cancel)
        now = time.perf_counter()
        if now - last[0] >= 1.0:
            last[0] = now
            report(Progress("repeat", repeat, total))
        return budget is not None and budget.over()

    return on_iteration
