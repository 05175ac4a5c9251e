"""Chart construction: every builder yields a schema-valid Vega-Lite spec with the promised
colours, scales and data. Rows are fake but plausible; no fit runs here."""

from __future__ import annotations

import math
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.charts import bars, colour_vision, comparisons, lines, style, theme
from core.results import agreement, ordering

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


def test_the_scaling_axes_end_just_past_the_data(runs):
    # Vega's nice log domain ran n to 100,000 for a largest n of 11,600. The time axes go on
    # to the first labelled tick past the data, and no further (compile lines at 3.5 s ran
    # above a last label of 2 s).
    chart = lines.scaling_lines(runs).to_dict()
    encoding = chart.get("layer", [chart])[0]["encoding"]
    low, high = encoding["x"]["scale"]["domain"]
    assert low < runs["n"].min() and runs["n"].max() < high <= 1.5 * runs["n"].max(), (low, high)
    _assert_ticked_just_past(encoding["y"], runs["per_iter_ms"])
    # The same for compilation against steady state (its n axis ran to 10,000 for n = 1,160).
    chart = lines.compile_vs_run(runs).to_dict()
    encoding = chart["layer"][0]["encoding"]
    low, high = encoding["x"]["scale"]["domain"]
    assert low < runs["n"].min() and runs["n"].max() < high <= 1.5 * runs["n"].max()
    plotted = [row["seconds"] for rows in chart["datasets"].values() for row in rows]
    _assert_ticked_just_past(encoding["y"], pd.Series(plotted))


def _assert_ticked_just_past(channel: dict, values: pd.Series) -> None:
    values = values[values > 0]  # what a log axis can show
    low, high = channel["scale"]["domain"]
    ticks = sorted(channel["axis"]["values"])
    assert low < values.min() and ticks[-1] >= values.max() and high <= max(ticks[-1], 1.5 * values.max())
    assert len(ticks) < 2 or ticks[-2] < values.max(), (ticks, values.max())


def test_the_elbo_axis_has_a_labelled_tick_below_the_lowest_value_and_above_the_highest(elbo_long):
    # A curve that levels off ran along the bottom edge under the lowest label, so the value it
    # converged to could not be read off the axis.
    for x in ("iteration", "wall_s"):
        encoding = lines.elbo_curves(elbo_long, x=x).to_dict()["encoding"]["y"]
        with np.errstate(invalid="ignore", divide="ignore"):
            values = np.log(-elbo_long["elbo"].astype(float))
        values = values[np.isfinite(values)]  # diverged tails are not drawn
        ticks = encoding["axis"]["values"]
        assert ticks[0] <= values.min() and ticks[-1] >= values.max() and len(ticks) <= 9
        assert encoding["scale"]["domain"] == [ticks[0], ticks[-1]]
        assert all(len(repr(tick)) <= 8 for tick in ticks), ticks  # no 10.200000000000001


def test_log_axes_tick_1_2_5_times_the_powers_of_ten_where_those_are_few():
    # 0.016 to 4.2 s (the phases of eager beside scan): the powers alone gave 0.1 and 1 only.
    assert style.log_axis(0.016, 4.2, "t").to_dict()["values"] == [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2]
    assert style.log_axis(0.5, 3000, "n").to_dict()["values"] == [1, 10, 100, 1000]  # 1-2-5 would be 11 ticks
    # Under a decade (compile times of 3.5 s, from 2 to 5 s): 2 and 5 alone said nothing between.
    assert style.log_axis(2, 5, "t").to_dict()["values"] == [2, 3, 4, 5]
    # One size in a scaling chart (n = 116, its domain 1.3 times either side): 90 and 100
    # alone left the point past the last label.
    assert style.log_axis(116 / 1.3, 116 * 1.3, "n").to_dict()["values"] == [100, 120, 140]
    assert style.log_axis(0.3, 0.45, "s").to_dict()["values"] == [0.3, 0.35, 0.4, 0.45]


