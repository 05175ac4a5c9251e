"""Run a FitSpec: data on the device, compiled executables cached, honest timings -> RunResult.

Timing protocol: every timed section ends in `jax.block_until_ready`, since
JAX dispatches asynchronously; the data's host-to-device copy is timed on its own;
tracing+lowering, XLA compilation, the first call and `repeats` steady-state calls are
reported separately, each steady-state call starting from the same initial state.
Compiled executables are cached in this process per (strategy, problem, device), and on
disk by JAX's persistent compilation cache (see `core.runtime`), so the second run of a
shape reports cache "memory" (same process) or "disk" (another process).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import statistics
import threading
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from core import data as datasets
from core import device_queue, memory_estimate, runtime, strategies
from core.compilations import CompileCounter
from core.result import RunResult
from core.spec import FitSpec, SpecError

@contextlib.contextmanager
def device_lock(platform: str, label: str = "measuring the machine", owner: str = "dashboard"):
    """Hold `platform` on this host for other work that would distort timings (inspecting,
    measuring peaks): it queues with the timed runs (`core.device_queue`)."""
    with device_queue.default_queue().hold(platform, label, owner):
        yield


class ExecutableCache:
    """Compiled executables per (strategy, Problem, device), least recently used first out.

    Bounded so a long-lived server that sees many shapes does not grow without limit.
    The app holds one in `st.cache_resource`; the command line uses `DEFAULT_CACHE`.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: collections.OrderedDict[tuple, dict[str, Any]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> dict[str, Any] | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple, executables: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = executables
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget the executables (JAX's persistent cache on disk is kept)."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


DEFAULT_CACHE = ExecutableCache()


class Progress(NamedTuple):
    """A progress report.

    Attributes:
        phase: "queued", "data", "transfer", "compile", "first_call", "repeat" or "done".
        done, total: progress within the phase (iterations for "first_call" on Python
            loops and chunked compiled loops, repeats for "repeat").
        elbo: the latest ELBO when the strategy can report one mid-run, else None.
        ahead: while "queued", the device queue's entries ahead (holder first).
        waited_s: while "queued", seconds waited so far.
    """

    phase: str
    done: int = 0
    total: int = 0
    elbo: float | None = None
    ahead: tuple = ()
    waited_s: float = 0.0


ProgressCallback = Callable[[Progress], None]


def resolve_device(platform: str):
    """The first device of `platform` in this process; SpecError naming the available ones if absent."""
    import jax

    try:
        # local_devices: under jax.distributed, device 0 of the platform may be another process's.
        return jax.local_devices(backend=platform)[0]
    except RuntimeError:
        available = ", ".join(runtime.available_platforms()) or "none"
        raise SpecError(f"device {platform!r} is not available here; available: {available}") from None


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    import jax

    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - start


@dataclasses.dataclass
class _Prepared:
    """A fit ready to time: data and initial state on the device, executables compiled."""

    strategy: strategies.Strategy
    problem: strategies.Problem
    data: Any
    state: Any
    tol: Any
    executables: dict[str, Any]
    transfer_s: float
    trace_lower_s: float
    compile_s: float
    compile_count: int
    disk_hits: int
    cache: str
    device: Any


def prepare(
    spec: FitSpec,
    counts: datasets.CountData | None = None,
    on_progress: ProgressCallback | None = None,
    cache: ExecutableCache | None = None,
) -> _Prepared:
    """Load and place the data, build the initial state, and get the executables."""
    import jax
    import jax.numpy as jnp

    from core import model

    runtime.configure()
    report = on_progress or (lambda progress: None)
    strategy = strategies.get(spec.strategy, devices=spec.devices)
    device = resolve_device(spec.device)
    # Before the data: a sharded run may ask for more devices than this process has.
    devices_used = strategy.device_count(device)
    report(Progress("data"))
    if spec.dataset.kind == "simulated_on_device":
        # Drawn in row blocks where they are fitted (FitSpec allows only sharded here), so no
        # host array of the rows exists; the draw is timed in place of the copy.
        from core.simulate_sharded import simulate_on_devices

        shape = (spec.dataset.n, spec.dataset.p, spec.dataset.d)
        (data, _), transfer_s = _timed(lambda: simulate_on_devices(
            *shape, seed=spec.dataset.seed, mesh=strategy.mesh(device), dtype=spec.precision))
    else:
        counts = counts if counts is not None else datasets.load(spec.dataset)
        shape = (counts.n, counts.p, counts.d)
        host = model.make_data(counts.counts, counts.offsets, counts.covariates, spec.precision)
        report(Progress("transfer"))
        data, transfer_s = _timed(lambda: strategy.place_data(host, device))
    problem = strategies.Problem(
        n=shape[0], p=shape[1], d=shape[2], dtype=spec.precision,
        iterations=spec.iterations, optimizer=spec.optimizer,
        chunk=chunk_iterations(shape[0] * shape[1], spec.iterations) if strategy.chunkable else 0,
    )
    with jax.default_device(device):
        state = strategy.place_state(strategies.init_state(data, spec.init, problem.transformation), device)
        state = jax.block_until_ready(state)
        tol = jax.device_put(jnp.asarray(spec.tol, dtype=spec.precision), device)
    key = (strategy.name, problem if strategy.static_iterations else dataclasses.replace(problem, iterations=0),
           device.platform, device.id, devices_used)
    cache = DEFAULT_CACHE if cache is None else cache
    executables = cache.get(key) if strategy.compiled_ahead else {}
    trace_lower_s = compile_s = 0.0
    counter = CompileCounter()
    if executables is None:
        report(Progress("compile"))
        with counter, jax.default_device(device):
            lowered, trace_lower_s = _timed_plain(lambda: strategy.lower(problem, state, data, tol))
            executables, compile_s = _timed_plain(lambda: strategy.compile(lowered))
        cache.put(key, executables)
        if counter.compiles:
            cache_state = "compiled"
        elif counter.disk_hits:
            cache_state = "disk"
        else:  # JAX's own in-process cache had the same computations (another spec, same HLO)
            cache_state = "memory"
    else:
        cache_state = "memory" if strategy.compiled_ahead else "none"
    return _Prepared(strategy, problem, data, state, tol, executables, transfer_s,
                     trace_lower_s, compile_s, counter.compiles, counter.disk_hits, cache_state, device)


# Work (n x p x iterations) one call of a compiled loop may hold before the loop is split
# into calls: about 2 s on a 2-core CPU, so that a cancel lands within seconds. Splitting
# costs one dispatch and one device sync per call, nothing next to seconds of work.
CHUNK_WORK = 200_000_000


def chunk_iterations(cells: int, iterations: int) -> int:
    """Iterations per call for a compiled loop over `cells` = n x p values: 0 (one call)
    when the whole loop is within `CHUNK_WORK`, else the largest divisor of `iterations`
    within it (so every call runs the same executable)."""
    if cells * iterations <= CHUNK_WORK:
        return 0
    most = max(1, CHUNK_WORK // max(1, cells))
    return max(k for k in range(1, min(most, iterations) + 1) if iterations % k == 0)


def _timed_plain(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Time host-side work (tracing, lowering, compiling) that returns no device arrays."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def live_elbo_reporter(report: ProgressCallback, total: int,
                       cancel: threading.Event | None = None) -> Callable[[int, Any], None]:
    """Per-iteration callback for a Python loop's first call: about 50 ELBO reports a run
    (and at least one a second), and a cancel check every iteration."""
    # Reading an ELBO back forces a device sync, so the first call of a Python-loop
    # strategy reports about 50 times per run rather than every iteration (the timed
    # repeats read nothing back: see _repeat_callback). A report also goes out at least
    # once a second: each one is where the dashboard can stop a cancelled run, and a long
    # eager fit may take minutes for 1/50 of its iterations.
    every = max(1, total // 50)
    last = [0, time.perf_counter()]  # iterations reported so far, and when

    def on_iteration(i: int, value) -> None:
        _check(cancel)
        now = time.perf_counter()
        if i + 1 - last[0] >= every or now - last[1] >= 1.0 or i + 1 == total:
            last[0], last[1] = i + 1, now
            report(Progress("first_call", i + 1, total, float(value)))

    return on_iteration


def _repeat_callback(report: ProgressCallback, repeat: int, total: int, cancel: threading.Event | None,
                     ) -> Callable[[int, Any], None]:
    """Per-iteration (or per-chunk) callback inside a timed repeat: a cancel check, and a
    progress report at most once a second (a point where the dashboard can stop the run).
    It reads nothing back from the device, so the timing is left alone."""
    last = [time.perf_counter()]

    def on_iteration(i: int, value) -> None:
        _check(cancel)
        now = time.perf_counter()
        if now - last[0] >= 1.0:
            last[0] = now
            report(Progress("repeat", repeat, total))

    return on_iteration


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise device_queue.Cancelled("cancelled; nothing was stored")


def _queue_reporter(report: ProgressCallback):
    """The device queue's `on_wait`, as "queued" progress reports."""
    def on_wait(ahead, waited_s: float) -> None:
        report(Progress("queued", len(ahead), 0, None, tuple(ahead), waited_s))
    return on_wait


def run(
    spec: FitSpec,
    counts: datasets.CountData | None = None,
    on_progress: ProgressCallback | None = None,
    cache: ExecutableCache | None = None,
    cancel: threading.Event | None = None,
    owner: str = "command line",
    hold_device: bool = True,
) -> RunResult:
    """Fit `spec` and time it; the result is not stored (see `core.store`).

    The timed section (data transfer, compilation, first call, repeats) holds the
    device: it waits its turn in the host's device queue (`core.device_queue`), and the
    result records the wait (`queue_wait_s`) and the section's epoch window
    (`timed_window`), so that anyone can check that two windows never overlap.

    Args:
        spec: what to run.
        counts: the data, when the caller already holds it (e.g. an uploaded CSV);
            otherwise loaded from `spec.dataset`.
        on_progress: called with `Progress` reports from the calling thread.
        cache: where compiled executables are kept (default: `DEFAULT_CACHE`).
        cancel: set it (e.g. from another thread) to stop the run: `Cancelled` is raised
            while queued, between phases, between iterations of Python loops, between
            the calls of a split compiled loop (`chunk_iterations`) and between repeats.
        owner: who is running, as shown to others in the device queue.
        hold_device: False skips the queue: for the non-primary processes of a
            distributed run, which join the primary's collectives (it holds the queue).

    Raises:
        SpecError: the device is absent, the data are invalid (`core.data.DataError`) or
            the fit would not fit in the device's free memory.
        device_queue.Cancelled: `cancel` was set.
    """
    import jax

    from core import peers

    report = on_progress or (lambda progress: None)
    memory_estimate.check(spec, counts)
    label = f"{spec.strategy} · {spec.dataset.label} · {spec.precision}"

    def turn():
        if not hold_device:
            return contextlib.nullcontext(0.0)
        return device_queue.default_queue().hold(spec.device, label, owner, _queue_reporter(report), cancel)

    if peers.is_peer(spec.strategy):
        counts = counts if counts is not None else datasets.load(spec.dataset)
        with turn() as waited:
            window_start = time.time()
            timing = peers.run_peer(spec, counts, on_progress)
            window = (window_start, time.time())
        return _result(spec, (counts.n, counts.p, counts.d), _measured_peer(timing, waited, window))
    with turn() as waited:
        window_start = time.time()
        prep = prepare(spec, counts, report, cache)
        _check(cancel)
        strategy, problem = prep.strategy, prep.problem
        live = None
        chunked = problem.iterations_per_call < problem.iterations
        if (strategy.python_loop or chunked) and (on_progress or cancel):
            live = live_elbo_reporter(report, problem.iterations, cancel)
        report(Progress("first_call", 0, problem.iterations))
        with CompileCounter() as first_counter, jax.default_device(prep.device):
            # Copied outside the timing: a run that donates its state consumes it.
            start = jax.block_until_ready(strategy.fresh_state(prep.state))
            output, first_call_s = _timed(
                lambda: strategy.run(prep.executables, problem, start, prep.data, prep.tol, live))
        elbo = np.asarray(output.elbo, dtype=np.float64)[: int(output.iterations_run)]
        del output, start  # the final state is not needed: free its buffers before the repeats
        times = []
        with CompileCounter() as repeat_counter, jax.default_device(prep.device):
            for r in range(spec.repeats):
                _check(cancel)
                report(Progress("repeat", r, spec.repeats))
                start = jax.block_until_ready(strategy.fresh_state(prep.state))
                between = _repeat_callback(report, r, spec.repeats, cancel) if live else None
                _, seconds = _timed(lambda: strategy.run(prep.executables, problem, start, prep.data, prep.tol,
                                                         between))
                times.append(seconds)
        window = (window_start, time.time())
        report(Progress("done", spec.repeats, spec.repeats))
    measured = _Measured(
        elbo=elbo,
        transfer_s=prep.transfer_s, trace_lower_s=prep.trace_lower_s, compile_s=prep.compile_s,
        first_call_s=first_call_s, times=times,
        compile_count=prep.compile_count + first_counter.compiles,
        disk_cache_hits=prep.disk_hits + first_counter.disk_hits,
        recompile_count=repeat_counter.backend_compiles, cache=prep.cache,
        devices=strategy.device_count(prep.device), device_kind=prep.device.device_kind,
        versions=runtime.environment(prep.device),
        optimizer=spec.optimizer.name, lr=spec.optimizer.lr, init=spec.init,
        queue_wait_s=waited, timed_window=window,
        chunk_iterations=problem.chunk,
    )
    return _result(spec, (problem.n, problem.p, problem.d), measured)


@dataclasses.dataclass
class _Measured:
    """What a timed fit produced, from a JAX strategy or a peer, before it becomes a RunResult."""

    elbo: np.ndarray
    transfer_s: float
    trace_lower_s: float
    compile_s: float
    first_call_s: float
    times: list[float]
    compile_count: int
    disk_cache_hits: int
    recompile_count: int
    cache: str
    devices: int
    device_kind: str
    versions: dict[str, Any]
    optimizer: str
    lr: float
    init: str
    queue_wait_s: float
    timed_window: tuple[float, float]
    chunk_iterations: int = 0


def _measured_peer(timing, queue_wait_s: float, timed_window: tuple[float, float]) -> _Measured:
    # A peer reports what actually ran: pyplnmodels fits with its own optimizer and start.
    return _Measured(
        elbo=np.asarray(timing.elbo, dtype=np.float64)[: timing.iterations_run], transfer_s=timing.transfer_s,
        trace_lower_s=timing.trace_lower_s, compile_s=timing.compile_s, first_call_s=timing.first_call_s,
        times=list(timing.times), compile_count=timing.compile_count,
        disk_cache_hits=int(timing.cache == "disk"), recompile_count=timing.recompile_count, cache=timing.cache,
        devices=timing.devices, device_kind=timing.device_kind, versions=timing.versions,
        optimizer=timing.optimizer, lr=timing.lr, init=timing.init,
        queue_wait_s=queue_wait_s, timed_window=timed_window,
    )


def _result(spec: FitSpec, shape: tuple[int, int, int], measured: _Measured) -> RunResult:
    import jax

    from core import peers

    trace = measured.elbo
    bad = np.flatnonzero(~np.isfinite(trace))
    diverged_at = int(bad[0]) if bad.size else None
    if diverged_at is not None:
        trace = trace[:diverged_at]
    run_s = statistics.median(measured.times)
    n, p, d = shape
    # A peer (PyTorch, pyPLNmodels) runs in this process alone, and asking JAX would start
    # its backend for nothing; a JAX fit ran in every process of a jax.distributed run.
    processes = 1 if peers.is_peer(spec.strategy) else jax.process_count()
    return RunResult(
        spec=spec.to_dict(),
        spec_key=spec.key,
        strategy=spec.strategy,
        dataset=spec.dataset.label,
        n=n,
        p=p,
        d=d,
        precision=spec.precision,
        device=spec.device,
        iterations=spec.iterations,
        optimizer=measured.optimizer,
        lr=measured.lr,
        init=measured.init,
        repeats=spec.repeats,
        tol=spec.tol,
        status="ok" if diverged_at is None else "diverged",
        error=None if diverged_at is None else f"ELBO not finite at iteration {diverged_at}",
        diverged_at=diverged_at,
        iterations_run=len(trace),
        transfer_s=measured.transfer_s,
        trace_lower_s=measured.trace_lower_s,
        compile_s=measured.compile_s,
        first_call_s=measured.first_call_s,
        run_s=run_s,
        run_s_min=min(measured.times),
        run_s_max=max(measured.times),
        per_iter_ms=1e3 * run_s / max(1, len(measured.elbo)),
        compile_count=measured.compile_count,
        disk_cache_hits=measured.disk_cache_hits,
        recompile_count=measured.recompile_count,
        cache=measured.cache,
        final_elbo=float(trace[-1]) if len(trace) else None,
        elbo=[float(v) for v in trace],
        devices=measured.devices,
        processes=processes,
        device_kind=measured.device_kind,
        versions=measured.versions,
        queue_wait_s=measured.queue_wait_s,
        chunk_iterations=measured.chunk_iterations,
        timed_start=measured.timed_window[0],
        timed_end=measured.timed_window[1],
        created_at=time.time(),
    )
