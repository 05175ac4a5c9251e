"""Altair chart builders: a DataFrame of runs in, a Vega-Lite chart out.

Column names are `RunResult` field names (`core.results.result`); `runs` has one row per run and
a missing `status` column reads as "ok". Input a page can reasonably produce (no runs
yet, baseline not run) gives a chart holding a short note, never a traceback on a projector.

Diverged runs stop early, so their timings and ELBOs are not comparable: they never enter
a median, and the line charts show them apart (crosses) or cut their non-finite tails.

Here: the strategy palette and the helpers every chart shares. The line charts (ELBO
curves, scaling with n and with the device count) are in `core.charts.lines`, the bar
charts in `core.charts.bars`, the roofline in `core.charts.roofline`.
"""

from __future__ import annotations

import dataclasses

import altair as alt
import numpy as np
import pandas as pd

from core import catalog
from core.results import significance, spread

# Every runnable in teaching order, and its colour: the catalog's (`core.catalog`, where
# the palette's rules are written), checked by tests/charts/test_palette.py.
STRATEGY_ORDER = tuple(catalog.RUNNABLES)
STRATEGY_COLORS = {name: runnable.colour for name, runnable in catalog.RUNNABLES.items()}
# Strategies this program no longer knows (imported runs): one more hue, used by none above.
UNKNOWN_COLOR = catalog.UNKNOWN_COLOUR
# The phases of a run are greys, light to dark in time order: no strategy is grey (chroma
# under 15, where every strategy has 25 or more), so a phase chart beside a strategy chart
# can never be read as naming strategies. Each is 3:1 on both themes' backgrounds, which
# leaves greys only the L* band 41 to 62: a faint tint each (sage, khaki, slate, warm grey),
# found by search with their lightness spread evenly over that band (61, 53, 47, 43), keeps
# any two phases apart by delta E >= 15 with colour-blind vision too (the set before, 12, two
# of them at L* 42 and 43, read as one grey in the legend), and the bars outline each segment.
PHASE_COLORS = ("#7B9A91", "#857D64", "#626F86", "#666564")
# Lines that are neither a strategy nor a phase (an ideal): a neutral grey, 4:1 on both themes,
# in no strategy's hue family (a slate was jit_step's violet, darker).
REFERENCE_COLOR = "#7F7F7F"
# Axis titles and chart titles for timing columns, in words.
LABELS = {
    "time_to_solution_s": "time to solution (s)", "per_iter_ms": "time per iteration (ms)", "run_s": "steady-state run (s)",
    "compile_s": "XLA compile (s)", "first_call_s": "first call (s)", "trace_lower_s": "trace+lower (s)",
    "transfer_s": "data transfer (s)",
}
UNITS = {name: LABELS[name] for name in ("per_iter_ms", "run_s", "compile_s")}


def strategy_color_scale(present: list[str]) -> alt.Scale:
    """A colour scale giving each strategy the same colour in every chart.

    Args:
        present: strategy names in the chart, any order, duplicates allowed.

    Returns:
        Ordinal scale: domain = known names in `STRATEGY_ORDER` order, then unknown names
        (sorted, grey); range = their colours.
    """
    names = set(present)
    domain = [s for s in STRATEGY_ORDER if s in names] + sorted(names - set(STRATEGY_ORDER))
    return alt.Scale(domain=domain, range=[STRATEGY_COLORS.get(s, UNKNOWN_COLOR) for s in domain])


def color_by_strategy(df: pd.DataFrame, legend: bool | alt.Legend = True) -> alt.Color:
    """The colour channel for `df`'s `strategy` column, on `strategy_color_scale`; `legend`
    True for the page's default legend, False for none, or a legend of its own."""
    if legend is True:
        legend = alt.Legend()
    return alt.Color("strategy:N", title="strategy", sort=None, legend=legend or None,
                     scale=strategy_color_scale(list(df["strategy"].astype(str))))


# Text geometry at the theme's 16 px labels (`core.charts.theme`), for laying out legends
# and labels: a character's width (Source Sans averages about 0.5 em), and the width a
# chart has on a 1024 px projector with the sidebar open (about 640 px of column).
CHART_CHAR_PX, PROJECTOR_CHART_PX = 9, 600
# A legend's entry height, the symbol and gaps beside each label, and its title's height.
LEGEND_ROW_PX, LEGEND_SYMBOL_PX, LEGEND_TITLE_PX = 21, 44, 28


