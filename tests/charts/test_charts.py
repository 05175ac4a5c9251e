"""Chart construction: every builder yields a schema-valid Vega-Lite spec with the promised
colours, scales and data. Rows are fake but plausible; no fit runs here."""

from __future__ import annotations

import math
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.charts import bars, comparisons, lines, style, theme
from core.results import agreement

from project import ROOT


def _run(id_, strategy, n=116, run_s=1.0, status="ok", **kw):
    row = dict(id=id_, strategy=strategy, dataset=f"oaks x{n // 116}", n=n, p=114, d=1,
               precision="float32", device="cpu", iterations=150, status=status,
               trace_lower_s=0.05, compile_s=0.3, first_call_s=run_s * 1.1, run_s=run_s,
               run_s_min=run_s * 0.9, run_s_max=run_s * 1.2, per_iter_ms=run_s / 150 * 1e3,
               cache="compiled", final_elbo=-3.0e5)
    if strategy == "eager":
        row.update(trace_lower_s=0.0, compile_s=0.0, cache="none")
    row.update(kw)
    return row


@pytest.fixture
def runs():
    rows, i = [], 1
    for n in (116, 1160, 11600):
        scale = n / 116
        for strategy, t in (("eager", 2.0), ("jit_step", 1.0), ("scan", 0.5)):
            rows.append(_run(i, strategy, n=n, run_s=t * scale))
            i += 1
    # A second scan run at the smallest n, a diverged fori_loop and a diverged scan whose
    # absurd timing must not move any median.
    rows.append(_run(i, "scan", run_s=0.6))
    rows.append(_run(i + 1, "fori_loop", run_s=0.4, status="diverged", final_elbo=np.nan))
    rows.append(_run(i + 2, "scan", run_s=500.0, status="diverged"))
    rows.append(_run(i + 3, "my_new_strategy", run_s=0.7))
    return pd.DataFrame(rows)


@pytest.fixture
def elbo_long():
    frames = []
    for run_id, strategy, label in ((1, "eager", "eager #1"), (2, "scan", "scan #2"),
                                    (3, "scan", "scan #3")):
        it = np.arange(50)
        elbo = -(1e6 * np.exp(-it / 10) + 3e5)
        if run_id == 3:
            elbo[40:] = np.nan  # diverged tail
            elbo[39] = -np.inf
        frames.append(pd.DataFrame(dict(run_id=run_id, strategy=strategy, label=label,
                                        iteration=it, elbo=elbo, wall_s=(it + 1) * 1e-3)))
    return pd.concat(frames, ignore_index=True)


