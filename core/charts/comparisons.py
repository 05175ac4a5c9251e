"""Charts that compare stored runs: a timing summarised per group, ratios to a pinned run,
and the time each run took to come near the best ELBO stored.

Input and output as in `core.charts.style`. Titles and axes name timings in words
(`style.LABELS`), never by column name. Steady-state timings carry the range of their
repeats; a ratio that is not significant, or of one program, is labelled as noise
(`core.results.spread`).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.charts.bars import (
    LINE_PX,
    bars_from_one,
    lines_axis,
    log_domain_with_room,
    row_step,
    run_labels,
    text_share,
    wrapped,
    wrapped_names,
)
from core.charts.style import (
    CHART_CHAR_PX,
    LABELS,
    PROJECTOR_CHART_PX,
    color_by_strategy,
    log_axis,
    log_axis_reaching,
    log_grid_above,
    log_grid_below,
    not_diverged,
    note_chart,
    row_spread,
    strategy_rank,
    with_spread,
)
from core.results import spread
from core.results.comparison import group_names
from core.results.ordering import natural_key

# The most of a projector's chart width the group names may take on one line each.
MOST_LABEL_SHARE = 0.4


def label(metric: str) -> str:
    """A timing column in words: "time per iteration (ms)"; unknown columns as they are."""
    return LABELS.get(metric, metric)


def _without_unit(metric: str) -> str:
    return label(metric).rsplit(" (", 1)[0]


def grouped_summary(runs: pd.DataFrame, by: list[str], metric: str = "per_iter_ms",
                    log_x: bool = True) -> alt.Chart | alt.LayerChart:
    """Median with the range per group, over non-diverged runs.

    Args:
        runs: columns in `by` and `metric`; optional status, optimizer, and run_s,
            run_s_min, run_s_max, repeats (the repeats' range for run_s and per_iter_ms).
        by: columns defining a group, e.g. ["dataset", "strategy", "optimizer"].
        metric: a timing column.
        log_x: log x axis (timings across strategies span decades).

    Returns:
        One row per group that has a value of `metric`, naturally ordered ("x2" before
        "x10"): the median of the runs' medians (dot) and the fastest to the slowest repeat
        of any run (line). Groups with diverged runs say "(k diverged)", so an all-diverged
        group is listed rather than dropped; a group whose runs have no value of `metric`
        (no time to solution for a fixed number of iterations) would be an empty row and is
        left out (`core.results.comparison.unmeasured_groups` names them); a group that holds
        runs of several optimizers, which time different algorithms, says "(k optimizers)".
    """
    title = f"{label(metric)} by {', '.join(by)}: median and range"
    if runs.empty or not by:
        return note_chart("No runs to summarise.", title)
    df = with_spread(runs, metric).assign(group=group_names(runs, by), ok=not_diverged(runs))
    finished = df[df["ok"]].groupby("group")
    stats = finished[metric].agg(["median", "count"]).rename(columns={"count": "size"}).join(
        finished["low"].min().rename("min")).join(finished["high"].max().rename("max"))
    out = df.groupby("group").agg(diverged=("ok", lambda s: int((~s).sum())),
                                  any_max=(metric, "max")).join(stats).reset_index()
    out["size"] = out["size"].fillna(0).astype(int)
    out = out[(out["size"] > 0) | (out["diverged"] > 0)]
    # The least value drawn: missing where no row is left, or none of them has a value.
    anchor = pd.concat([out["min"], out["any_max"]]).min()
    if pd.isna(anchor):
        return note_chart(f"No run here has a {_without_unit(metric)}: pick another timing.", title)
    notes = out["diverged"].map(lambda k: [f"{k} diverged"] if k else [])
    if "optimizer" in df and "optimizer" not in by:
        mixed = df.groupby("group")["optimizer"].nunique().reindex(out["group"]).to_numpy()
        notes = [n + [f"{k} optimizers"] if k > 1 else n for n, k in zip(notes, mixed)]
    out["text"] = [f"({', '.join(n)})" if n else "" for n in notes]
    # All-diverged: the note at their values; where they have none (a diverged run has no time
    # to solution) at the chart's least value, not dropped (the row was left blank).
    out["text_x"] = out["max"].fillna(out["any_max"]).fillna(anchor)
    valueless = out["max"].isna() & out["any_max"].isna()
    out = out.assign(_k=out["group"].map(natural_key)).sort_values("_k").drop(columns="_k")
    color = {}
    if "strategy" in by:
        first = df.drop_duplicates("group").set_index("group")
        out["strategy"] = out["group"].map(first["strategy"])
        if by[0] == "strategy":  # strategies first: teaching order, not the alphabet
            out = out.assign(_r=strategy_rank(out["strategy"]), _k=out["group"].map(natural_key))
            out = out.sort_values(["_r", "_k"]).drop(columns=["_r", "_k"])
        color = {"color": color_by_strategy(out, legend=False)}  # the axis names every group
    x_title = label(metric) + (", log scale" if log_x else "")
    # No axis title: the chart's title names the columns, and a title beside labels this
    # long was drawn over them. Labels wrap at their separators to MOST_LABEL_SHARE of a
    # projector's chart, so that the plot keeps the rest.
    most_chars = int(MOST_LABEL_SHARE * PROJECTOR_CHART_PX / CHART_CHAR_PX)
    out["row"] = out["group"].map(lambda g: wrapped(g, most_chars))
    lines = int(out["row"].str.count("\n").max()) + 1
    broken = lines > 1
    y = alt.Y("row:N", sort=list(out["row"]), title=None, axis=lines_axis(lines, "\\n") if broken else alt.Axis())
    tips = ["group:N", *[alt.Tooltip(f"{c}:Q", format=".4g") for c in ("median", "min", "max")],
            alt.Tooltip("size:Q", title="runs"), "diverged:Q"]
    base = alt.Chart(out)
    if log_x:  # room right of the longest range for its note
        values = pd.concat([out["min"], out["max"], out["median"], out["text_x"]])
        row_lines = [line for row in out["row"] for line in row.split("\n")]
        share = text_share(out["text"], row_lines) if out["text"].str.len().any() else 0.0
        domain = log_domain_with_room(values, out["text_x"], share, from_one=False)
        # A labelled tick past the slowest run (0.45 s stood past the last one, 0.2), and none
        # across the room kept for the notes.
        axis, end = log_axis_reaching(*domain, pd.concat([out["min"], out["max"], out["median"]]), x_title)
        domain = [domain[0], end]
        scale = alt.Scale(type="log", nice=False, domain=domain)
        # A note with no value to stand at starts at the axis, where it reads as the row's note:
        # at the least value drawn, inside the plot, "(1 diverged)" read as a point at 0.003 s.
        out.loc[valueless, "text_x"] = domain[0]
    else:
        scale, axis = alt.Scale(zero=False), alt.Axis(title=x_title)
    rule = base.mark_rule(strokeWidth=3).encode(
        x=alt.X("min:Q", axis=axis, scale=scale), x2="max:Q", y=y, tooltip=tips, **color)
    point = base.mark_point(filled=True, size=110).encode(x="median:Q", y=y, tooltip=tips, **color)
    text = base.mark_text(align="left", dx=6).encode(x="text_x:Q", y=y, text="text:N")
    return alt.layer(rule, point, text, title=title).properties(height=alt.Step(LINE_PX * lines + 12 if broken else 30))


def ratio_bars(runs: pd.DataFrame, baseline_id: int,
               metric: str = "run_s") -> alt.Chart | alt.LayerChart:
    """Each run's `metric` divided by that of a pinned baseline run, with its range.

    Args:
        runs: columns id, strategy, `metric`; optional label, status, and the repeats'
            range (run_s_min, run_s_max, repeats).
        baseline_id: `id` of the pinned run.
        metric: a timing column (lower is better: below 1 is faster).

    Returns:
        Bars from 1 to the ratio (log x) with a whisker over its range, labelled "×0.25
        (×0.24–×0.26)", "within noise" where not significant, or "same program" (no bar) for
        one program; diverged runs get no ratio and read "diverged"; runs with no value of
        `metric` (no time to solution for a fixed number of iterations) would be empty rows
        and are left out (the page counts them); where the runs hold several optimizers, each
        label names its run's. A note if the baseline is absent or diverged.
    """
    title = f"{label(metric)} relative to run #{baseline_id}"
    base = runs[runs["id"] == baseline_id]
    if base.empty or not not_diverged(base).all():
        return note_chart(f"Pin a finished, non-diverged run (#{baseline_id} is not one).", title)
    if not float(base[metric].astype(float).iloc[0]) > 0:  # e.g. no time to solution: it ran a fixed number of iterations
        return note_chart(f"Run #{baseline_id} has no {_without_unit(metric)}: pick another timing or baseline.",
                          title)
    runs = runs[(pd.to_numeric(runs[metric], errors="coerce") > 0) | ~not_diverged(runs)]
    if "label" not in runs and runs.get("optimizer", pd.Series(dtype=str)).nunique() > 1:
        runs = runs.assign(label=runs["strategy"].astype(str) + " · " + runs["optimizer"].astype(str)
                           + " #" + runs["id"].astype(str))
    df = with_spread(run_labels(runs), metric)
    pinned = df[df["id"] == baseline_id].iloc[0]

    found = [spread.ratio(row_spread(row, metric), row_spread(pinned, metric)) if not row["diverged"] else None
             for _, row in df.iterrows()]
    # One program is one speed: no bar (x1) and no whisker, whatever its repeats say.
    df["ratio"] = [(1.0 if r.same_program else r.value) if r else np.nan for r in found]
    df["low"] = [r.low if r and not r.same_program else np.nan for r in found]
    df["high"] = [r.high if r and not r.same_program else np.nan for r in found]
    df["test"] = [r.why if r else "" for r in found]
    df["text"] = [r.brief if r else "diverged" for r in found]
    df["verdict"] = [r.label if r else "diverged" for r in found]
    df.loc[df["id"] == baseline_id, ["text", "verdict", "test"]] = ["baseline", "baseline", ""]
    tips = ["run:N", "id:N", alt.Tooltip(f"{metric}:Q", format=".4g", title=label(metric)),
            alt.Tooltip("ratio:Q", format=".3f", title="ratio (×)"), alt.Tooltip("verdict:N", title="with range"),
            alt.Tooltip("test:N", title="decided by")]
    return bars_from_one(df, "ratio", alt.Y("run:N", sort=list(df["run"]), title=None),
                          f"{_without_unit(metric)} ÷ that of run #{baseline_id} (×, log scale)", title, tips)


def reach_labels(reached: pd.DataFrame) -> pd.Series:
    """Each run's name on `reach_bars`: its `label` column, else "#id strategy · optimizer"."""
    if "label" in reached:
        return reached["label"]
    return "#" + reached["id"].astype(str) + " " + reached["strategy"] + " · " + reached["optimizer"]


def reach_bars(reached: pd.DataFrame, relative: float) -> alt.Chart | alt.LayerChart:
    """Seconds each run took to come within `relative` of its problem's best ELBO.

    Args:
        reached: `core.results.reach.reach_frame`'s columns (id, strategy, optimizer,
            iterations_to, seconds_to); optional label.
        relative: the distance, for the title.

    Returns:
        Horizontal bars (log x) labelled with the iterations, for the runs that came that
        close; the others have no bar to draw (the page names them in its caption).
    """
    title = f"Seconds to within {relative:g} of the best ELBO stored (estimated)"
    if reached.empty:
        return note_chart("No runs to show.", title)
    df = reached.assign(label=reach_labels(reached))
    df = df[df["iterations_to"].notna()]
    if df.empty:
        return note_chart(f"No run came within {relative:g} of the best ELBO stored for its data.", title)
    df = df.assign(_r=strategy_rank(df["strategy"])).sort_values(["_r", "id"]).drop(columns="_r")
    seconds = df["seconds_to"].astype(float)
    floor = log_grid_below(seconds.min() / 2)
    high = log_grid_above(seconds.max() * 2)  # room for the labels right of the longest bar
    df["floor"] = floor  # a log axis has no zero: bars start at its left end
    df["text"] = df["iterations_to"].map(lambda k: f"{int(k):,} it")
    df["text_x"] = seconds
    df["label"], lines = wrapped_names(df["label"])
    y = alt.Y("label:N", sort=list(df["label"]), title=None,
              axis=lines_axis(lines, "\\n") if lines > 1 else alt.Axis())
    x = alt.X("seconds_to:Q", axis=log_axis(floor, high, "seconds (log scale)"),
              scale=alt.Scale(type="log", domain=[floor, high], nice=False))
    tips = ["label:N", alt.Tooltip("iterations_to:Q", title="iterations"),
            alt.Tooltip("seconds_to:Q", format=".4g", title="seconds (estimated)")]
    bars = alt.Chart(df).mark_bar().encode(x=x, x2="floor:Q", y=y, color=color_by_strategy(df, legend=False),
                                           tooltip=tips)
    text = alt.Chart(df).mark_text(align="left", dx=4).encode(x=alt.X("text_x:Q"), y=y, text="text:N")
    return alt.layer(bars, text, title=title).properties(height=alt.Step(row_step(lines, 28)))
