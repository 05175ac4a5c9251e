"""What compiling the programs of runs shown together cost, as it was paid.

A run loaded from a cache compiled (almost) nothing: the compile its program cost is that
of the run that made it (`core.store.cold_compiles`). So the figure beside a set of runs is
the longest compile any of them paid, or any run that made one of their programs paid when
it made it; never the "0 µs" of a load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pandas

# Where a run's executable came from when it compiled nothing (`RunResult.cache`).
CACHED = ("memory", "disk")


class CompileCost(NamedTuple):
    """The compile figure for a set of runs.

    Attributes:
        label: "Longest compile" (some run compiled), or "First compile" (every
            compiled run loaded its program: the figure is what making it cost the first
            time; short, as a metric's label at 1024 px holds about 15 characters).
        seconds: trace + lower + XLA compile, the longest; None when no stored run says
            (every program came from a cache made before any stored run compiled it).
        loaded: how many of the runs loaded their program from a cache.
        places: where they loaded it from ("disk", "memory", "disk and memory").
        paid_by: the run that paid the longest, "run #7 (scan)" ("" when none says): it may
            be a run not shown, which made a shown run's program (the figure then read as
            longer than every bar drawn).
    """

    label: str
    seconds: float | None
    loaded: int
    places: str
    paid_by: str = ""


def longest(runs: "pandas.DataFrame", makers: "pandas.DataFrame") -> CompileCost | None:
    """The compile figure for `runs` (a runs frame's finished rows), `makers` the frame of the
    runs that made the cached ones' programs; None when no run compiles anything (eager,
    the peers)."""
    compiled = runs[runs["cache"] != "none"]
    if compiled.empty:
        return None
    loaded = compiled[compiled["cache"].isin(CACHED)]
    own = compiled.loc[~compiled.index.isin(loaded.index)]
    paid = [(float(row["compile_total_s"]), row) for _, row in own.iterrows()]
    made = [(float(row["trace_lower_s"] + row["compile_s"]), row) for _, row in makers.iterrows()]
    places = " and ".join(sorted(set(loaded["cache"])))
    if not paid and not made:
        return CompileCost("Longest compile", None, len(loaded), places)
    seconds, row = max(paid + made, key=lambda pair: pair[0])
    return CompileCost("Longest compile" if paid else "First compile", seconds, len(loaded), places,
                       f"run #{int(row['id'])} ({row['strategy']})")
