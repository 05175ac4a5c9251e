"""Which run is the fastest to its solution, and which others it cannot be told from.

A "fastest" that is not significantly faster than another run (`core.results.significance`),
or that ran the same compiled program on the same problem, is noise, not a winner: a room
would read the name as the answer, and it would change from one click to the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from core.results import significance, spread
from core.results.ordering import listed

if TYPE_CHECKING:
    import pandas


SAME_PROGRAM = "same program"


class Tie(NamedTuple):
    """A run the fastest cannot be told from: its strategy, why ("same program", or the
    test's verdict with its p-value), and whether only its repeats' ranges judged it (too few
    repeats for a test)."""

    strategy: str
    why: str
    by_ranges: bool = False


class Fastest(NamedTuple):
    """The fastest run (a row of a runs frame) and the runs tied with it."""

    run: "pandas.Series"
    ties: list[Tie]

    @property
    def same_program(self) -> list[str]:
        """The tied strategies that ran the fastest's very program."""
        return [tie.strategy for tie in self.ties if tie.why == SAME_PROGRAM]

    @property
    def not_told_apart(self) -> list[str]:
        """The tied strategies that ran another program, no significant difference apart."""
        return [tie.strategy for tie in self.ties if tie.why != SAME_PROGRAM]

    @property
    def untested(self) -> list[str]:
        """Of `not_told_apart`, those judged by their ranges alone, which no test found alike."""
        return [tie.strategy for tie in self.ties if tie.by_ranges]

    def brief(self) -> str:
        """Under the headline number, a few words (a narrow column at 1024 px): who, or the tie."""
        if not self.ties:
            return f"{self.run['strategy']} · converged in {int(self.run['iterations_run']):,} it"
        others = len(self.ties)
        if not self.not_told_apart:
            return f"same program as {others} other{'s' * (others > 1)}"
        return f"tied with {others} other{'s' * (others > 1)}"

    def one_speed(self) -> str:
        """Beside the fastest's time per iteration, the strategies that ran its very program
        ("" for none): their figure is the same speed, whichever name the headline shows."""
        if not self.same_program:
            return ""
        return f"; {listed(sorted(self.same_program))} ran the same compiled program: one speed"

    def sentence(self) -> str:
        """The tie in a sentence across the page ("" without one): which strategies are one
        program with the fastest (one speed), which another program it cannot be told from."""
        if not self.ties:
            return ""
        # A time to solution is only ever of a fit that converged (certified): say so in words.
        iterations = f"converged in {int(self.run['iterations_run']):,} iterations"
        if not self.not_told_apart:  # one program, however many strategies asked for it: no winner to name
            runners = sorted([self.run["strategy"], *self.same_program])
            return f"Fastest to solution: {listed(runners)}, one compiled program: one speed, {iterations}."
        said = [f"Fastest to solution: **{self.run['strategy']}**, {iterations}"]
        if self.same_program:
            said.append(f"the same compiled program as {', '.join(self.same_program)}: one speed")
        untested = self.untested
        tested = [name for name in self.not_told_apart if name not in untested]
        if tested:
            said.append(f"tied with {', '.join(tested)}: no significant difference, so the order among them is noise")
        if untested:
            # Said as what it is: overlapping ranges of a few repeats are no finding that the two are alike.
            said.append(f"{spread.NOT_TOLD_APART} from {', '.join(untested)}: {spread.TOO_FEW_REPEATS} (more "
                        "Repeats in the sidebar can tell them apart)")
        return "; ".join(said) + "."


def fastest(runs: "pandas.DataFrame", metric: str = "time_to_solution_s") -> Fastest | None:
    """The run of `runs` (a runs frame's finished rows) with the least `metric`, and the others
    whose difference from it is not significant; None when no run has a value of `metric`."""
    timed = runs[runs[metric].notna()]
    if timed.empty:
        return None
    best = timed.loc[timed[metric].idxmin()]
    ties = []
    for _, row in timed.iterrows():
        if row["id"] == best["id"]:
            continue
        ratio = spread.speedup(spread.Spread.of_run(row, metric), spread.Spread.of_run(best, metric))
        if ratio.significant is False:
            ties.append(Tie(str(row["strategy"]), SAME_PROGRAM if ratio.same_program else ratio.why,
                            by_ranges=ratio.untested))
    return Fastest(best, ties)


class OneProgram(NamedTuple):
    """Strategies whose runs executed one compiled program on one problem and host."""

    program: str  # the fingerprint (`RunResult.program`)
    strategies: list[str]


def one_program_groups(runs: "pandas.DataFrame") -> list[OneProgram]:
    """The groups of two or more strategies in `runs` (a runs frame with `program` and `host`)
    that ran one program (`significance.program_identity`), in the frame's order."""
    groups: dict[str, list[str]] = {}
    fingerprints: dict[str, str] = {}
    for _, row in runs.iterrows():
        identity = significance.program_identity(row)
        if identity and row["strategy"] not in groups.setdefault(identity, []):
            groups[identity].append(str(row["strategy"]))
            fingerprints[identity] = str(row["program"])
    return [OneProgram(fingerprints[key], names) for key, names in groups.items() if len(names) > 1]


def one_program_at_every_size(runs: "pandas.DataFrame") -> list[list[str]]:
    """Groups of strategies in `runs` (a runs frame over several sizes) that ran one program
    (`one_program_groups`) at every size where two or more of them ran: on a chart of timings
    against n their lines lie on one another, the one drawn last hiding the others."""
    names = set(runs["strategy"].astype(str))
    together = {name: set(names) for name in names}
    for _, at_size in runs.groupby("n", sort=False):
        absent = names - set(at_size["strategy"].astype(str))
        grouped = {name: set(group.strategies) for group in one_program_groups(at_size) for name in group.strategies}
        for name in names - absent:
            together[name] &= grouped.get(name, {name}) | absent
    groups = {tuple(sorted(alike)) for alike in together.values()
              if len(alike) > 1 and all(together[other] == alike for other in alike)}
    return [list(group) for group in sorted(groups)]
