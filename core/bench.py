"""Side-by-side benchmarks: a grid of specs run in one process, stored, printed as a table.

Benchmarks print figures; they are not tests. Every run of the grid goes through the
same engine and the same store as the dashboard's, so the table's rows also appear on
the Compare and Scaling pages.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

from core.result import RunResult
from core.spec import DatasetSpec, FitSpec, OptimizerSpec


def oaks_grid(
    replicates: Iterable[int],
    strategy_names: Iterable[str],
    iterations: Iterable[int],
    precision: str = "float32",
    repeats: int = 3,
    device: str = "cpu",
    optimizer: OptimizerSpec = OptimizerSpec(),
) -> list[FitSpec]:
    """One spec per (oaks replication, strategy); `iterations` pairs with `replicates`."""
    specs = []
    for replicate, count in zip(replicates, iterations, strict=True):
        for name in strategy_names:
            specs.append(FitSpec(
                dataset=DatasetSpec(kind="oaks", replicate=replicate), strategy=name, iterations=count,
                precision=precision, device=device, optimizer=optimizer, repeats=repeats,
            ))
    return specs


def run_grid(specs: list[FitSpec], store=None, on_result: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Run every spec in order (data loaded once per dataset), storing each result."""
    from core import data, engine

    loaded: dict[DatasetSpec, data.CountData] = {}
    results = []
    for spec in specs:
        if spec.dataset not in loaded:
            loaded[spec.dataset] = data.load(spec.dataset)
        result = engine.run(spec, counts=loaded[spec.dataset])
        if store is not None:
            store.add(result)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def table(results: list[RunResult]) -> str:
    """A plain-text table: per-iteration ms, compile s and the ratio to the fastest at each n."""
    fastest: dict[int, float] = {}
    for r in results:
        if r.status == "ok":
            fastest[r.n] = min(fastest.get(r.n, math.inf), r.per_iter_ms)
    header = (f"{'strategy':<18} {'dataset':<11} {'n':>7} {'iters':>5} {'ms/iter':>9} {'spread %':>8} "
              f"{'trace+lower s':>13} {'compile s':>9} {'first call s':>12} {'x fastest':>9} {'cache':>8} "
              f"{'compiles':>8} {'recompiles':>10}")
    lines = [header, "-" * len(header)]
    for r in results:
        spread = 100 * (r.run_s_max - r.run_s_min) / r.run_s if r.run_s else math.nan
        ratio = r.per_iter_ms / fastest[r.n] if r.status == "ok" else math.nan
        lines.append(
            f"{r.strategy:<18} {r.dataset:<11} {r.n:>7} {r.iterations_run:>5} {r.per_iter_ms:>9.3f} {spread:>8.1f} "
            f"{r.trace_lower_s:>13.3f} {r.compile_s:>9.3f} {r.first_call_s:>12.3f} {ratio:>9.2f} {r.cache:>8} "
            f"{r.compile_count:>8} {r.recompile_count:>10}" + ("" if r.status == "ok" else f"  {r.status}")
        )
    return "\n".join(lines)
