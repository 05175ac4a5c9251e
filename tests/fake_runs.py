"""Plausible stored runs for tests that need runs without fitting anything."""

from __future__ import annotations

from core.run.result import RunResult
from core.spec import FitSpec


def make_run(strategy: str = "scan", created_at: float = 0.0, iterations: int = 5,
             host: str = "test-host", **changes) -> RunResult:
    """A plausible stored run of the default spec (with `strategy` and `iterations`)."""
    spec = FitSpec(strategy=strategy, iterations=iterations)
    elbo = [-1000.0 + 10.0 * i + 0.1 / (i + 3) for i in range(iterations)]
    values = dict(
        spec=spec.to_dict(), spec_key=spec.key, strategy=strategy, dataset="oaks x1",
        n=116, p=114, d=1, precision="float32", device="cpu", iterations=iterations,
        optimizer="seed", lr=0.01, init="seed", repeats=3, tol=0.0, status="ok", error=None,
        diverged_at=None, iterations_run=iterations, transfer_s=0.001, trace_lower_s=0.02,
        compile_s=0.3, first_call_s=0.05, run_s=0.04, run_s_min=0.039, run_s_max=0.041,
        per_iter_ms=8.0, compile_count=1, disk_cache_hits=0, recompile_count=0,
        cache="compiled", final_elbo=elbo[-1], elbo=elbo, devices=1, device_kind="cpu",
        versions={"jax": "0.4.35", "jaxlib": "0.4.35", "optax": "0.2.4", "numpy": "2.1",
                  "python": "3.11.7", "platform": "cpu", "cpu_count": 16, "host": host},
        created_at=created_at,
    )
    values.update(changes)
    return RunResult(**values)
