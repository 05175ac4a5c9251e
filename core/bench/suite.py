"""The benchmark the command line's `bench` runs: the per-iteration grid and the time-to-solution
table, side by side in one process, as a value (`Bench`) so that it runs the same here or on a
worker of a cluster (`core.cluster.tasks.benchmark`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from core.bench import grid
from core.bench import time_to_solution as tts
from core.results.result import RunResult
from core.spec import DEFAULTS, DatasetSpec, SpecError


@dataclasses.dataclass(frozen=True)
class Bench:
    """What to benchmark.

    Attributes:
        sizes: oaks replication factors.
        strategies: runnables of the per-iteration grid.
        iterations: iterations per size for the grid.
        precision, repeats, device: as in `FitSpec`.
        cold: compile every grid run from scratch.
        tables: which tables to make: "per-iteration", "time-to-solution".
        solve_strategies, solve_optimizers: the time-to-solution contenders.
        trajectory_cap: every contender's trajectory length, or None for each optimizer's own
            (`time_to_solution.CAPS`).
    """

    sizes: tuple[int, ...]
    strategies: tuple[str, ...]
    iterations: tuple[int, ...]
    precision: str = "float32"
    repeats: int = 5
    device: str = "cpu"
    cold: bool = False
    tables: tuple[str, ...] = ("per-iteration", "time-to-solution")
    solve_strategies: tuple[str, ...] = (DEFAULTS.strategy,)
    solve_optimizers: tuple[str, ...] = tts.DEFAULT_OPTIMIZERS
    trajectory_cap: int | None = None

    def check(self) -> None:
        """SpecError for a benchmark that cannot run (before anything runs)."""
        if len(self.iterations) != len(self.sizes):
            raise SpecError(f"--iterations needs one value per size ({len(self.sizes)}); got {len(self.iterations)}")
        if self.trajectory_cap is not None and self.trajectory_cap < 1:
            raise SpecError(f"--trajectory-cap must be at least 1; got {self.trajectory_cap}")
        self.grid()
        for contender in self.contenders():  # refused pairs are refused before anything runs
            contender.spec(DatasetSpec(), 1, self.precision, self.repeats, self.device)

    def grid(self):
        return grid.oaks_grid(self.sizes, self.strategies, self.iterations, self.precision, self.repeats,
                              self.device)

    def contenders(self):
        return tts.contenders(self.solve_strategies, self.solve_optimizers)


def run(bench: Bench, store, on_result: Callable[[RunResult], None] | None = None) -> list[str]:
    """Runs `bench`, storing every run in `store`; returns its tables as text."""
    bench.check()
    out = []
    if "per-iteration" in bench.tables:
        out.append(grid.table(grid.run_grid(bench.grid(), store, on_result, cold=bench.cold)))
    if "time-to-solution" in bench.tables:
        solutions = tts.run(bench.sizes, bench.contenders(), store, bench.precision, bench.repeats, bench.device,
                            on_result, bench.trajectory_cap)
        out.append(f"\nTime to solution: steady-state seconds to within 1e-5 (relative) of the best ELBO this "
                   f"project's contenders reached ({bench.precision}, median of {bench.repeats} rounds, "
                   "contenders in turn)\n"
                   + tts.table(solutions))
    return out