def legend_for(labels: list[str], title: str | None, height: int) -> alt.Legend:
    """A legend that shows every entry of `labels`, none cut or dropped.

    Where the page puts it (`pages/ui/display.chart`) while its entries fit beside a
    chart of `height` px; below it otherwise, in as many columns as fit `PROJECTOR_CHART_PX`,
    so that it grows downwards instead of running past the chart's bottom edge (Vega cuts
    what a right legend's height leaves out). `symbolLimit` 0: Vega's default (30) drops
    further entries with only a console warning.
    """
    names = [str(label) for label in dict.fromkeys(labels)]
    fits_beside = LEGEND_TITLE_PX * bool(title) + LEGEND_ROW_PX * len(names) <= height
    common = dict(title=title, labelLimit=0, titleLimit=0, symbolLimit=0)
    if fits_beside:
        return alt.Legend(**common)
    column_px = LEGEND_SYMBOL_PX + CHART_CHAR_PX * max((len(n) for n in names), default=1)
    columns = max(1, min(len(names), PROJECTOR_CHART_PX // column_px))
    return alt.Legend(orient="bottom", direction="vertical", columns=columns, **common)


def not_diverged(df: pd.DataFrame) -> pd.Series:
    """True per row of `df` whose status is not "diverged" (no status column: all True)."""
    if "status" not in df:
        return pd.Series(True, index=df.index)
    return df["status"].fillna("ok") != "diverged"


def strategy_rank(strategy: pd.Series) -> pd.Series:
    """Each strategy's position in `STRATEGY_ORDER`, unknown ones last: a sort key."""
    order = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    return strategy.map(lambda s: order.get(s, len(order)))


def note_chart(text: str, title: str) -> alt.Chart:
    """A chart holding only a message, for input that cannot be plotted (`is_note`)."""
    return alt.Chart(pd.DataFrame({"note": [text]}), title=title).mark_text(size=16).encode(
        text="note:N").properties(height=60, usermeta={"note": True})


def is_note(chart: alt.TopLevelMixin) -> bool:
    """Whether `chart` is a `note_chart`: a page that sets its charts' height leaves a note's
    alone (the default Run's one program drew "×1" in the middle of 200 empty pixels)."""
    usermeta = getattr(chart, "usermeta", alt.Undefined)
    return usermeta is not alt.Undefined and bool(usermeta.get("note"))


_GRID_STEPS = (1.0, 2.0, 5.0)
# The most labelled ticks a log axis takes of 1, 2 and 5 times the powers of ten: labels of
# up to five characters fit a 640 px plot eight times over.
MAX_LOG_TICKS = 8


def log_grid_below(value: float) -> float:
    """The largest 1, 2 or 5 times a power of ten at most `value` (> 0): a log axis's start
    that carries a labelled tick (`log_axis`)."""
    power = 10.0 ** np.floor(np.log10(value))
    return float(max(step * power for step in _GRID_STEPS if step * power <= value * (1 + 1e-9)))


def log_grid_above(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at least `value` (> 0): a log axis's end."""
    power = 10.0 ** np.floor(np.log10(value))
    return float(min(step * power for step in (*_GRID_STEPS, 10.0) if step * power >= value * (1 - 1e-9)))


def log_axis(low: float, high: float, title: str) -> alt.Axis:
    """An axis for a log scale over [low, high] whose ticks are 1, 2 and 5 times the powers
    of ten inside it (the powers alone where those would be more than `MAX_LOG_TICKS`, every
    whole multiple where they would be fewer than 3), labelled as plain numbers. (Powers
    alone past two decades left 0.016 to 4.2 s with the ticks 0.1 and 1: nothing past a bar
    ending at 3.5 s.)

    Vega's own log ticks on a domain that does not start at a power of ten label whichever
    multiples fit, so that 1 (no speed-up) can go unlabelled and the labels' spacing jumps.
    """
    low, high = float(low), float(high)
    if not (0 < low < high and np.isfinite(high)):
        return alt.Axis(title=title, format="~g")
    powers = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)

    def ticks(steps) -> list[float]:
        return [float(step * 10.0 ** power) for power in powers for step in steps
                if low * (1 - 1e-9) <= step * 10.0 ** power <= high * (1 + 1e-9)]

    values = ticks(_GRID_STEPS)
    if len(values) > MAX_LOG_TICKS:
        values = ticks((1.0,))
    elif len(values) < 3:
        # Under a decade wide, evenly spaced ticks, or the axis had its ends labelled and
        # nothing between (compile times of 2 to 5 s), or one size's n at 116 between the
        # labels 90 and 100 and the axis's end.
        values = _even_ticks(low, high)
    return alt.Axis(title=title, values=values, format="~g")


def _even_ticks(low: float, high: float) -> list[float]:
    """At least three ticks inside [low, high], multiples of the widest step of 1, 2 or 5
    times a power of ten that gives three: 2, 3, 4, 5 for 2 to 5 s; 100, 120, 140 for 89 to
    151 rows."""
    top = int(np.floor(np.log10(high - low)))
    for power in range(top, top - 4, -1):
        for step in (5.0, 2.0, 1.0):
            size = step * 10.0 ** power
            ticks = np.arange(np.ceil(low / size * (1 - 1e-9)) * size, high * (1 + 1e-9), size)
            if ticks.size >= 3:
                return [round(float(tick), max(0, -power)) for tick in ticks]
    return [low, high]


def log_axis_reaching(low: float, high: float, values, title: str) -> tuple[alt.Axis, float]:
    """(`log_axis` from `low`, the scale's end): ticked up to the first tick at or past the
    largest positive of `values` (1, 2 or 5 times a power of ten, or the next power where the
    axis ticks the powers alone), so that a labelled tick stands past the data and none runs
    on across room kept for labels; the end is `high` or that tick, the larger. Without a
    positive value, ticked to `high`."""
    shown = pd.Series(values, dtype=float)
    shown = shown[np.isfinite(shown) & (shown > 0)]
    if shown.empty:
        return log_axis(low, high, title), high
    reach = float(shown.max())
    top = log_grid_above(reach)
    axis = log_axis(low, top, title)
    if max(axis.values, default=0) < top:
        top = float(10.0 ** np.ceil(np.log10(reach)))
        axis = log_axis(low, top, title)
    return axis, max(high, top)


def median_by(runs: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """Median of `cols` over non-diverged runs per `keys`, with a `runs` count."""
    grouped = runs[not_diverged(runs)].groupby(keys)
    return grouped[cols].median().join(grouped.size().rename("runs")).reset_index()


def with_spread(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`runs` with `low` and `high`: the fastest and slowest repeat of `metric`.

    run_s (and time_to_solution_s, which is run_s where set) has its repeats' range
    (run_s_min, run_s_max), per_iter_ms the same range per iteration; the other timings are measured once, so their range is the value itself
    and `spread_known` is False.
    """
    df = runs.copy()
    # time_to_solution_s is run_s for a run that stopped at its tolerance: the same repeats.
    if metric in ("run_s", "per_iter_ms", "time_to_solution_s") and {"run_s_min", "run_s_max"} <= set(df):
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = df[metric] / df["run_s"] if metric != "run_s" else 1.0
        df["low"], df["high"] = df["run_s_min"] * scale, df["run_s_max"] * scale
        repeats = df["repeats"] if "repeats" in df else pd.Series(2, index=df.index)
        df["spread_known"] = (repeats.fillna(2) >= 2) & np.isfinite(df["low"]) & np.isfinite(df["high"])
    else:
        df["low"] = df["high"] = df[metric]
        df["spread_known"] = False
    return df


def row_spread(row: pd.Series, metric: str) -> spread.Spread:
    """A `with_spread` row's spread of `metric`, with its repeats' seconds (scaled as the metric
    is) and its program, for the significance test (`core.results.significance`)."""
    known = bool(row["spread_known"])
    found = spread.Spread(row[metric], row["low"], row["high"], 2 if known else 1)
    if not known:
        return found
    samples = significance.samples(row)
    scale = float(row[metric]) / float(row["run_s"]) if metric != "run_s" and float(row["run_s"]) > 0 else 1.0
    return dataclasses.replace(found, repeats=len(samples) or found.repeats,
                               samples=tuple(seconds * scale for seconds in samples),
                               program=significance.program_identity(row))


