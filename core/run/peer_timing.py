"""The timing protocol for a peer (PyTorch, pyPLNmodels), in the engine's phases.

See `core.fit.peers` for what each peer is. Timing (the engine's protocol, with
PyTorch's means): `time.perf_counter()` around work that ends in
`torch.cuda.synchronize()` on a GPU (PyTorch on CPU is synchronous); the data's copy to
the device is timed apart; the first call, then `spec.repeats` steady-state calls each
from the same initial state. PyTorch has no ahead-of-time compile step to time alone:
`torch.compile` compiles at the first call, so for torch_compile `first_call_s` is that
real first call (Dynamo tracing, AOTAutograd, Inductor codegen and the C++ build, plus
the iterations) and `compile_s` is an *estimate*, first_call_s - median steady-state
call (0 when nothing was compiled). `trace_lower_s` is 0 for every peer.

This module imports torch and pyPLNmodels (seconds): `core.run.measure` imports it only
when a peer runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import statistics
import sys
import threading
import time
from typing import Any, Callable

import numpy as np
import torch
from torch._dynamo.utils import counters

from core.coordination.budget import Budget
from core.data import datasets
from core.data.counts import CountData
from core.fit.peers import pyplnmodels_fit as peer
from core.fit.peers import torch_fit
from core.fit.peers.torch_optim import make_torch_optimizer
from core.results.result import Measurement
from core.run import progress
from core.run.progress import Progress, ProgressCallback
from core.run.repeats import steady_state
from core.spec import FitSpec, SpecError

# pyPLNmodels' ELBO is its own code's: in float32 it sums and assembles in float32, which the
# lab's accurate sums (core.fit.model.wide_sum) cannot reach.
FLOAT32_PYPLNMODELS = ("pyPLNmodels computes its float32 ELBO with its own float32 sums, which are not held to "
                       "the 1e-6 accuracy of the lab's float32 ELBOs: compare its ELBO in float64")


def torch_device(platform_name: str) -> torch.device:
    """The torch device for a spec's platform; SpecError if PyTorch cannot use it here."""
    if platform_name == "cpu":
        return torch.device("cpu")
    if platform_name == "gpu":
        if torch.cuda.is_available():
            return torch.device("cuda", 0)
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise SpecError(f"device 'gpu' is not available to PyTorch here (torch {torch.__version__}, "
                        f"{build}, no CUDA device); available: cpu")
    raise SpecError(f"device {platform_name!r} is not supported by the PyTorch peers; use cpu or gpu")


def measure(spec: FitSpec, counts: CountData | None, report: ProgressCallback,
            cancel: threading.Event | None, watched: bool, budget: Budget | None = None) -> Measurement:
    """Fit and time `spec` with the peer named `spec.strategy`; pyplnmodels stops at `tol` as
    the strategies do (the PyTorch twins run every iteration). Past `budget` the fit stops
    after the current iteration and the measurement is marked `timed_out`.

    Raises:
        SpecError: the device is not available to PyTorch, or the data are invalid.
    """
    device = torch_device(spec.device)
    report(Progress("data"))
    counts = counts if counts is not None else datasets.load(spec.dataset)
    live = (progress.live_elbo_reporter(report, spec.iterations, cancel, budget) if watched
            else progress.stop_checker(cancel, budget))
    if spec.strategy == "pyplnmodels":
        return _measure_pyplnmodels(spec, counts, device, report, cancel, live, budget)
    return _measure_torch(spec, counts, device, report, cancel, live, budget)


def _sync(device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _dynamo_counts() -> dict[str, int]:
    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "fx_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fx_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
    }


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in after}


def _over(budget: Budget | None) -> bool:
    return budget is not None and budget.over()


