"""The device-count sweep: its points, the command that re-runs a spec in its own process,
the table of speed-ups and efficiencies, and its chart. The real subprocess runs are in
tests/test_app.py (Scaling page); here only a refused one runs."""

from __future__ import annotations

import altair as alt
import pandas as pd
import pytest
from specs import tutorial_spec

from core.bench import device_sweep
from core.charts import lines, style
from core.cli.arguments import build_parser, fit_spec
from core.spec import DatasetSpec, OptimizerSpec, SpecError


def test_points_share_the_spec_where_strong_and_weak_meet():
    base = tutorial_spec(iterations=20, precision="float64", repeats=2)
    points = device_sweep.sweep_points(base, (4, 1, 2), strong_replicate=100, weak_per_device=25)
    assert [(p.series, p.devices, p.spec.dataset.replicate) for p in points] == [
        ("strong", 1, 100), ("strong", 2, 100), ("strong", 4, 100),
        ("weak", 1, 25), ("weak", 2, 50), ("weak", 4, 100)]
    assert all(p.spec.strategy == "sharded" and p.spec.iterations == 20 and p.spec.precision == "float64"
               for p in points)
    # oaks x100 on 4 devices is both the last strong and the last weak point: it runs once.
    specs = device_sweep.distinct_specs(points)
    assert [(s.devices, s.dataset.replicate) for s in specs] == [(1, 100), (1, 25), (2, 100), (2, 50), (4, 100)]
    with pytest.raises(SpecError, match="at least one device count"):
        device_sweep.sweep_points(base, ())
    with pytest.raises(SpecError, match="devices must be between"):
        device_sweep.sweep_points(base, (0, -1))


def test_xla_flags_keep_other_flags_and_replace_the_count():
    flags = "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8 --xla_cpu_foo=1"
    assert device_sweep.xla_flags_with_device_count(flags, 2) == (
        "--xla_dump_to=/tmp/x --xla_cpu_foo=1 --xla_force_host_platform_device_count=2")
    assert device_sweep.xla_flags_with_device_count("", 4) == "--xla_force_host_platform_device_count=4"
    spec = tutorial_spec(strategy="sharded", devices=4)
    env = device_sweep.subprocess_environment(spec, {"PLNLAB_DB": "/x.sqlite3", "XLA_FLAGS": "--a=1"})
    assert env["XLA_FLAGS"] == "--a=1 --xla_force_host_platform_device_count=4" and env["PLNLAB_DB"] == "/x.sqlite3"


@pytest.mark.parametrize("spec", [
    tutorial_spec(dataset=DatasetSpec(kind="oaks", replicate=25), strategy="sharded", devices=2, iterations=7,
                  precision="float64", optimizer=OptimizerSpec("adam", 0.05), init="log_counts", repeats=2),
    tutorial_spec(dataset=DatasetSpec(kind="simulated_on_device", n=1000, p=9, d=2, seed=4), strategy="sharded"),
    tutorial_spec(dataset=DatasetSpec(kind="simulated", n=50, p=4), strategy="while_loop", tol=1e-7),
])
def test_command_line_builds_the_same_spec(spec):
    arguments = device_sweep.cli_arguments(spec, "/tmp/runs.sqlite3")
    args = build_parser().parse_args(arguments)
    assert args.db == "/tmp/runs.sqlite3" and args.json
    assert fit_spec(args).key == spec.key  # so the page finds the stored run


def test_csv_data_cannot_run_in_another_process():
    spec = tutorial_spec(dataset=DatasetSpec(kind="csv", counts_path="upload.csv", content_hash="ab"))
    with pytest.raises(SpecError, match="csv"):
        device_sweep.cli_arguments(spec, "/tmp/runs.sqlite3")


def test_progress_lines_give_their_phase():
    assert device_sweep.phase_of("sharded on oaks x1: compile    \n") == "compile"
    assert device_sweep.phase_of("sharded on oaks x1: first_call [....] 0/5") == "first_call"
    assert device_sweep.phase_of("sharded on oaks x1: queued, 1 ahead, waited 3 s; holder: ...") == "queued"
    assert device_sweep.phase_of("W0000 something else: entirely") is None