def test_log_scales_where_promised(runs, elbo_long):
    assert {("x", "n"), ("y", "per_iter_ms")} <= _log_fields(lines.scaling_lines(runs).to_dict())
    assert {("x", "n"), ("y", "seconds")} <= _log_fields(lines.compile_vs_run(runs).to_dict())
    assert ("x", "wall_s") in _log_fields(lines.elbo_curves(elbo_long, x="wall_s").to_dict())
    fit_only = lines.elbo_curves(elbo_long.assign(fit_s=elbo_long["wall_s"] / 2), x="fit_s").to_dict()
    assert ("x", "fit_s") in _log_fields(fit_only)
    assert fit_only["encoding"]["x"]["axis"]["title"] == "time into the fit, compile left out (s, log scale)"
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
    # 1.9 s against 2.0 s, ranges overlapping, no repeats kept for a test: not a speed-up, and
    # not said alike either.
    assert per.loc["scan_namedtuple", "text"] == "not told apart"
    assert per.loc["scan_namedtuple", "verdict"].startswith("not told apart: too few repeats for a test")


def test_speedup_labels_have_room_right_of_the_longest_bar():
    # "×204 (×153–×231)" was cut at the chart's edge: the log axis now ends far enough right.
    runs = pd.DataFrame([_run(1, "eager", run_s=2.0), _run(2, "scan", run_s=0.0098)])
    spec = bars.speedup_bars(runs).to_dict()
    low, high = spec["layer"][0]["encoding"]["x"]["scale"]["domain"]
    longest = pd.concat(_datasets(spec))["high"].max()
    share = (math.log(longest) - math.log(low)) / (math.log(high) - math.log(low))
    assert low < 1 < longest < high and share < 0.7


def test_speedup_without_baseline_is_a_note(runs):
    spec = bars.speedup_bars(runs[runs["strategy"] != "eager"]).to_dict()
    assert spec["mark"]["type"] == "text"
    assert "eager" in pd.concat(_datasets(spec))["note"].iloc[0]


def test_speedup_over_a_baseline_that_only_diverged_says_so_not_run_it():
    runs = pd.DataFrame([_run(1, "scan", run_s=0.001, status="diverged"), _run(2, "jit_step", run_s=0.5)])
    spec = bars.speedup_bars(runs, baseline="scan").to_dict()
    note = pd.concat(_datasets(spec))["note"].iloc[0]
    assert note == "Every scan run diverged: no speed-up against it (the runs' notes say why)."


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
    # Diverged runs with no value of the timing (no time to solution): the note is still drawn
    # (its position was missing, and the row blank), from the axis's start: at the least value
    # drawn, inside the plot, it read as a point there.
    untimed = runs.assign(run_s=np.where(runs["status"] == "diverged", np.nan, runs["run_s"]))
    spec = comparisons.grouped_summary(untimed, by=["strategy"], metric="run_s").to_dict()
    per = pd.concat(_datasets(spec)).set_index("group")
    assert per.loc["fori_loop", "text"] == "(1 diverged)"
    axis_start = spec["layer"][0]["encoding"]["x"]["scale"]["domain"][0]
    assert per.loc["fori_loop", "text_x"] == pytest.approx(axis_start)
    assert axis_start < untimed["run_s"].min() * 0.9  # left of the least value drawn


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
    data = pd.concat(_datasets(bars.timing_bars(runs).to_dict())).dropna(subset=["phase"])
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
        "trace+lower", "compile or load", "first call", "steady state"]
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


def _named_layers(spec: dict) -> dict[str, dict]:
    found = {}
    for layer in spec.get("layer", []):
        if "name" in layer:
            found[layer["name"]] = layer
        found.update(_named_layers(layer))
    return found