def _measure_torch(spec: FitSpec, counts, device, report, cancel, live, budget) -> Measurement:
    compiled = spec.strategy == "torch_compile"
    sync = _sync(device)
    host = torch_fit.host_data(counts.counts, counts.offsets, counts.covariates, spec.precision)
    report(Progress("transfer"))
    start = time.perf_counter()
    data = torch_fit.place_data(host, device)
    sync()
    transfer_s = time.perf_counter() - start
    optimizer = make_torch_optimizer(spec.optimizer)
    state = torch_fit.init_state(data, spec.init, optimizer)
    sync()
    if compiled:
        key = torch_fit.step_key(spec, counts, device)
        if not torch_fit.has_compiled(key):
            report(Progress("compile"))  # a hint: torch.compile builds at the first call
        step = torch_fit.compiled_step(spec.optimizer, key)
    else:
        step = torch_fit.make_step(optimizer)

    def timed(on_iteration=None):
        begin = time.perf_counter()
        _, trace = torch_fit.run_loop(step, state, data, spec.iterations, on_iteration)
        sync()
        return trace, time.perf_counter() - begin

    counts_before = _dynamo_counts() if compiled else None
    report(Progress("first_call", 0, spec.iterations))
    trace, first_call_s = timed(live)
    first = _delta(_dynamo_counts(), counts_before) if compiled else None

    def repeat(r: int) -> tuple[float, bool]:
        repeat_trace, seconds = timed(progress.repeat_reporter(report, r, spec.repeats, cancel, budget))
        return seconds, len(repeat_trace) >= len(trace)

    times = steady_state(spec.repeats, repeat, report, cancel, budget)
    repeats = _delta(_dynamo_counts(), counts_before) if compiled else None
    if compiled:
        compile_count = first["graphs"]
        recompile_count = repeats["graphs"] - first["graphs"]
        from_disk = first["fx_hits"] and not first["fx_misses"]
        cache = "memory" if compile_count == 0 else ("disk" if from_disk else "compiled")
        # An estimate: torch.compile builds inside the first call (see the module docstring).
        # (None when a run stopped by its budget timed no repeat to subtract.)
        compile_s = max(0.0, first_call_s - statistics.median(times)) if compile_count and times else 0.0
    else:
        compile_count = recompile_count = 0
        cache, compile_s = "none", 0.0
    return Measurement(
        elbo=trace.detach().cpu().numpy().astype(np.float64), times=times, shape=(counts.n, counts.p, counts.d),
        transfer_s=transfer_s, compile_s=compile_s, first_call_s=first_call_s,
        compile_count=compile_count, disk_cache_hits=int(cache == "disk"), recompile_count=recompile_count,
        cache=cache, device_kind=_device_kind(device), versions=_versions(device),
        optimizer=spec.optimizer.name, lr=spec.optimizer.lr, init=spec.init, timed_out=bool(budget and budget.passed),
    )


def _measure_pyplnmodels(spec: FitSpec, counts, device, report, cancel, live, budget) -> Measurement:
    sync = _sync(device)
    report(Progress("transfer"))
    start = time.perf_counter()
    peer.build(counts, device, spec.precision)
    sync()
    transfer_s = time.perf_counter() - start
    report(Progress("first_call", 0, spec.iterations))
    done = [0]

    def on_iteration(value) -> bool:
        done[0] += 1
        return live(done[0] - 1, value)

    model, first_call_s, diverged = peer.timed_fit(counts, device, spec.precision, spec.iterations, sync,
                                                    on_iteration, spec.tol)
    stirling = diverged if diverged is not None else peer.recorded_elbo(model)

    def repeat(r: int) -> tuple[float, bool]:
        _, seconds, stopped = peer.timed_fit(counts, device, spec.precision, spec.iterations, sync,
                                             lambda value: _over(budget), spec.tol)
        return seconds, stopped is None

    # A diverged (or stopped) fit is not timed again: its steady state would be a different run.
    times = steady_state(spec.repeats if diverged is None else 0, repeat, report, cancel, budget)
    # pyPLNmodels' own algorithm (torch.optim.Rprop on M, S; B and Sigma profiled; its
    # log-counts init inside the timed fit); a fit that stopped on a non-finite ELBO is not
    # timed again, so its one time stands for the repeats; one stopped by its budget has none.
    timed_out = bool(budget and budget.passed)
    return Measurement(
        elbo=peer.exact_elbo(stirling, counts.counts), times=times if times or timed_out else [first_call_s],
        shape=(counts.n, counts.p, counts.d), transfer_s=transfer_s, first_call_s=first_call_s,
        device_kind=_device_kind(device), versions=_versions(device, pyplnmodels=True),
        optimizer=peer.OPTIMIZER, lr=peer.LEARNING_RATE, init=peer.INIT, timed_out=timed_out,
        warnings=[FLOAT32_PYPLNMODELS] if spec.precision == "float32" else [],
    )


def _device_kind(device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _versions(device, pyplnmodels: bool = False) -> dict[str, Any]:
    versions = {
        "torch": str(torch.__version__),  # a TorchVersion: unpickled, it would import torch in the server
        "torch_cuda": torch.version.cuda,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "platform": "gpu" if device.type == "cuda" else "cpu",
        "device_kind": _device_kind(device),
        "os": platform.platform(),
        "cpu_count": os.cpu_count(),
        "host": socket.gethostname(),
    }
    if pyplnmodels:
        versions["pyPLNmodels"] = importlib.metadata.version("pyPLNmodels")
    return versions
