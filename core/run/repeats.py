"""The timing protocol's steady state, written once for every runnable (JAX strategies and
peers alike): `repeats` timed calls after the first one, each preceded by a cancel check and
the time budget's, each reported as a "repeat" phase, and each kept only if it ran whole."""

from __future__ import annotations

import threading
from typing import Callable

from core.machine.budget import Budget
from core.run import progress
from core.run.progress import Progress, ProgressCallback

# Times the r-th steady-state call: (its seconds, whether it ran every iteration the first
# call ran; a call the budget stopped partway is not a repeat).
TimedCall = Callable[[int], tuple[float, bool]]


def steady_state(repeats: int, call: TimedCall, report: ProgressCallback, cancel: threading.Event | None,
                 budget: Budget | None) -> list[float]:
    """The seconds of each whole steady-state call, up to `repeats` of them; fewer when the
    budget passed (a cancel raises `core.machine.device_queue.Cancelled`)."""
    times = []
    for r in range(repeats):
        progress.check(cancel)
        if budget is not None and budget.over():
            break
        report(Progress("repeat", r, repeats))
        seconds, whole = call(r)
        if not whole:
            break
        times.append(seconds)
    report(Progress("done", repeats, repeats))
    return times
