"""The tutorial as a story: its levels one step at a time, each with what it fixes and
how much faster the fit has become since the first.

`STEPS` is data: a step names a runnable, says what it changes and which of the seed
tutorial's pitfalls (`core.inspect.pitfalls`) it is about, and may set fields of the
problem's spec (a strategy that needs its own optimizer or tolerance). Appending a
step is all it takes to tell more of the story.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from core.results import spread
from core.results.result import RunResult
from core.spec import GRADIENT_OPTIMIZERS, FitSpec, OptimizerSpec


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the story.

    Attributes:
        strategy: the runnable it runs (`core.fit.catalog`).
        title: a few words for the slide, e.g. "jit each function".
        origin: where it comes from: "seed tutorial, level 1" or "this project".
        fixes: what it changes over the step before, in two sentences at most.
        pitfalls: keys of `core.inspect.pitfalls` this step is about.
        changes: FitSpec fields this step sets over the problem's (field, value) pairs.
    """

    strategy: str
    title: str
    origin: str
    fixes: str
    pitfalls: tuple[str, ...] = ()
    changes: tuple[tuple[str, Any], ...] = ()

    def spec(self, problem: FitSpec) -> FitSpec:
        """The problem's spec, run this step's way."""
        return dataclasses.replace(problem, strategy=self.strategy, **dict(self.changes))


STEPS: list[Step] = [
    Step("eager", "No JIT", "seed tutorial, level 0",
         "The starting point: a Python loop dispatches every JAX operation to XLA on its own, hundreds of "
         "tiny calls per iteration, none fused.",
         pitfalls=("trace_precedence", "logdet_overflow")),
    Step("jit_per_function", "jit each function", "seed tutorial, level 1",
         "The gradient, the optimizer's update, Sigma and its inverse are each compiled once: five calls per "
         "iteration instead of hundreds, and XLA fuses the work inside each.",
         pitfalls=("fused_reduction",)),
    Step("scan", "The whole loop in lax.scan", "seed tutorial, level 2",
         "The loop itself is compiled: one call runs every iteration on the device, with no return to Python "
         "in between."),
    Step("scan_namedtuple", "scan with a NamedTuple state", "seed tutorial, level 3",
         "Named, typed fields instead of dict keys: clearer code, the same compiled program, so the same speed."),
    Step("scan_pytree_class", "scan with a pytree class, done right", "seed tutorial, level 4",
         "A class with methods that return new objects, every array a pytree child. The seed's version "
         "never updated Omega.",
         pitfalls=("pytree_class",)),
    Step("fori_loop", "lax.fori_loop", "this project",
         "The ELBO goes into a preallocated buffer updated in place: the same while loop underneath, so it "
         "times like scan."),
    Step("scan_analytic", "Hand-derived gradients", "this project",
         "Gradients written out, one triangular solve for Omega and packed parameters: less work per "
         "iteration for the same trajectory."),
]


def story_problem(problem: FitSpec) -> FitSpec:
    """The problem as the story runs it: one algorithm for every step, run for the same
    number of iterations (tol 0), so that the bars compare strategies alone. A profiled
    optimizer (the sidebar's default converges with one) becomes the tutorial's own, seed
    from the seed start: jit_per_function and scan_analytic take a gradient step apart."""
    if problem.optimizer.name in GRADIENT_OPTIMIZERS:
        return dataclasses.replace(problem, tol=0.0)
    return dataclasses.replace(problem, optimizer=OptimizerSpec("seed"), init="seed", tol=0.0)


def specs(problem: FitSpec, steps: Sequence[Step] = STEPS) -> list[FitSpec]:
    """Every step's spec for the problem (`story_problem`)."""
    base = story_problem(problem)
    return [step.spec(base) for step in steps]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """Where the story stands after a step.

    Attributes:
        since_start: the step's steady-state speed-up over the first step, with its range.
        over_previous: its speed-up over the step before (None for the first step or when
            that step has no run).
    """

    since_start: spread.Ratio | None
    over_previous: spread.Ratio | None


def outcomes(runs: Sequence[RunResult | None]) -> list[Outcome]:
    """Speed-ups step by step, from each step's run (None where a step has not run).

    A diverged run stops early, so its timing is no speed-up: it counts as not run.
    """
    usable = [run if run is not None and run.status == "ok" else None for run in runs]
    spreads = [spread.Spread.of_run(run) if run is not None else None for run in usable]
    first = spreads[0] if spreads else None
    found = []
    for index, mine in enumerate(spreads):
        previous = spreads[index - 1] if index > 0 else None
        found.append(Outcome(
            since_start=spread.speedup(first, mine) if first is not None and mine is not None else None,
            over_previous=spread.speedup(previous, mine) if previous is not None and mine is not None else None))
    return found


def step_label(index: int, step: Step) -> str:
    """The chart's label for a step: "3 · The whole loop in lax.scan"."""
    return f"{index + 1} · {step.title}"


def chart_rows(runs: Sequence[RunResult | None], shown: int, steps: Sequence[Step] = STEPS) -> list[dict[str, Any]]:
    """One row per step up to `shown` (inclusive) that has a finished run, for `core.charts.bars.story_bars`."""
    rows = []
    for index, (step, run, outcome) in enumerate(zip(steps, runs, outcomes(runs))):
        if index > shown or run is None or run.status != "ok":
            continue
        rows.append({"step": step_label(index, step), "strategy": step.strategy, "run_s": run.run_s,
                     "run_s_min": run.run_s_min, "run_s_max": run.run_s_max, "repeats": run.repeats,
                     "id": run.id,
                     "speedup": "start" if index == 0 else outcome.since_start.brief if outcome.since_start else ""})
    return rows
