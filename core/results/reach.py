"""When an ELBO curve comes within a relative distance of a best ELBO: the measure behind
"time to solution" in the benchmark, the Compare page and `python -m core solve`.

An ELBO is a maximum, so a run's distance to the best is (best - ELBO) / |best|; runs of
one problem (same data, any strategy, optimizer or precision) share their best. Element i
of a curve is the ELBO of the state iteration i starts from, so a run that reaches the
best within `relative` at element i needs i + 1 iterations to say so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas

# The distance to the best that counts as solved, and how far a run's final ELBO may lie
# from the best for `python -m core solve` to take its configuration as one that converges.
SOLVED = 1e-5
PROBLEM = ["dataset", "n", "p", "d"]


def iterations_to(elbo: np.ndarray, best: float, relative: float = SOLVED) -> int | None:
    """Iterations a run with ELBO curve `elbo` needed to come within `relative` of `best`
    (the index of the first such element + 1), or None when it never did."""
    values = np.asarray(elbo, dtype=np.float64)
    close = (best - values) / abs(best) <= relative
    return int(np.argmax(close)) + 1 if close.any() else None


def best_by_problem(frame: pandas.DataFrame) -> dict[tuple, float]:
    """The best (largest) final ELBO of the finished runs of each problem, by its `PROBLEM`
    values (dataset, n, p, d)."""
    finished = frame[frame["status"] == "ok"]
    return {key: float(value) for key, value in finished.groupby(PROBLEM)["final_elbo"].max().items()}


def reach_frame(frame: pandas.DataFrame, curves: dict[int, np.ndarray], best: dict[tuple, float],
                relative: float = SOLVED) -> pandas.DataFrame:
    """Per run of `frame` (rows of the store's frame) with its curve: the iterations to come
    within `relative` of its problem's `best` (`best_by_problem`), and the seconds that
    takes, *estimated* as those iterations at the run's steady-state time per iteration
    (`per_iter_ms`), alone and with the run's trace, lowering and compile time before it.

    Returns columns id, strategy, optimizer, init, precision, best_elbo, iterations_to,
    seconds_to (NaN where the run never came that close) and with_compile_s.
    """
    # Deferred: pandas is only needed by the pages and the benchmarks (see core.store.frames).
    import pandas as pd

    rows = []
    for _, run in frame.iterrows():
        curve = curves.get(int(run["id"]))
        target = best.get(tuple(run[c] for c in PROBLEM), math.nan)
        count = iterations_to(curve, target, relative) if curve is not None and math.isfinite(target) else None
        seconds = count * run["per_iter_ms"] / 1e3 if count is not None else math.nan
        rows.append({"id": int(run["id"]), "strategy": run["strategy"], "optimizer": run["optimizer"],
                     "init": run["init"], "precision": run["precision"], "best_elbo": target,
                     "iterations_to": count, "seconds_to": seconds,
                     "with_compile_s": seconds + run["trace_lower_s"] + run["compile_s"]})
    return pd.DataFrame(rows, columns=["id", "strategy", "optimizer", "init", "precision", "best_elbo",
                                       "iterations_to", "seconds_to", "with_compile_s"])