def test_a_whisker_is_a_capped_line_over_a_halo_that_the_stylesheet_paints_for_either_theme(runs):
    # A white halo under a dark line read as "=" on the dark theme: the stylesheet paints the
    # line and caps in the page's text colour and the halo in its inverse, by the layers' names.
    layers = _named_layers(bars.timing_bars(runs).to_dict())
    # Altair numbers a name it meets again ("whisker_line_2"), as the stylesheet expects.
    halo, line, caps = (next(layer for named, layer in layers.items() if named.startswith(name))
                        for name in bars.WHISKER_LAYERS)
    assert halo["mark"]["strokeWidth"] > line["mark"]["strokeWidth"]
    assert halo["mark"]["color"] == theme.LIGHT["background"] and line["mark"]["color"] == theme.LIGHT["text"]
    assert caps["mark"]["type"] == "tick" and caps["encoding"]["x"]["field"] == "_end"
    css = Path(ROOT, "pages/ui/projector.css").read_text()
    for name in bars.WHISKER_LAYERS:
        assert f'[class*="{name}"]' in css, name
    # The inverse of either theme's text is (about) that theme's background.
    for scheme in (theme.LIGHT, theme.DARK):
        text = int(scheme["text"][1:3], 16)
        assert abs((255 - text) - int(scheme["background"][1:3], 16)) <= 20


def test_cached_runs_say_so_and_show_the_cold_compile_beside_them():
    runs = pd.DataFrame([_run(7, "scan", cache="disk", compile_s=0.01), _run(8, "jit_step", cache="compiled"),
                         _run(9, "eager")])
    cold = pd.DataFrame([_run(3, "scan", compile_s=0.8, trace_lower_s=0.1), _run(2, "jit_step", compile_s=0.7)])
    data = pd.concat(_datasets(bars.timing_bars(runs, cold_compiles=cold).to_dict())).dropna(subset=["phase"])
    labels = list(dict.fromkeys(data["run"]))
    assert "scan (cached)" in labels and "jit_step" in labels
    # Only the cached strategy gets its cold compile, right under it, compile phases only.
    assert labels.index("scan: compiled by run #3") == labels.index("scan (cached)") + 1
    assert not any("jit_step: cold" in label for label in labels)
    reference = data[data["run"] == "scan: compiled by run #3"].set_index("phase")["seconds"]
    assert dict(reference) == pytest.approx({"trace+lower": 0.1, "compile or load": 0.8})
    # What the page's caption reads to say whether there is a dashed bar to explain.
    assert list(bars.cold_compile_rows(cold, runs)["strategy"]) == ["scan"]
    assert bars.cold_compile_rows(cold, runs.assign(cache="compiled")).empty



def test_no_row_without_a_run_when_no_phase_has_room_for_its_name():
    # Three cached loads of 0.02 s beside a 2.2 s compile: no segment of a solid bar is wide
    # enough to be named, and the names' layer drew a row labelled "null" (seen on the Run page).
    runs = pd.DataFrame([_run(i, name, run_s=0.02, compile_s=0.001, trace_lower_s=0.001, first_call_s=0.02,
                              cache="disk") for i, name in ((2, "scan"), (3, "scan_namedtuple"))])
    cold = pd.DataFrame([_run(1, "scan", run_s=0.02, compile_s=2.0, trace_lower_s=0.2)])
    spec = bars.timing_bars(runs, cold_compiles=cold).to_dict()
    drawn = {"scan (cached)", "scan: compiled by run #1", "scan_namedtuple (cached)"}
    for data in _datasets(spec):
        if "run" in data:
            assert set(data["run"]) <= drawn, data


