"""How long a run will hold the device, read from this server's own stored runs: said before
Run, so that a plan its time budget cannot hold is known before anyone waits on it.

`budget.check` refuses only what no machine could finish (its floors are far under any
real speed), so three strategies at oaks x1,000 on a 2-core server were offered without a
word and stopped at the budget minutes later. This estimate uses the server's history
instead: of the stored finished runs with the spec's strategy, optimizer, precision and
device, the one whose data is nearest in cells (n x p, by ratio), its steady-state time per
iteration scaled by the ratio of cells, times the spec's iterations and calls (the first
and each repeat), plus that run's trace, lower and compile time.

Scaled by cells because an iteration of a large fit is passes over (n, p) arrays; below a
few thousand cells an iteration has fixed costs, so an estimate scaled down from a larger
run reads low there, where every run is quick anyway. A fit that stops at its tolerance runs
fewer iterations than asked: the estimate is of the most. No stored run of the kind, no
estimate.
"""

from __future__ import annotations

import dataclasses
import math

from core.coordination.budget import duration
from core.results.result import RunResult
from core.spec import FitSpec

# Below this a plan is said nothing of: it is over about as soon as a page would say it.
SAY_FROM_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Attributes:
        seconds: the estimated seconds the run holds the device (its compile included).
        basis: the stored run it is scaled from.
    """

    seconds: float
    basis: RunResult


def estimate(spec: FitSpec, cells: int, history: list[RunResult]) -> Estimate | None:
    """The estimate for `spec` on data of `cells` (n x p) from `history`, the store's runs of
    the same strategy, optimizer, precision and device (`RunStore.find`); None when none of
    them finished with a time per iteration."""
    usable = [run for run in history if run.status == "ok" and run.per_iter_ms > 0 and run.n * run.p > 0]
    if not usable or cells <= 0:
        return None
    basis = min(usable, key=lambda run: abs(math.log(run.n * run.p / cells)))
    per_iteration = basis.per_iter_ms / 1e3 * cells / (basis.n * basis.p)
    seconds = (1 + spec.repeats) * spec.iterations * per_iteration + basis.trace_lower_s + basis.compile_s
    return Estimate(seconds, basis)


def history_of(store, spec: FitSpec) -> list[RunResult]:
    """The stored runs `estimate` may scale for `spec` (newest first)."""
    return store.find(strategy=spec.strategy, optimizer=spec.optimizer.name, precision=spec.precision,
                      device=spec.device, status="ok")


def cells_of(spec: FitSpec, counts=None) -> int | None:
    """n x p of the data `spec` fits (`counts` where read already); None when only reading
    its file tells."""
    if counts is not None:
        return counts.n * counts.p
    shape = spec.dataset.shape
    return shape[0] * shape[1] if shape is not None else None


def plan_note(specs: list[FitSpec], counts, store, budget_seconds: float) -> tuple[str, bool] | None:
    """(a sentence on how long `specs`, timed together on their data (`counts` where read
    already), will hold the device, whether that passes `budget_seconds`), or None when it
    is short or nothing stored tells. Timed together, the runs share one budget
    (`core.run.engine`)."""
    cells = cells_of(specs[0], counts) if specs else None
    if cells is None:
        return None
    found = [estimate(spec, cells, history_of(store, spec)) for spec in specs]
    known = [one for one in found if one is not None]
    total = sum(one.seconds for one in known)
    if not known or total < SAY_FROM_SECONDS:
        return None
    slowest = max(known, key=lambda one: one.seconds).basis
    counted = ("" if len(known) == len(found) else
               f" for the {len(known)} of {len(found)} with stored runs of their kind")
    text = (f"About {duration(total)}{counted} by this server's stored runs, scaled to this size "
            f"({slowest.strategy} ran {slowest.per_iter_ms:.3g} ms an iteration at {slowest.n:,} x {slowest.p:,})")
    over = total > budget_seconds
    if over:
        fewer = "Fewer strategies, iterations or repeats" if len(specs) > 1 else "Fewer iterations or repeats"
        text += (f", past the {duration(budget_seconds)} a run may hold the device: it would stop there and keep "
                 f"what finished. {fewer}, or smaller data, fit in it")
    return text + ".", over
