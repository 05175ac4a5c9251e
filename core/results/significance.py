"""Whether two timings differ: a significance test on their repeats, not a glance at ranges.

Each run keeps the seconds of every timed call (`RunResult.repeat_times`). Two runs are
compared as `asv compare` does: the two-sided Mann–Whitney U test (scipy's, exact for the
small samples a run takes) on those seconds, and a difference counts only where it is both
unlikely under "no difference" (p < `ALPHA`) and large enough to matter (the ratio of the
medians beyond `CLEAR_OF_ONE` of x1); the ratio's interval is a bootstrap of the medians'
ratio (`ratio_interval`). Two runs of one compiled program on one problem and
one host (`program_identity`) are one speed whatever their repeats say.

With few repeats the test cannot reach `ALPHA` at all (3 against 3: p is at least 0.1);
then, and for runs stored before their repeats were kept, the rule falls back to the
repeats' ranges: apart means different. The verdict names which rule decided.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from typing import Any, Sequence

ALPHA = 0.05
# A ratio of medians within this of x1 is no difference worth a chart's bar: ranges that only
# just miss each other (x0.34 to x0.999) print as reaching "x1".
CLEAR_OF_ONE = 0.01
MANN_WHITNEY = "Mann–Whitney U, two-sided"
RANGES = "the repeats' ranges"
SAME_PROGRAM = "same program"
# What a run computed besides its program: one program fed other data, another start or
# another count of iterations does other work, and its time is another time.
_WORK = ("dataset", "n", "p", "d", "optimizer", "lr", "init", "tol", "iterations", "iterations_run")


@dataclasses.dataclass(frozen=True)
class Test:
    """What decided whether two timings differ.

    Attributes:
        differs: True (different), False (no significant difference, or one program), None
            (unknown: a timing of one repeat and no program to go by).
        p_value: the Mann–Whitney U test's, where it decided; else None.
        method: `MANN_WHITNEY`, `RANGES` or `SAME_PROGRAM`; "" when unknown.
        sizes: the repeats on each side.
        near: for `RANGES` with no difference, the ranges do not meet but their ratio is within
            `CLEAR_OF_ONE` of x1 (set by `core.results.spread`, which knows the ratio): said so,
            as "overlapping" beside a table whose ranges are apart read as a mistake.
    """

    differs: bool | None
    p_value: float | None
    method: str
    sizes: tuple[int, int]
    near: bool = False

    @property
    def same_program(self) -> bool:
        return self.method == SAME_PROGRAM

    def describe(self) -> str:
        """For a help text: "Mann–Whitney U, two-sided, 12 and 12 repeats: p = 0.0003"."""
        if self.method == SAME_PROGRAM:
            return "one compiled program (same fingerprint) on one problem: its timings differ only by noise"
        if self.method == MANN_WHITNEY:
            return f"{MANN_WHITNEY}, {self.sizes[0]} and {self.sizes[1]} repeats: p = {p_text(self.p_value)}"
        if self.method == RANGES:
            return (f"the ranges of {self.sizes[0]} and {self.sizes[1]} repeats, "
                    + ("apart" if self.differs else
                       f"apart by under {CLEAR_OF_ONE:.0%}, too little to count" if self.near else "overlapping")
                    + f" (too few repeats kept for a test at p < {ALPHA:g})")
        return "a single repeat: no range to judge by"


def p_text(p_value: float | None) -> str:
    """"0.032", "0.0003", "< 1e-6"."""
    if p_value is None or not math.isfinite(p_value):
        return "n/a"
    if p_value < 1e-6:
        return "< 1e-6"
    return f"{p_value:.2g}" if p_value < 0.01 else f"{p_value:.3f}".rstrip("0").rstrip(".")


def _field(run: Any, name: str) -> Any:
    return run.get(name) if hasattr(run, "get") else getattr(run, name, None)


def samples(run: Any) -> tuple[float, ...]:
    """The seconds of a run's timed calls (a `RunResult`, a dict or a store frame's row, whose
    `repeat_times_json` holds them as JSON text); () where they were not kept."""
    value = _field(run, "repeat_times")
    if value is None and hasattr(run, "get"):
        value = run.get("repeat_times_json")
    if isinstance(value, str):
        value = json.loads(value) if value else []
    if value is None or (isinstance(value, float) and math.isnan(value)):  # a frame's missing cell
        return ()
    return tuple(float(seconds) for seconds in value)


def program_identity(run: Any) -> str:
    """Which compiled program a run executed, on what and where: its fingerprint
    (`RunResult.program`), the problem and the iterations it ran, and its host (one program on
    two machines is two speeds); "" when the run has no fingerprint. `run` is a `RunResult`, a
    dict or a frame row (with a `host` column where it has no `versions`)."""
    program = _field(run, "program")
    if not isinstance(program, str) or not program:
        return ""
    versions = _field(run, "versions")
    host = versions.get("host") if isinstance(versions, dict) else _field(run, "host")
    work = "|".join(str(_field(run, name)) for name in _WORK)
    return f"{program}@{host if isinstance(host, str) else ''}|{work}"


def same_program(first: str, second: str) -> bool:
    """Whether two program identities (`program_identity`) say one compiled program ran on one
    problem and one host: both known and equal."""
    return bool(first) and first == second


def ratio_interval(first: Sequence[float], second: Sequence[float], level: float = 0.95,
                   resamples: int = 2_000) -> tuple[float, float]:
    """A bootstrap interval (percentile, `level`) of median(first) / median(second): each
    sample resampled with replacement, the same draws every time (seeded), so that a page
    shows one interval for one pair of runs."""
    # Deferred, with the test's scipy: most pages compare nothing.
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = np.asarray(first, float), np.asarray(second, float)
    ratios = (np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
              / np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1))
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def least_p(first: int, second: int) -> float:
    """The smallest two-sided p the exact Mann–Whitney U test gives for these sample sizes
    (every value of one sample below every value of the other): 2 / C(first + second, first)."""
    return min(1.0, 2.0 / math.comb(first + second, first))


def compare(first: Sequence[float], second: Sequence[float], ranges_apart: bool | None = None,
            one_program: bool = False) -> Test:
    """Whether timings `first` and `second` (seconds of each repeat) differ.

    Args:
        first, second: each repeat's seconds; may be empty (runs stored before they were kept).
        ranges_apart: for the fallback, whether the two runs' [min, max] ranges are apart,
            where they are known without the samples; None when either is unknown.
        one_program: the two runs executed one compiled program on one problem and host.
    """
    first, second = [float(seconds) for seconds in first], [float(seconds) for seconds in second]
    sizes = (len(first), len(second))
    if one_program:
        return Test(False, None, SAME_PROGRAM, sizes)
    if min(sizes) >= 2 and least_p(*sizes) < ALPHA:
        # Deferred: a page that compares nothing never loads scipy.stats.
        from scipy import stats

        p_value = float(stats.mannwhitneyu(first, second, alternative="two-sided").pvalue)
        ratio = statistics.median(first) / statistics.median(second)
        return Test(bool(p_value < ALPHA and abs(ratio - 1) > CLEAR_OF_ONE), p_value, MANN_WHITNEY, sizes)
    if ranges_apart is None and min(sizes) >= 2:
        ranges_apart = max(first) < min(second) or max(second) < min(first)
    if ranges_apart is None:
        return Test(None, None, "", sizes)
    return Test(ranges_apart, None, RANGES, sizes)