@pytest.mark.parametrize("eager_s", [0.08, 8.0])
def test_a_bar_that_dwarfs_the_rest_is_cut_with_its_total_and_the_page_is_told(eager_s):
    runs = pd.DataFrame([_run(1, "eager", run_s=eager_s, compile_s=0.0, trace_lower_s=0.0, first_call_s=eager_s),
                         _run(2, "scan", run_s=0.05, compile_s=0.3, trace_lower_s=0.05, first_call_s=0.05)])
    spec = bars.timing_bars(runs).to_dict()
    x = spec["layer"][0]["encoding"]["x"]
    assert x.get("scale", {}).get("type") != "log" and x["axis"]["title"] == "time (s)"  # seconds, not ratios
    data = pd.concat(_datasets(spec))
    said = data.dropna(subset=["text"]) if "text" in data else data.iloc[:0]
    if eager_s < 1:  # 0.17 s beside 0.45 s: both whole
        assert bars.timing_cut(runs) is None and bars.cut_runs(runs) == [] and said.empty
        return
    cut = bars.timing_cut(runs)
    # scan's whole bar, to its slowest repeat, fills the axis; eager's 16 s stops at its end.
    assert cut == pytest.approx(bars.AXIS_PAD * (0.05 + 0.3 + 0.05 + 0.05 * 1.2))
    assert bars.cut_runs(runs) == [("eager", pytest.approx(16.0))]
    assert x["scale"]["domain"] == pytest.approx([0, cut * (1 + bars.CUT_TEXT_ROOM)])
    # No tick past the cut, where the room holds the totals: a tick there read as the bar's length.
    assert max(x["axis"]["values"]) <= cut and len(x["axis"]["values"]) >= 3
    phases = data.dropna(subset=["phase"])
    assert phases["end"].max() == pytest.approx(cut) and said["text"].tolist() == ["16 s, cut"]
    scan = phases[phases["run"] == "scan"].sort_values("phase_rank")
    assert list(scan["end"] - scan["start"]) == pytest.approx([0.05, 0.3, 0.05, 0.05])  # every phase its seconds


def test_a_dashed_cold_compile_neither_decides_a_cut_nor_reaches_past_its_compile():
    # scan loaded its program (41 s: a 2,000-iteration fit) beside the dashed 1.4 s compile of
    # the run that made it: the run was cut at 30 s, its label saying 41.2 s, because the dashed
    # row took that run's slowest repeat as its own whisker.
    scan = _run(2, "scan", run_s=20.9, compile_s=0.02, trace_lower_s=0.3, first_call_s=20.0, cache="disk")
    cold = pd.DataFrame([_run(1, "scan", run_s=20.9, compile_s=1.1, trace_lower_s=0.3, first_call_s=20.0)])
    runs = pd.DataFrame([scan])
    assert bars.timing_cut(runs, cold) is None and bars.cut_runs(runs, cold) == []
    spec = bars.timing_bars(runs, cold_compiles=cold).to_dict()
    phases = pd.concat(_datasets(spec)).dropna(subset=["phase"])
    assert phases["end"].max() == pytest.approx(0.3 + 0.02 + 20.0 + 20.9)  # drawn whole


def test_only_the_bars_past_the_widest_fall_are_cut():
    # Eager (31 s) over jit_step and scan (2 to 2.5 s) and a cached load (0.3 s): the fall from
    # eager to jit_step is the widest; the cached run, 8 times below scan, is drawn whole.
    runs = pd.DataFrame([_run(1, "eager", run_s=15.0, compile_s=0.0, trace_lower_s=0.0, first_call_s=16.0),
                         _run(2, "jit_step", run_s=0.5, compile_s=1.5, trace_lower_s=0.3, first_call_s=0.2),
                         _run(3, "scan", run_s=0.4, compile_s=1.3, trace_lower_s=0.3, first_call_s=0.1),
                         _run(4, "scan_namedtuple", run_s=0.1, compile_s=0.0, trace_lower_s=0.1, first_call_s=0.1,
                              cache="disk")])
    assert [name for name, _ in bars.cut_runs(runs)] == ["eager"]
    assert bars.timing_cut(runs) == pytest.approx(bars.AXIS_PAD * (0.3 + 1.5 + 0.2 + 0.5 * 1.2))
    # A compile of 2.2 s beside a cached load of 0.3 s: the shorter keeps over a tenth of the axis.
    assert bars.timing_cut(runs[runs["strategy"] != "eager"]) is None
    # Eager 4 s, jit_step 4 s and scan 2.2 s over one cached load of 0.25 s: most bars are long,
    # and cutting them at the cached one's length hid them all (oaks x1, 2026-11-29).
    most = pd.DataFrame([_run(1, "eager", run_s=1.0, compile_s=0.0, trace_lower_s=0.0, first_call_s=2.35),
                         _run(2, "jit_step", run_s=0.04, compile_s=3.6, trace_lower_s=0.3, first_call_s=0.03),
                         _run(3, "scan", run_s=0.03, compile_s=1.8, trace_lower_s=0.3, first_call_s=0.03),
                         _run(4, "scan_namedtuple", run_s=0.03, compile_s=0.08, trace_lower_s=0.11, first_call_s=0.03,
                              cache="disk")])
    assert bars.timing_cut(most) is None


