"""The time one run may hold the device: refused before it starts when it cannot fit, stopped
when it passes it.

A shared device serves one timed run at a time, so one click asking for a million eager
iterations would hold it for days. Each run gets `max_run_seconds()` from when it takes
the device ($PLNLAB_MAX_RUN_SECONDS, default 5 minutes; the queue wait does not count).

- Before it starts: `check` refuses a run whose *least* possible time exceeds the budget.
  The estimate is a floor (per-iteration dispatch and per-cell costs well under what any
  machine does, see `_FLOORS`), so a refused run could not have finished anywhere; it
  catches the absurd requests without guessing at this machine's speed.
- While it runs: a `Budget` is checked where cancels are checked (between iterations of a
  Python loop, between the calls of a split compiled loop, between repeats), never inside a
  timed call; a run past it stops there and is stored as "timed_out" with the ELBO curve so
  far and the repeats that finished.
"""

from __future__ import annotations

import time

from core import catalog, config
from core.spec import FitSpec, SpecError

MAX_RUN_SECONDS_ENV = "PLNLAB_MAX_RUN_SECONDS"
DEFAULT_MAX_RUN_SECONDS = config.variable(MAX_RUN_SECONDS_ENV).default

# Floors, in seconds, on what one iteration costs beside its arithmetic: Python's dispatch
# of the ops or of the jitted calls (the catalog's `dispatch_floor_s`). Compiled loops dispatch once.
_FLOORS = {name: runnable.dispatch_floor_s for name, runnable in catalog.RUNNABLES.items()}
# Floors on the seconds per cell of Y per iteration: ~15 ns measured on a 2-core CPU (scan,
# oaks x100), floor 0.2 ns; an accelerator reads and writes at least six arrays a cell,
# 24 bytes at 3.35 TB/s (H100) is 7 ps, floor 2 ps.
_CELL_FLOORS = {"cpu": 2e-10, "gpu": 2e-12, "tpu": 2e-12}


def seconds_setting(name: str, default: float, zero_allowed: bool = False) -> float:
    """The environment variable `name` as a finite number of seconds, `default` when unset.

    Raises:
        SpecError: naming the variable, when it is not a number of seconds > 0 (>= 0 where
            `zero_allowed`).
    """
    if not config.raw(name):
        return default
    try:
        return config.seconds(name, zero_allowed)
    except config.ConfigError as exc:
        raise SpecError(str(exc)) from None


def max_run_seconds() -> float:
    """$PLNLAB_MAX_RUN_SECONDS when set, else `DEFAULT_MAX_RUN_SECONDS`.

    Raises:
        SpecError: the variable is not a number of seconds > 0.
    """
    return seconds_setting(MAX_RUN_SECONDS_ENV, DEFAULT_MAX_RUN_SECONDS)


def least_seconds(spec: FitSpec, shape: tuple[int, int, int] | None) -> float:
    """A floor on the seconds `spec` holds the device: its first call and repeats, each of
    `spec.iterations` iterations at no less than `_FLOORS` + cells x `_CELL_FLOORS`."""
    cells = shape[0] * shape[1] if shape is not None else 0
    per_iteration = _FLOORS.get(spec.strategy, 0.0) + cells * _CELL_FLOORS.get(spec.device, 0.0)
    return (1 + spec.repeats) * spec.iterations * per_iteration


def duration(seconds: float) -> str:
    """`seconds` in words: "42 s", "7 minutes", "3 hours", "5 days"."""
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:,.0f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:,.0f} hours"
    if seconds >= 120:
        return f"{seconds / 60:,.0f} minutes"
    return f"{seconds:.3g} s"


def check(spec: FitSpec, shape: tuple[int, int, int] | None, seconds: float | None = None) -> None:
    """Raise SpecError when `spec` cannot finish within `seconds` (default `max_run_seconds()`)."""
    budget = max_run_seconds() if seconds is None else seconds
    least = least_seconds(spec, shape)
    if least > budget:
        raise SpecError(
            f"too long for this server: {spec.iterations:,} iterations x {1 + spec.repeats} calls of "
            f"{spec.strategy} would hold the {spec.device} for at least {duration(least)}, and a run may "
            f"hold it for {duration(budget)} ({MAX_RUN_SECONDS_ENV}); use fewer iterations or repeats, "
            "or a compiled strategy")


class Budget:
    """The deadline of one run, from when it takes the device (`start`).

    Args:
        seconds: how long the run may hold the device; None for no limit.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._deadline: float | None = None
        self.passed = False

    def start(self) -> None:
        if self.seconds is not None:
            self._deadline = time.monotonic() + self.seconds

    def over(self) -> bool:
        """Whether the deadline has passed (remembered in `passed`)."""
        if not self.passed and self._deadline is not None and time.monotonic() > self._deadline:
            self.passed = True
        return self.passed
