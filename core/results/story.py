"""The tutorial as a story: its levels one step at a time, each with what it fixes and
how much faster the fit has become since the first.

`STEPS` is data: a step names a runnable, says what it changes and which of the seed
tutorial's pitfalls (`core.inspect.pitfalls`) it is about, and may set fields of the
problem's spec (a strategy that needs its own optimizer or tolerance). Appending a
step is all it takes to tell more of the story.

The steps compare time per iteration, so a slow step may run fewer iterations than the
others (`Step.max_iterations`), and they are timed together, their repeats in turn
(`core.run.engine.run_together`), so that the machine's load at one moment lands on every
step alike: `stored_choice` prefers the runs of one such group.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from core.results import significance, spread
from core.results.result import RunResult
from core.spec import GRADIENT_OPTIMIZERS, FitSpec, OptimizerSpec


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the story.

    Attributes:
        strategy: the runnable it runs (`core.catalog`).
        title: a few words for the slide, e.g. "jit each function".
        origin: where it comes from: "from the tutorial, level 1" or "added by this lab".
        fixes: what it changes over the step before, in two sentences at most.
        pitfalls: keys of `core.inspect.pitfalls` this step is about.
        changes: FitSpec fields this step sets over the problem's (field, value) pairs.
        max_iterations: at most this many iterations, for a step too slow to run the
            problem's in a talk; the story compares time per iteration, which a Python
            loop's fixed cost per iteration keeps the same at any count.
        traced: its speed-up is about what Python launches each iteration: the step
            points to the traced timeline of one iteration (Under the hood).
    """

    strategy: str
    title: str
    origin: str
    fixes: str
    pitfalls: tuple[str, ...] = ()
    changes: tuple[tuple[str, Any], ...] = ()
    max_iterations: int | None = None
    traced: bool = False

    def spec(self, problem: FitSpec) -> FitSpec:
        """The problem's spec, run this step's way."""
        changes = dict(self.changes)
        if self.max_iterations is not None:
            changes["iterations"] = min(problem.iterations, self.max_iterations)
        return dataclasses.replace(problem, strategy=self.strategy, **changes)


# Eager dispatches hundreds of ops per iteration (about 50 ms each on oaks on a 2-core CPU): at
# the default 500 iterations its four calls took 100 s, most of a warm-up. Forty show its
# cost per iteration as well.
SLOW_STEP_ITERATIONS = 40


STEPS: list[Step] = [
    Step("eager", "No JIT", "from the tutorial, level 0",
         "The starting point: a Python loop dispatches every JAX operation to XLA on its own, hundreds of "
         "tiny calls per iteration, none fused.",
         pitfalls=("trace_precedence", "logdet_overflow"), max_iterations=SLOW_STEP_ITERATIONS),
    Step("jit_per_function", "jit each function", "from the tutorial, level 1",
         "The gradient, the optimizer's update, Sigma and its inverse are each compiled once: five calls per "
         "iteration instead of hundreds, and XLA fuses the work inside each.",
         pitfalls=("fused_reduction",)),
    Step("scan", "The whole loop in lax.scan", "from the tutorial, level 2",
         "The loop itself is compiled: one call runs every iteration on the device, with no return to Python "
         "in between.", traced=True),
    Step("scan_namedtuple", "scan with a NamedTuple state", "from the tutorial, level 3",
         "Named, typed fields instead of dict keys: clearer code, the same compiled program, so the same speed."),
    Step("scan_pytree_class", "scan with a pytree class, done right", "from the tutorial, level 4",
         "A class with methods that return new objects, every array a pytree child. The seed's version "
         "never updated Omega.",
         pitfalls=("pytree_class",)),
    Step("fori_loop", "lax.fori_loop", "added by this lab",
         "The ELBO goes into a preallocated buffer updated in place: the same while loop underneath, so it "
         "times like scan."),
    Step("scan_analytic", "Hand-derived gradients", "added by this lab",
         "Gradients written out, one triangular solve for Omega and packed parameters: less work per "
         "iteration for the same trajectory."),
]


# Repeats at least: a talk's machine is busy, and with 3 the medians of steps that run one
# program (scan and its NamedTuple) still differed by a third on 2 loaded cores.
STORY_REPEATS = 5


def story_problem(problem: FitSpec) -> FitSpec:
    """The problem as the story runs it: one algorithm for every step, run for the same
    number of iterations (tol 0) and at least `STORY_REPEATS` repeats, so that the bars
    compare strategies alone. A profiled optimizer (the sidebar's default converges with
    one) becomes the tutorial's own, seed from the seed start: jit_per_function and
    scan_analytic take a gradient step apart."""
    repeats = max(problem.repeats, STORY_REPEATS)
    if problem.optimizer.name in GRADIENT_OPTIMIZERS:
        return dataclasses.replace(problem, tol=0.0, repeats=repeats)
    return dataclasses.replace(problem, optimizer=OptimizerSpec("seed"), init="seed", tol=0.0, repeats=repeats)


