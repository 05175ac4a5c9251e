"""Bar charts of runs: where the time went, speed-ups, ratios to a pinned run, group summaries.

Input and output as in `core.charts.style` (a DataFrame of runs in, a Vega-Lite chart out, a
note instead of a traceback). Diverged runs stop early, so their timings are not
comparable: they never enter a median or a ratio, and the bars mark them ("(diverged)",
lighter, dashed outline) instead of dropping them silently.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.charts.style import color_by_strategy, not_diverged, note_chart, strategy_rank

# Chronological, which is also the stack order. No phase colour is a paler version of
# another, so that a diverged (paler) bar cannot be read as a different phase.
PHASES = {"trace_lower_s": "trace+lower", "compile_s": "compile",
          "first_call_s": "first call", "run_s": "steady state"}
PHASE_COLORS = ("#009E73", "#E69F00", "#CC79A7", "#0072B2")


def _run_labels(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy sorted by strategy, with `run` (one axis label per run) and `diverged`."""
    df = runs.assign(strategy=runs["strategy"].astype(str), diverged=~not_diverged(runs))
    ids = df["id"] if "id" in df else pd.Series(df.index, index=df.index)
    if "label" in df:
        run = df["label"].astype(str)
    else:  # "#id" only where a strategy repeats: "scan #12" is noise otherwise
        run = df["strategy"].where(~df["strategy"].duplicated(keep=False),
                                   df["strategy"] + " #" + ids.astype(str))
    df["run"] = run.where(~df["diverged"], run + " (diverged)")
    df = df.assign(_r=strategy_rank(df["strategy"]), _i=ids).sort_values(["_r", "_i"])
    return df.drop(columns=["_r", "_i"])


def _times(values: pd.Series) -> pd.Series:
    return values.map(lambda v: "" if not np.isfinite(v) else
                      f"×{v:.1f}" if v >= 1 else f"×{v:.2g}")


def _bars_from_one(df: pd.DataFrame, x: str, y: alt.Y, x_title: str, title: str,
                   tips: list) -> alt.LayerChart:
    """Bars from 1 to `x` on a log axis (faster and slower point opposite ways), a dashed
    rule at 1, and the `text` column right of each bar (or of the rule, for bars below 1)."""
    df = df.assign(one=1.0, text_x=df[x].where(df[x] > 1, 1.0).fillna(1.0))
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=x_title), x2="one:Q", y=y,
        color=color_by_strategy(df, legend=False), tooltip=tips)
    text = alt.Chart(df).mark_text(align="left", dx=4, fontSize=14).encode(
        x="text_x:Q", y=y, text="text:N", tooltip=tips)
    rule = alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(x="one:Q")
    return alt.layer(bars, rule, text, title=title).properties(height=alt.Step(28))


def timing_bars(runs: pd.DataFrame) -> alt.Chart:
    """Stacked horizontal bars of where each run's time went.

    Args:
        runs: columns strategy, trace_lower_s, compile_s, first_call_s, run_s; optional
            id, label, status, n, cache.

    Returns:
        One bar per run: trace+lower | compile | first call | steady state, in seconds.
    """
    title = "Where the time goes (s)"
    if runs.empty:
        return note_chart("No runs to show yet.", title)
    df = _run_labels(runs)
    extra = [c for c in ("n", "cache") if c in df]
    long = df.melt(id_vars=["run", "strategy", "diverged", *extra], value_vars=list(PHASES),
                   var_name="column", value_name="seconds")
    long["phase"] = long["column"].map(PHASES)
    long["phase_rank"] = long["column"].map({c: i for i, c in enumerate(PHASES)})
    diverged = alt.datum.diverged
    return alt.Chart(long, title=title).mark_bar(strokeWidth=1.5).encode(
        x=alt.X("seconds:Q", stack="zero", title="time (s)"),
        y=alt.Y("run:N", sort=list(df["run"]), title=None),
        color=alt.Color("phase:N", title="phase", sort=None, scale=alt.Scale(
            domain=list(PHASES.values()), range=list(PHASE_COLORS))),
        order=alt.Order("phase_rank:Q"),
        opacity=alt.condition(diverged, alt.value(0.45), alt.value(1.0)),
        stroke=alt.condition(diverged, alt.value("#333333"), alt.value(None)),
        strokeDash=alt.condition(diverged, alt.value([4, 2]), alt.value([1, 0])),
        tooltip=["run:N", "phase:N", alt.Tooltip("seconds:Q", format=".4f", title="seconds (s)"),
                 *[f"{c}:N" for c in extra]],
    ).properties(height=alt.Step(28))


