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
- the passes: the strategy's own time per cell per iteration, the slope between its smallest
  and largest stored runs where they are at least MIN_SPAN apart in cells (eager's unfused
  passes over the arrays cost it more a cell than a compiled loop's); else the least time per
  cell of any stored run of that optimizer, precision and device, whatever its strategy
  (every strategy does the same arithmetic; the largest compiled runs come nearest to it);
  times the cells added, and never under that least time times all the cells.

Scaled up far (more than FAR_REACH times the cells of the run it starts from) an estimate may
be short: arrays that outgrow the processor's caches run slower a cell. It says so, and warns
where twice it would pass the budget.

Scaled by the cells alone, eager's 40 ms an iteration at oaks x1, nearly all dispatch, would
read as 40 s at x1,000. The time is then that per iteration times the iterations and the
calls (the first and each repeat), plus making its program: the nearest run's trace, lower and
compile time where that run is of these data and the run may use a cache, else what compiling
cost the strategy's own run nearest in size that compiled (`_compile_s`). A
fit that stops at its tolerance is counted at the iterations after which the nearest run of
its kind stopped (the default on oaks: 49 at x1, 51 at x1,000), not at its cap, which
read five to ten times too long. A strategy with no stored run of its kind is named and
not counted, and the time is then a least. Where the plan passes the budget, the note says
a setting at which it would fit.
"""

from __future__ import annotations

import dataclasses
import math

from core.coordination.budget import duration
from core.results.ordering import listed
from core.results.result import RunResult
from core.run import batches
from core.spec import FitSpec
from core.store.run_store import IMPORTED

# Under this a plan is said nothing of: it is over about as soon as said.
SAY_FROM_SECONDS = 10.0
# A strategy's own runs this far apart in cells give its own cost of a cell (`_per_cell`).
MIN_SPAN = 4.0
# Scaled up by more than this many times the cells, an estimate may be short by up to
# FAR_FACTOR: work whose arrays outgrow the processor's caches runs slower a cell (on a 2-core
# CPU, from oaks x1 and x100 to x1,000: eager 2.1 times the estimate, scan 1.4, jit_step 0.74).
FAR_REACH = 4.0
FAR_FACTOR = 2.0


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Attributes:
        iterations: the iterations a call is expected to run: the spec's, or where it stops
            at a tolerance as the nearest run did, that run's count (at most the spec's).
        per_iteration_s: the estimated seconds an iteration.
        compile_s: the nearest run's trace, lower and compile seconds.
        calls: the first call and each repeat.
        basis: the stored run it is scaled from.
        reach: the data's cells over the basis's.
    """

    iterations: int
    per_iteration_s: float
    compile_s: float
    calls: int
    basis: RunResult
    reach: float = 1.0

    @property
    def call_s(self) -> float:
        return self.iterations * self.per_iteration_s

    @property
    def seconds(self) -> float:
        """The estimated seconds the run holds the device, its compile included."""
        return self.calls * self.call_s + self.compile_s


def estimate(spec: FitSpec, cells: int, history: list[RunResult], cold: bool = False) -> Estimate | None:
    """The estimate for `spec` on data of `cells` (n x p) from `history`, the store's runs of
    the same optimizer, precision and device (`history_of`; see the module docstring), compiled
    from scratch where `cold`; None when none of its strategy finished with a time per iteration."""
    usable = [run for run in history if run.status == "ok" and run.per_iter_ms > 0 and run.n * run.p > 0]
    own = [run for run in usable if run.strategy == spec.strategy]
    if not own or cells <= 0:
        return None
    basis = min(own, key=lambda run: abs(math.log(run.n * run.p / cells)))
    basis_cells, basis_seconds = basis.n * basis.p, basis.per_iter_ms / 1e3
    least = min(run.per_iter_ms / 1e3 / (run.n * run.p) for run in usable)
    per_iteration = max(basis_seconds + _per_cell(own, least) * (cells - basis_cells), least * cells)
    # A fit that stops at its tolerance: about as many iterations as the nearest one that
    # stopped did (the default on oaks: 49 at x1, 51 at x1,000), not the cap.
    stopped_early = spec.tol > 0 and basis.tol > 0 and basis.iterations_run < basis.iterations
    iterations = min(spec.iterations, basis.iterations_run) if stopped_early else spec.iterations
    return Estimate(iterations, per_iteration, _compile_s(own, basis, cells, cold), 1 + spec.repeats, basis,
                    cells / basis_cells)


def _compile_s(own: list[RunResult], basis: RunResult, cells: int, cold: bool) -> float:
    """What making the program will cost: the basis's, where it is of these data and not asked
    to compile from scratch (its program is at hand, in memory or on disk); else what compiling
    cost the strategy's own run nearest in cells that compiled (a basis loaded from a cache
    read 0.0 s, and a sweep compiling from scratch at three sizes was told a tenth of its time)."""
    if not cold and basis.n * basis.p == cells:
        return basis.trace_lower_s + basis.compile_s
    compiled = [run for run in own if run.cache.startswith("compiled")]
    if not compiled:
        return basis.trace_lower_s + basis.compile_s
    nearest = min(compiled, key=lambda run: abs(math.log(run.n * run.p / cells)))
    return nearest.trace_lower_s + nearest.compile_s


def _per_cell(own: list[RunResult], least: float) -> float:
    """Seconds an iteration grows by a cell, for a strategy whose stored runs are `own`: the
    slope between its smallest and its largest run where they are at least MIN_SPAN apart in
    cells (eager's unfused passes cost it 1.6 times scan's a cell at oaks x100); else `least`,
    the least time a cell of any strategy of the kind."""
    small, large = (min(own, key=lambda run: run.n * run.p), max(own, key=lambda run: run.n * run.p))
    small_cells, large_cells = small.n * small.p, large.n * large.p
    slope = (large.per_iter_ms - small.per_iter_ms) / 1e3 / (large_cells - small_cells or 1)
    return slope if large_cells >= MIN_SPAN * small_cells and slope > 0 else least


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


def plan_note(specs: list[FitSpec], counts, store, budget_seconds: float,
              cold: bool = False) -> tuple[str, bool] | None:
    """(a sentence on how long `specs`, timed together on their data (`counts` where read
    already), will hold the device, whether that passes `budget_seconds`), or None when it
    is short or nothing stored tells. Timed together, the runs share one budget
    (`core.run.engine`). Strategies with no stored run of their kind are named, and the
    time is then a least."""
    planned = _planned(specs, counts, {}, store, cold)
    if planned is None or planned.seconds < SAY_FROM_SECONDS:
        return None
    slowest = max(planned.known, key=lambda one: one.seconds)
    several = len(planned.known) > 1
    text = (f"{planned.about} {_spoken(planned.seconds)}{f' for the {len(planned.known)} strategies' * several} by "
            f"this server's earlier runs, scaled to this size ({'the longest, ' * several}"
            f"{slowest.basis.strategy}: {slowest.iterations:,} iterations x {slowest.calls} calls at "
            f"{_ms(1e3 * slowest.per_iteration_s)}, from {_ms(slowest.basis.per_iter_ms)} at "
            f"{slowest.basis.n:,} x {slowest.basis.p:,}, and {_spoken(slowest.compile_s)} to make its program)"
            f"{planned.far}{planned.not_counted}")
    return _against_budget(text, [planned], budget_seconds, "That")


def _ms(milliseconds: float) -> str:
    """"2,000 ms", not .3g's "2e+03 ms"; "0.716 ms" and "62.6 ms" to three figures."""
    return f"{milliseconds:,.0f} ms" if milliseconds >= 100 else f"{milliseconds:.3g} ms"


def _spoken(seconds: float) -> str:
    """An estimate in words, to the second under 20 minutes: "5 minutes" beside a budget of 5
    minutes that it passes read as a contradiction."""
    if 120 <= seconds < 1200:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} minutes {rest} s" if rest else f"{minutes} minutes"
    return duration(seconds)


