"""Altair chart builders: a DataFrame of runs in, a Vega-Lite chart out.

Column names are `RunResult` field names (`core.result`); `runs` has one row per run and
a missing `status` column reads as "ok". Input a page can reasonably produce (no runs
yet, baseline not run) gives a chart holding a short note, never a traceback on a projector.

Diverged runs stop early, so their timings and ELBOs are not comparable: they never enter
a median or a ratio, and bar charts mark them ("(diverged)", lighter, dashed outline)
instead of dropping them silently.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

STRATEGY_ORDER = (
    "eager", "jit_per_function", "jit_step", "scan", "scan_namedtuple",
    "scan_pytree_class", "fori_loop", "while_loop", "sharded", "fastest",
    "pyplnmodels", "torch_eager", "torch_compile",
)
# Okabe-Ito (2008) extended with Paul Tol's "muted" scheme: hues that stay apart under the
# common colour-vision deficiencies. Okabe-Ito yellow is left out: it vanishes on white
# under a projector. Families share hues (Python-loop jits warm, scans blue, lax loops green).
STRATEGY_COLORS = {
    "eager": "#000000", "jit_per_function": "#E69F00", "jit_step": "#D55E00",
    "scan": "#0072B2", "scan_namedtuple": "#56B4E9", "scan_pytree_class": "#332288",
    "fori_loop": "#009E73", "while_loop": "#117733", "sharded": "#CC79A7",
    "fastest": "#882255", "pyplnmodels": "#999933", "torch_eager": "#CC6677",
    "torch_compile": "#44AA99",
}
UNKNOWN_COLOR = "#9E9E9E"
# Chronological, which is also the stack order. No phase colour is a paler version of
# another, so that a diverged (paler) bar cannot be read as a different phase.
PHASES = {"trace_lower_s": "trace+lower", "compile_s": "compile",
          "first_call_s": "first call", "run_s": "steady state"}
PHASE_COLORS = ("#009E73", "#E69F00", "#CC79A7", "#0072B2")
UNITS = {"per_iter_ms": "time per iteration (ms)", "run_s": "steady-state run (s)",
         "compile_s": "compile (s)"}


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


def _color(df: pd.DataFrame, legend: bool = True) -> alt.Color:
    return alt.Color("strategy:N", title="strategy", sort=None,
                     legend=alt.Legend() if legend else None,
                     scale=strategy_color_scale(list(df["strategy"].astype(str))))


def _ok(df: pd.DataFrame) -> pd.Series:
    if "status" not in df:
        return pd.Series(True, index=df.index)
    return df["status"].fillna("ok") != "diverged"


def _rank(strategy: pd.Series) -> pd.Series:
    order = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    return strategy.map(lambda s: order.get(s, len(order)))


def _note(text: str, title: str) -> alt.Chart:
    """A chart holding only a message, for input that cannot be plotted."""
    return alt.Chart(pd.DataFrame({"note": [text]}), title=title).mark_text(
        size=16, color="#555555").encode(text="note:N").properties(height=60)


def _run_labels(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy sorted by strategy, with `run` (one axis label per run) and `diverged`."""
    df = runs.assign(strategy=runs["strategy"].astype(str), diverged=~_ok(runs))
    ids = df["id"] if "id" in df else pd.Series(df.index, index=df.index)
    if "label" in df:
        run = df["label"].astype(str)
    else:  # "#id" only where a strategy repeats: "scan #12" is noise otherwise
        run = df["strategy"].where(~df["strategy"].duplicated(keep=False),
                                   df["strategy"] + " #" + ids.astype(str))
    df["run"] = run.where(~df["diverged"], run + " (diverged)")
    df = df.assign(_r=_rank(df["strategy"]), _i=ids).sort_values(["_r", "_i"])
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
        color=_color(df, legend=False), tooltip=tips)
    text = alt.Chart(df).mark_text(align="left", dx=4, fontSize=14).encode(
        x="text_x:Q", y=y, text="text:N", tooltip=tips)
    rule = alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(x="one:Q")
    return alt.layer(bars, rule, text, title=title).properties(height=alt.Step(28))