def test_compile_line_uses_real_compiles_and_marks_cache_loads_apart():
    runs = pd.DataFrame([_run(1, "scan", n=116, compile_s=0.8), _run(2, "scan", n=116, compile_s=0.02, cache="disk"),
                         _run(3, "scan", n=1160, compile_s=0.01, cache="disk"),
                         _run(4, "scan", n=1160, compile_s=0.0, trace_lower_s=0.0, cache="memory")])
    data = pd.concat(_datasets(lines.compile_vs_run(runs).to_dict()))
    compiled = data[data["timing"] == lines.COMPILED]
    assert list(compiled["n"]) == [116] and compiled["seconds"].iloc[0] == pytest.approx(0.85)
    loads = data[data["timing"] == lines.CACHE_LOAD].drop_duplicates("n")
    assert sorted(loads["n"]) == [116, 1160]  # the memory hit took no time: nothing to draw on a log axis
    assert lines.draws_cache_loads(runs) and not lines.draws_cache_loads(runs[runs["cache"] == "compiled"])
    assert not lines.draws_cache_loads(runs.iloc[[3]])  # a memory hit with no time has no point


def test_titles_and_axes_name_timings_in_words(runs):
    for chart in (comparisons.grouped_summary(runs, by=["strategy"]), comparisons.ratio_bars(runs, 1, "per_iter_ms")):
        spec = chart.to_dict()
        text = str(spec["title"]) + " ".join(str(d.get("title")) for d in _walk(spec) if "field" in d)
        assert "per_iter_ms" not in text and "time per iteration" in text


