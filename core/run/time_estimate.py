"""How long a run will hold the device, read from this server's own stored runs: said before
Run, so that a plan its time budget cannot hold is known before anyone waits on it.

`budget.check` refuses only what no machine could finish (its floors are far under any
real speed), so three strategies at oaks x1,000 on a 2-core server were offered without a
word and stopped at the budget minutes later. This estimate uses the server's history
instead. An iteration costs a part that does not grow with the data (Python's dispatch of
each op or call, a compiled loop's launches) and passes over the (n, p) arrays:

- the part of this strategy: of its stored finished runs with the spec's optimizer,
  precision and device, the one whose data is nearest in cells (n x p, by ratio), at its
  steady-state time per iteration;
- the passes: the least time per cell per iteration of any stored run of that optimizer,
  precision and device, whatever its strategy (every strategy does the same arithmetic;
  the largest compiled runs come nearest to it), times the cells added.

Scaled by the cells alone, eager's 40 ms an iteration at oaks x1, nearly all dispatch, would
read as 40 s at x1,000. The time is then that per iteration times the spec's iterations and calls
(the first and each repeat), plus the nearest run's trace, lower and compile time. A fit
that stops at its tolerance runs fewer iterations than asked: the estimate is of the most.
No stored run of the strategy, no estimate.
"""

from __future__ import annotations

import dataclasses
import math

from core.coordination.budget import duration
from core.results.result import RunResult
from core.spec import FitSpec
from core.store.run_store import IMPORTED

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
    the same optimizer, precision and device (`history_of`; see the module docstring); None
    when none of its strategy finished with a time per iteration."""
    usable = [run for run in history if run.status == "ok" and run.per_iter_ms > 0 and run.n * run.p > 0
              and run.optimizer == spec.optimizer.name and run.precision == spec.precision
              and run.device == spec.device]
    own = [run for run in usable if run.strategy == spec.strategy]
    if not own or cells <= 0:
        return None
    basis = min(own, key=lambda run: abs(math.log(run.n * run.p / cells)))
    basis_cells, basis_seconds = basis.n * basis.p, basis.per_iter_ms / 1e3
    per_cell = min(run.per_iter_ms / 1e3 / (run.n * run.p) for run in usable)
    # Never below 0 nor the nearest run's own share per cell: per_cell is at most its share.
    per_iteration = basis_seconds + per_cell * (cells - basis_cells)
    seconds = (1 + spec.repeats) * spec.iterations * per_iteration + basis.trace_lower_s + basis.compile_s
    return Estimate(seconds, basis)


def history_of(store, spec: FitSpec) -> list[RunResult]:
    """The stored runs `estimate` reads for `spec`: every strategy's, of its optimizer,
    precision and device, except those imported from elsewhere (their times are another
    machine's), newest first."""
    found = store.find(optimizer=spec.optimizer.name, precision=spec.precision, device=spec.device, status="ok")
    return [run for run in found if run.owner != IMPORTED]


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
    histories: dict[tuple, list[RunResult]] = {}
    for spec in specs:
        kind = (spec.optimizer.name, spec.precision, spec.device)
        if kind not in histories:
            histories[kind] = history_of(store, spec)
    found = [estimate(spec, cells, histories[(spec.optimizer.name, spec.precision, spec.device)]) for spec in specs]
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
