"""Peers: the comparisons users would otherwise make by hand, run and timed like strategies.

- `pyplnmodels`: pyPLNmodels' own `Pln.fit` (PyTorch, eager, Rprop, profiled B and Sigma).
- `torch_eager`: our algorithm (model, initialisation, optimizer) in PyTorch, eager.
- `torch_compile`: the same with the per-iteration step under `torch.compile`.

`run_peer(spec, counts)` returns a `PeerTiming` with the engine's timing phases. Every
ELBO is the ELBO itself with the exact log Y! (gammaln). Nothing here imports torch or
pyPLNmodels until a peer runs, so the dashboard's first paint does not pay for them.

Timing (the engine's protocol, with PyTorch's means): `time.perf_counter()` around work that
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
import statistics
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
    from core.engine import Progress, live_elbo_reporter

    report = on_progress or (lambda progress: None)
    device = torch_device(spec.device)
    report(Progress("data"))
    counts = counts if counts is not None else datasets.load(spec.dataset)
    from core.peers import timed

    live = live_elbo_reporter(report, spec.iterations) if on_progress is not None else None
    if spec.strategy == "pyplnmodels":
        return timed.run_pyplnmodels(spec, counts, device, report, Progress, live)
    return timed.run_torch(spec, counts, device, report, Progress, live)