def speedup_bars(runs: pd.DataFrame, baseline: str = "eager") -> alt.Chart | alt.LayerChart:
    """Steady-state speed-up of each strategy over a baseline strategy.

    Args:
        runs: columns strategy, run_s; optional status.
        baseline: the strategy whose median run_s is the reference.

    Returns:
        Bars of median run_s(baseline) / median run_s(strategy) (log x), labelled "×12.3";
        all-diverged strategies are listed as "diverged". A note if the baseline is absent.
    """
    title = f"Speed-up over {baseline} (steady state)"
    df = runs.assign(strategy=runs["strategy"].astype(str), ok=not_diverged(runs))
    base = df.loc[df["ok"] & (df["strategy"] == baseline), "run_s"].median()
    if not base > 0:  # also catches NaN: no non-diverged baseline run
        return note_chart(f"Run the {baseline} strategy to see speed-ups against it.", title)
    per = df.groupby("strategy").agg(runs=("ok", "size"),
                                     diverged=("ok", lambda s: int((~s).sum())))
    per = per.join(df[df["ok"]].groupby("strategy")["run_s"].median()).reset_index()
    per["speedup"] = base / per["run_s"]
    per["text"] = _times(per["speedup"])
    some = (per["diverged"] > 0) & per["speedup"].notna()
    if some.any():  # an empty selection maps to int64, which pandas 3 will not add to str
        per.loc[some, "text"] += per.loc[some, "diverged"].map(lambda k: f" ({k} diverged)")
    per.loc[per["speedup"].isna(), "text"] = "diverged"
    tips = ["strategy:N", alt.Tooltip("speedup:Q", format=".2f", title="speed-up (×)"),
            alt.Tooltip("run_s:Q", format=".4f", title="median run (s)"), "runs:Q", "diverged:Q"]
    order = list(per.sort_values("strategy", key=strategy_rank)["strategy"])
    return _bars_from_one(per, "speedup", alt.Y("strategy:N", sort=order, title=None),
                          f"speed-up over {baseline} (×, log scale)", title, tips)


def grouped_summary(runs: pd.DataFrame, by: list[str], metric: str = "per_iter_ms",
                    log_x: bool = True) -> alt.Chart | alt.LayerChart:
    """Median with a min-max rule per group, over non-diverged runs.

    Args:
        runs: columns in `by` and `metric`; optional status.
        by: columns defining a group, e.g. ["strategy", "precision"].
        metric: a numeric column; a _ms or _s suffix gives the axis unit.
        log_x: log x axis (timings across strategies span decades).

    Returns:
        One row per group; groups with diverged runs say "(k diverged)", so an
        all-diverged group is listed rather than dropped.
    """
    title = f"{metric} by {', '.join(by)}: median and min-max"
    if runs.empty or not by:
        return note_chart("No runs to summarise.", title)
    df = runs.assign(group=runs[by].astype(str).agg(" · ".join, axis=1), ok=not_diverged(runs))
    stats = df[df["ok"]].groupby("group")[metric].agg(["median", "min", "max", "size"])
    out = df.groupby("group").agg(diverged=("ok", lambda s: int((~s).sum())),
                                  any_max=(metric, "max")).join(stats).reset_index()
    out["size"] = out["size"].fillna(0).astype(int)
    out["text"] = out["diverged"].map(lambda k: f"({k} diverged)" if k else "")
    out["text_x"] = out["max"].fillna(out["any_max"])  # all-diverged: label at their values
    color = {}
    if "strategy" in by:
        first = df.drop_duplicates("group").set_index("group")
        out["strategy"] = out["group"].map(first["strategy"])
        out = out.assign(_r=strategy_rank(out["strategy"])).sort_values(["_r", "group"])
        color = {"color": color_by_strategy(out)}
    unit = "ms" if metric.endswith("_ms") else "s" if metric.endswith("_s") else ""
    x_title = f"{metric} ({', '.join(filter(None, [unit, 'log scale' if log_x else '']))})"
    y = alt.Y("group:N", sort=list(out["group"]), title=", ".join(by))
    tips = ["group:N", *[alt.Tooltip(f"{c}:Q", format=".4g") for c in ("median", "min", "max")],
            alt.Tooltip("size:Q", title="runs"), "diverged:Q"]
    base = alt.Chart(out)
    scale = alt.Scale(type="log") if log_x else alt.Scale(zero=False)
    rule = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("min:Q", title=x_title, scale=scale),
        x2="max:Q", y=y, tooltip=tips, **color)
    point = base.mark_point(filled=True, size=90).encode(x="median:Q", y=y, tooltip=tips, **color)
    text = base.mark_text(align="left", dx=6, color="#555555").encode(
        x="text_x:Q", y=y, text="text:N")
    return alt.layer(rule, point, text, title=title).properties(height=alt.Step(28))