def _against_budget(text: str, plans: list[_Planned], budget_seconds: float, subject: str,
                    several: bool = False) -> tuple[str, bool]:
    """`text` ended with what `plans` (batches run one after another, each under the budget)
    mean for `budget_seconds`: whether one passes it (`subject` names what does; `several`: more
    than one), or may (an estimate scaled far up may be short by up to FAR_FACTOR), with a
    setting at which the longest would fit; and whether to warn."""
    longest = max(plans, key=lambda plan: plan.seconds)
    if longest.seconds > budget_seconds:
        return (text + f". {subject} {'pass' if several else 'passes'} the {duration(budget_seconds)} a run may "
                f"hold the device: {'each' if several else 'it'} would stop there and keep what finished. "
                f"{_what_fits(longest.known, budget_seconds)}."), True
    if longest.is_far and FAR_FACTOR * longest.seconds > budget_seconds:
        return (text + f". {subject} may pass the {duration(budget_seconds)} a run may hold the device: it would "
                f"stop there and keep what finished. {_what_fits(longest.known, budget_seconds / FAR_FACTOR)} "
                "even at twice the estimate."), True
    return text + ".", False


def sweep_note(specs: list[FitSpec], store, budget_seconds: float, cold: bool = False) -> tuple[str, bool] | None:
    """`plan_note` for a sweep, whose batches (`core.run.batches`: each size's strategies timed
    together) run one after the other, each under its own budget: (a sentence on how long
    they will hold the device in all, and on the longest, whether a batch passes
    `budget_seconds`), or None when it is short or nothing stored tells."""
    histories: dict[tuple, list[RunResult]] = {}
    planned = [(members, _planned(members, None, histories, store, cold))
               for members in ([specs[index] for index in batch.members] for batch in batches.plan(specs))]
    planned = [(members, plan) for members, plan in planned if plan is not None]
    total = sum(plan.seconds for _, plan in planned)
    if not planned or total < SAY_FROM_SECONDS:
        return None
    unknown = sorted({name for _, plan in planned for name in plan.unknown})
    members, longest = max(planned, key=lambda pair: pair[1].seconds)
    about = "At least" if unknown else "About"
    text = (f"{about} {_spoken(total)} in all by this server's earlier runs, scaled to each size; the longest, "
            f"{members[0].dataset.label}, {longest.about.lower()} {_spoken(longest.seconds)}{longest.far}")
    text += _not_counted(unknown)
    passing = [members[0].dataset.label for members, plan in planned if plan.seconds > budget_seconds]
    return _against_budget(text, [plan for _, plan in planned], budget_seconds,
                           listed(passing) if passing else members[0].dataset.label, several=len(passing) > 1)


