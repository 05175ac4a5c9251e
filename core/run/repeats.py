"""The timing protocol's steady state, written once for every runnable (JAX strategies and
peers alike): `repeats` timed calls after the first one, each preceded by a cancel check and
the time budget's, each reported as a "repeat" phase, and each kept only if it ran whole.

Several fits timed together take their repeats in turn (`in_turn`: the first fit's repeat
1, the second's, ..., then every repeat 2), as pyperf and asv interleave benchmarks, so that
a moment of load on a shared machine lands on every fit alike."""

from __future__ import annotations

import threading
from typing import Callable, Sequence

from core.machine.budget import Budget
from core.run import progress
from core.run.progress import Progress, ProgressCallback

# Times the r-th steady-state call: (its seconds, whether it ran every iteration the first
# call ran; a call the budget stopped partway is not a repeat).
TimedCall = Callable[[int], tuple[float, bool]]


def in_turn(repeats: int, calls: Sequence[TimedCall], reports: Sequence[ProgressCallback],
            cancel: threading.Event | None, budget: Budget | None) -> list[list[float]]:
    """The seconds of each fit's whole steady-state calls, up to `repeats` each, the fits
    taking turns; a fit stops at its first partial call, all stop once the budget passed
    (a cancel raises `core.machine.device_queue.Cancelled`). `reports[i]` hears fit i."""
    times: list[list[float]] = [[] for _ in calls]
    going = [True] * len(calls)
    for r in range(repeats):
        for member, (call, report) in enumerate(zip(calls, reports)):
            progress.check(cancel)
            if budget is not None and budget.over():
                going = [False] * len(calls)
            if not going[member]:
                continue
            report(Progress("repeat", r, repeats))
            seconds, whole = call(r)
            if whole:
                times[member].append(seconds)
            else:
                going[member] = False
    for report in reports:
        report(Progress("done", repeats, repeats))
    return times


def steady_state(repeats: int, call: TimedCall, report: ProgressCallback, cancel: threading.Event | None,
                 budget: Budget | None) -> list[float]:
    """One fit's steady state (`in_turn` with one fit)."""
    return in_turn(repeats, [call], [report], cancel, budget)[0]
