"""Run a FitSpec: check it, wait for the device, time it with its runnable -> RunResult.

The timing itself belongs to each runnable (`core.run.jax_timing` for the JAX
strategies, `core.run.peer_timing` for the peers); the engine does what every run
shares: the memory check before anything is loaded, the data loaded and checked for
what float32 cannot hold (`core.fit.precision_guard`) before the run queues, the turn in
the host's device queue, and the result built from what was measured.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Sequence

from core import catalog
from core.coordination import budget, device_queue
from core.data import datasets
from core.data.counts import CountData
from core.fit import precision_guard
from core.machine import machine_state, memory_estimate
from core.results.result import RunResult
from core.run import batches, jax_timing, lifecycle, measure, repeats
from core.run.certified import certified
from core.run.prepared import ExecutableCache
from core.run.progress import Progress, ProgressCallback, ignore
from core.spec import FitSpec, SpecError
from core.store.record_checks import MAX_TEXT, MAX_WARNINGS


def _queue_reporter(report: ProgressCallback):
    """The device queue's `on_wait`, as "queued" progress reports."""
    def on_wait(ahead, waited_s: float) -> None:
        report(Progress("queued", len(ahead), 0, None, tuple(ahead), waited_s))
    return on_wait


def run(
    spec: FitSpec,
    counts: CountData | None = None,
    on_progress: ProgressCallback | None = None,
    cache: ExecutableCache | None = None,
    cancel: threading.Event | None = None,
    owner: str = "command line",
    hold_device: bool = True,
    cold: bool = False,
    max_seconds: float | None = None,
) -> RunResult:
    """Fit `spec` and time it; the result is not stored (see `core.run.stored_run`).

    The timed section (data transfer, compilation, first call, repeats) holds the
    device: it waits its turn in the host's device queue (`core.coordination.device_queue`), and the
    result records the wait (`queue_wait_s`) and the section's epoch window
    (`timed_window`), so that anyone can check that two windows never overlap.

    Args:
        spec: what to run.
        counts: the data, when the caller already holds it (e.g. an uploaded CSV);
            otherwise loaded from `spec.dataset`.
        on_progress: called with `Progress` reports from the calling thread.
        cache: where compiled executables are kept (default: the process's own).
        cancel: set it (e.g. from another thread) to stop the run: `Cancelled` is raised
            while queued, between phases, between iterations of Python loops, between
            the calls of a split compiled loop and between repeats.
        owner: who is running, as shown to others in the device queue.
        hold_device: False skips the queue: for the non-primary processes of a
            distributed run, which join the primary's collectives (it holds the queue).
        cold: compile from scratch, skipping the in-memory and the persistent compilation
            caches for this run only (`core.run.cold_compile`); the run still stores its
            executables in both. It compiles while holding the device queue.
        max_seconds: how long the run may hold the device (default: this process's
            `core.coordination.budget.max_run_seconds()`; a run on a worker gets its server's).

    A run may hold the device for `max_seconds`: one that cannot finish within it is
    refused, one that passes it stops and returns as "timed_out".

    Raises:
        SpecError: the device is absent, the data are invalid (`core.data.DataError`),
            the fit would not fit in the device's free memory or in the time budget, or
            float32 cannot hold the data's ELBO (the message names float64).
        core.run.progress.Cancelled: `cancel` was set.
    """
    catalog.runnable(spec.strategy)  # KeyError naming the known ones
    seconds = budget.max_run_seconds() if max_seconds is None else max_seconds
    memory_estimate.check(spec, counts)
    budget.check(spec, memory_estimate.shape_of(spec, counts), seconds)
    allowed = budget.Budget(seconds)
    report = on_progress or ignore
    counts = _host_data(spec, counts, seconds)
    warnings = _data_warnings(spec, counts)
    label = lifecycle.label(spec)
    turn = (device_queue.default_queue().hold(spec.device, label, owner, _queue_reporter(report), cancel)
            if hold_device else contextlib.nullcontext(0.0))
    with turn as waited:
        window_start = time.time()
        allowed.start()
        with machine_state.Watch() as watch:
            measurement = measure.measure(spec, counts, report, cancel, cache,
                                           watched=on_progress is not None or cancel is not None, budget=allowed,
                                           cold=cold)
        window = (window_start, time.time())
    measurement = certified(measurement, counts)
    _keep_machine_state(measurement, _machine_state(watch))
    return RunResult.measured(spec, measurement, waited, window, budget_s=allowed.seconds, warnings=warnings)


