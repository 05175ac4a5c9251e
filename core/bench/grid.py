"""Side-by-side benchmarks: a grid of specs run in one process, stored, printed as a table.

Benchmarks print figures; they are not tests. Every run of the grid goes through the
same engine and the same store as the dashboard's, so the table's rows also appear on
the Compare and Scaling pages.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from core import catalog
from core.data import datasets
from core.data.counts import CountData
from core.inspect import roofline
from core.results.result import RunResult
from core.run import engine, stored_run
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
    """One spec per (oaks replication, strategy); `iterations` pairs with `replicates`. Each
    runs all its iterations (tol 0) from the tutorial's start, with an optimizer every strategy
    takes (the tutorial's by default): a time per iteration, not a time to solution."""
    specs = []
    for replicate, count in zip(replicates, iterations, strict=True):
        for name in strategy_names:
            specs.append(FitSpec(
                dataset=DatasetSpec(kind="oaks", replicate=replicate), strategy=name, iterations=count,
                precision=precision, device=device, optimizer=optimizer, init="seed", repeats=repeats, tol=0.0,
            ))
    return specs


def run_grid(specs: list[FitSpec], store=None, on_result: Callable[[RunResult], None] | None = None,
             cold: bool = False) -> list[tuple[RunResult, Any]]:
    """Run every spec in order (data loaded once per dataset), storing each result; `cold`
    compiles each from scratch (`core.run.cold_compile`).

    Returns (result, analysis) pairs; the analysis (`core.inspect.roofline.Analysis`: XLA's cost
    per iteration, the roofline floor, peak memory) is None for the peers, whose work
    XLA never sees.
    """
    loaded: dict[DatasetSpec, CountData] = {}
    rows = []
    for spec in specs:
        if spec.dataset not in loaded:
            loaded[spec.dataset] = datasets.load(spec.dataset)
        if store is not None:
            result = stored_run.run_and_store(store, spec, loaded[spec.dataset], owner="benchmark", cold=cold)
        else:
            result = engine.run(spec, counts=loaded[spec.dataset], owner="benchmark", cold=cold)
        # After the run, its executables are in the engine's cache: nothing recompiles here.
        analysis = roofline.analyse(spec, loaded[spec.dataset]) if catalog.runnable(spec.strategy).inspectable else None
        rows.append((result, analysis))
        if on_result is not None:
            on_result(result)
    return rows


def _ratio(value: float, reference: float | None) -> float:
    return value / reference if reference else math.nan


def _cell(value: float, width: int, digits: int = 2) -> str:
    """`value` right-aligned in `width`, or "-" where there is nothing to show (no pyPLNmodels
    run to divide by, no roofline for a peer): "nan" read as a failed measurement."""
    return f"{value:>{width}.{digits}f}" if math.isfinite(value) else f"{'-':>{width}}"


def table(rows: list[tuple[RunResult, Any]]) -> str:
    """A plain-text table, one line per run, ratios taken at the same n.

    Columns: per-iteration ms (median of repeats) and its spread (max - min, % of the
    median); trace+lower and compile seconds; ratio to the fastest run, to pyPLNmodels
    and to the roofline floor; which side of the roofline binds; XLA's peak memory and
    its ratio to the arrays the model holds.
    """
    fastest: dict[int, float] = {}
    reference: dict[int, float] = {}
    for r, _ in rows:
        if r.status == "ok":
            fastest[r.n] = min(fastest.get(r.n, math.inf), r.per_iter_ms)
            if r.strategy == "pyplnmodels":
                reference[r.n] = r.per_iter_ms
    header = (f"{'strategy':<18} {'dataset':<11} {'n':>7} {'iters':>5} {'ms/iter':>9} {'spread%':>7} "
              f"{'trace+lower s':>13} {'compile s':>9} {'x fastest':>9} {'x pyPLN':>7} "
              f"{'floor ms':>8} {'x floor':>7} {'bound':>7} {'peak MB':>8} {'x model':>7} {'recompiles':>10}")
    lines = [header, "-" * len(header)]
    for r, analysis in rows:
        spread = 100 * (r.run_s_max - r.run_s_min) / r.run_s if r.run_s else math.nan
        bound = analysis.floor if analysis is not None else None
        floor_ms = 1e3 * bound.seconds if bound else math.nan
        peak = analysis.peak_bytes if analysis is not None else None
        peak_mb = peak / 1e6 if peak else math.nan
        lines.append(
            f"{r.strategy:<18} {r.dataset:<11} {r.n:>7} {r.iterations_run:>5} {r.per_iter_ms:>9.3f} {spread:>7.1f} "
            f"{r.trace_lower_s:>13.3f} {r.compile_s:>9.3f} {_ratio(r.per_iter_ms, fastest.get(r.n)):>9.2f} "
            f"{_cell(_ratio(r.per_iter_ms, reference.get(r.n)), 7)} {_cell(floor_ms, 8, 3)} "
            f"{_cell(_ratio(r.per_iter_ms, floor_ms), 7)} "
            f"{bound.bound if bound else '-':>7} {_cell(peak_mb, 8, 1)} "
            f"{_cell(_ratio(peak, analysis.model_bytes) if peak else math.nan, 7)} {r.recompile_count:>10}"
            + ("" if r.status == "ok" else f"  {r.status}")
        )
    return "\n".join(lines)