def test_labels_sort_naturally():
    assert ordering.natural_order(["#10 scan", "#2 scan", "#1 eager", "#11 scan"]) == [
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
    # Each run of a strategy its own dash, the first solid; another strategy starts solid again
    # (its colour tells it apart): handed out over every run, Vega's dashes repeated within one.
    many = pd.concat([elbo_long.assign(run_id=elbo_long["run_id"] + 10 * k,
                                       label=elbo_long["label"] + f" · {k}") for k in range(3)])
    dash = lines.elbo_curves(many).to_dict()["encoding"]["strokeDash"]["scale"]
    by_run = dict(zip(dash["domain"], map(tuple, dash["range"])))
    scans = [dash_ for label, dash_ in by_run.items() if label.startswith("scan")]
    eagers = [dash_ for label, dash_ in by_run.items() if label.startswith("eager")]
    assert len(set(scans)) == len(scans) == 6 and len(set(eagers)) == 3 and tuple(lines.RUN_DASHES[0]) in eagers


def test_elbo_curves_can_name_runs_by_their_labels_in_their_strategies_colours(elbo_long):
    # A story's live chart: one run a strategy, named as its progress bar and its bar are.
    steps = elbo_long[elbo_long["run_id"] != 3].assign(label=lambda d: d["strategy"].map(
        {"eager": "1 · No JIT", "scan": "3 · lax.scan"}))
    assert "strokeDash" not in lines.elbo_curves(steps).to_dict()["encoding"]  # by strategy, as before
    color = lines.elbo_curves(steps, name_runs=True).to_dict()["encoding"]["color"]
    assert color["field"] == "label" and color["scale"]["domain"] == ["1 · No JIT", "3 · lax.scan"]
    assert color["scale"]["range"] == [style.STRATEGY_COLORS["eager"], style.STRATEGY_COLORS["scan"]]


def test_a_run_with_one_finite_elbo_is_drawn_as_a_dot(elbo_long):
    # A fit that diverged after its first iteration: one finite ELBO, which a line alone leaves undrawn.
    diverged = elbo_long["run_id"] == 3
    one_point = elbo_long[~diverged | (elbo_long["iteration"] == 0)]
    spec = lines.elbo_curves(one_point).to_dict()
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["line", "point"]
    dots = next(frame for frame in _datasets(spec) if len(frame) == 1)
    assert dots["run_id"].tolist() == [3]
    assert spec["title"] == "log(-ELBO), lower is better"
    assert all("title" not in layer for layer in spec["layer"])  # drawn once, by the page, above the chart
    assert "layer" not in lines.elbo_curves(elbo_long).to_dict()  # every run a line: no layer
    # Every run diverged after its first iteration: an axis of whole iterations with a width.
    alone = lines.elbo_curves(elbo_long[elbo_long["iteration"] == 0]).to_dict()
    x = alone["layer"][0]["encoding"]["x"]
    assert x["scale"]["domain"] == [0, 1] and x["axis"]["format"] == "d" and x["axis"]["tickMinStep"] == 1


def test_coinciding_curves_are_named_and_near_ones_are_not():
    curve = -1e5 * (1 + np.exp(-np.arange(30) / 5.0))
    nudged = curve.copy()
    nudged[-1] = np.nextafter(nudged[-1], 0.0)  # one ulp off at the last point: two lines
    frame = pd.concat([pd.DataFrame({"run_id": run_id, "strategy": label, "label": label, "iteration": np.arange(30),
                                     "elbo": values})
                       for run_id, label, values in ((1, "scan_pytree_class", curve), (2, "scan", curve),
                                                     (3, "jit_step", nudged), (4, "scan_namedtuple", curve),
                                                     (5, "eager", nudged * 2))])
    assert lines.coinciding_curves(frame) == [["scan", "scan_namedtuple", "scan_pytree_class"]]
    assert ("one line shows each group: scan, scan_namedtuple and scan_pytree_class (in scan_pytree_class's colour)."
            in lines.coinciding_note(frame))
    assert lines.coinciding_note(frame[frame["run_id"].isin([1, 3, 5])]) == ""
    frame.loc[frame["run_id"] == 5, "elbo"] = nudged
    assert lines.coinciding_curves(frame) == [["eager", "jit_step"], ["scan", "scan_namedtuple", "scan_pytree_class"]]
    assert "eager and jit_step (in jit_step's colour); scan, " in lines.coinciding_note(frame)
    assert lines.coinciding_curves(frame.iloc[:0]) == []
    # Compare's runs by their numbers alone: their legend says the rest.
    numbered = frame.assign(label="#" + frame["run_id"].astype(str) + " " + frame["label"] + " · adam")
    said = lines.coinciding_note(numbered)
    assert said.endswith("each group: #1, #2 and #4 (in #4's colour); #3 and #5 (in #5's colour)."), said
    # And the chart draws each group's named curve last (on top), whatever the runs' ids: scan_pytree_class
    # is run 1 here, and drawn in id order the scan runs after it covered it.
    drawn = pd.concat(_datasets(lines.elbo_curves(frame).to_dict()))
    order = list(dict.fromkeys(drawn["label"]))
    assert order.index("scan_pytree_class") > max(order.index("scan"), order.index("scan_namedtuple"))
    assert order.index("jit_step") > order.index("eager")


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


def test_reach_bars_start_at_the_log_axis_end_and_draw_only_runs_that_came_close():
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
    assert sorted(rows["text"]) == ["42 it", "45 it"]
    assert list(comparisons.reach_labels(reached.iloc[2:])) == ["#3 scan · seed"]  # named by the page instead
    assert "No runs" in str(comparisons.reach_bars(reached.iloc[:0], 1e-5).to_dict())
    assert "No run came within 1e-05" in str(comparisons.reach_bars(reached.iloc[2:], 1e-5).to_dict())


def test_a_ratio_to_a_baseline_without_that_timing_says_so():
    runs = pd.DataFrame([_run(1, "eager", run_s=2.0), _run(2, "scan", run_s=0.5)]).assign(time_to_solution_s=None)
    note = str(comparisons.ratio_bars(runs, 1, "time_to_solution_s").to_dict())
    assert "Run #1 has no time to solution" in note


def test_log_axes_tick_at_one_two_five_and_label_one():
    # A speed-up axis from 0.5 to 40: 1 (no speed-up) must carry a tick and a plain label.
    axis = style.log_axis(0.5, 40.0, "speed-up").to_dict()
    assert axis["values"] == [0.5, 1.0, 2.0, 5.0, 10.0, 20.0] and axis["format"] == "~g"
    assert style.log_axis(0.01, 900.0, "ms").to_dict()["values"] == [0.01, 0.1, 1.0, 10.0, 100.0]
    spec = bars.bars_from_one(pd.DataFrame({"strategy": ["scan"], "speedup": [8.0], "low": [7.0], "high": [9.0],
                                            "text": ["8×"]}), "speedup", alt.Y("strategy:N"), "x", "t", []).to_dict()
    bar = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "bar")
    assert 1.0 in bar["encoding"]["x"]["axis"]["values"]


