"""The machine's limit: measured peaks, and the time floor they imply for a strategy's work.

`peaks(device, dtype)` measures, once per host, device and dtype (then cached in a JSON
file beside the compilation cache), three rates with small jitted kernels: dense matmul
FLOP/s, `exp` evaluations per second and memory bandwidth (bytes read per second by a
sum over a large array); each is the fastest of a few calls. `floor(cost, peaks)` turns XLA's cost analysis of
one iteration into a lower bound on its time under a roofline model:

    compute = flops / matmul peak + transcendentals / exp rate
    memory  = compulsory bytes / bandwidth
    floor   = max(compute, memory)

`analyse(spec)` puts the two together for one strategy, with XLA's memory analysis.

Both sides are optimistic, which is what a floor should be: elementwise flops never run
at matmul speed, and the compulsory bytes are only what an iteration cannot avoid (read
the data and the state, write the new state). XLA's own "bytes accessed" is not used for
the floor: it counts every operand of every op, reuse from cache included, so it is an
upper bound on traffic, not a lower one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import socket
import time

import jax
import jax.numpy as jnp

from core.inspect.xla_analysis import Cost, Memory, normalise_cost, normalise_memory
from core.run import runtime
from core.run.engine import device_lock
from core.run.host import default_cache_dir
from core.run.prepared import ExecutableCache, prepare

_MATMUL_SIZE = 1024
_EXP_ELEMENTS = 1 << 22
_STREAM_ELEMENTS = 1 << 25
_REPEATS = 7


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Measured rates of one device for one dtype.

    Attributes:
        matmul_flops_per_s: dense (1024 x 1024) matmul FLOP/s.
        exp_per_s: `exp` evaluations per second (summed, so nothing is written back).
        bytes_per_s: bytes read per second by a sum over 128 MB (float32).
        device_kind, dtype, host: what was measured.
    """

    matmul_flops_per_s: float
    exp_per_s: float
    bytes_per_s: float
    device_kind: str
    dtype: str
    host: str


@dataclasses.dataclass(frozen=True)
class Floor:
    """The time floor of one iteration, in seconds, and which side binds."""

    compute_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def _best_seconds(fn, *args) -> float:
    """The fastest of a few timed calls: other work on the machine only ever adds time."""
    jax.block_until_ready(fn(*args))  # compile and warm up outside the timing
    times = []
    for _ in range(_REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def measure_peaks(device, dtype: str) -> Peaks:
    """Time the three kernels on `device` (a few seconds on a laptop CPU)."""
    runtime.configure()
    with jax.default_device(device):
        key = jax.random.key(0)
        a = jax.random.normal(key, (_MATMUL_SIZE, _MATMUL_SIZE), dtype)
        matmul_s = _best_seconds(jax.jit(jnp.matmul), a, a)
        x = jax.random.uniform(key, (_EXP_ELEMENTS,), dtype, -1.0, 1.0)
        exp_s = _best_seconds(jax.jit(lambda v: jnp.sum(jnp.exp(v))), x)
        stream = jnp.ones((_STREAM_ELEMENTS,), dtype)
        # Reading alone, so no output buffer is allocated (and page-faulted) per call: a
        # copy kernel measured that way understated the bandwidth enough for real fits to
        # beat the "floor".
        read_s = _best_seconds(jax.jit(jnp.sum), stream)
    itemsize = jnp.dtype(dtype).itemsize
    return Peaks(
        matmul_flops_per_s=2 * _MATMUL_SIZE**3 / matmul_s,
        exp_per_s=_EXP_ELEMENTS / exp_s,
        bytes_per_s=_STREAM_ELEMENTS * itemsize / read_s,
        device_kind=device.device_kind,
        dtype=dtype,
        host=socket.gethostname(),
    )


def _cache_path():
    return default_cache_dir().parent / "peaks.json"


def peaks(device, dtype: str, remeasure: bool = False) -> Peaks:
    """This host's peaks for `device` and `dtype`, measured on first use and then cached."""
    path = _cache_path()
    key = f"{socket.gethostname()}|{device.platform}|{device.device_kind}|{os.cpu_count()}|{dtype}"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if key in cached and not remeasure:
        return Peaks(**cached[key])
    measured = measure_peaks(device, dtype)
    cached[key] = dataclasses.asdict(measured)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(cached, indent=1))
    temporary.replace(path)  # atomic, so concurrent readers never see half a file
    return measured


