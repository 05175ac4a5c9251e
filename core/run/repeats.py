"""The timing protocol's steady state, written once for every runnable (JAX strategies and
peers alike): timed calls after the first one, each preceded by a cancel check and the time
budget's, each reported as a "repeat" phase, and each kept only if it ran whole.

How many: at least the spec's `repeats`, and for a short fit more, calibrated as pyperf and
asv calibrate, until it has been timed for `min_measured_seconds()` in all (0.25 s: a 16 ms
fit takes 16 repeats), at most `MAX_REPEATS`. A difference between two fits is then tested on
enough repeats (`core.results.significance`: 3 against 3 can never pass its test; 3 against 11
can). Each fit's count is planned from its first repeat: among fits timed together a slow one
(eager, seconds a fit) keeps the spec's count while a quick one takes more, in the same rounds.

Several fits timed together take their repeats in turn (`in_turn`: the first fit's repeat
1, the second's, ..., then every repeat 2), as pyperf and asv interleave benchmarks, so that
a moment of load on a shared machine lands on every fit alike."""

from __future__ import annotations

import math
import threading
from typing import Callable, Sequence

from core import config
from core.coordination.budget import Budget, seconds_setting
from core.run import progress
from core.run.progress import Progress, ProgressCallback

# Times the r-th steady-state call: (its seconds, whether it ran every iteration the first
# call ran; a call the budget stopped partway is not a repeat).
TimedCall = Callable[[int], tuple[float, bool]]

MIN_MEASURED_S_ENV = "PLNLAB_MIN_MEASURED_S"
DEFAULT_MIN_MEASURED_S = config.variable(MIN_MEASURED_S_ENV).default
# Calibration stops here: 25 against 25 repeats resolve a difference of a few percent, and a
# click on a projector must not wait for more.
MAX_REPEATS = 25


def min_measured_seconds() -> float:
    """$PLNLAB_MIN_MEASURED_S when set (0: exactly the spec's repeats), else
    `DEFAULT_MIN_MEASURED_S`.

    Raises:
        SpecError: the variable is not a number of seconds >= 0.
    """
    return seconds_setting(MIN_MEASURED_S_ENV, DEFAULT_MIN_MEASURED_S, zero_allowed=True)


def planned(repeats: int, first: float, target_s: float) -> int:
    """How many repeats a fit whose first repeat took `first` seconds takes: as many as bring it
    to `target_s` in all, never fewer than `repeats` nor (calibrating) more than `MAX_REPEATS`."""
    if repeats < 1 or target_s <= 0 or not first > 0:
        return repeats
    return max(repeats, min(MAX_REPEATS, math.ceil(target_s / first)))


def in_turn(repeats: int, calls: Sequence[TimedCall], reports: Sequence[ProgressCallback],
            cancel: threading.Event | None, budget: Budget | None,
            target_s: float | None = None) -> list[list[float]]:
    """The seconds of each fit's whole steady-state calls, the fits taking turns: `repeats`
    each, or as many as `planned` makes of it from its first (`target_s`: default
    `min_measured_seconds()`); a fit stops at its first partial call, all stop once the budget
    passed (a cancel raises `core.coordination.device_queue.Cancelled`). `reports[i]` hears fit i."""
    target_s = min_measured_seconds() if target_s is None else target_s
    times: list[list[float]] = [[] for _ in calls]
    going = [True] * len(calls)
    wanted = [repeats] * len(calls)
    r = 0
    while r < max(wanted, default=0):
        for member, (call, report) in enumerate(zip(calls, reports)):
            progress.check(cancel)
            if budget is not None and budget.over():
                going = [False] * len(calls)
            if not going[member] or r >= wanted[member]:
                continue
            report(Progress("repeat", r, wanted[member]))
            seconds, whole = call(r)
            if whole:
                times[member].append(seconds)
                if r == 0:
                    wanted[member] = planned(repeats, seconds, target_s)
            else:
                going[member] = False
        r += 1
    for report, total in zip(reports, wanted):
        report(Progress("done", total, total))
    return times


def steady_state(repeats: int, call: TimedCall, report: ProgressCallback, cancel: threading.Event | None,
                 budget: Budget | None) -> list[float]:
    """One fit's steady state (`in_turn` with one fit)."""
    return in_turn(repeats, [call], [report], cancel, budget)[0]
