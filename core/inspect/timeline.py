"""Inside one iteration: a few steady-state iterations of each strategy under JAX's profiler.

`trace_strategies(spec, names)` prepares each strategy for `spec`'s problem as the engine
does (its own executable cache, so nothing is shared with stored runs), runs it untraced
(compile and first calls, then `UNTRACED_RUNS` runs: the fastest is the untraced time),
then runs every strategy once more inside one `jax.profiler.trace` session, each run
marked by an annotation, and reads
the trace (`core.inspect.trace_reading`), each compiled program's ops added up by the part of
the algorithm they belong to (`core.inspect.iteration_parts`). A traced run is never a
timing: nothing is stored, and the profiler's own cost shows as traced against untraced time.

Runs on a worker (`core.cluster.tasks.timeline`) under the device's lock, so that it does
not land in another run's timed window. Python's own tracer is off: on CPU it made eager
several times slower and the trace ten times larger; the host's launches and jit calls are
C++ events and stay.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import tempfile
import time

import jax
import jaxlib

from core import catalog
from core.coordination.device_queue import device_lock
from core.inspect import iteration_parts, trace_reading
from core.inspect.trace_findings import STRATEGIES, Timeline
from core.run.prepared import ExecutableCache, prepare
from core.spec import FitSpec, SpecError

ITERATIONS = 5
# Untraced runs after the first, the fastest of them kept: one run, against the one traced, could
# read slower than it (eager met an op's first use after the first run, or a busy moment) and
# say the profiler cost less than nothing.
UNTRACED_RUNS = 3
# The trace file handed back for download; eager's at oaks x100 is a few MB.
MAX_TRACE_BYTES = 40 * 2**20


def _run(prep, annotation: str | None = None) -> float:
    """One run of a prepared fit, in microseconds, once its arrays are ready; inside a
    profiler annotation named `annotation` when given. Its starting state is copied first,
    outside the run, as the engine times it (a run that donates its state consumes it)."""
    start = jax.block_until_ready(prep.strategy.fresh_state(prep.state))
    with jax.profiler.TraceAnnotation(annotation) if annotation else contextlib.nullcontext():
        began = time.perf_counter()
        jax.block_until_ready(prep.strategy.run(prep.executables, prep.problem, start, prep.data, prep.tol))
        return (time.perf_counter() - began) * 1e6


def _events(trace_dir: str) -> list[trace_reading.Event]:
    path = next(pathlib.Path(trace_dir).rglob("*.xplane.pb"))
    profile = jax.profiler.ProfileData.from_file(str(path))
    return [trace_reading.Event(plane.name, line.name, event.name, event.start_ns, event.duration_ns)
            for plane in profile.planes for line in plane.lines for event in line.events]


def _perfetto(trace_dir: str) -> bytes:
    found = next(pathlib.Path(trace_dir).rglob("perfetto_trace.json.gz"), None)
    if found is None or found.stat().st_size > MAX_TRACE_BYTES:
        return b""
    return found.read_bytes()


def _parts(prep) -> dict[str, str]:
    """{op name: part of the algorithm} over a prepared fit's compiled programs: none for
    eager, whose ops are programs of their own."""
    found = {}
    for compiled in prep.executables.values():
        found.update(iteration_parts.part_of_each_op(compiled.as_text() or ""))
    return found


def trace_strategies(spec: FitSpec, counts=None, names: tuple[str, ...] = STRATEGIES,
                     iterations: int = ITERATIONS) -> Timeline:
    """Trace `iterations` iterations of each of `names` on `spec`'s problem.

    Args:
        spec: the problem (data, precision, device, optimizer, start, tol); its strategy,
            iterations and repeats are replaced.
        counts: the data when the caller holds it (an uploaded CSV), as `prepare`.

    Returns:
        The timeline; a strategy that cannot run `spec`'s optimizer is left out and named in
        its `skipped`, with why.

    Raises:
        SpecError: the device is absent or the data are invalid.
    """
    with device_lock(spec.device, label=f"timeline: {spec.dataset.label}"):
        prepared, untraced, skipped = [], {}, []
        for name in names:
            try:
                one = dataclasses.replace(spec, strategy=name, iterations=iterations, repeats=1)
            except SpecError:  # e.g. jit_per_function runs the gradient optimizers only
                skipped.append((name, f"it runs only the optimizers {', '.join(catalog.RUNNABLES[name].accepted)}, "
                                      f"not {spec.optimizer.name}"))
                continue
            prep = prepare(one, counts, cache=ExecutableCache(size=1))
            with jax.default_device(prep.device):
                _run(prep)  # first calls: eager's and the jitted functions' own compiles
                untraced[name] = min(_run(prep) for _ in range(UNTRACED_RUNS))
            prepared.append(prep)
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        with tempfile.TemporaryDirectory() as trace_dir:
            with jax.profiler.trace(trace_dir, create_perfetto_trace=True, profiler_options=options):
                for prep in prepared:
                    with jax.default_device(prep.device):
                        _run(prep, trace_reading.ANNOTATION + prep.strategy.name)
            events = _events(trace_dir)
            perfetto = _perfetto(trace_dir)
    parts = {prep.strategy.name: found for prep in prepared
             if iteration_parts.names_a_part(found := _parts(prep))}
    first = prepared[0]
    device = first.device
    return Timeline(
        dataset=spec.dataset.label, n=first.problem.n, p=first.problem.p, precision=spec.precision,
        device=device.platform if device.device_kind == device.platform
        else f"{device.platform} ({device.device_kind})",
        optimizer=spec.optimizer.label, traces=trace_reading.read(events, iterations, untraced, parts),
        perfetto=perfetto, versions={"jax": jax.__version__, "jaxlib": jaxlib.__version__}, skipped=tuple(skipped))