def ratio_bars(runs: pd.DataFrame, baseline_id: int,
               metric: str = "run_s") -> alt.Chart | alt.LayerChart:
    """Each run's `metric` divided by that of a pinned baseline run.

    Args:
        runs: columns id, strategy, `metric`; optional label, status.
        baseline_id: `id` of the pinned run.
        metric: a timing column (lower is better: below 1 is faster).

    Returns:
        Bars from 1 to the ratio (log x) labelled "×0.25"; diverged runs get no ratio and
        read "diverged". A note if the baseline is absent or diverged.
    """
    title = f"{metric} relative to run #{baseline_id}"
    base = runs[runs["id"] == baseline_id]
    if base.empty or not not_diverged(base).all() or not base[metric].iloc[0] > 0:
        return note_chart(f"Pin a finished, non-diverged run (#{baseline_id} is not one).", title)
    df = _run_labels(runs)
    df["ratio"] = (df[metric] / base[metric].iloc[0]).where(~df["diverged"])
    df["text"] = _times(df["ratio"]).where(~df["diverged"], "diverged")
    df.loc[df["id"] == baseline_id, "text"] = "baseline"
    tips = ["run:N", "id:N", alt.Tooltip(f"{metric}:Q", format=".4g"),
            alt.Tooltip("ratio:Q", format=".3f", title="ratio (×)")]
    return _bars_from_one(df, "ratio", alt.Y("run:N", sort=list(df["run"]), title=None),
                          f"{metric} / {metric} of run #{baseline_id} (×, log scale)", title, tips)


def reach_bars(reached: pd.DataFrame, relative: float) -> alt.Chart | alt.LayerChart:
    """Seconds each run took to come within `relative` of its problem's best ELBO.

    Args:
        reached: `core.run.reach.reach_frame`'s columns (id, strategy, optimizer,
            iterations_to, seconds_to); optional label.
        relative: the distance, for the title.

    Returns:
        Horizontal bars (log x) labelled with the iterations; a run that never came that
        close reads "not within" at the axis start, so it is listed rather than dropped.
    """
    title = f"Seconds to within {relative:g} of the best ELBO stored (estimated)"
    if reached.empty:
        return note_chart("No runs to show.", title)
    df = reached.assign(label=reached.get("label", "#" + reached["id"].astype(str) + " " + reached["strategy"]
                                          + " · " + reached["optimizer"]))
    df = df.assign(_r=strategy_rank(df["strategy"])).sort_values(["_r", "id"]).drop(columns="_r")
    floor = df["seconds_to"].min() / 2 if df["seconds_to"].notna().any() else 1e-3
    df["text"] = df["iterations_to"].map(lambda k: f"{int(k):,} it" if k == k and k is not None else "not within")
    df["text_x"] = df["seconds_to"].fillna(floor)
    y = alt.Y("label:N", sort=list(df["label"]), title=None)
    tips = ["label:N", alt.Tooltip("iterations_to:Q", title="iterations"),
            alt.Tooltip("seconds_to:Q", format=".4g", title="seconds (estimated)")]
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("seconds_to:Q", scale=alt.Scale(type="log"), title="seconds (log scale)"), y=y,
        color=color_by_strategy(df, legend=False), tooltip=tips)
    text = alt.Chart(df).mark_text(align="left", dx=4, fontSize=14).encode(x="text_x:Q", y=y, text="text:N")
    return alt.layer(bars, text, title=title).properties(height=alt.Step(28))