def specs(problem: FitSpec, steps: Sequence[Step] = STEPS) -> list[FitSpec]:
    """Every step's spec for the problem (`story_problem`)."""
    base = story_problem(problem)
    return [step.spec(base) for step in steps]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """Where the story stands after a step.

    Attributes:
        since_start: the step's speed-up per iteration over the first step, with its range.
        over_previous: its speed-up over the step before (None for the first step or when
            that step has no run).
        timed_with_start: whether its run was timed together with the first step's
            (`RunResult.timed_with`): a ratio of runs timed apart carries the load of two moments.
        one_program: the steps (counted from 1) whose repeats its figures pool, itself
            included, when neighbouring steps ran one compiled program; () otherwise.
        per_iteration: the milliseconds per iteration its figures divide (pooled with
            `one_program`'s), or None where the step has no finished run.
    """

    since_start: spread.Ratio | None
    over_previous: spread.Ratio | None
    timed_with_start: bool = False
    one_program: tuple[int, ...] = ()
    per_iteration: spread.Spread | None = None


def stored_choice(candidates: Sequence[Sequence[RunResult]]) -> list[RunResult | None]:
    """Each step's run to show, from its stored runs (newest first): the runs of the group
    timed together (`RunResult.timed_with`) that covers the most steps, the newest such group
    on a tie; a step outside it shows its newest run; None where a step has none."""
    covered: dict[str, set[int]] = {}
    newest: dict[str, float] = {}
    for index, runs in enumerate(candidates):
        for run in runs:
            if run.timed_with:
                covered.setdefault(run.timed_with, set()).add(index)
                newest[run.timed_with] = max(newest.get(run.timed_with, 0.0), run.created_at)
    best = max(covered, key=lambda mark: (len(covered[mark]), newest[mark]), default=None)
    chosen = []
    for runs in candidates:
        together = [run for run in runs if best is not None and run.timed_with == best]
        chosen.append(together[0] if together else runs[0] if runs else None)
    return chosen


def all_timed_together(runs: Sequence[RunResult | None]) -> bool:
    """Whether every step has a run and all of them were timed together (one group)."""
    marks = {run.timed_with if run is not None else "" for run in runs}
    return bool(runs) and len(marks) == 1 and "" not in marks


def outcomes(runs: Sequence[RunResult | None]) -> list[Outcome]:
    """Speed-ups per iteration step by step, from each step's run (None where a step has not run).

    A diverged run stops early, so its timing is no speed-up: it counts as not run.
    """
    usable = [run if run is not None and run.status == "ok" else None for run in runs]
    spreads = [spread.Spread.of_run(run, "per_iter_ms") if run is not None else None for run in usable]
    # Neighbouring steps that ran one compiled program are one speed: each shows the speed-up of
    # the whole chain's pooled repeats, so that "one program" never sits beside two different
    # numbers (pooled pair by pair, the first of three steps kept a figure of its own).
    chains: list[list[int]] = []
    for index, here in enumerate(spreads):
        before = spreads[index - 1] if index > 0 else None
        if here is not None and before is not None and significance.same_program(here.program, before.program):
            chains[-1].append(index)
        else:
            chains.append([index])
    one_program: dict[int, tuple[int, ...]] = {}
    for chain in chains:
        if len(chain) > 1:
            pooled = spread.Spread.pooled([spreads[index] for index in chain])
            for index in chain:
                spreads[index] = pooled
                one_program[index] = tuple(member + 1 for member in chain)
    first = spreads[0] if spreads else None
    start_mark = usable[0].timed_with if usable and usable[0] is not None else ""
    found = []
    for index, (run, mine) in enumerate(zip(usable, spreads)):
        previous = spreads[index - 1] if index > 0 else None
        found.append(Outcome(
            since_start=spread.speedup(first, mine) if first is not None and mine is not None else None,
            over_previous=spread.speedup(previous, mine) if previous is not None and mine is not None else None,
            timed_with_start=bool(start_mark) and run is not None and run.timed_with == start_mark,
            one_program=one_program.get(index, ()), per_iteration=mine))
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
        # The bar and its whisker are the figures its label divides: pooled over one program's
        # steps, whose bars had differed under one label (each its own run's median).
        timed, per_fit = outcome.per_iteration, run.iterations_run / 1e3
        rows.append({"step": step_label(index, step), "strategy": step.strategy, "per_iter_ms": timed.median,
                     "run_s": timed.median * per_fit, "run_s_min": timed.low * per_fit,
                     "run_s_max": timed.high * per_fit, "repeats": timed.repeats,
                     "iterations_run": run.iterations_run, "id": run.id,
                     "speedup": "start" if index == 0 else outcome.since_start.brief if outcome.since_start else ""})
    return rows
