"""Chart layout on a projector: legends that show every entry, labels inside the plot,
log axes where timings span decades, groups and ratios of like with like. Rows are fake
but plausible (`test_charts`' fixtures); no fit runs here."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd
import pytest
from charts.test_charts import _datasets, elbo_long, runs  # noqa: F401 - fixtures, used by name

from core.charts import bars, comparisons, lines, style, theme


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


def test_timing_bars_stay_linear_and_cut_the_bars_that_dwarf_the_rest(runs):
    close = runs[(runs["n"] == 116) & (runs["strategy"].isin(["jit_step", "scan"])) & (runs["status"] == "ok")]
    linear = bars.timing_bars(close).to_dict()["layer"][0]["encoding"]
    assert linear["x"]["field"] == "start" and linear["x2"]["field"] == "end"
    assert "type" not in linear["x"].get("scale", {}) and bars.timing_cut(close) is None
    spec = bars.timing_bars(runs).to_dict()  # eager at n = 11600 beside scan at n = 116: decades apart
    encoding = spec["layer"][0]["encoding"]
    assert "type" not in encoding["x"]["scale"] and encoding["x"]["axis"]["title"] == "time (s)"
    assert encoding["y"]["axis"]["labelOverlap"] is False  # every run's name, however short its row
    data = pd.concat(_datasets(spec)).dropna(subset=["phase"])
    cut = bars.timing_cut(runs)
    for run, parts in data.groupby("run"):
        parts = parts.sort_values("phase_rank")
        # Each phase starts where the one before it ended, up to the cut.
        assert list(parts["start"].iloc[1:]) == pytest.approx(list(parts["end"].iloc[:-1])), run
        assert list(parts["end"]) == pytest.approx(list(parts["seconds"].cumsum().clip(upper=cut))), run
    cut_names = {name for name, _ in bars.cut_runs(runs)}
    assert cut_names and "jit_step" in cut_names and data["end"].max() == pytest.approx(cut)


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
    assert spec["height"] == {"step": bars.row_step(2, 44)}  # two lines a row, names and texts alike
    assert "split(datum.label" in spec["layer"][0]["encoding"]["y"]["axis"]["labelExpr"]
    data = pd.concat(_datasets(spec)).dropna(subset=["run"]).drop_duplicates("id").set_index("id")
    assert data.loc[3, "text"] == "×0.25\n(×0.19–×0.33)"
    assert data["run"].str.count("\n").max() == 1  # "strategy ·" over "optimizer #id"
    as_one_line = data["text"].str.replace("\n(", " (", regex=False)
    names = data["run"].str.replace(" ·\n", " · ", regex=False)
    lines = pd.Series([line for row in data["run"] for line in row.split("\n")])
    assert bars.text_share(as_one_line, names) > bars.MOST_TEXT_SHARE
    assert bars.text_share(as_one_line, lines, broken=True) <= bars.MOST_TEXT_SHARE


def test_long_run_names_wrap_so_that_the_bars_keep_their_plot_and_every_row_its_name(runs):
    # Compare names a run by all that sets it apart: on one line such names took the whole
    # chart's width (no bars drawn), and split at every separator onto rows too short for them
    # (Vega dropped every other name).
    names = {run_id: f"#{run_id} scan_pytree_class · preconditioned_lbfgs · simulated 1000x50 d=1 (seed 0) · "
                     f"float{32 if run_id % 2 else 64}" for run_id in runs["id"]}
    named = runs.assign(label=runs["id"].map(names))
    reached = pd.DataFrame({"id": runs["id"], "strategy": runs["strategy"], "optimizer": "preconditioned_lbfgs",
                            "iterations_to": 30.0, "seconds_to": np.linspace(0.01, 0.5, len(runs)),
                            "label": named["label"]})
    for spec in (comparisons.ratio_bars(named, 1).to_dict(), comparisons.reach_bars(reached, 1e-5).to_dict()):
        y = spec["layer"][0]["encoding"]["y"]
        rows = pd.concat(_datasets(spec))[y["field"]].dropna().unique()
        lines = [line.removesuffix(" ·") for row in rows for line in row.split("\n")]
        assert max(len(line) for line in lines) <= bars.RUN_NAME_CHARS
        most = max(row.count("\n") + 1 for row in rows)
        assert spec["height"]["step"] >= bars.LINE_PX * most  # each row holds its name's lines
        assert y["axis"]["labelOffset"] == -(most - 1) * bars.LINE_PX / 2 and len(y["sort"]) == len(rows)
        assert set(y["sort"]) == set(rows)  # drawn in the order asked, under their wrapped names


def test_long_group_names_wrap_to_a_projectors_width_and_notes_stay_inside_the_plot(runs):
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
    # A broken line ends with the separator's mark (beyond the width): it goes on below.
    assert all(row.split("\n")[0].endswith(" ·") for row in data["row"])
    assert max(len(line.removesuffix(" ·")) for line in lines) <= most and data["row"].str.contains("\n").all()
    assert spec["height"] == {"step": bars.LINE_PX * 2 + 12}  # two lines a row: "oaks x1 · scan" / its optimizer
    assert y["axis"]["labelOffset"] == -bars.LINE_PX / 2  # centred on the row
    assert y["axis"]["labelLimit"] == 0  # each line drawn whole, the separator's mark included
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


def test_grouped_timings_have_a_labelled_tick_past_the_slowest_run(runs):
    # Eager's dots at 0.45 s stood past the last labelled tick (0.2): the axis ends at the tick after them.
    spec = comparisons.grouped_summary(runs, by=["strategy"]).to_dict()
    encoding = spec["layer"][0]["encoding"]["x"]
    data = pd.concat(_datasets(spec)).drop_duplicates("group")
    slowest = float(data["max"].max())
    ticks = sorted(encoding["axis"]["values"])
    assert ticks[-1] >= slowest > ticks[-2]  # the first tick past it ends the labels: none across the notes' room
    assert encoding["scale"]["domain"][1] >= ticks[-1]
