"""A worker's start and end: its devices, what it serves, warm imports, and recycling.

Dask runs `dask_setup(worker)` in every worker process this project's workers start with
(`--preload core.cluster.worker_setup` on `dask worker`; the embedded cluster passes it too),
before the worker joins the scheduler, and again in each fresh process the nanny starts
after one died or was recycled. It

1. undoes the nanny's thread limits (it sets OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 by
   default, which would make the PyTorch peers single-threaded while the command line's use
   every core), and sets what the native libraries need (`core.machine.host.native_settings`),
   all before numpy, JAX or torch load;
2. picks the device platforms it serves: those named by PLNLAB_WORKER_PLATFORMS (e.g. "gpu"),
   else, in the embedded cluster, the one given to its number, else every platform JAX sees
   here. A worker serving only the CPU starts JAX with JAX_PLATFORMS=cpu, so it never takes
   a GPU's memory;
3. starts JAX (`core.machine.runtime.configure`), notes its devices (`facts`) and offers one
   Dask resource per platform it serves ("plnlab-cpu", "plnlab-gpu"): a fit for the GPU asks
   for "plnlab-gpu", so it lands on a worker that has one, one at a time;
4. imports the engine and the strategies now, so that the first Run pays no start-up.
   Torch and pyPLNmodels wait for the first peer's run: importing them in the background
   took seconds of a 2-core machine while the first JAX fits waited for it (the default
   Run click went from 12.4 s to 9.3 s without it, under load). A peer's run imports them
   in its own task, holding the device, before its timed sections.

Recycling: after `PLNLAB_WORKER_MAX_RUNS` runs (default 100), or once its resident memory
passes half its memory limit or its memory mappings pass half of vm.max_map_count, a
worker takes no more work (its resources go to 0), waits until its last result has been
collected, and exits; its nanny starts a fresh one. Dask's own memory limit stays the last
line: a worker over 95% of it is killed, which costs the run it holds (stored as
interrupted), never the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from core import config
from core.cluster.channel import KEY_PREFIX

log = logging.getLogger(__name__)

PLATFORMS_ENV = "PLNLAB_WORKER_PLATFORMS"
LOCAL_PLATFORMS_ENV = "PLNLAB_LOCAL_PLATFORMS"  # set by the embedded cluster: platform i for worker i
MAX_RUNS_ENV = "PLNLAB_WORKER_MAX_RUNS"
KEEP_THREAD_LIMITS_ENV = "PLNLAB_WORKER_KEEP_THREAD_LIMITS"
DEFAULT_MAX_RUNS = config.variable(MAX_RUNS_ENV).default
RESOURCE_PREFIX = "plnlab-"
# The nanny's thread limits that would make this worker differ from the command line (a
# worker started without core/cluster/dask.yaml gets them).
NANNY_THREAD_LIMITS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

_facts: dict[str, Any] = {}
_runs = 0
_retiring = False


def resource(platform: str) -> str:
    """The Dask resource a fit on `platform` asks for."""
    return RESOURCE_PREFIX + platform


def dask_setup(worker) -> None:
    """Dask's preload hook: see the module docstring."""
    _undo_nanny_thread_limits()
    # Deferred: the native libraries' environment must be set before numpy or JAX loads.
    from core.machine.host import native_settings

    native_settings()
    wanted = _platforms_wanted(worker)
    if wanted == ["cpu"]:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # Deferred: JAX starts here, after the environment above is set.
    from core.machine import runtime

    runtime.configure()
    found = _probe(wanted)
    served = [platform for platform in found["platforms"] if wanted is None or platform in wanted]
    for platform in served:
        worker.state.total_resources[resource(platform)] = 1
        worker.state.available_resources[resource(platform)] = 1
    _facts.clear()
    _facts.update(found, served=served, name=str(worker.name), memory_limit=worker.memory_manager.memory_limit,
                  started_at=time.time())
    _warm_up()


def _undo_nanny_thread_limits() -> None:
    if config.raw(KEEP_THREAD_LIMITS_ENV):
        return
    # Deferred: read only in a worker process, where distributed is loaded already.
    import dask

    limits = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    for name in NANNY_THREAD_LIMITS:
        if limits.get(name) is not None and os.environ.get(name) == str(limits[name]):
            del os.environ[name]
    if os.environ.get("MALLOC_TRIM_THRESHOLD_"):  # too late to undo once the process runs
        log.warning("MALLOC_TRIM_THRESHOLD_ is set: fits here may time about 10 percent slower than on the command "
                    "line; start workers with DASK_CONFIG=core/cluster/dask.yaml")


