"""What one fit produced: timings, compile counts, the ELBO curve and the environment.

A `RunResult` is what the engine returns, what the store keeps and what `run --json`
prints; its field names are the JSON keys. ELBO values are the ELBO itself (negative),
with the exact log Y! = gammaln(Y + 1) (`log_factorial = "exact"`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

STATUSES = ("ok", "diverged", "interrupted")
CACHE_STATES = ("compiled", "memory", "disk", "none")


@dataclasses.dataclass
class RunResult:
    """One stored run.

    Attributes:
        id: store row id (0 until stored).
        created_at: epoch seconds when the run finished.
        spec: the FitSpec as a dict (`FitSpec.to_dict()`); `spec_key` is its hash.
        strategy, dataset, n, p, d, precision, device, iterations, optimizer, lr, init,
        repeats, tol: the spec, flattened for tables ("dataset" is its label).
        status: "ok", "diverged" (non-finite ELBO) or "interrupted" (killed mid-run).
        error: for "diverged", where and what; else None.
        diverged_at: first iteration whose ELBO is not finite, or None.
        iterations_run: iterations done (while_loop may stop early; diverged runs stop).
        transfer_s: host-to-device copy of the data, timed apart from the fit (for data
            drawn on the devices, the draw, its compilation included).
        trace_lower_s: tracing to a jaxpr and lowering to StableHLO (0 when cached or eager).
        compile_s: XLA compilation (0 when cached in memory; a disk-cache load otherwise).
        first_call_s: the first execution (for eager and jit-on-call, includes dispatch
            warm-up and any compilation JAX does lazily).
        run_s, run_s_min, run_s_max: steady state over `repeats` executions (median, min, max).
        per_iter_ms: run_s / iterations_run in milliseconds.
        compile_count: XLA compilations that ran (persistent-cache loads excluded).
        disk_cache_hits: executables loaded from the persistent compilation cache.
        recompile_count: compilations during the steady-state repeats (0 for jitted code).
        cache: "compiled" (built now), "memory" (reused in process), "disk" (loaded from
            the persistent cache) or "none" (eager: nothing compiled ahead).
        final_elbo: last finite ELBO.
        elbo: ELBO per iteration, up to divergence or the while_loop stop.
        log_factorial: "exact" (gammaln) for every ELBO here.
        devices: number of devices used.
        processes: processes that computed the fit together (`jax.process_count()`; 1
            unless it ran under jax.distributed).
        device_kind: e.g. "cpu", "NVIDIA H100".
        versions: jax, jaxlib, optax, numpy, python versions; platform; cpu_count; host.
        queue_wait_s: seconds spent waiting for the device in the host's queue.
        chunk_iterations: iterations per call when a large compiled loop was split into
            calls (so that a cancel lands within seconds); 0 when it ran in one call.
        timed_start, timed_end: epoch seconds of the timed section, while the run held
            the device; `to_dict()` also gives them as `timed_window` [start, end].
    """

    spec: dict[str, Any]
    spec_key: str
    strategy: str
    dataset: str
    n: int
    p: int
    d: int
    precision: str
    device: str
    iterations: int
    optimizer: str
    lr: float
    init: str
    repeats: int
    tol: float
    status: str
    error: str | None
    diverged_at: int | None
    iterations_run: int
    transfer_s: float
    trace_lower_s: float
    compile_s: float
    first_call_s: float
    run_s: float
    run_s_min: float
    run_s_max: float
    per_iter_ms: float
    compile_count: int
    disk_cache_hits: int
    recompile_count: int
    cache: str
    final_elbo: float | None
    elbo: list[float]
    devices: int
    device_kind: str
    versions: dict[str, Any]
    processes: int = 1
    log_factorial: str = "exact"
    queue_wait_s: float = 0.0
    chunk_iterations: int = 0
    timed_start: float = 0.0
    timed_end: float = 0.0
    id: int = 0
    created_at: float = 0.0

    def to_dict(self, with_elbo: bool = True) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["timed_window"] = [self.timed_start, self.timed_end]
        if not with_elbo:
            out.pop("elbo")
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})