def test_a_refused_run_raises_its_one_line_message(tmp_path):
    spec = tutorial_spec(strategy="sharded", device="gpu", iterations=2, repeats=1)
    seen = []
    with pytest.raises(SpecError, match="device 'gpu' is not available"):
        device_sweep.run_in_own_process(spec, str(tmp_path / "runs.sqlite3"), on_phase=seen.append)
    assert seen == []


def _frame(points, times):
    rows = [{"spec_key": p.spec.key, "n": 116 * p.spec.dataset.replicate, "per_iter_ms": times[(p.series, p.devices)],
             "status": "ok"} for p in points]
    return pd.DataFrame(rows)


def test_table_gives_speed_up_and_efficiency():
    points = device_sweep.sweep_points(tutorial_spec(), (1, 2, 4), strong_replicate=100, weak_per_device=25)
    times = {("strong", 1): 8.0, ("strong", 2): 5.0, ("strong", 4): 4.0,
             ("weak", 1): 2.0, ("weak", 2): 2.5, ("weak", 4): 4.0}
    frame = _frame(points, times)
    # A second run of the 1-device strong point moves its median; a diverged one does not count.
    extra = {"spec_key": points[0].spec.key, "n": 11600, "per_iter_ms": 10.0, "status": "ok"}
    diverged = {"spec_key": points[1].spec.key, "n": 11600, "per_iter_ms": 0.001, "status": "diverged"}
    frame = pd.concat([frame, pd.DataFrame([extra, diverged])], ignore_index=True)
    table = device_sweep.scaling_table(frame, points).set_index(["series", "devices"])
    assert table.loc[("strong", 1), "per_iter_ms"] == 9.0 and table.loc[("strong", 1), "runs"] == 2
    assert table.loc[("strong", 4), "speed_up"] == pytest.approx(9.0 / 4.0)
    assert table.loc[("strong", 4), "efficiency"] == pytest.approx(9.0 / 4.0 / 4)
    assert table.loc[("strong", 2), "ideal_ms"] == pytest.approx(4.5)
    assert table.loc[("weak", 4), "efficiency"] == pytest.approx(0.5)
    assert table.loc[("weak", 2), "ideal_ms"] == 2.0
    assert table.loc[("weak", 2), "rows_per_device"] == 2900 and table.loc[("weak", 4), "n"] == 11600


def test_table_without_a_one_device_run_has_no_ratios():
    points = device_sweep.sweep_points(tutorial_spec(), (1, 2), strong_replicate=10, weak_per_device=5)
    frame = _frame(points, {("strong", 1): 1.0, ("strong", 2): 1.0, ("weak", 1): 1.0, ("weak", 2): 1.0})
    frame = frame[frame["spec_key"] != points[0].spec.key]  # strong x10 on 1 device never ran
    table = device_sweep.scaling_table(frame, points)
    strong = table[table["series"] == "strong"]
    assert list(strong["devices"]) == [2] and strong["speed_up"].isna().all()
    assert table[table["series"] == "weak"]["speed_up"].notna().all()
    assert device_sweep.scaling_table(frame.iloc[:0], points).empty


def test_device_chart_draws_measured_and_ideal_lines():
    points = device_sweep.sweep_points(tutorial_spec(), (1, 2, 4))
    times = {("strong", 1): 8.0, ("strong", 2): 5.0, ("strong", 4): 4.0,
             ("weak", 1): 2.0, ("weak", 2): 2.5, ("weak", 4): 4.0}
    table = device_sweep.scaling_table(_frame(points, times), points)
    spec = lines.device_scaling(table, "strong").to_dict()
    data = pd.concat([pd.DataFrame(rows) for rows in spec["datasets"].values()])
    measured, ideal = data[data["line"] == "measured"], data[data["line"] == "ideal"]
    assert list(measured["ms"]) == [8.0, 5.0, 4.0] and list(ideal["ms"]) == [8.0, 4.0, 2.0]
    assert spec["encoding"]["x"]["scale"]["type"] == "log" and spec["encoding"]["x"]["axis"]["values"] == [1, 2, 4]
    assert spec["encoding"]["color"]["scale"]["range"][0] == style.STRATEGY_COLORS["sharded"]
    assert "Weak" in lines.device_scaling(table, "weak").to_dict()["title"]
    note = lines.device_scaling(table.iloc[:0], "weak")
    assert isinstance(note, alt.Chart) and "No stored run" in str(note.to_dict())
    with pytest.raises(ValueError, match="series"):
        lines.device_scaling(table, "sideways")
