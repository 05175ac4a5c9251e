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
import os
import socket
import time

import jax
import jax.numpy as jnp

from core.coordination.device_queue import device_lock
from core.inspect.findings import Analysis, Floor, Peaks  # noqa: F401
from core.inspect.floor import floor, matching_runs, times_floor  # noqa: F401
from core.inspect.xla_analysis import Cost, Memory, normalise_cost, normalise_memory
from core.machine import runtime
from core.machine.host import default_cache_dir
from core.run.prepared import ExecutableCache, prepare

_MATMUL_SIZE = 1024
_EXP_ELEMENTS = 1 << 22
_STREAM_ELEMENTS = 1 << 25
_REPEATS = 7


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
