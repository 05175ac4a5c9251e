"""Chart construction: every builder yields a schema-valid Vega-Lite spec with the promised
colours, scales and data. Rows are fake but plausible; no fit runs here."""

from __future__ import annotations

import math
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.charts import bars, lines, style
from core.run import agreement

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
        bars.grouped_summary(runs, by=["strategy"]),
        bars.grouped_summary(runs, by=["strategy", "precision"], metric="run_s", log_x=False),
        bars.ratio_bars(runs, baseline_id=1),
        bars.ratio_bars(runs, baseline_id=999),
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
                  bars.grouped_summary(empty, by=["strategy"]),
                  lines.elbo_curves(elbo_long.iloc[:0])):
        chart.to_dict()


def test_scan_has_one_colour_across_charts_and_subsets(runs, elbo_long):
    subset = runs[runs["strategy"].isin(["scan", "jit_step"])]
    a = _strategy_colors(lines.scaling_lines(runs).to_dict())
    b = _strategy_colors(bars.speedup_bars(runs).to_dict())
    c = _strategy_colors(bars.grouped_summary(subset, by=["strategy"]).to_dict())
    d = _strategy_colors(lines.elbo_curves(elbo_long).to_dict())
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
    assert ("x", "ratio") in _log_fields(bars.ratio_bars(runs, 1).to_dict())


def test_speedup_values_and_labels():
    runs = pd.DataFrame([_run(1, "eager", run_s=2.0), _run(2, "scan", run_s=0.5),
                         _run(3, "jit_step", run_s=4.0),
                         _run(4, "scan", run_s=0.001, status="diverged")])
    data = pd.concat(_datasets(bars.speedup_bars(runs).to_dict()))
    per = data.dropna(subset=["strategy"]).drop_duplicates("strategy").set_index("strategy")
    assert per.loc["scan", "speedup"] == pytest.approx(4.0)
    assert per.loc["jit_step", "speedup"] == pytest.approx(0.5)
    assert per.loc["eager", "speedup"] == pytest.approx(1.0)
    assert per.loc["scan", "text"] == "×4.0 (1 diverged)"
    assert per.loc["jit_step", "text"] == "×0.5"


def test_speedup_without_baseline_is_a_note(runs):
    spec = bars.speedup_bars(runs[runs["strategy"] != "eager"]).to_dict()
    assert spec["mark"]["type"] == "text"
    assert "eager" in pd.concat(_datasets(spec))["note"].iloc[0]


def test_grouped_median_ignores_diverged_runs(runs):
    data = pd.concat(_datasets(bars.grouped_summary(runs, by=["strategy"],
                                                      metric="run_s").to_dict()))
    per = data.set_index("group")
    # Non-diverged scan runs: 0.5, 5.0, 50.0, 0.6; the diverged 500 s run is left out.
    assert per.loc["scan", "median"] == pytest.approx(np.median([0.5, 5.0, 50.0, 0.6]))
    assert per.loc["scan", "max"] == pytest.approx(50.0)
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
    ratio = pd.concat(_datasets(bars.ratio_bars(runs, baseline_id=1).to_dict()))
    ratio = ratio.dropna(subset=["run"]).set_index("id")
    assert ratio.loc[len(runs) - 2, "text"] == "diverged"
    assert pd.isna(ratio.loc[len(runs) - 2, "ratio"])
    assert ratio.loc[3, "ratio"] == pytest.approx(0.25)  # scan 0.5 s vs eager 2.0 s
    assert ratio.loc[3, "text"] == "×0.25"
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


def test_timing_bars_stack_in_chronological_order(runs):
    spec = bars.timing_bars(runs).to_dict()
    assert spec["encoding"]["color"]["scale"]["domain"] == [
        "trace+lower", "compile", "first call", "steady state"]
    assert spec["encoding"]["order"]["field"] == "phase_rank"
    data = pd.concat(_datasets(spec))
    assert len(data) == 4 * len(runs)


def test_ratio_against_diverged_or_missing_baseline_is_a_note(runs):
    diverged_id = int(runs.loc[runs["status"] == "diverged", "id"].iloc[0])
    for baseline in (diverged_id, 12345):
        assert bars.ratio_bars(runs, baseline).to_dict()["mark"]["type"] == "text"


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
