"""A timing's spread over its repeats, speed-ups with their range, and when a difference is noise.

A run's steady state is timed over several repeats (`RunResult.run_s`, `run_s_min`,
`run_s_max`: median, min, max; `repeat_times`: each one). The same settings run again give
another median, so a ratio of two medians means little without the repeats behind it: the
speed-up of A over B is shown with a 95% bootstrap interval of the ratio of the medians
(without each repeat's time, the range it can take between the repeats' extremes: B's fastest
over A's slowest, to B's slowest over A's fastest), and whether it is a difference
at all is decided by a significance test on the repeats (`core.results.significance`), as
`asv compare` does; two runs of one compiled program are one speed.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Iterable

from core.results import significance
from core.results.significance import CLEAR_OF_ONE

NOT_SIGNIFICANT = "no significant difference"
WITHIN_NOISE = "within noise"  # the same verdict, where a chart has little room
# Overlapping ranges of a few repeats, no test run: no finding that the two are alike either.
NOT_TOLD_APART = "not told apart"
TOO_FEW_REPEATS = "too few repeats for a test, and their ranges overlap"
SAME_PROGRAM = "same program"


@dataclasses.dataclass(frozen=True)
class Spread:
    """A median and the range it came from.

    Attributes:
        median: the reported value (the median of the repeats).
        low, high: the fastest and slowest repeat.
        repeats: how many timings the range spans; with fewer than 2 the spread is unknown.
        samples: each timing, where kept (runs stored before they were have none).
        program: which compiled program on which host was timed
            (`significance.program_identity`); "" when unknown or several.
    """

    median: float
    low: float
    high: float
    repeats: int = 2
    samples: tuple[float, ...] = ()
    program: str = ""

    @classmethod
    def of_run(cls, run: Any, metric: str = "run_s") -> Spread:
        """The spread of a run (a `RunResult`, a dict or a DataFrame row) for `metric`.

        Args:
            run: has run_s, run_s_min, run_s_max and, optionally, repeats.
            metric: "run_s" or "time_to_solution_s", or "per_iter_ms" (the same range
                scaled to one iteration).
        """
        median, low, high = (float(_field(run, name)) for name in ("run_s", "run_s_min", "run_s_max"))
        samples = significance.samples(run)
        repeats = len(samples) or _field(run, "repeats")
        # Rows without a repeat count (e.g. hand-made frames): a range that spans something is one.
        repeats = int(repeats) if repeats is not None and repeats == repeats else 2 if high > low else 1
        program = significance.program_identity(run)
        if metric in ("run_s", "time_to_solution_s"):  # the latter is run_s, for a run that stopped at tol
            return cls(median, low, high, repeats, samples, program)
        if metric != "per_iter_ms":
            raise ValueError(f"only run_s, time_to_solution_s and per_iter_ms have a spread; got {metric!r}")
        scale = float(_field(run, "per_iter_ms")) / median if median > 0 else math.nan
        return cls(median * scale, low * scale, high * scale, repeats, tuple(t * scale for t in samples), program)

    @classmethod
    def pooled(cls, spreads: Iterable[Spread]) -> Spread:
        """Several runs of one thing as one spread: the median of their medians, the widest range,
        every sample (where each run kept its own), one program where all ran the same."""
        spreads = list(spreads)
        if not spreads:
            raise ValueError("no spreads to pool")
        samples = () if any(not s.samples for s in spreads) else tuple(t for s in spreads for t in s.samples)
        programs = {s.program for s in spreads}
        return cls(statistics.median(s.median for s in spreads), min(s.low for s in spreads),
                   max(s.high for s in spreads), sum(s.repeats for s in spreads), samples,
                   programs.pop() if len(programs) == 1 else "")

    @property
    def known(self) -> bool:
        """Whether there is a range to judge noise by (at least two timings)."""
        return self.repeats >= 2 and all(math.isfinite(v) for v in (self.low, self.high))

    def range_label(self, unit: str) -> str:
        """The fastest to the slowest repeat, "0.21–0.24 ms", or "1 repeat" without a range."""
        return f"{self.low:.3g}–{self.high:.3g} {unit}" if self.known else "1 repeat"

    def overlaps(self, other: Spread) -> bool:
        """Whether the two ranges share a value: a difference between them is within noise."""
        return self.low <= other.high and other.low <= self.high


@dataclasses.dataclass(frozen=True)
class Ratio:
    """How many times faster one timing is than a baseline, with its range.

    Attributes:
        value: baseline median / median.
        low, high: the ratio's range: a 95% bootstrap interval of the ratio of the medians
            where both runs kept their repeats and the test decided, else the repeats' extremes.
        significant: whether the difference is real (`core.results.significance`): False
            within noise or for one program, None when either spread is unknown (a single repeat).
        test: what decided it (None for a ratio that could not be formed).
    """

    value: float
    low: float
    high: float
    significant: bool | None
    test: significance.Test | None = None

    @property
    def same_program(self) -> bool:
        """Both timings are of one compiled program: one speed, whatever the repeats say."""
        return self.test is not None and self.test.same_program

    @property
    def untested(self) -> bool:
        """Not significant because the repeats' ranges overlap, with too few repeats for a
        test: said "not told apart", not "no significant difference", which no test found."""
        return (self.significant is False and self.test is not None and self.test.method == significance.RANGES
                and not self.test.near)

    @property
    def why(self) -> str:
        """How the verdict was reached, for a help text or a tooltip."""
        return self.test.describe() if self.test is not None else ""

    @property
    def span(self) -> str:
        """The range alone: "×21–×26"; "×1.16–×1.21" where two digits would read "×1.2–×1.2",
        or put the value outside its own range ("×1.69 (×1.7–×2.1)" for a range from 1.69)."""
        low, high = times(self.low, short=True), times(self.high, short=True)
        shown = _shown(times(self.value)) if math.isfinite(self.value) else None
        outside = shown is not None and not (_shown(low) <= shown <= _shown(high))
        if self.high < 10 and self.low != self.high and (low == high or outside):
            low, high = f"×{self.low:.3g}", f"×{self.high:.3g}"
        return f"{low}–{high}"

    @property
    def label(self) -> str:
        """"×23.5 (×21–×26)", "no significant difference (×0.97–×1.1)", "not told apart: too few
        repeats for a test, and their ranges overlap (×0.9–×1.2)", "same program: differences
        are noise" or "×23.5 (1 repeat: no range)"."""
        if not math.isfinite(self.value):
            return "n/a"
        if self.same_program:
            return f"{SAME_PROGRAM}: differences are noise"
        if self.significant is None:
            return f"{times(self.value)} (1 repeat: no range)"
        if self.untested:
            return f"{NOT_TOLD_APART}: {TOO_FEW_REPEATS} ({self.span})"
        if not self.significant:
            return f"{NOT_SIGNIFICANT} ({self.span})"
        return f"{times(self.value)} ({self.span})"

    @property
    def brief(self) -> str:
        """For a chart's narrow margin: "×23.5 (×21–×26)", "within noise", "not told apart",
        "same program" or "×23.5 (1 repeat)"."""
        if not math.isfinite(self.value):
            return ""
        if self.same_program:
            return SAME_PROGRAM
        if self.significant is None:
            return f"{times(self.value)} (1 repeat)"
        if self.untested:
            return NOT_TOLD_APART
        if not self.significant:
            return WITHIN_NOISE
        return f"{times(self.value)} ({self.span})"


