"""Peers: the comparisons users would otherwise make by hand, run and timed like strategies.

- `pyplnmodels`: pyPLNmodels' own `Pln.fit` (PyTorch, eager, Rprop, profiled B and Sigma).
- `torch_eager`: our algorithm (model, initialisation, optimizer) in PyTorch, eager.
- `torch_compile`: the same with the per-iteration step under `torch.compile`.

`run_peer(spec, counts)` returns a `PeerTiming` with the engine's timing phases. Every
ELBO is the ELBO itself with the exact log Y! (gammaln). Nothing here imports torch or
pyPLNmodels until a peer runs, so the dashboard's first paint does not pay for them.

Timing (GUIDE section 4, with PyTorch's means): `time.perf_counter()` around work that
ends in `torch.cuda.synchronize()` on a GPU (PyTorch on CPU is synchronous); the data's
copy to the device is timed apart; the first call, then `spec.repeats` steady-state
calls each from the same initial state. PyTorch has no ahead-of-time compile step to
time alone: `torch.compile` compiles at the first call, so for torch_compile
`first_call_s` is that real first call (Dynamo tracing, AOTAutograd, Inductor codegen
and the C++ build, plus the iterations) and `compile_s` is an *estimate*,
first_call_s - median steady-state call (0 when nothing was compiled). `trace_lower_s`
is 0 for every peer.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from core.spec import FitSpec, SpecError

PEER_NAMES = ("pyplnmodels", "torch_eager", "torch_compile")

_DESCRIPTIONS = {
    "pyplnmodels": (
        "pyplnmodels: pyPLNmodels' own Pln.fit (PyTorch, eager) on the same data, iterations and "
        "device. Its own algorithm whatever the spec says: Rprop(lr=0.01) on M and S from "
        "M = log(Y + (Y == 0)), S = 0.5, with B and Sigma profiled. Its ELBO is re-expressed with "
        "the exact log Y!; its float32-only inputs are cast to the spec's precision."
    ),
    "torch_eager": (
        "torch_eager: our algorithm line for line in PyTorch (same model, initialisation and "
        "optax optimizer semantics), run op by op from a Python loop: the PyTorch counterpart "
        "of the eager strategy."
    ),
    "torch_compile": (
        "torch_compile: the same PyTorch step under torch.compile (TorchDynamo + Inductor, "
        "mode='default', dynamic=False), one compiled function per iteration driven from a "
        "Python loop, like jit_step. Compilation happens at the first call; compile_s is "
        "estimated as first call minus a steady-state call."
    ),
}


@dataclasses.dataclass
class PeerTiming:
    """What one peer run produced; field names follow `core.result.RunResult`.

    Attributes:
        name: the peer, one of `PEER_NAMES`.
        transfer_s: host-to-device copy of the data (for pyplnmodels: building the `Pln`
            object, i.e. its data handling and copy to the device).
        trace_lower_s: always 0 (PyTorch has no separate trace/lower phase to time).
        compile_s: torch_compile: first_call_s - median(times) when the first call
            compiled (an estimate, see the module docstring), else 0; 0 for the others.
        first_call_s: the first timed call, compilation included for torch_compile.
        times: seconds of each of the `repeats` steady-state calls.
        elbo: (iterations_run,) float64 ELBO per iteration, exact log Y!; a NaN at the
            end marks where pyPLNmodels stopped on a non-finite ELBO.
        iterations_run: iterations done in the first call.
        compile_count: Dynamo graphs compiled during the first call (torch_compile).
        recompile_count: Dynamo graphs compiled during the steady-state calls.
        cache: "compiled", "memory" (compiled step reused in this process), "disk"
            (Inductor's on-disk FX graph cache hit) or "none" (nothing compiled).
        device_kind: "cpu" or the CUDA device name.
        devices: devices used (always 1).
        versions: torch (and pyPLNmodels) versions, threads, platform, host.
        optimizer, lr, init: what actually ran (pyplnmodels ignores the spec's).
        notes: how this row differs from the JAX strategies, in words.
    """

    name: str
    transfer_s: float
    trace_lower_s: float
    compile_s: float
    first_call_s: float
    times: list[float]
    elbo: np.ndarray
    iterations_run: int
    compile_count: int
    recompile_count: int
    cache: str
    device_kind: str
    devices: int
    versions: dict[str, Any]
    optimizer: str
    lr: float
    init: str
    notes: str = ""
    log_factorial: str = "exact"

    @property
    def run_s(self) -> float:
        return statistics.median(self.times)

    @property
    def per_iter_ms(self) -> float:
        return 1e3 * self.run_s / max(1, self.iterations_run)


def names() -> list[str]:
    return list(PEER_NAMES)


def describe() -> list[dict[str, str]]:
    """[{"name", "description"}] for every peer, like `core.strategies.describe()`."""
    return [{"name": name, "description": _DESCRIPTIONS[name]} for name in PEER_NAMES]


def is_peer(name: str) -> bool:
    return name in PEER_NAMES


def torch_device(platform_name: str):
    """The torch device for a spec's platform; SpecError if PyTorch cannot use it here."""
    import torch

    if platform_name == "cpu":
        return torch.device("cpu")
    if platform_name == "gpu":
        if torch.cuda.is_available():
            return torch.device("cuda", 0)
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise SpecError(f"device 'gpu' is not available to PyTorch here (torch {torch.__version__}, "
                        f"{build}, no CUDA device); available: cpu")
    raise SpecError(f"device {platform_name!r} is not supported by the PyTorch peers; use cpu or gpu")


def run_peer(spec: FitSpec, counts=None, on_progress: Callable | None = None) -> PeerTiming:
    """Fit and time `spec` with the peer named `spec.strategy`.

    Args:
        spec: what to run; `spec.strategy` names the peer. `tol` is ignored (every
            iteration runs).
        counts: the data (`core.data.CountData`), or None to load `spec.dataset`.
        on_progress: called with `core.engine.Progress` reports, as the engine does.

    Raises:
        KeyError: `spec.strategy` is not a peer.
        SpecError: the device is not available to PyTorch, or the data are invalid.
    """
    if spec.strategy not in PEER_NAMES:
        raise KeyError(f"unknown peer {spec.strategy!r}; known: {', '.join(PEER_NAMES)}")
    from core import data as datasets
    from core.engine import Progress

    report = on_progress or (lambda progress: None)
    device = torch_device(spec.device)
    report(Progress("data"))
    counts = counts if counts is not None else datasets.load(spec.dataset)
    live = _live(report, Progress, spec.iterations) if on_progress is not None else None
    if spec.strategy == "pyplnmodels":
        return _run_pyplnmodels(spec, counts, device, report, Progress, live)
    return _run_torch(spec, counts, device, report, Progress, live)


def _sync(device) -> Callable[[], None]:
    import torch

    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _live(report, Progress, total: int) -> Callable[[int, Any], None]:
    # As the engine does for Python loops: reading a value back syncs a GPU, so ~50
    # reports per first call, none in the steady-state calls.
    every = max(1, total // 50)

    def on_iteration(i: int, value) -> None:
        if (i + 1) % every == 0 or i + 1 == total:
            report(Progress("first_call", i + 1, total, float(value)))

    return on_iteration


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


def _run_torch(spec: FitSpec, counts, device, report, Progress, live) -> PeerTiming:
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


def _run_pyplnmodels(spec: FitSpec, counts, device, report, Progress, live) -> PeerTiming:
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