def test_log_axes_start_and_end_on_labelled_ticks():
    assert [style.log_grid_below(v) for v in (0.7, 0.0102, 3.0, 1.0, 19.9)] == [0.5, 0.01, 2.0, 1.0, 10.0]
    assert [style.log_grid_above(v) for v in (0.087, 0.7, 3.0, 6.0, 1.0)] == [0.1, 1.0, 5.0, 10.0, 1.0]
    reached = pd.DataFrame({"id": [1, 2], "strategy": ["scan", "scan"], "optimizer": ["preconditioned_lbfgs"] * 2,
                            "iterations_to": [31, 31], "seconds_to": [0.0205, 0.029]})
    bar = next(layer for layer in comparisons.reach_bars(reached, 1e-5).to_dict()["layer"]
               if layer["mark"]["type"] == "bar")
    low, high = bar["encoding"]["x"]["scale"]["domain"]
    assert (low, high) == (0.01, 0.1) and bar["encoding"]["x"]["axis"]["values"] == [0.01, 0.02, 0.05, 0.1]


def test_strategies_of_one_program_show_one_speed_up_over_another_baseline():
    """With eager as the baseline, scan and scan_namedtuple (one fingerprint) read one speed-up,
    that of their pooled repeats, not two; a third program keeps its own."""
    def timed(id_, strategy, median, program, seed):
        times = list(median * (1 + 0.05 * np.random.default_rng(seed).standard_normal(8)))
        return _run(id_, strategy, run_s=float(np.median(times)), run_s_min=min(times), run_s_max=max(times),
                    repeat_times=times, program=program, host="h", lr=0.01, optimizer="seed", init="seed",
                    tol=0.0, iterations_run=150)

    runs = pd.DataFrame([timed(1, "eager", 2.0, "", 0), timed(2, "scan", 0.10, "abc", 1),
                         timed(3, "scan_namedtuple", 0.13, "abc", 2), timed(4, "fori_loop", 0.10, "def", 3)])
    data = pd.concat(_datasets(bars.speedup_bars(runs, baseline="eager").to_dict()))
    per = data.dropna(subset=["strategy"]).drop_duplicates("strategy").set_index("strategy")
    assert per.loc["scan", "speedup"] == per.loc["scan_namedtuple", "speedup"]
    assert per.loc["scan", "text"] == per.loc["scan_namedtuple", "text"] and per.loc["scan", "text"].startswith("×")
    assert per.loc["fori_loop", "speedup"] != per.loc["scan", "speedup"]
    # Against one of them as the baseline, the other is the same program: no bar.
    data = pd.concat(_datasets(bars.speedup_bars(runs, baseline="scan").to_dict()))
    per = data.dropna(subset=["strategy"]).drop_duplicates("strategy").set_index("strategy")
    assert per.loc["scan_namedtuple", "text"] == "same program" and per.loc["scan_namedtuple", "speedup"] == 1.0