def run_together(
    specs: Sequence[FitSpec],
    counts: CountData | None = None,
    on_progress: ProgressCallback | None = None,
    cache: ExecutableCache | None = None,
    cancel: threading.Event | None = None,
    owner: str = "command line",
    max_seconds: float | None = None,
    cold: bool = False,
) -> list[RunResult]:
    """Fit and time several JAX strategies on one problem side by side, their repeats in
    turn (the first spec's repeat 1, the second's, ..., then every repeat 2), as pyperf and
    asv interleave benchmarks: a moment of load on a shared machine then lands on every fit
    alike instead of becoming one fit's "speed-up" over another.

    The whole group holds the device once, within one time budget (`max_seconds`, as
    `run`): each spec's first call runs in order, then the repeats go round. Each result
    carries the group's timed window and its mark (`RunResult.timed_with`), so that a reader
    knows which runs were timed together. Progress reports say which spec they are about
    (`Progress.member`). `cold` compiles each from scratch, as `run`.

    Raises:
        SpecError: as `run`, for any spec; also when the specs fit different data or one
            is a peer (a peer's timing is its own: `run` it alone).
        core.run.progress.Cancelled: `cancel` was set; no result comes back.
    """
    specs = list(specs)
    if not specs:
        return []
    for spec in specs:
        if catalog.runnable(spec.strategy).is_peer:
            raise SpecError(f"{spec.strategy} is a peer: its timing is its own, run it alone")
        if batches.problem_key(spec) != batches.problem_key(specs[0]):
            raise SpecError("fits timed together must share their data, device and repeats")
    seconds = budget.max_run_seconds() if max_seconds is None else max_seconds
    for spec in specs:
        memory_estimate.check(spec, counts)
    shape = memory_estimate.shape_of(specs[0], counts)
    least = sum(budget.least_seconds(spec, shape) for spec in specs)
    if least > seconds:
        raise SpecError(f"too long for this server: these {len(specs)} fits together would hold the "
                        f"{specs[0].device} for at least {least:,.0f} s, and a run may hold it for {seconds:,.0f} s "
                        f"({budget.MAX_RUN_SECONDS_ENV}); use fewer iterations or repeats")
    allowed = budget.Budget(seconds)
    report = on_progress or ignore
    counts = _host_data(specs[0], counts, seconds)
    warnings = _data_warnings(specs[0], counts)
    label = lifecycle.label(specs)
    with (device_queue.default_queue().hold(specs[0].device, label, owner, _queue_reporter(report), cancel) as waited,
          machine_state.Watch() as watch):
        window_start = time.time()
        allowed.start()
        timings = []
        for member, spec in enumerate(specs):
            def member_report(progress: Progress, member: int = member) -> None:
                report(progress._replace(member=member))

            timings.append(jax_timing.start(spec, counts, member_report, cancel, cache,
                                            watched=on_progress is not None or cancel is not None, budget=allowed,
                                            cold=cold))
        times = repeats.in_turn(specs[0].repeats, [t.repeat for t in timings], [t.report for t in timings],
                                cancel, allowed)
        window = (window_start, time.time())
    mark = uuid.uuid4().hex[:12]
    state = _machine_state(watch)  # one timed window for the group: read once
    results = []
    for spec, timing, taken in zip(specs, timings, times):
        measurement = certified(timing.measurement(taken), counts)
        _keep_machine_state(measurement, state)
        result = RunResult.measured(spec, measurement, waited, window, budget_s=allowed.seconds, warnings=warnings,
                                    together=len(specs))
        result.timed_with = mark
        results.append(result)
    return results


def _machine_state(watch: machine_state.Watch) -> dict:
    """The machine's facts and its state over the timed window `watch` covered."""
    return {**machine_state.facts(), **watch.state()}


def _keep_machine_state(measurement, state: dict) -> None:
    """Adds the machine's state over the timed window to what the run keeps of its environment
    (`RunResult.versions`), as pyperf keeps it; pages read from it whether the run is unstable
    (`core.results.stability`)."""
    measurement.versions = {**measurement.versions, **state}


def _host_data(spec: FitSpec, counts: CountData | None, seconds: float) -> CountData | None:
    """The data on the host, loaded now (outside the queue) unless the caller holds it or
    the sharded strategy draws it on the devices; a CSV's shape is checked against memory
    and the time budget once it is known."""
    if counts is not None or spec.dataset.kind == "simulated_on_device":
        return counts
    counts = datasets.load(spec.dataset)
    if spec.dataset.shape is None:
        memory_estimate.check(spec, counts)
        budget.check(spec, memory_estimate.shape_of(spec, counts), seconds)
    return counts


def _data_warnings(spec: FitSpec, counts: CountData | None) -> tuple[str, ...]:
    """What the run's reader must know about its data: how they were changed to be fitted,
    and what float32 rounding does to their ELBO. Raises SpecError when float32 cannot fit
    them at all (`core.fit.precision_guard`)."""
    if counts is None:
        return ()
    warnings = list(counts.warnings)
    if spec.precision == "float32":
        check = precision_guard.check_float32(counts.counts)
        if check.refusal:
            raise SpecError(check.refusal)
        if check.warning:
            warnings.append(check.warning)
    # Within what the store keeps of a run's warnings, which refuses a longer one: a file's
    # long column names in a warning cost the run its result.
    return tuple(warning if len(warning) <= MAX_TEXT else warning[:MAX_TEXT - 1] + "…"
                 for warning in warnings[:MAX_WARNINGS])