def floor(flops: float, transcendentals: float, bytes_moved: float, machine: Peaks) -> Floor:
    """The roofline floor for work of this size on `machine`."""
    return Floor(
        compute_s=flops / machine.matmul_flops_per_s + transcendentals / machine.exp_per_s,
        memory_s=bytes_moved / machine.bytes_per_s,
    )


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One strategy's work per iteration against the machine's limit.

    Attributes:
        cost: XLA's cost analysis of one iteration (None fields where XLA gives none;
            all None for eager and the peers, which hand XLA nothing ahead of time).
        floor: the roofline floor of that work, or None without a cost.
        compulsory_bytes: what one iteration must move: read the data, read and write
            the state (parameters, Omega, optimizer moments).
        peak_bytes: XLA's memory analysis: the largest (arguments + outputs + temporaries
            - aliased) over the strategy's executables, or None.
        model_bytes: the arrays the model itself holds: Y, O, X, B, M, S and Omega.
    """

    cost: Cost
    floor: Floor | None
    compulsory_bytes: int
    peak_bytes: int | None
    model_bytes: int


def _nbytes(tree) -> int:
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree))


def _peak(memory: Memory | None) -> int | None:
    if memory is None:
        return None
    if memory.peak_bytes:
        return memory.peak_bytes
    parts = (memory.argument_bytes, memory.output_bytes, memory.temp_bytes)
    if any(part is None for part in parts):
        return None
    return sum(parts) - (memory.alias_bytes or 0)


def analyse(spec, counts=None, cache=None) -> Analysis:
    """XLA's cost and memory for `spec`'s executables (cached ones reused), and its floor."""
    prep = prepare(spec, counts, cache=cache)
    cost = Cost()
    peaks_seen = []
    if prep.executables:
        cost = Cost(0.0, 0.0, 0.0)
        for compiled in prep.executables.values():
            cost = cost + normalise_cost(compiled.cost_analysis())
            peaks_seen.append(_peak(normalise_memory(compiled.memory_analysis())))
    data_bytes = _nbytes(prep.data)
    compulsory = data_bytes + 2 * _nbytes(prep.state)
    bound = None
    if cost.flops is not None and cost.transcendentals is not None:
        bound = floor(cost.flops, cost.transcendentals, compulsory, peaks(prep.device, spec.precision))
    known = [peak for peak in peaks_seen if peak is not None]
    return Analysis(
        cost=cost,
        floor=bound,
        compulsory_bytes=compulsory,
        peak_bytes=max(known) if known else None,
        model_bytes=data_bytes + _nbytes(prep.state.params) + _nbytes(prep.state.precision),
    )


def device_peaks(platform: str, dtype: str, remeasure: bool = False) -> Peaks:
    """`peaks` of the first device of `platform`, taken under the engine's lock for it, so
    that the kernels and a timed run on the same device never distort each other."""
    runtime.configure()
    device = runtime.resolve_device(platform)
    with device_lock(platform):
        return peaks(device, dtype, remeasure)


def analyse_apart(spec, counts=None) -> Analysis:
    """`analyse(spec)` with a private executable cache, under the device's lock.

    For the app: the shared cache is left as it was, so that a later timed run of the
    same spec still reports its own compilation (JAX's persistent cache keeps the
    second compile here short).
    """
    with device_lock(spec.device):
        return analyse(spec, counts, cache=ExecutableCache(size=1))


def _same(run, spec, fields=None) -> bool:
    """Whether `run` has `spec`'s `fields`; by default every one but `repeats`, which
    leaves an iteration's work alone."""
    # Stored specs are `FitSpec.to_dict()`, which leaves out fields at their defaults
    # (devices, a CSV's header choice): compare like with like.
    wanted = spec.to_dict()
    fields = fields or [field.name for field in dataclasses.fields(spec) if field.name != "repeats"]
    return all(run.spec.get(field) == wanted.get(field) for field in fields)


_PROBLEM = ("strategy", "dataset", "precision", "device", "iterations")


def matching_runs(runs, spec, machine: Peaks) -> list:
    """Finished runs measured where `machine` was, of the same work per iteration as `spec`.

    A run matches on strategy, data, precision, device and iterations, on this host and
    device kind (a time from another machine says nothing about this one's floor).

    Args:
        runs: `RunResult`s, e.g. `RunStore.list()`.
        spec: the `FitSpec` whose floor the times are compared with.
        machine: the peaks of the floor; its host and device kind select the runs.

    Returns:
        The matching runs, those of the very same settings (`repeats` aside) first, then
        fastest first.
    """
    found = [run for run in runs
             if run.status == "ok" and run.per_iter_ms > 0 and _same(run, spec, _PROBLEM)
             and run.versions.get("host") == machine.host and run.device_kind == machine.device_kind]
    return sorted(found, key=lambda run: (not _same(run, spec), run.per_iter_ms))


def times_floor(runs, spec, bound: Floor) -> list[dict]:
    """One row per run (of `matching_runs`): id, created_at, per_iter_ms, same_settings
    (every field of `spec` but repeats) and x_floor, its per-iteration time over the floor."""
    return [{"id": run.id, "created_at": run.created_at, "per_iter_ms": run.per_iter_ms,
             "same_settings": _same(run, spec),
             "x_floor": run.per_iter_ms / 1e3 / bound.seconds if bound.seconds > 0 else math.nan}
            for run in runs]