def _platforms_wanted(worker) -> list[str] | None:
    """The platforms this worker should serve, or None for every one JAX finds."""
    named = config.listed(PLATFORMS_ENV)
    if named:
        return named
    local = config.listed(LOCAL_PLATFORMS_ENV)
    if local:
        try:
            return [local[int(worker.name) % len(local)]]
        except (TypeError, ValueError):
            return [local[0]]
    return None


def _probe(wanted: list[str] | None) -> dict[str, Any]:
    """Platforms and device kinds JAX has in this process, and why the absent ones are absent."""
    # Deferred: JAX, on the worker only.
    import jax

    # Deferred: as above (the runtime imports JAX).
    from core.machine import runtime

    available = runtime.available_platforms()
    kinds = {}
    for platform in available:
        devices = jax.devices(platform)
        kinds[platform] = (f"{os.cpu_count()} cores" if platform == "cpu"
                           else f"{devices[0].device_kind} x{len(devices)}")
    return {"host": socket.gethostname(), "pid": os.getpid(), "platforms": available, "kinds": kinds,
            "jax": jax.__version__, "wanted": wanted}


def _warm_up() -> None:
    """Imports what a JAX fit needs, while the worker joins (see the module's docstring)."""
    # Deferred: the engine and every strategy, so that the first run finds them loaded.
    from core.fit import algorithms, strategies  # noqa: F401
    from core.run import engine, jax_timing  # noqa: F401


def facts(dask_worker=None) -> dict[str, Any]:
    """What this worker is (host, platforms and device kinds, what it serves, memory, runs so
    far); `Client.run` calls it on every worker."""
    return {**_facts, "runs": _runs, "rss_bytes": _rss_bytes(), "maps": _map_count(), "retiring": _retiring,
            "address": getattr(dask_worker, "address", "")}


def _rss_bytes() -> int:
    # Deferred: psutil comes with distributed, on the worker.
    import psutil

    return psutil.Process().memory_info().rss


def _map_count() -> int:
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux
        return 0


def _max_map_count() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as limit:
            return int(limit.read())
    except (OSError, ValueError):
        return 65530


def max_runs() -> int:
    try:
        return config.whole(MAX_RUNS_ENV)
    except config.ConfigError:
        return DEFAULT_MAX_RUNS


def after_run() -> dict[str, Any]:
    """Counts a run; retires this worker when it has passed a bound. Returns what the run's
    submitter should know of the worker: its address, name, host, runs so far, resident
    memory, mappings and whether it is being recycled."""
    global _runs
    _runs += 1
    # Deferred: only ever called in a task, on a worker.
    from distributed import get_worker

    worker = get_worker()
    rss, maps = _rss_bytes(), _map_count()
    limit = worker.memory_manager.memory_limit
    why = None
    if _runs >= max_runs():
        why = f"{_runs} runs"
    elif limit and rss > limit / 2:
        why = f"{rss / 2**30:.1f} GiB resident, over half its limit of {limit / 2**30:.1f} GiB"
    elif maps > _max_map_count() / 2:
        why = f"{maps:,} memory mappings, over half of vm.max_map_count"
    if why is not None:
        _retire(worker, why)
    return {"worker": worker.address, "name": str(worker.name), "host": socket.gethostname(), "runs": _runs,
            "rss_bytes": rss, "maps": maps, "recycling": why}


def _retire(worker, why: str) -> None:
    """No more work for this worker; it exits once its last result has been collected."""
    global _retiring
    if _retiring:
        return
    _retiring = True
    log.warning("recycling this worker after %s", why)
    # Deferred: only ever called on a worker.
    from distributed.utils import sync

    # From the task's thread, before its result goes out: the scheduler gives this worker
    # nothing more, so when the result has been collected it is idle for good.
    mine = {name: 0 for name in worker.state.total_resources if name.startswith(RESOURCE_PREFIX)}
    sync(worker.loop, worker.set_resources, **mine)
    worker.loop.add_callback(_close_when_idle, worker, why)


async def _close_when_idle(worker, why: str, limit_s: float = 600.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = worker.state.executing or any(str(key).startswith(KEY_PREFIX) for key in worker.state.data)
        if not busy:
            break
        await asyncio.sleep(0.1)
    # nanny=False: the nanny sees its worker exit and starts a fresh one.
    await worker.close(nanny=False, reason=f"plnlab: recycled after {why}")
