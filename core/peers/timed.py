"""The timed peer runs: the PyTorch fits and pyPLNmodels' own, in the engine's phases.

See `core.peers` for what each peer is and how its phases map onto the engine's.
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from core.peers import PeerTiming
from core.spec import FitSpec


def _sync(device) -> Callable[[], None]:
    import torch

    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _dynamo_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "fx_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fx_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in after}


def run_torch(spec: FitSpec, counts, device, report, Progress, live) -> PeerTiming:
    from core.peers import torch_fit
    from core.peers.torch_optim import make_optimizer

    compiled = spec.strategy == "torch_compile"
    sync = _sync(device)
    host = torch_fit.host_data(counts.counts, counts.offsets, counts.covariates, spec.precision)
    report(Progress("transfer"))
    start = time.perf_counter()
    data = torch_fit.place_data(host, device)
    sync()
    transfer_s = time.perf_counter() - start
    optimizer = make_optimizer(spec.optimizer)
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
    times = []
    for r in range(spec.repeats):
        report(Progress("repeat", r, spec.repeats))
        times.append(timed()[1])
    repeats = _delta(_dynamo_counts(), counts_before) if compiled else None
    report(Progress("done", spec.repeats, spec.repeats))
    if compiled:
        compile_count = first["graphs"]
        recompile_count = repeats["graphs"] - first["graphs"]
        from_disk = first["fx_hits"] and not first["fx_misses"]
        cache = "memory" if compile_count == 0 else ("disk" if from_disk else "compiled")
        compile_s = max(0.0, first_call_s - statistics.median(times)) if compile_count else 0.0
        notes = ("compile_s estimated as first_call_s - median steady call; "
                 f"graph breaks in the first call: {first['graph_breaks']}")
    else:
        compile_count = recompile_count = 0
        cache, compile_s, notes = "none", 0.0, ""
    return PeerTiming(
        name=spec.strategy,
        transfer_s=transfer_s,
        trace_lower_s=0.0,
        compile_s=compile_s,
        first_call_s=first_call_s,
        times=times,
        elbo=trace.detach().cpu().numpy().astype(np.float64),
        iterations_run=spec.iterations,
        compile_count=compile_count,
        recompile_count=recompile_count,
        cache=cache,
        device_kind=_device_kind(device),
        devices=1,
        versions=_versions(device),
        optimizer=spec.optimizer.name,
        lr=spec.optimizer.lr,
        init=spec.init,
        notes=notes,
    )


def run_pyplnmodels(spec: FitSpec, counts, device, report, Progress, live) -> PeerTiming:
    from core.peers import pyplnmodels_fit as peer

    sync = _sync(device)
    peer.model_class()  # import pyPLNmodels (and torch) before anything is timed
    report(Progress("transfer"))
    start = time.perf_counter()
    peer.build(counts, device, spec.precision)
    sync()
    transfer_s = time.perf_counter() - start
    report(Progress("first_call", 0, spec.iterations))
    done = [0]

    def on_iteration(value) -> None:
        live(done[0], value)
        done[0] += 1

    model, first_call_s, diverged = peer.timed_fit(counts, device, spec.precision, spec.iterations, sync,
                                                    on_iteration if live else None)
    stirling = diverged if diverged is not None else peer.recorded_elbo(model)
    times = []
    # A diverged fit is not timed again: its steady state would be a different run.
    for r in range(spec.repeats if diverged is None else 0):
        report(Progress("repeat", r, spec.repeats))
        times.append(peer.timed_fit(counts, device, spec.precision, spec.iterations, sync)[1])
    report(Progress("done", spec.repeats, spec.repeats))
    return PeerTiming(
        name=spec.strategy,
        transfer_s=transfer_s,
        trace_lower_s=0.0,
        compile_s=0.0,
        first_call_s=first_call_s,
        times=times or [first_call_s],
        elbo=peer.exact_elbo(stirling, counts.counts),
        iterations_run=len(stirling),
        compile_count=0,
        recompile_count=0,
        cache="none",
        device_kind=_device_kind(device),
        devices=1,
        versions=_versions(device, pyplnmodels=True),
        optimizer=peer.OPTIMIZER,
        lr=peer.LEARNING_RATE,
        init=peer.INIT,
        notes=("pyPLNmodels' own algorithm (torch.optim.Rprop on M, S; B and Sigma profiled; "
               "log-counts init inside the timed fit); its Stirling log Y! replaced by the exact one"
               + ("; it stopped on a non-finite ELBO and was not repeated" if diverged is not None else "")),
    )


def _device_kind(device) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _versions(device, pyplnmodels: bool = False) -> dict[str, Any]:
    import torch

    versions = {
        "torch": torch.__version__,
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
        import importlib.metadata

        versions["pyPLNmodels"] = importlib.metadata.version("pyPLNmodels")
    return versions