def test_speed_ups_with_no_bar_to_draw_say_so_in_the_chart():
    """Every run one program (the first Run's scan strategies), or one strategy alone: ×1
    throughout, said in the chart rather than drawn as an empty plot."""
    def timed(id_, strategy, program):
        return _run(id_, strategy, run_s=0.1, run_s_min=0.09, run_s_max=0.11, repeat_times=[0.09, 0.1, 0.11],
                    program=program, host="h", lr=0.01, optimizer="seed", init="seed", tol=0.0, iterations_run=150)

    one_program = pd.DataFrame([timed(1, "scan", "abc"), timed(2, "scan_namedtuple", "abc")])
    alone = pd.DataFrame([timed(1, "scan", "abc")])
    for runs, said in ((one_program, "×1: one compiled program, one speed"), (alone, "×1: scan alone")):
        chart = bars.speedup_bars(runs, baseline="scan")
        spec = chart.to_dict()
        assert spec["mark"]["type"] == "text" and pd.concat(_datasets(spec))["note"].iloc[0] == said
        # A note, which the Run page leaves at its own height (not 200 px around one line).
        assert style.is_note(chart) and spec["height"] == 60
    # Another program beside them draws its bars.
    mixed = pd.concat([one_program, pd.DataFrame([timed(3, "jit_step", "def")])], ignore_index=True)
    drawn = bars.speedup_bars(mixed, baseline="jit_step")
    assert drawn.to_dict().get("layer") and not style.is_note(drawn)


def test_each_phase_wide_enough_is_named_in_its_segment_in_the_ink_that_reads_on_its_grey():
    """The phases' greys are close in lightness: a segment with room says which phase it is,
    by the legend's name (a short form read as another phase), nothing where it has no room;
    and the chart keeps its time axis."""
    runs = pd.DataFrame([_run(1, "scan", run_s=0.8, compile_s=1.5, trace_lower_s=0.01, first_call_s=0.8),
                         _run(2, "jit_step", status="diverged", run_s=0.5, compile_s=2.0)])
    spec = bars.timing_bars(runs).to_dict()
    (written,) = [layer for layer in spec["layer"] if layer.get("encoding", {}).get("text", {}).get("field") == "tag"]
    assert written["encoding"]["color"] == {"field": "ink", "type": "nominal", "scale": None}
    # A layer with no axis of its own (axis=None) took the time axis off the whole chart.
    assert written["encoding"]["x"]["axis"] == spec["layer"][0]["encoding"]["x"]["axis"]
    assert spec["layer"][0]["encoding"]["x"]["axis"]["title"] == "time (s)"
    tags = pd.DataFrame(spec["datasets"][written["data"]["name"]])
    said = dict(zip(tags["named"], tags["tag"]))
    # Each segment's width decides: compile's 1.5 s is named, trace's 0.01 s not.
    top = spec["layer"][0]["encoding"]["x"]["scale"]["domain"][1]
    scan = runs.iloc[0]
    for column, phase in bars.PHASES.items():
        room = scan[column] / top * bars.NARROWEST_PLOT_PX
        fits = len(phase) * bars.TAG_CHAR_PX + bars.TAG_MARGIN_PX <= room
        assert said.get(phase) == (phase if fits else None), (phase, room, said)
    assert said["compile or load"] == "compile or load" and "trace+lower" not in said
    assert set(said) == set(said.values()) <= set(bars.PHASES.values())  # the legend's names, no other
    assert set(tags["run"]) == {"scan"}  # a diverged run's hollow bar is not written in
    inks = dict(zip(tags["named"], tags["ink"]))
    for phase, grey in zip(bars.PHASES.values(), style.PHASE_COLORS):
        if phase in inks:
            other = "#FFFFFF" if inks[phase] == "#111111" else "#111111"
            assert colour_vision.contrast(inks[phase], grey) > colour_vision.contrast(other, grey) >= 1