def _shown(text: str) -> float:
    """The number a ratio's text ("×1.7", "×1,200") shows."""
    return float(text.lstrip("×").replace(",", ""))


def _field(run: Any, name: str, default: Any = None) -> Any:
    if hasattr(run, "get"):  # a dict or a pandas row
        return run.get(name, default)
    return getattr(run, name, default)


def speedup(baseline: Spread, other: Spread) -> Ratio:
    """How many times faster `other` runs than `baseline` (above 1: faster)."""
    if not (other.median > 0 and other.low > 0):
        return Ratio(math.nan, math.nan, math.nan, None)
    low, high = baseline.low / other.high, baseline.high / other.low
    test = _test(baseline, other, low, high)
    if test.method == significance.MANN_WHITNEY:
        low, high = significance.ratio_interval(baseline.samples, other.samples)
    return Ratio(value=baseline.median / other.median, low=low, high=high, significant=test.differs, test=test)


def ratio(value: Spread, baseline: Spread) -> Ratio:
    """`value` / `baseline` (below 1: faster than the baseline), with its range."""
    if not (baseline.median > 0 and baseline.low > 0):
        return Ratio(math.nan, math.nan, math.nan, None)
    low, high = value.low / baseline.high, value.high / baseline.low
    test = _test(baseline, value, low, high)
    if test.method == significance.MANN_WHITNEY:
        low, high = significance.ratio_interval(value.samples, baseline.samples)
    return Ratio(value=value.median / baseline.median, low=low, high=high, significant=test.differs, test=test)


def _test(baseline: Spread, other: Spread, low: float, high: float) -> significance.Test:
    """The significance test of two spreads; without their samples, their ranges apart and the
    ratio's range clear of x1 by `CLEAR_OF_ONE`."""
    apart = near = None
    if baseline.known and other.known:
        clear = low > 1 + CLEAR_OF_ONE or high < 1 - CLEAR_OF_ONE
        apart, near = not baseline.overlaps(other) and clear, not baseline.overlaps(other) and not clear
    test = significance.compare(baseline.samples, other.samples, apart,
                                significance.same_program(baseline.program, other.program))
    if test.method == significance.RANGES:
        if not (baseline.known and other.known):
            return dataclasses.replace(test, differs=None, method="")
        # Ranges of runs stored without each repeat's time span the repeats they counted.
        return dataclasses.replace(test, sizes=(baseline.repeats, other.repeats), near=bool(near))
    return test


def times(value: float, short: bool = False) -> str:
    """A ratio as "×23.5", "×1.04", "×0.25"; `short` keeps two significant digits ("×21"), three
    within 5% of 1 ("×1.02")."""
    if not math.isfinite(value):
        return "n/a"
    if short:
        if value >= 10:
            return f"×{value:,.0f}"
        # Near 1 two digits read "×1", i.e. no gain, for a bound that is 1.02 or 0.97.
        return f"×{value:.3g}" if 0.95 <= value < 1.05 else f"×{value:.2g}"
    if value >= 100:
        return f"×{value:,.0f}"
    return f"×{value:.1f}" if value >= 10 else f"×{value:.3g}"


def value_range(spread: Spread, unit: str, digits: int = 3) -> str:
    """"3.47 ms (3.41–3.60)", or "3.47 ms (1 repeat)" when there is no range."""
    main = f"{spread.median:.{digits}g} {unit}".strip()
    if not spread.known:
        return f"{main} (1 repeat)"
    return f"{main} ({spread.low:.{digits}g}–{spread.high:.{digits}g})"
