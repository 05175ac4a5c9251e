"""A JAX fit ready to time: data and initial state on the device, executables compiled or reused.

Compiled executables are cached in this process per (strategy, problem, device), and on
disk by JAX's persistent compilation cache (see `core.machine.runtime`), so the second
preparation of a shape reports cache "memory" (same process) or "disk" (another
process). Timing runs (`core.run.jax_timing`), the inspector and the roofline analysis
(`core.inspect`) all start from a `PreparedFit`.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from core.data import datasets
from core.data.counts import CountData
from core.data.on_device import simulate_on_devices
from core.fit import model, strategies
from core.machine import runtime
from core.machine.compilations import CompileCounter
from core.results import result
from core.run import fingerprint
from core.run.cold_compile import from_scratch
from core.run.progress import Progress, ProgressCallback, ignore
from core.spec import FitSpec


class Cached(NamedTuple):
    """A strategy's compiled executables, by name, and their programs' fingerprint."""

    executables: dict[str, Any]
    program: str


class ExecutableCache:
    """Compiled executables per (strategy, Problem, device), least recently used first out.

    Bounded so a long-lived server that sees many shapes does not grow without limit.
    Each worker holds one for its runs (`core.cluster.tasks`); a fit in this process uses
    `DEFAULT_CACHE`.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: collections.OrderedDict[tuple, Cached] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Cached | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple, cached: Cached) -> None:
        with self._lock:
            self._items[key] = cached
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget the executables (JAX's persistent cache on disk is kept)."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


DEFAULT_CACHE = ExecutableCache()

# Work (n x p x iterations) one call of a compiled loop may hold on a CPU before the loop is
# split into calls: 0.3 s (the seed's optimizer) to 1 s (preconditioned L-BFGS) on a 2-core
# CPU, so that a cancel, and the end of a run's time budget, land within about a second.
# Splitting costs one dispatch and one device sync per call (tens of microseconds), and the
# call's scratch buffer: XLA's CPU runtime allocates it afresh at every call, and malloc maps
# a block that large anew, so its pages fault in again (13,000 faults, about 35 ms a call at
# oaks x100, where an iteration takes 22-25 ms). Having malloc keep freed memory instead
# (mallopt: no mmap, no trim) took that away, but let a process running pyPLNmodels at oaks
# x1000 grow to 24 GB; fewer calls are the remedy (`chunk_iterations`). An accelerator does
# the same work in far less time: its calls hold `ACCELERATOR_CHUNK_FACTOR` times as much,
# so that the dispatch stays negligible there too.
CHUNK_WORK = 30_000_000
ACCELERATOR_CHUNK_FACTOR = 100


def chunk_work(platform: str) -> int:
    """The work one call of a compiled loop may hold on `platform` (see `CHUNK_WORK`)."""
    return CHUNK_WORK if platform == "cpu" else CHUNK_WORK * ACCELERATOR_CHUNK_FACTOR


def chunk_iterations(cells: int, iterations: int, work: int | None = None) -> int:
    """Iterations per call for a compiled loop over `cells` = n x p values: 0 (one call)
    when the whole loop is within `work` (default `CHUNK_WORK`), else a divisor of
    `iterations` (so every call runs the same executable): the largest within `work`, or,
    when that is under half of what `work` allows, the smallest within twice it.

    The second choice keeps a count with few divisors from being cut into many small
    calls: 31 iterations at oaks x100 (`work` allows 22) ran as 31 calls of one, where one
    call of 31 holds the device 0.8 s: the calls of one took 40-60 ms an iteration, where
    one call takes 22-25 ms (each call's scratch buffer faults its pages in again)."""
    work = CHUNK_WORK if work is None else work
    if cells * iterations <= work:
        return 0
    most = max(1, work // max(1, cells))
    chunk = max(k for k in range(1, min(most, iterations) + 1) if iterations % k == 0)
    if 2 * chunk < most:
        wider = [k for k in range(most + 1, min(2 * most, iterations) + 1) if iterations % k == 0]
        if wider:
            return 0 if wider[0] == iterations else wider[0]
    return chunk


def stopping_chunk_iterations(cells: int, iterations: int, work: int | None = None) -> int:
    """Iterations per call for a compiled loop that stops at a tolerance: as many as `work`
    allows, 0 (one call) when the whole loop is within it. Any count will do: its loop ends
    where the fit's iterations do (`core.fit.strategies.base.Stop`)."""
    work = CHUNK_WORK if work is None else work
    if cells * iterations <= work:
        return 0
    return max(1, work // max(1, cells))


class Compilation(NamedTuple):
    """How the executables of a prepared fit were obtained.

    Attributes:
        trace_lower_s: tracing to a jaxpr and lowering to StableHLO (0 when cached).
        compile_s: XLA compilation (0 when cached in memory; a disk-cache load otherwise).
        compile_count: XLA compilations that ran (persistent-cache loads excluded).
        disk_cache_hits: executables loaded from the persistent compilation cache.
        cache: "compiled", "memory", "disk", "none" (eager: nothing compiled ahead), or the
            count from each place when the executables came from several ("compiled 1, disk 3").
        program: the fingerprint of the compiled programs (`core.run.fingerprint`), "" when
            nothing is compiled ahead.
    """

    trace_lower_s: float
    compile_s: float
    compile_count: int
    disk_cache_hits: int
    cache: str
    program: str = ""


@dataclasses.dataclass
class PreparedFit:
    """A fit ready to run: data and initial state on the device, executables compiled.

    Attributes:
        transfer_s: host-to-device copy of the data (for data drawn on the devices, the
            draw, its compilation included).
    """

    strategy: strategies.Strategy
    problem: strategies.Problem
    data: Any
    state: Any
    tol: Any
    executables: dict[str, Any]
    device: Any
    transfer_s: float
    compilation: Compilation


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(fn(), seconds), the clock stopped once every device array it returns is ready."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - start


def _timed_host(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Time host-side work (tracing, lowering, compiling) that returns no device arrays."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _initial_state(data, init: str, problem: strategies.Problem):
    """The fit's starting state as one compiled program: built op by op it was about 70
    tiny executables, each compiled (about 40 ms) or loaded from the persistent cache on
    its own, a few seconds of a fresh process's start and a mapping each."""
    return strategies.init_state(data, init, problem.algorithm)


# XLA's CPU fusion emitters make faster loops but take longer to build: this program runs
# once per fit, and with the older emitters it compiled in 0.19 s instead of 0.33-0.46 s
# (oaks x1) and ran as fast (0.41 s either way at oaks x1000). The fit's own loop keeps them:
# without, its iterations were 15-20% slower.
_ONCE_CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
_initial_state_cpu = jax.jit(_initial_state, static_argnames=("init", "problem"),
                             compiler_options=_ONCE_CPU_OPTIONS)
_initial_state_jit = jax.jit(_initial_state, static_argnames=("init", "problem"))


def initial_state(data, init: str, problem: strategies.Problem, platform: str = "cpu"):
    """The fit's starting state, compiled for `platform` (the device the data is on)."""
    compiled = _initial_state_cpu if platform == "cpu" else _initial_state_jit
    return compiled(data, init, problem)


def prepare(
    spec: FitSpec,
    counts: CountData | None = None,
    on_progress: ProgressCallback | None = None,
    cache: ExecutableCache | None = None,
    cold: bool = False,
) -> PreparedFit:
    """Load and place the data, build the initial state, and get the executables.

    Args:
        cold: compile from scratch: neither `cache` nor JAX's persistent cache is read
            (`core.run.cold_compile`); the new executables are stored in both.
    """
    runtime.configure()
    report = on_progress or ignore
    strategy = strategies.get(spec.strategy, devices=spec.devices)
    device = runtime.resolve_device(spec.device)
    # Before the data: a sharded run may ask for more devices than this process has.
    devices_used = strategy.device_count(device)
    report(Progress("data"))
    if spec.dataset.kind == "simulated_on_device":
        # Drawn in row blocks where they are fitted (FitSpec allows only sharded here), so no
        # host array of the rows exists; the draw is timed in place of the copy.
        shape = (spec.dataset.n, spec.dataset.p, spec.dataset.d)
        (data, _), transfer_s = timed(lambda: simulate_on_devices(
            *shape, seed=spec.dataset.seed, mesh=strategy.mesh(device), dtype=spec.precision))
    else:
        counts = counts if counts is not None else datasets.load(spec.dataset)
        shape = (counts.n, counts.p, counts.d)
        host = model.make_data(counts.counts, counts.offsets, counts.covariates, spec.precision)
        report(Progress("transfer"))
        data, transfer_s = timed(lambda: strategy.place_data(host, device))
    stops = spec.tol > 0
    chunk = (stopping_chunk_iterations if stops else chunk_iterations)(shape[0] * shape[1], spec.iterations,
                                                                       chunk_work(device.platform))
    problem = strategies.Problem(
        n=shape[0], p=shape[1], d=shape[2], dtype=spec.precision,
        iterations=spec.iterations, optimizer=spec.optimizer,
        chunk=chunk if strategy.chunkable else 0, stops=stops,
    )
    with jax.default_device(device):
        state = strategy.place_state(initial_state(data, spec.init, problem, device.platform), device)
        state = jax.block_until_ready(state)
        # NumPy, then placed: a `jnp` scalar is a small program compiled in every fresh process.
        tol = strategy.place_scalar(np.asarray(spec.tol, dtype=spec.precision), device)
    key = (strategy.name, problem if strategy.static_iterations else dataclasses.replace(problem, iterations=0),
           device.platform, device.id, devices_used)
    cache = DEFAULT_CACHE if cache is None else cache
    if not strategy.compiled_ahead:
        cached = Cached({}, "")
    else:  # a cold run compiles again, whatever this process has
        cached = None if cold else cache.get(key)
    if cached is not None:
        executables = cached.executables
        compilation = Compilation(0.0, 0.0, 0, 0, "memory" if strategy.compiled_ahead else "none",
                                  cached.program)
    else:
        report(Progress("compile"))
        counter = CompileCounter()
        with jax.default_device(device), from_scratch(cold):
            lowered, trace_lower_s = _timed_host(lambda: strategy.lower(problem, state, data, tol))
            # Counted while the strategy's executables are built or loaded, not while tracing,
            # whose eager helpers (a copy, a stack) compile and hit the disk cache on their own.
            with counter:
                executables, compile_s = _timed_host(lambda: strategy.compile(lowered))
        program = fingerprint.fingerprint(lowered, device.device_kind, devices_used)
        cache.put(key, Cached(executables, program))
        # Nothing compiled or loaded: JAX's own in-process cache had the same computations
        # (another spec, same HLO).
        cache_state = result.cache_label(counter.compiles, counter.disk_hits,
                                         0 if counter.backend_compiles else len(executables))
        compilation = Compilation(trace_lower_s, compile_s, counter.compiles, counter.disk_hits, cache_state, program)
    return PreparedFit(strategy, problem, data, state, tol, executables, device, transfer_s, compilation)