def _walk(spec):
    """Every dict inside a Vega-Lite spec."""
    if isinstance(spec, dict):
        yield spec
        for v in spec.values():
            yield from _walk(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _walk(v)


def _datasets(spec):
    return [pd.DataFrame(rows) for rows in spec.get("datasets", {}).values()]


def _strategy_colors(spec):
    colors = {}
    for d in _walk(spec):
        enc = d.get("color")
        if isinstance(enc, dict) and enc.get("field") == "strategy" and "scale" in enc:
            colors.update(zip(enc["scale"]["domain"], enc["scale"]["range"]))
    return colors


def _log_fields(spec):
    return {(ch, d[ch].get("field")) for d in _walk(spec) for ch in ("x", "y")
            if isinstance(d.get(ch), dict) and d[ch].get("scale", {}).get("type") == "log"}


def _all_builders(runs, elbo_long):
    return [
        bars.timing_bars(runs),
        bars.speedup_bars(runs),
        bars.speedup_bars(runs, baseline="absent"),
        lines.elbo_curves(elbo_long),
        lines.elbo_curves(elbo_long, x="wall_s"),
        *(lines.scaling_lines(runs, y=y) for y in ("per_iter_ms", "run_s", "compile_s")),
        lines.compile_vs_run(runs),
        comparisons.grouped_summary(runs, by=["strategy"]),
        comparisons.grouped_summary(runs, by=["strategy", "precision"], metric="run_s", log_x=False),
        comparisons.ratio_bars(runs, baseline_id=1),
        comparisons.ratio_bars(runs, baseline_id=999),
    ]


def test_every_builder_gives_a_valid_titled_spec(runs, elbo_long):
    for chart in _all_builders(runs, elbo_long):
        assert isinstance(chart, (alt.Chart, alt.LayerChart))
        spec = chart.to_dict()  # validates against the Vega-Lite schema
        assert spec.get("title"), spec


def test_empty_input_gives_a_note_not_an_error(runs, elbo_long):
    empty = runs.iloc[:0]
    for chart in (bars.timing_bars(empty), bars.speedup_bars(empty),
                  lines.scaling_lines(empty), lines.compile_vs_run(empty),
                  comparisons.grouped_summary(empty, by=["strategy"]),
                  lines.elbo_curves(elbo_long.iloc[:0])):
        chart.to_dict()


def test_scan_has_one_colour_across_charts_and_subsets(runs, elbo_long):
    subset = runs[runs["strategy"].isin(["scan", "jit_step"])]
    a = _strategy_colors(lines.scaling_lines(runs).to_dict())
    b = _strategy_colors(bars.speedup_bars(runs).to_dict())
    c = _strategy_colors(comparisons.grouped_summary(subset, by=["strategy"]).to_dict())
    d = _strategy_colors(lines.elbo_curves(elbo_long[elbo_long["run_id"] != 3]).to_dict())  # one run each
    assert a["scan"] == b["scan"] == c["scan"] == d["scan"] == style.STRATEGY_COLORS["scan"]
    assert a["my_new_strategy"] == style.UNKNOWN_COLOR


def test_color_scale_domain_follows_strategy_order():
    scale = style.strategy_color_scale(["zzz", "scan", "eager", "torch_compile", "scan"])
    assert scale.domain == ["eager", "scan", "torch_compile", "zzz"]
    assert scale.range[-1] == style.UNKNOWN_COLOR
    assert len(set(style.STRATEGY_COLORS.values())) == len(style.STRATEGY_ORDER)
    assert set(style.STRATEGY_COLORS) == set(style.STRATEGY_ORDER)


def test_log_scales_where_promised(runs, elbo_long):
    assert {("x", "n"), ("y", "per_iter_ms")} <= _log_fields(lines.scaling_lines(runs).to_dict())
    assert {("x", "n"), ("y", "seconds")} <= _log_fields(lines.compile_vs_run(runs).to_dict())
    assert ("x", "wall_s") in _log_fields(lines.elbo_curves(elbo_long, x="wall_s").to_dict())
    assert not _log_fields(lines.elbo_curves(elbo_long).to_dict())
    assert ("x", "speedup") in _log_fields(bars.speedup_bars(runs).to_dict())
    assert ("x", "ratio") in _log_fields(comparisons.ratio_bars(runs, 1).to_dict())


def test_speedup_values_carry_their_range_and_noise_is_labelled():
    runs = pd.DataFrame([_run(1, "eager", run_s=2.0), _run(2, "scan", run_s=0.5),
                         _run(3, "jit_step", run_s=4.0),
                         _run(4, "scan", run_s=0.001, status="diverged"),
                         _run(5, "scan_namedtuple", run_s=1.9)])
    data = pd.concat(_datasets(bars.speedup_bars(runs).to_dict()))
    per = data.dropna(subset=["strategy"]).drop_duplicates("strategy").set_index("strategy")
    assert per.loc["scan", "speedup"] == pytest.approx(4.0)
    assert per.loc["jit_step", "speedup"] == pytest.approx(0.5)
    assert per.loc["eager", "speedup"] == pytest.approx(1.0) and per.loc["eager", "text"] == "baseline"
    # Repeats span 0.9x to 1.2x of each median: eager 1.8-2.4 s, scan 0.45-0.6 s.
    assert (per.loc["scan", "low"], per.loc["scan", "high"]) == pytest.approx((1.8 / 0.6, 2.4 / 0.45))
    assert per.loc["scan", "text"] == "×4 (×3–×5.3) (1 diverged)"
    # 1.9 s against 2.0 s, ranges overlapping: noise, not a speed-up.
    assert per.loc["scan_namedtuple", "text"] == "within noise"
    assert per.loc["scan_namedtuple", "verdict"].startswith("no significant difference")


def test_speedup_without_baseline_is_a_note(runs):
    spec = bars.speedup_bars(runs[runs["strategy"] != "eager"]).to_dict()
    assert spec["mark"]["type"] == "text"
    assert "eager" in pd.concat(_datasets(spec))["note"].iloc[0]


def test_grouped_median_ignores_diverged_runs(runs):
    data = pd.concat(_datasets(comparisons.grouped_summary(runs, by=["strategy"],
                                                      metric="run_s").to_dict()))
    per = data.set_index("group")
    # Non-diverged scan runs: 0.5, 5.0, 50.0, 0.6; the diverged 500 s run is left out. The
    # range spans the repeats: from the fastest (0.9 x 0.5) to the slowest (1.2 x 50).
    assert per.loc["scan", "median"] == pytest.approx(np.median([0.5, 5.0, 50.0, 0.6]))
    assert (per.loc["scan", "min"], per.loc["scan", "max"]) == pytest.approx((0.45, 60.0))
    assert per.loc["scan", "diverged"] == 1
    # An all-diverged group is listed, labelled, with no median.
    assert per.loc["fori_loop", "text"] == "(1 diverged)"
    assert pd.isna(per.loc["fori_loop", "median"])


def test_scaling_and_compile_medians_ignore_diverged(runs):
    data = pd.concat(_datasets(lines.scaling_lines(runs, y="run_s").to_dict()))
    drawn = data[data["status"].isna()] if "status" in data else data
    scan = drawn[(drawn["strategy"] == "scan") & (drawn["n"] == 116)]
    assert scan["run_s"].tolist() == [pytest.approx(0.55)]
    data = pd.concat(_datasets(lines.compile_vs_run(runs).to_dict()))
    assert data["seconds"].max() < 500.0
    # Eager compiles nothing: no zero may reach a log axis.
    assert (data["seconds"] > 0).all()


def test_bars_mark_diverged_runs(runs):
    data = pd.concat(_datasets(bars.timing_bars(runs).to_dict()))
    assert "fori_loop (diverged)" in set(data["run"])
    assert set(data.loc[data["run"].str.endswith("(diverged)"), "diverged"]) == {True}
    ratio = pd.concat(_datasets(comparisons.ratio_bars(runs, baseline_id=1).to_dict()))
    ratio = ratio.dropna(subset=["run"]).drop_duplicates("id").set_index("id")
    assert ratio.loc[len(runs) - 2, "text"] == "diverged"
    assert pd.isna(ratio.loc[len(runs) - 2, "ratio"])
    assert ratio.loc[3, "ratio"] == pytest.approx(0.25)  # scan 0.5 s vs eager 2.0 s
    assert ratio.loc[3, "text"] == "×0.25 (×0.19–×0.33)"
    assert ratio.loc[1, "text"] == "baseline"
    assert ratio.loc[1, "ratio"] == pytest.approx(1.0)


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, core.charts.style, core.charts.bars, core.charts.lines, core.charts.roofline; print(any(m in sys.modules for m in ('streamlit', 'jax')))"
    root = Path(ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    assert out.stdout.strip() == "False"


def test_timing_bars_stack_in_chronological_order_with_a_whisker_over_the_steady_state(runs):
    spec = bars.timing_bars(runs).to_dict()
    stacked = spec["layer"][0]
    assert stacked["encoding"]["color"]["scale"]["domain"] == [
        "trace+lower", "compile", "first call", "steady state"]
    assert stacked["encoding"]["color"]["scale"]["range"] == list(style.PHASE_COLORS)
    assert stacked["encoding"]["order"]["field"] == "phase_rank"
    data = pd.concat(_datasets(spec))
    assert len(data.dropna(subset=["phase"])) == 4 * len(runs)
    whisker = data.dropna(subset=["range_low"]).drop_duplicates("id").set_index("id")
    eager = runs.set_index("id").loc[1]
    before = eager["trace_lower_s"] + eager["compile_s"] + eager["first_call_s"]
    assert (whisker.loc[1, "range_low"], whisker.loc[1, "range_high"]) == pytest.approx(
        (before + eager["run_s_min"], before + eager["run_s_max"]))
    assert not (whisker["status"] == "diverged").any()  # a diverged run's timings mean nothing


def test_cached_runs_say_so_and_show_the_cold_compile_beside_them():
    runs = pd.DataFrame([_run(7, "scan", cache="disk", compile_s=0.01), _run(8, "jit_step", cache="compiled"),
                         _run(9, "eager")])
    cold = pd.DataFrame([_run(3, "scan", compile_s=0.8, trace_lower_s=0.1), _run(2, "jit_step", compile_s=0.7)])
    data = pd.concat(_datasets(bars.timing_bars(runs, cold_compiles=cold).to_dict())).dropna(subset=["phase"])
    labels = list(dict.fromkeys(data["run"]))
    assert "scan (cached)" in labels and "jit_step" in labels
    # Only the cached strategy gets its cold compile, right under it, compile phases only.
    assert labels.index("scan: cold compile #3") == labels.index("scan (cached)") + 1
    assert not any("jit_step: cold" in label for label in labels)
    reference = data[data["run"] == "scan: cold compile #3"].set_index("phase")["seconds"]
    assert dict(reference) == pytest.approx({"trace+lower": 0.1, "compile": 0.8})


def test_compile_line_uses_real_compiles_and_marks_cache_loads_apart():
    runs = pd.DataFrame([_run(1, "scan", n=116, compile_s=0.8), _run(2, "scan", n=116, compile_s=0.02, cache="disk"),
                         _run(3, "scan", n=1160, compile_s=0.01, cache="disk"),
                         _run(4, "scan", n=1160, compile_s=0.0, trace_lower_s=0.0, cache="memory")])
    data = pd.concat(_datasets(lines.compile_vs_run(runs).to_dict()))
    compiled = data[data["timing"] == lines.COMPILED]
    assert list(compiled["n"]) == [116] and compiled["seconds"].iloc[0] == pytest.approx(0.85)
    loads = data[data["timing"] == lines.CACHE_LOAD].drop_duplicates("n")
    assert sorted(loads["n"]) == [116, 1160]  # the memory hit took no time: nothing to draw on a log axis


def test_titles_and_axes_name_timings_in_words(runs):
    for chart in (comparisons.grouped_summary(runs, by=["strategy"]), comparisons.ratio_bars(runs, 1, "per_iter_ms")):
        spec = chart.to_dict()
        text = str(spec["title"]) + " ".join(str(d.get("title")) for d in _walk(spec) if "field" in d)
        assert "per_iter_ms" not in text and "time per iteration" in text


def test_labels_sort_naturally():
    assert style.natural_order(["#10 scan", "#2 scan", "#1 eager", "#11 scan"]) == [
        "#1 eager", "#2 scan", "#10 scan", "#11 scan"]
    runs = pd.DataFrame([_run(i, "scan", dataset=f"oaks x{k}") for i, k in ((1, 10), (2, 2), (3, 100))])
    groups = pd.concat(_datasets(comparisons.grouped_summary(runs, by=["dataset"]).to_dict()))["group"]
    assert list(groups) == ["oaks x2", "oaks x10", "oaks x100"]


def test_ratio_against_diverged_or_missing_baseline_is_a_note(runs):
    diverged_id = int(runs.loc[runs["status"] == "diverged", "id"].iloc[0])
    for baseline in (diverged_id, 12345):
        assert comparisons.ratio_bars(runs, baseline).to_dict()["mark"]["type"] == "text"


def test_elbo_curves_drop_non_finite_and_dash_shared_strategies(elbo_long):
    spec = lines.elbo_curves(elbo_long).to_dict()
    data = pd.concat(_datasets(spec))
    assert np.isfinite(data["log_neg_elbo"]).all()
    assert len(data) == 50 + 50 + 39
    assert data["log_neg_elbo"].iloc[0] == pytest.approx(math.log(1.3e6))
    assert spec["encoding"]["strokeDash"]["field"] == "label"
    single = lines.elbo_curves(elbo_long[elbo_long["run_id"] != 3]).to_dict()
    assert "strokeDash" not in single["encoding"]


def test_elbo_curves_thin_long_runs_and_reject_bad_axis(elbo_long):
    data = pd.concat(_datasets(lines.elbo_curves(elbo_long, max_points_per_run=10).to_dict()))
    assert data.groupby("run_id").size().max() <= 11
    assert set(data.loc[data["run_id"] == 1, "iteration"]) >= {0, 49}
    with pytest.raises(ValueError):
        lines.elbo_curves(elbo_long, x="time")
    with pytest.raises(ValueError):
        lines.elbo_curves(elbo_long.drop(columns="wall_s"), x="wall_s")


def test_agreement():
    assert agreement.spread(pd.Series([-100.0, -101.0, -100.5])) == pytest.approx(1 / 101)
    assert agreement.spread(pd.Series([-100.0, np.nan, -101.0, None])) == pytest.approx(1 / 101)
    assert agreement.spread(pd.Series([-5.0, -5.0])) == 0.0
    assert agreement.spread(pd.Series([-5.0, np.inf])) == 0.0
    assert math.isnan(agreement.spread(pd.Series([np.nan, None], dtype=object)))
    assert math.isnan(agreement.spread(pd.Series([], dtype=float)))


def test_reach_bars_start_at_the_log_axis_end_and_list_runs_that_never_came_close():
    reached = pd.DataFrame({"id": [1, 2, 3], "strategy": ["eager", "scan", "scan"],
                            "optimizer": ["preconditioned_lbfgs", "preconditioned_lbfgs", "seed"],
                            "iterations_to": [42, 45, None], "seconds_to": [0.5, 0.01, None]})
    spec = comparisons.reach_bars(reached, 1e-5).to_dict()
    bars_layer = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "bar")
    # A bar on a log axis drawn from 0 is not drawn at all: it starts at the axis' left end.
    assert bars_layer["encoding"]["x2"]["field"] == "floor"
    low, high = bars_layer["encoding"]["x"]["scale"]["domain"]
    assert bars_layer["encoding"]["x"]["scale"]["type"] == "log" and 0 < low < 0.01 and high > 0.5
    rows = pd.concat(_datasets(spec))
    assert sorted(rows["text"]) == ["42 it", "45 it", "not within"]
    assert "No runs" in str(comparisons.reach_bars(reached.iloc[:0], 1e-5).to_dict())


def test_a_ratio_to_a_baseline_without_that_timing_says_so():
    runs = pd.DataFrame([_run(1, "eager", run_s=2.0), _run(2, "scan", run_s=0.5)]).assign(time_to_solution_s=None)
    note = str(comparisons.ratio_bars(runs, 1, "time_to_solution_s").to_dict())
    assert "Run #1 has no time to solution" in note


def test_runs_sharing_a_strategy_get_one_legend_in_their_strategys_colours(elbo_long):
    spec = lines.elbo_curves(elbo_long).to_dict()
    color, dash = spec["encoding"]["color"], spec["encoding"]["strokeDash"]
    # Same field and title: Vega-Lite merges them into one legend naming each run.
    assert color["field"] == dash["field"] == "label" and color["title"] == dash["title"] == "run"
    assert dict(zip(color["scale"]["domain"], color["scale"]["range"])) == {
        "eager #1": style.STRATEGY_COLORS["eager"], "scan #2": style.STRATEGY_COLORS["scan"],
        "scan #3": style.STRATEGY_COLORS["scan"]}
    assert color["legend"]["symbolLimit"] == 0 and color["legend"]["labelLimit"] == 0


@pytest.mark.parametrize("count", [3, 12, 40])
def test_a_legend_never_runs_past_its_chart_nor_drops_entries(count):
    labels = [f"#{i} scan_pytree_class" for i in range(1, count + 1)]
    legend = style.legend_for(labels, "run", height=340).to_dict()
    assert legend["symbolLimit"] == 0 and legend["labelLimit"] == 0
    rows = math.ceil(count / legend.get("columns", 1))
    if legend.get("orient") == "bottom":  # below the chart, which then grows: columns that fit a projector
        column_px = style.LEGEND_SYMBOL_PX + style.CHART_CHAR_PX * len(labels[-1])
        assert legend["columns"] * column_px <= style.PROJECTOR_CHART_PX and legend["columns"] >= 1
    else:  # beside it: every row within its height
        assert style.LEGEND_TITLE_PX + rows * style.LEGEND_ROW_PX <= 340
    assert (legend.get("orient") == "bottom") == (count > 12)
    assert theme.config()["legend"]["symbolLimit"] == 0  # every other legend keeps all its entries too


def test_grouped_timings_leave_out_groups_without_the_timing_and_say_which_mix_optimizers(runs):
    runs = runs.assign(optimizer=["seed"] * len(runs), time_to_solution_s=np.nan)
    runs.loc[runs["strategy"] == "scan", "time_to_solution_s"] = runs["run_s"]
    runs.loc[runs["id"] == 10, "optimizer"] = "preconditioned_lbfgs"  # the second scan run at n = 116
    spec = comparisons.grouped_summary(runs, by=["dataset", "strategy"], metric="time_to_solution_s").to_dict()
    data = pd.concat(_datasets(spec)).drop_duplicates("group").set_index("group")
    # Only scan has a time to solution: no empty rows for eager or jit_step; the diverged
    # fori_loop stays listed as diverged.
    assert sorted(data.index) == ["oaks x1 · fori_loop", "oaks x1 · scan", "oaks x10 · scan", "oaks x100 · scan"]
    assert data.loc["oaks x1 · fori_loop", "text"] == "(1 diverged)"
    assert data.loc["oaks x1 · scan", "text"] == "(1 diverged, 2 optimizers)"
    assert data.loc["oaks x10 · scan", "text"] == ""
    apart = comparisons.grouped_summary(runs, by=["dataset", "strategy", "optimizer"], metric="time_to_solution_s")
    assert not pd.concat(_datasets(apart.to_dict()))["text"].str.contains("optimizers").any()
    finished = runs[runs["status"] == "ok"].assign(time_to_solution_s=np.nan)
    nothing = comparisons.grouped_summary(finished, ["strategy"], "time_to_solution_s")
    assert "No run here has a time to solution" in str(nothing.to_dict())


def test_ratios_leave_out_runs_without_the_timing_and_name_their_optimizer(runs):
    runs = runs.assign(optimizer=["seed"] * (len(runs) - 1) + ["lbfgs"], time_to_solution_s=runs["run_s"])
    runs.loc[runs["id"] == 2, "time_to_solution_s"] = np.nan
    data = pd.concat(_datasets(comparisons.ratio_bars(runs, 1, "time_to_solution_s").to_dict()))
    rows = data.dropna(subset=["run"]).drop_duplicates("run").set_index("id")
    assert 2 not in rows.index  # no empty row for a run without the timing
    assert rows.loc[1, "run"] == "eager · seed #1" and rows.loc[1, "text"] == "baseline"
    assert rows.loc[len(runs) - 2, "text"] == "diverged"  # a diverged run stays listed


def test_timing_bars_take_a_log_axis_where_totals_span_more_than_ten_times(runs):
    close = runs[(runs["n"] == 116) & (runs["strategy"].isin(["jit_step", "scan"])) & (runs["status"] == "ok")]
    linear = bars.timing_bars(close).to_dict()["layer"][0]["encoding"]
    assert linear["x"]["field"] == "seconds" and "type" not in linear["x"].get("scale", {})
    spec = bars.timing_bars(runs).to_dict()  # eager at n = 11600 beside scan at n = 116: decades apart
    encoding = spec["layer"][0]["encoding"]
    assert encoding["x"]["scale"]["type"] == "log" and encoding["x2"]["field"] == "end"
    assert "log scale" in encoding["x"]["title"]
    data = pd.concat(_datasets(spec)).dropna(subset=["phase"])
    floor = encoding["x"]["scale"]["domainMin"]
    assert 0 < floor <= data.loc[data["seconds"] > 0, "seconds"].min()
    for run, parts in data.groupby("run"):
        parts = parts.sort_values("phase_rank")
        # Each phase starts where the one before it ended, and ends at the run's time so far.
        assert list(parts["start"].iloc[1:]) == pytest.approx(list(parts["end"].iloc[:-1])), run
        assert list(parts["end"]) == pytest.approx(list(parts["seconds"].cumsum().clip(lower=floor))), run


def test_ratio_labels_get_room_inside_the_plot_on_two_lines_where_one_cannot_hold_them(runs):
    short = comparisons.ratio_bars(runs, 1).to_dict()  # "eager #1", "×0.25 (×0.19–×0.33)": one line fits
    scale = short["layer"][0]["encoding"]["x"]["scale"]
    assert scale["type"] == "log" and scale["nice"] is False and short["height"] == {"step": 30}
    low, high = scale["domain"]
    share = bars.text_share(pd.Series(["×0.25 (×0.19–×0.33)"]), pd.Series(["my_new_strategy #13"]))
    # The text, drawn from 1 at most (the slowest ratio is 1.2 here), ends inside the plot.
    assert math.log10(high / 1.2) / math.log10(high / low) >= share

    long = runs.assign(optimizer=["preconditioned_lbfgs"] * (len(runs) - 1) + ["seed"])
    spec = comparisons.ratio_bars(long, 1).to_dict()
    assert spec["height"] == {"step": 44}
    assert "split(datum.label" in spec["layer"][0]["encoding"]["y"]["axis"]["labelExpr"]
    data = pd.concat(_datasets(spec)).dropna(subset=["run"]).drop_duplicates("id").set_index("id")
    assert data.loc[3, "text"] == "×0.25\n(×0.19–×0.33)"
    as_one_line = data["text"].str.replace("\n(", " (", regex=False)
    assert bars.text_share(as_one_line, data["run"]) > bars.MOST_TEXT_SHARE
    assert bars.text_share(as_one_line, data["run"], broken=True) <= bars.MOST_TEXT_SHARE


def test_long_group_names_take_a_line_per_column_and_notes_stay_inside_the_plot(runs):
    runs = runs.assign(optimizer="preconditioned_lbfgs")
    short = comparisons.grouped_summary(runs, by=["strategy"]).to_dict()
    assert "labelExpr" not in short["layer"][0]["encoding"]["y"].get("axis", {}) and short["height"] == {"step": 30}
    by = ["dataset", "strategy", "optimizer"]
    spec = comparisons.grouped_summary(runs, by=by).to_dict()
    y = spec["layer"][0]["encoding"]["y"]
    assert "split(datum.label" in y["axis"]["labelExpr"] and y["title"] is None
    scale = spec["layer"][0]["encoding"]["x"]["scale"]
    data = pd.concat(_datasets(spec)).drop_duplicates("group")
    lines = [line for row in data["row"] for line in row.split("\n")]
    most = int(comparisons.MOST_LABEL_SHARE * style.PROJECTOR_CHART_PX / style.CHART_CHAR_PX)
    assert max(map(len, lines)) <= most and data["row"].str.contains("\n").all()
    assert spec["height"] == {"step": bars.LINE_PX * 2 + 12}  # two lines a row: "oaks x1 · scan" / its optimizer
    assert y["axis"]["labelOffset"] == -bars.LINE_PX / 2  # centred on the row
    noted = data[data["text"] != ""]
    low, high = scale["domain"]
    share = bars.text_share(noted["text"], lines)
    # Each note, right of its range, ends inside the plot.
    assert all(math.log10(high / x) / math.log10(high / low) >= share for x in noted["text_x"])


def test_one_line_axis_labels_stay_on_their_rows_when_only_the_texts_break():
    df = pd.DataFrame({"strategy": ["eager", "scan_pytree_class"], "ratio": [1.0, 0.00547], "low": [1.0, 0.0048],
                       "high": [1.0, 0.0062], "text": ["baseline", "×0.00547 (×0.0048–×0.0062)"]})
    spec = bars.bars_from_one(df, "ratio", alt.Y("strategy:N"), "ratio", "title", []).to_dict()
    assert spec["height"] == {"step": 44}  # the ratio takes two lines
    assert "axis" not in spec["layer"][0]["encoding"]["y"]  # "eager" has one: no offset moves it off its row
    texts = pd.concat(_datasets(spec))["text"].dropna()
    assert "×0.00547\n(×0.0048–×0.0062)" in set(texts) and "baseline" in set(texts)