def _median_by(runs: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """Median of `cols` over non-diverged runs per `keys`, with a `runs` count."""
    grouped = runs[_ok(runs)].groupby(keys)
    return grouped[cols].median().join(grouped.size().rename("runs")).reset_index()


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
        return _note("No runs to show yet.", title)
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
    df = runs.assign(strategy=runs["strategy"].astype(str), ok=_ok(runs))
    base = df.loc[df["ok"] & (df["strategy"] == baseline), "run_s"].median()
    if not base > 0:  # also catches NaN: no non-diverged baseline run
        return _note(f"Run the {baseline} strategy to see speed-ups against it.", title)
    per = df.groupby("strategy").agg(runs=("ok", "size"),
                                     diverged=("ok", lambda s: int((~s).sum())))
    per = per.join(df[df["ok"]].groupby("strategy")["run_s"].median()).reset_index()
    per["speedup"] = base / per["run_s"]
    per["text"] = _times(per["speedup"])
    some = (per["diverged"] > 0) & per["speedup"].notna()
    per.loc[some, "text"] += per.loc[some, "diverged"].map(lambda k: f" ({k} diverged)")
    per.loc[per["speedup"].isna(), "text"] = "diverged"
    tips = ["strategy:N", alt.Tooltip("speedup:Q", format=".2f", title="speed-up (×)"),
            alt.Tooltip("run_s:Q", format=".4f", title="median run (s)"), "runs:Q", "diverged:Q"]
    order = list(per.sort_values("strategy", key=_rank)["strategy"])
    return _bars_from_one(per, "speedup", alt.Y("strategy:N", sort=order, title=None),
                          f"speed-up over {baseline} (×, log scale)", title, tips)


def elbo_curves(elbo_long: pd.DataFrame, x: str = "iteration",
                max_points_per_run: int = 2000) -> alt.Chart:
    """log(-ELBO) against iteration or wall-clock time, one line per run.

    Args:
        elbo_long: columns run_id, strategy, label (legend text), iteration, elbo (the
            ELBO itself, negative); wall_s, needed when `x == "wall_s"`.
        x: "iteration", or "wall_s" (log x: strategies finish decades apart).
        max_points_per_run: longer curves are thinned evenly, last point kept, so that a
            1e6-iteration run does not ship megabytes of JSON to the browser.

    Returns:
        Lines coloured by strategy, dashed by label when several runs share a strategy.
        Rows with non-finite log(-ELBO) (diverged tails) are dropped.

    Raises:
        ValueError: `x` is unknown, or its column is absent.
    """
    if x not in ("iteration", "wall_s") or x not in elbo_long:
        raise ValueError(f"x must be 'iteration' or 'wall_s' and a column of elbo_long; got {x!r}")
    title = "log(-ELBO), lower is better"
    with np.errstate(invalid="ignore", divide="ignore"):
        df = elbo_long.assign(log_neg_elbo=np.log(-elbo_long["elbo"].astype(float)))
    df = df[np.isfinite(df["log_neg_elbo"]) & ((df[x] > 0) if x == "wall_s" else True)]
    if df.empty:
        return _note("No finite ELBO values to plot.", title)
    df = df.sort_values(["run_id", x]).assign(strategy=lambda d: d["strategy"].astype(str))
    pos, size = df.groupby("run_id").cumcount(), df.groupby("run_id")["elbo"].transform("size")
    df = df[(pos % np.ceil(size / max_points_per_run).astype(int) == 0) | (pos == size - 1)]
    x_enc = (alt.X("iteration:Q", title="iteration") if x == "iteration" else
             alt.X("wall_s:Q", scale=alt.Scale(type="log"), title="wall-clock time (s, log scale)"))
    tips = ["label:N", "strategy:N", "iteration:Q",
            alt.Tooltip("elbo:Q", format=",.1f", title="ELBO"),
            alt.Tooltip("log_neg_elbo:Q", format=".5f", title="log(-ELBO)")]
    tips += [alt.Tooltip("wall_s:Q", format=".4f", title="wall (s)")] if "wall_s" in df else []
    enc = dict(x=x_enc, y=alt.Y("log_neg_elbo:Q", scale=alt.Scale(zero=False), title="log(-ELBO)"),
               color=_color(df), detail="run_id:N", tooltip=tips)
    if df.groupby("strategy")["run_id"].nunique().gt(1).any():
        enc["strokeDash"] = alt.StrokeDash("label:N", title="run")
    return alt.Chart(df, title=title).mark_line().encode(**enc)


def scaling_lines(runs: pd.DataFrame, y: str = "per_iter_ms") -> alt.Chart | alt.LayerChart:
    """How a timing grows with n, per strategy, on log-log axes.

    Args:
        runs: columns strategy, n and `y`; optional status.
        y: "per_iter_ms", "run_s" or "compile_s".

    Returns:
        Median over non-diverged runs per (strategy, n), points joined by lines; diverged
        runs as crosses. Zeros (eager, cache hits) have no place on a log axis: left out.
    """
    if y not in UNITS:
        raise ValueError(f"y must be one of {', '.join(UNITS)}; got {y!r}")
    title = f"Scaling with n: {UNITS[y]}"
    df = runs.assign(strategy=runs["strategy"].astype(str))
    df = df[df[y] > 0]
    med = _median_by(df, ["strategy", "n"], [y])
    if med.empty:
        return _note("No non-diverged runs with a positive value to plot.", title)
    enc = dict(x=alt.X("n:Q", scale=alt.Scale(type="log"), title="n (rows, log scale)"),
               y=alt.Y(f"{y}:Q", scale=alt.Scale(type="log"), title=f"{UNITS[y]}, log scale"),
               color=_color(df), tooltip=["strategy:N", alt.Tooltip("n:Q", format=","),
                                          alt.Tooltip(f"{y}:Q", format=".4g", title=UNITS[y])])
    lines = alt.Chart(med).mark_line(point=True).encode(**enc)
    bad = df[~_ok(df)].assign(status="diverged")
    if bad.empty:
        return lines.properties(title=title)
    crosses = alt.Chart(bad).mark_point(shape="cross", size=90, filled=True, opacity=0.7).encode(
        **{**enc, "tooltip": [*enc["tooltip"], "status:N"]})
    return alt.layer(lines, crosses, title=title)


def compile_vs_run(runs: pd.DataFrame) -> alt.Chart | alt.LayerChart:
    """Compilation (trace_lower_s + compile_s) against steady state as n grows.

    Compilation is nearly flat in n while the run grows with it: where a strategy's dashed
    line drops below its solid one, compiling stopped mattering.

    Args:
        runs: columns strategy, n, trace_lower_s, compile_s, run_s; optional status.

    Returns:
        Log-log lines of median seconds vs n, colour by strategy, dash by timing kind.
    """
    title = "Compilation vs steady state, by n"
    df = runs.assign(strategy=runs["strategy"].astype(str),
                     compile_total_s=runs["trace_lower_s"] + runs["compile_s"])
    med = _median_by(df, ["strategy", "n"], ["compile_total_s", "run_s"])
    long = med.melt(id_vars=["strategy", "n", "runs"], value_vars=["compile_total_s", "run_s"],
                    var_name="column", value_name="seconds")
    long["timing"] = long["column"].map({"compile_total_s": "trace+lower+compile",
                                         "run_s": "steady-state run"})
    long = long[long["seconds"] > 0]  # eager and cache hits compile nothing: no log position
    if long.empty:
        return _note("No non-diverged runs to plot.", title)
    enc = dict(x=alt.X("n:Q", scale=alt.Scale(type="log"), title="n (rows, log scale)"),
               y=alt.Y("seconds:Q", scale=alt.Scale(type="log"), title="time (s, log scale)"),
               color=_color(long), detail="timing:N",
               tooltip=["strategy:N", alt.Tooltip("n:Q", format=","), "timing:N",
                        alt.Tooltip("seconds:Q", format=".4g", title="median (s)"), "runs:Q"])
    # Points in their own layer: on a line mark with point=True the dash legend loses its strokes.
    dash = alt.StrokeDash("timing:N", title="timing", scale=alt.Scale(
        domain=["steady-state run", "trace+lower+compile"], range=[[1, 0], [6, 4]]))
    lines = alt.Chart(long).mark_line().encode(strokeDash=dash, **enc)
    return alt.layer(lines, alt.Chart(long).mark_point(filled=True).encode(**enc), title=title)


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
        return _note("No runs to summarise.", title)
    df = runs.assign(group=runs[by].astype(str).agg(" · ".join, axis=1), ok=_ok(runs))
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
        out = out.assign(_r=_rank(out["strategy"])).sort_values(["_r", "group"])
        color = {"color": _color(out)}
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
    if base.empty or not _ok(base).all() or not base[metric].iloc[0] > 0:
        return _note(f"Pin a finished, non-diverged run (#{baseline_id} is not one).", title)
    df = _run_labels(runs)
    df["ratio"] = (df[metric] / base[metric].iloc[0]).where(~df["diverged"])
    df["text"] = _times(df["ratio"]).where(~df["diverged"], "diverged")
    df.loc[df["id"] == baseline_id, "text"] = "baseline"
    tips = ["run:N", "id:N", alt.Tooltip(f"{metric}:Q", format=".4g"),
            alt.Tooltip("ratio:Q", format=".3f", title="ratio (×)")]
    return _bars_from_one(df, "ratio", alt.Y("run:N", sort=list(df["run"]), title=None),
                          f"{metric} / {metric} of run #{baseline_id} (×, log scale)", title, tips)


def agreement(final_elbos: pd.Series) -> float:
    """Largest disagreement between final ELBOs, relative to their size.

    Args:
        final_elbos: one final ELBO per run; NaN, None and infinities are ignored.

    Returns:
        (max - min) / max |ELBO| over finite values: 0.0 for one value or exact agreement,
        NaN when no value is finite.
    """
    values = pd.to_numeric(pd.Series(final_elbos, dtype=object), errors="coerce").to_numpy(float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan")
    spread = float(values.max() - values.min())
    return 0.0 if spread == 0.0 else spread / float(np.abs(values).max())
