"""The work a worker does for the dashboard and the command line, each returning plain data.

Every function here runs in a worker process (`core.cluster.submit` sends it there) and
imports JAX, torch and the engine inside its body, so that the server, which imports this
module to name the functions it submits, never loads them. Each takes, by keyword, the
`token` its submitter made and the `label` others see, and talks back through a
`core.cluster.channel.TaskChannel`: progress out, cancel in, run once.

What comes back is made of types that import nothing heavy: `RunResult`
(`core.results.result`) and the findings of `core.inspect.findings`,
`core.inspect.trace_findings` and `core.inspect.pitfall_notes`, sent as plain data
(`core.cluster.plain`, `@plain.returned`): the submitter unpickles nothing a worker sends.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from core.cluster import plain, worker_setup
from core.cluster.channel import TaskChannel
from core.data.counts import CountData
from core.results.result import RunResult
from core.spec import FitSpec

_executables = None  # this worker's compiled executables, shared by its runs


def _cache():
    global _executables
    if _executables is None:
        # Deferred (as every engine import here): JAX loads on the worker, never in the server.
        from core.run.prepared import ExecutableCache

        _executables = ExecutableCache()
    return _executables


@plain.returned
def fit(spec: FitSpec, counts: CountData | None, owner: str, cold: bool, max_seconds: float, *, token: str,
        label: str) -> tuple[RunResult, dict[str, Any]]:
    """Fit and time `spec` (`core.run.engine.run`) under the submitter's time budget ->
    (the result, naming this worker; what the submitter should know of the worker)."""
    # Deferred: the engine (JAX) on the worker only.
    from core.run import engine

    try:
        with TaskChannel(token, label) as channel:
            result = engine.run(spec, counts, on_progress=channel.report, cancel=channel.cancel, cache=_cache(),
                                owner=owner, cold=cold, max_seconds=max_seconds)
    finally:
        state = worker_setup.after_run()
    result.worker = f"{state['worker']} on {state['host']}"
    return result, state


@plain.returned
def fit_together(specs: list[FitSpec], counts: CountData | None, owner: str, max_seconds: float,
                 cold: bool = False, *, token: str, label: str) -> tuple[list[RunResult], dict[str, Any]]:
    """Fit and time `specs` side by side, their repeats in turn (`core.run.engine.run_together`)
    -> (the results, naming this worker; what the submitter should know of the worker)."""
    # Deferred: the engine (JAX) on the worker only.
    from core.run import engine

    try:
        with TaskChannel(token, label) as channel:
            results = engine.run_together(specs, counts, on_progress=channel.report, cancel=channel.cancel,
                                          cache=_cache(), owner=owner, max_seconds=max_seconds, cold=cold)
    finally:
        state = worker_setup.after_run()
    for result in results:
        result.worker = f"{state['worker']} on {state['host']}"
    return results, state


@plain.returned
def inspection(spec: FitSpec, counts: CountData | None, *, token: str, label: str):
    """`core.inspect.introspect.inspect_fit`: source, jaxpr, HLO, costs and layout of `spec`."""
    # Deferred: JAX on the worker only.
    from core.inspect import introspect

    with TaskChannel(token, label):
        return introspect.inspect_fit(spec, counts)


@plain.returned
def analysis(spec: FitSpec, counts: CountData | None, *, token: str, label: str):
    """`core.inspect.roofline.analyse_apart`: XLA's costs of `spec` against this machine."""
    # Deferred: JAX on the worker only.
    from core.inspect import roofline

    with TaskChannel(token, label):
        return roofline.analyse_apart(spec, counts)


@plain.returned
def timeline(spec: FitSpec, counts: CountData | None, names: tuple[str, ...], *, token: str, label: str):
    """`core.inspect.timeline.trace_strategies`: a few iterations of each of `names` on
    `spec`'s problem, traced by JAX's profiler (never a timing: nothing is stored)."""
    # Deferred: JAX on the worker only.
    from core.inspect import timeline as tracing

    with TaskChannel(token, label):
        return tracing.trace_strategies(spec, counts, names)


@plain.returned
def peaks(platform: str, dtype: str, remeasure: bool, *, token: str, label: str):
    """`core.inspect.roofline.device_peaks`: this worker's measured matmul, exp and memory rates."""
    # Deferred: JAX on the worker only.
    from core.inspect import roofline

    with TaskChannel(token, label):
        return roofline.device_peaks(platform, dtype, remeasure)


@plain.returned
def pitfall(key: str, *, token: str, label: str):
    """`core.inspect.pitfalls.run`: one of the seed tutorial's pitfalls, demonstrated, on the
    CPU in its turn in the host's device queue (a demo's fit must not land in another run's
    timed window)."""
    # Deferred: JAX on the worker only.
    from core.coordination.device_queue import device_lock
    from core.inspect import pitfalls

    with TaskChannel(token, label), device_lock("cpu", label=f"pitfall demo: {key}"):
        return pitfalls.run(key)


@plain.returned
def sweep_point(spec: FitSpec, *, token: str, label: str) -> RunResult:
    """One run of the device sweep in its own `python -m core run` process (simulated CPU
    devices are fixed when JAX starts), storing into a scratch store of its own: the run
    comes back to the submitter, which stores it. Progress is the process's phases."""
    # Deferred: the sweep's process runner; it starts the process, not JAX.
    from core.bench import device_sweep
    from core.run.progress import Progress

    with TaskChannel(token, label) as channel, tempfile.TemporaryDirectory(prefix="plnlab-sweep-") as scratch:
        result = device_sweep.run_in_own_process(
            spec, os.path.join(scratch, "runs.sqlite3"), on_phase=lambda phase: channel.report(Progress(phase)),
            cancel=channel.cancel)
    state = worker_setup.after_run()
    result.id = 0  # its id in the scratch store means nothing in the submitter's
    result.worker = f"{state['worker']} on {state['host']}"
    return result


@plain.returned
def benchmark(bench, *, token: str, label: str) -> tuple[list[str], list[RunResult]]:
    """The command line's benchmark (`core.bench.suite.Bench`), every run side by side on this
    worker -> (its tables, its runs for the submitter's store). The runs are kept in a
    scratch store here: the worker never needs the submitter's."""
    # Deferred: the benchmark (JAX, and torch for the peers) on the worker only.
    from core.bench import suite
    from core.store.run_store import RunStore

    with TaskChannel(token, label), tempfile.TemporaryDirectory(prefix="plnlab-bench-") as scratch:
        store = RunStore(os.path.join(scratch, "runs.sqlite3"))
        tables = suite.run(bench, store)
        runs = [store.get(run.id) for run in store.list()]
    state = worker_setup.after_run()
    for run in runs:
        run.id = 0
        run.worker = f"{state['worker']} on {state['host']}"
    return tables, runs
