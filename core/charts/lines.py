"""Line charts: log(-ELBO) curves, and time per iteration against n and against the device count.

Conventions are those of `core.charts.style`: one row per run in `runs`, diverged runs
kept apart, a note instead of a chart for input that cannot be plotted.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.charts.style import (
    REFERENCE_COLOR,
    STRATEGY_COLORS,
    UNITS,
    UNKNOWN_COLOR,
    color_by_strategy,
    legend_for,
    log_axis,
    log_axis_reaching,
    log_grid_above,
    log_grid_below,
    median_by,
    not_diverged,
    note_chart,
    with_spread,
)
from core.results.ordering import listed, natural_order

# The time axes of `elbo_curves`, by column: from a cold start (compile included) or into the
# fit alone, where a compile long next to the fit would stand every curve upright.
TIME_AXES = {"wall_s": "wall-clock time from a cold start (s, log scale)",
             "fit_s": "time into the fit, compile left out (s, log scale)"}
# The dashes of the runs of one strategy on an ELBO chart, in turn: solid, then ever shorter.
RUN_DASHES = ([1, 0], [8, 4], [2, 3], [12, 3, 2, 3], [5, 5], [1, 5])
# The factor the scaling charts' log domains extend past their data on each side.
SCALING_PAD = 1.3


def elbo_curves(elbo_long: pd.DataFrame, x: str = "iteration",
                max_points_per_run: int = 2000, height: int = 340, name_runs: bool = False) -> alt.Chart:
    """log(-ELBO) against iteration or wall-clock time, one line per run.

    Args:
        elbo_long: columns run_id, strategy, label (legend text), iteration, elbo (the
            ELBO itself, negative); the column `x` names when it is a time.
        x: "iteration", or a time on a log axis (strategies finish decades apart): "wall_s",
            from a cold start, or "fit_s", into the fit, compile left out (`TIME_AXES`).
        max_points_per_run: longer curves are thinned evenly, last point kept, so that a
            1e6-iteration run does not ship megabytes of JSON to the browser.
        height: the plot's height in px; the legend goes below it when it would not fit
            beside it (`style.legend_for`).
        name_runs: the legend names each run by its label even where no two runs share a
            strategy (a page whose runs are its own steps, "1 · No JIT", beside bars so named).

    Returns:
        Lines coloured by strategy. When several runs share a strategy, each run is also
        dashed its own way and one legend names the runs, each entry in its strategy's
        colour and its dash (two legends, strategies and runs, would double the entries).
        Rows with non-finite log(-ELBO) (diverged tails) are dropped; a run left with one
        point is drawn as a dot (layered over the lines).

    Raises:
        ValueError: `x` is unknown, or its column is absent.
    """
    if x not in ("iteration", *TIME_AXES) or x not in elbo_long:
        raise ValueError(f"x must be 'iteration' or one of {sorted(TIME_AXES)} and a column of elbo_long; got {x!r}")
    title = "log(-ELBO), lower is better"
    with np.errstate(invalid="ignore", divide="ignore"):
        df = elbo_long.assign(log_neg_elbo=np.log(-elbo_long["elbo"].astype(float)))
    df = df[np.isfinite(df["log_neg_elbo"]) & ((df[x] > 0) if x in TIME_AXES else True)]
    if df.empty:
        return note_chart("No finite ELBO values to plot.", title)
    # Drawn in the labels' natural order (Vega draws lines in the data's order, the last on top),
    # so that of curves lying on one another the one seen is the one `coinciding_note` names:
    # in run-id order a newer jit_step run covered the scans the note said were on top.
    rank = {label: i for i, label in enumerate(natural_order(df["label"]))}
    df = (df.assign(_rank=df["label"].map(rank)).sort_values(["_rank", "run_id", x]).drop(columns="_rank")
          .assign(strategy=lambda d: d["strategy"].astype(str)))
    pos, size = df.groupby("run_id").cumcount(), df.groupby("run_id")["elbo"].transform("size")
    df = df[(pos % np.ceil(size / max_points_per_run).astype(int) == 0) | (pos == size - 1)]
    if x == "iteration":
        # Whole ticks: a run of four iterations was labelled 0.2, 0.4, ...; and an axis of one
        # iteration alone (every run diverged after its first) is given a width, not [0, 0].
        last = int(df["iteration"].max())
        x_enc = alt.X("iteration:Q", axis=alt.Axis(title="iteration", format="d", tickMinStep=1),
                      scale=alt.Scale(domain=[0, 1]) if last == 0 else alt.Undefined)
    else:  # from and to labelled ticks, 1, 2 and 5 times powers of ten between
        start = log_grid_below(float(df[x].min()))
        end = log_grid_above(max(float(df[x].max()), 1.5 * start))
        x_enc = alt.X(f"{x}:Q", scale=alt.Scale(type="log", domain=[start, end], nice=False),
                      axis=log_axis(start, end, TIME_AXES[x]))
    tips = ["label:N", "strategy:N", "iteration:Q",
            alt.Tooltip("elbo:Q", format=",.1f", title="ELBO"),
            alt.Tooltip("log_neg_elbo:Q", format=".5f", title="log(-ELBO)")]
    shown_time = x if x in TIME_AXES else "wall_s" if "wall_s" in df else None
    tips += [alt.Tooltip(f"{shown_time}:Q", format=".4f", title="time (s)" if x == "fit_s" else "wall (s)")] \
        if shown_time else []
    # Ticks of our own, from a tick below the lowest value to one above the highest: Vega's
    # domain ended at the data, and a curve that levels off (its converged value, what a user
    # reads off it) ran along the bottom edge below the lowest label.
    ticks = _linear_ticks(float(df["log_neg_elbo"].min()), float(df["log_neg_elbo"].max()))
    enc = dict(x=x_enc, y=alt.Y("log_neg_elbo:Q", scale=alt.Scale(zero=False, domain=[ticks[0], ticks[-1]], nice=False),
                                axis=alt.Axis(title="log(-ELBO)", values=ticks)),
               detail="run_id:N", tooltip=tips)
    if name_runs or df.groupby("strategy")["run_id"].nunique().gt(1).any():
        runs = natural_order(df["label"])
        strategy_of = dict(zip(df["label"].astype(str), df["strategy"]))
        legend = legend_for(runs, "run", height)
        # Colour and dash on one field, with one title: Vega-Lite draws a single legend.
        enc["color"] = alt.Color("label:N", title="run", sort=runs, legend=legend, scale=alt.Scale(
            domain=runs, range=[STRATEGY_COLORS.get(strategy_of[r], UNKNOWN_COLOR) for r in runs]))
        # Each run of a strategy its own dash (the first solid): Vega's default dashes, handed
        # out over every run, gave two runs of one strategy the same line and legend entry.
        within = {}
        dashes = []
        for run in runs:
            rank = within[strategy_of[run]] = within.get(strategy_of[run], -1) + 1
            dashes.append(RUN_DASHES[rank % len(RUN_DASHES)])
        enc["strokeDash"] = alt.StrokeDash("label:N", title="run", sort=runs, legend=legend,
                                           scale=alt.Scale(domain=runs, range=dashes))
    else:
        enc["color"] = color_by_strategy(df, legend=legend_for(sorted(set(df["strategy"])), "strategy", height))
    lines = alt.Chart(df).mark_line().encode(**enc)
    # A line needs two points: a fit that diverged after its first iteration has one finite
    # ELBO, and drawn as a line alone it left the chart empty. Such runs get a dot. The title
    # is the whole chart's, not a layer's (the page draws it once, above: `display.chart`).
    alone = df[df.groupby("run_id")["run_id"].transform("size") == 1]
    if alone.empty:
        return lines.properties(title=title, height=height)
    dots = alt.Chart(alone).mark_point(filled=True, size=80).encode(**enc)
    return alt.layer(lines, dots, title=title).properties(height=height)


def coinciding_curves(elbo_long: pd.DataFrame) -> list[list[str]]:
    """Labels of `elbo_curves`' lines that lie exactly on one another (the same ELBO at the same
    iterations: one compiled program, or programs that round alike), groups of two or more in
    legend order. Only the last drawn of a group shows, so a page says which lines it hides.
    """
    if elbo_long.empty:
        return []
    by_curve: dict[bytes, list[str]] = {}
    for _, curve in elbo_long.sort_values("iteration", kind="stable").groupby("run_id", sort=False):
        drawn = np.stack([curve["iteration"].to_numpy(float), curve["elbo"].to_numpy(float)])
        by_curve.setdefault(drawn.tobytes(), []).append(str(curve["label"].iloc[0]))
    order = {label: i for i, label in enumerate(natural_order(elbo_long["label"]))}
    return sorted((sorted(labels, key=order.get) for labels in by_curve.values() if len(labels) > 1),
                  key=lambda labels: order[labels[0]])


def coinciding_note(elbo_long: pd.DataFrame) -> str:
    """A sentence naming the curves drawn over one another (`coinciding_curves`), or ""."""
    groups = coinciding_curves(elbo_long)
    if not groups:
        return ""
    # `elbo_curves` draws the lines in this order, so the last of a group is the one on top: its
    # colour is the one seen.
    # A run named "#12 scan · preconditioned_lbfgs · log_rates_sd" (Compare) by its number alone: the
    # legend beside it says the rest, and a dozen full names made the caption a paragraph.
    def short(label: str) -> str:
        return label.split(" ", 1)[0] if label.startswith("#") else label

    said = "; ".join(f"{listed(map(short, group))} (in {short(group[-1])}'s colour)" for group in groups)
    return f" Identical curves, drawn over one another, so one line shows each group: {said}."


def _linear_ticks(low: float, high: float, most: int = 8) -> list[float]:
    """The ticks of a linear axis over [low, high], from the first at or below `low` to the
    first at or above `high`: multiples of a step of 1, 2 or 5 times a power of ten giving at
    most `most` intervals."""
    span = high - low if high > low else max(abs(high), 1.0) * 1e-6
    power = 10.0 ** np.floor(np.log10(span / most))
    step = next(m * power for m in (1.0, 2.0, 5.0, 10.0) if span / (m * power) <= most)
    start, end = np.floor(low / step) * step, np.ceil(high / step) * step
    if end - start < step / 2:
        start, end = start - step, end + step
    digits = int(max(0, 1 - np.floor(np.log10(step))))  # 10.200000000000001 is 10.2
    return [round(float(tick), digits) for tick in np.arange(start, end + step / 2, step)]


def scaling_lines(runs: pd.DataFrame, y: str = "per_iter_ms") -> alt.Chart | alt.LayerChart:
    """How a timing grows with n, per strategy, on log-log axes.

    Args:
        runs: columns strategy, n and `y`; optional status, and run_s, run_s_min,
            run_s_max, repeats (the repeats' range, for per_iter_ms and run_s).
        y: "per_iter_ms", "run_s" or "compile_s".

    Returns:
        Median over non-diverged runs per (strategy, n), points joined by lines, with a
        vertical whisker from the fastest to the slowest repeat; diverged runs as crosses.
        Zeros (eager, cache hits) have no place on a log axis: left out.
    """
    if y not in UNITS:
        raise ValueError(f"y must be one of {', '.join(UNITS)}; got {y!r}")
    title = f"Scaling with n: {UNITS[y]}"
    df = with_spread(runs.assign(strategy=runs["strategy"].astype(str)), y)
    df = df[df[y] > 0]
    med = median_by(df, ["strategy", "n"], [y])
    if med.empty:
        return note_chart("No non-diverged runs with a positive value to plot.", title)
    ok = df[not_diverged(df)].groupby(["strategy", "n"])
    med = med.merge(ok["low"].min().rename("low").reset_index(), on=["strategy", "n"]).merge(
        ok["high"].max().rename("high").reset_index(), on=["strategy", "n"])
    tips = ["strategy:N", alt.Tooltip("n:Q", format=","), alt.Tooltip(f"{y}:Q", format=".4g", title=UNITS[y]),
            alt.Tooltip("low:Q", format=".4g", title="fastest repeat"),
            alt.Tooltip("high:Q", format=".4g", title="slowest repeat")]
    # Domains a little past the data, with ticks inside them: Vega's nice log domain ran the n
    # axis to 100,000 for a largest n of 11,600, and put the top point on the top edge.
    # (Every run's, the diverged crosses' and the whiskers' values inside.)
    n_low, n_high = float(df["n"].min()) / SCALING_PAD, float(df["n"].max()) * SCALING_PAD
    shown = pd.concat([df[y], med["low"], med["high"]]).dropna()
    y_low, y_high = float(shown[shown > 0].min()) / SCALING_PAD, float(shown.max()) * SCALING_PAD
    y_axis, y_high = log_axis_reaching(y_low, y_high, shown, f"{UNITS[y]}, log scale")
    enc = dict(x=alt.X("n:Q", scale=alt.Scale(type="log", domain=[n_low, n_high], nice=False),
                       axis=log_axis(n_low, n_high, "n (rows, log scale)")),
               y=alt.Y(f"{y}:Q", scale=alt.Scale(type="log", domain=[y_low, y_high], nice=False), axis=y_axis),
               color=color_by_strategy(df), tooltip=tips)
    lines = alt.Chart(med).mark_line(point=True).encode(**enc)
    ranged = med[med["high"] > med["low"]]
    layers = [lines]
    if not ranged.empty:
        layers.append(alt.Chart(ranged).mark_rule(strokeWidth=2).encode(
            x="n:Q", y="low:Q", y2="high:Q", color=enc["color"], tooltip=tips))
    bad = df[~not_diverged(df)].assign(status="diverged")
    if not bad.empty:
        layers.append(alt.Chart(bad).mark_point(shape="cross", size=90, filled=True, opacity=0.7).encode(
            x=enc["x"], y=enc["y"], color=enc["color"], tooltip=["strategy:N", alt.Tooltip("n:Q", format=","),
                                                                  alt.Tooltip(f"{y}:Q", format=".4g"), "status:N"]))
    return layers[0].properties(title=title) if len(layers) == 1 else alt.layer(*layers, title=title)


COMPILED, CACHE_LOAD, STEADY = "compile (compiled now)", "compile (cache load)", "steady-state run"


def draws_cache_loads(runs: pd.DataFrame) -> bool:
    """Whether `compile_vs_run` draws hollow points for cache loads (a page says what they
    are only where there are some)."""
    if "cache" not in runs:
        return False
    return bool((runs["cache"].isin(["memory", "disk"]) & (runs["trace_lower_s"] + runs["compile_s"] > 0)).any())


def compile_vs_run(runs: pd.DataFrame) -> alt.Chart | alt.LayerChart:
    """Compilation (trace_lower_s + compile_s) against steady state as n grows.

    Compilation is nearly flat in n while the run grows with it: where a strategy's dashed
    line drops below its solid one, compiling stopped mattering. Only runs that compiled
    (cache "compiled") draw the compile line; runs that loaded a cached executable are
    hollow points apart, so that a cache load is never read as a compile.

    Args:
        runs: columns strategy, n, trace_lower_s, compile_s, run_s; optional status, cache.

    Returns:
        Log-log lines of median seconds vs n, colour by strategy, dash by timing kind.
    """
    title = "Compilation vs steady state, by n"
    cache = runs["cache"] if "cache" in runs else pd.Series("compiled", index=runs.index)
    df = runs.assign(strategy=runs["strategy"].astype(str), compile_total_s=runs["trace_lower_s"] + runs["compile_s"],
                     cache=cache)
    compiled = median_by(df[df["cache"] == "compiled"], ["strategy", "n"], ["compile_total_s"])
    loaded = median_by(df[df["cache"].isin(["memory", "disk"])], ["strategy", "n"], ["compile_total_s"])
    steady = median_by(df, ["strategy", "n"], ["run_s"])
    long = pd.concat([compiled.rename(columns={"compile_total_s": "seconds"}).assign(timing=COMPILED),
                      loaded.rename(columns={"compile_total_s": "seconds"}).assign(timing=CACHE_LOAD),
                      steady.rename(columns={"run_s": "seconds"}).assign(timing=STEADY)], ignore_index=True)
    long = long[long["seconds"] > 0]  # eager compiles nothing, a memory hit costs nothing: no log position
    if long.empty:
        return note_chart("No non-diverged runs to plot.", title)
    # Domains just past the data, ticked inside them, as `scaling_lines` (Vega's nice domain
    # ran n to 10,000 for a largest n of 1,160).
    n_low, n_high = float(long["n"].min()) / SCALING_PAD, float(long["n"].max()) * SCALING_PAD
    y_low, y_high = float(long["seconds"].min()) / SCALING_PAD, float(long["seconds"].max()) * SCALING_PAD
    # A labelled tick past the highest point: at 1.3 times 3.5 s the last tick was 2 s, and the
    # compile lines ran above every label.
    y_axis, y_high = log_axis_reaching(y_low, y_high, long["seconds"], "time (s, log scale)")
    enc = dict(x=alt.X("n:Q", scale=alt.Scale(type="log", domain=[n_low, n_high], nice=False),
                       axis=log_axis(n_low, n_high, "n (rows, log scale)")),
               y=alt.Y("seconds:Q", scale=alt.Scale(type="log", domain=[y_low, y_high], nice=False), axis=y_axis),
               color=color_by_strategy(long),
               tooltip=["strategy:N", alt.Tooltip("n:Q", format=","), "timing:N",
                        alt.Tooltip("seconds:Q", format=".4g", title="median (s)"), "runs:Q"])
    # Points in their own layer: on a line mark with point=True the dash legend loses its strokes.
    dash = alt.StrokeDash("timing:N", title="timing", scale=alt.Scale(
        domain=[STEADY, COMPILED], range=[[1, 0], [6, 4]]))
    drawn = long[long["timing"] != CACHE_LOAD]
    lines = alt.Chart(drawn).mark_line().encode(strokeDash=dash, detail="timing:N", **enc)
    points = alt.Chart(drawn).mark_point(filled=True).encode(**enc)
    loads = long[long["timing"] == CACHE_LOAD]
    if loads.empty:
        return alt.layer(lines, points, title=title)
    hollow = alt.Chart(loads).mark_point(filled=False, size=140, strokeWidth=2).encode(
        shape=alt.Shape("timing:N", title=None, scale=alt.Scale(domain=[CACHE_LOAD], range=["diamond"])), **enc)
    return alt.layer(lines, points, hollow, title=title)


def device_scaling(table: pd.DataFrame, series: str) -> alt.Chart | alt.LayerChart:
    """Time per iteration against the device count, measured and ideal, for one series.

    Args:
        table: `core.bench.device_sweep.scaling_table` output (series, devices, n,
            rows_per_device, per_iter_ms, runs, ideal_ms, speed_up, efficiency).
        series: "strong" (fixed n: ideal time t(1)/k) or "weak" (fixed rows per device:
            ideal time flat at t(1)).

    Returns:
        The measured line in the sharded strategy's colour and the ideal one dashed grey, on
        log2 device axes (log time for strong scaling, where the ideal is a straight line).
    """
    if series not in ("strong", "weak"):
        raise ValueError(f"series must be 'strong' or 'weak'; got {series!r}")
    title = "Strong scaling: same n, more devices" if series == "strong" else \
        "Weak scaling: same rows per device, more devices"
    df = table[(table["series"] == series) & (table["per_iter_ms"] > 0)]
    if df.empty:
        return note_chart("No stored run of this series yet.", title)
    counts = sorted(int(k) for k in df["devices"])
    x = alt.X("devices:Q", title="devices", scale=alt.Scale(type="log", base=2, nice=False,
                                                            domain=[counts[0], max(counts[-1], 2)]),
              axis=alt.Axis(values=counts, format="d"))
    y = alt.Y("ms:Q", title="time per iteration (ms" + (", log scale)" if series == "strong" else ")"),
              scale=alt.Scale(type="log") if series == "strong" else alt.Scale(zero=True))
    measured = df.assign(ms=df["per_iter_ms"], line="measured")
    ideal = df[df["ideal_ms"].notna()].assign(ms=lambda d: d["ideal_ms"], line="ideal")
    tips = [alt.Tooltip("devices:Q", title="devices"), alt.Tooltip("n:Q", format=",", title="n"),
            alt.Tooltip("rows_per_device:Q", format=",", title="rows per device"),
            alt.Tooltip("per_iter_ms:Q", format=".3f", title="ms / iteration"),
            alt.Tooltip("speed_up:Q", format=".2f", title="speed-up vs 1 device"),
            alt.Tooltip("efficiency:Q", format=".2f", title="efficiency"), alt.Tooltip("runs:Q", title="runs")]
    colour = alt.Color("line:N", title=None, legend=alt.Legend(symbolType="stroke"), scale=alt.Scale(
        domain=["measured", "ideal"], range=[STRATEGY_COLORS["sharded"], REFERENCE_COLOR]))
    # Same field and title as the colour: Vega-Lite merges both into one legend.
    dash = alt.StrokeDash("line:N", title=None, scale=alt.Scale(domain=["measured", "ideal"],
                                                                range=[[1, 0], [6, 4]]))
    lines = alt.Chart(pd.concat([measured, ideal], ignore_index=True)).mark_line(point=True).encode(
        x=x, y=y, color=colour, strokeDash=dash, tooltip=tips)
    return lines.properties(title=title)