@dataclasses.dataclass(frozen=True)
class _Planned:
    """The estimates of fits timed together: those of strategies with stored runs of their
    kind (`known`), and the strategies without (`unknown`)."""

    known: list[Estimate]
    unknown: list[str]

    @property
    def seconds(self) -> float:
        return sum(one.seconds for one in self.known)

    @property
    def about(self) -> str:
        return "At least" if self.unknown else "About"

    @property
    def is_far(self) -> bool:
        return max(one.reach for one in self.known) > FAR_REACH

    @property
    def far(self) -> str:
        """Where it is scaled far up: by how much, and what that may mean."""
        if not self.is_far:
            return ""
        return (f"; scaled up from runs {max(one.reach for one in self.known):,.0f} times smaller, where work that "
                "outgrows the processor's caches can take up to twice as long")

    @property
    def not_counted(self) -> str:
        return _not_counted(self.unknown)


def _not_counted(strategies: list[str]) -> str:
    """"; eager not counted: …", naming the strategies a time leaves out, or ""."""
    if not strategies:
        return ""
    return f"; {listed(strategies)} not counted: no earlier run of {'its' if len(strategies) == 1 else 'their'} kind"


def _planned(specs: list[FitSpec], counts, histories: dict[tuple, list[RunResult]], store,
             cold: bool = False) -> _Planned | None:
    """The estimates of `specs`, timed together on their data; None when its size is not
    known yet or no strategy has a stored run of its kind. `histories` keeps each kind of
    run's history read (one read of the store per kind: the strategies of a plan share one)."""
    cells = cells_of(specs[0], counts) if specs else None
    if cells is None:
        return None
    found = []
    for spec in specs:
        kind = (spec.optimizer.name, spec.precision, spec.device)
        if kind not in histories:
            histories[kind] = history_of(store, spec)
        found.append(estimate(spec, cells, histories[kind], cold))
    known = [one for one in found if one is not None]
    if not known:
        return None
    return _Planned(known, [spec.strategy for spec, one in zip(specs, found) if one is None])


def _what_fits(known: list[Estimate], budget_seconds: float) -> str:
    """A setting at which the estimated runs fit in the budget: fewer repeats, else fewer
    iterations a call."""
    per_call = sum(one.call_s for one in known)
    compile_s = sum(one.compile_s for one in known)
    calls = known[0].calls
    room = budget_seconds - compile_s
    most_calls = int(room // per_call) if per_call > 0 else calls
    if 1 <= most_calls < calls:
        return f"With Repeats at {most_calls - 1} it would fit"
    most_iterations = max(one.iterations for one in known)
    fitting = int(most_iterations * room / (calls * per_call)) if per_call > 0 and room > 0 else 0
    if fitting >= 1:
        return f"At about {fitting:,} iterations it would fit (a fit may not converge in them)"
    return "Choose smaller data or fewer strategies"
