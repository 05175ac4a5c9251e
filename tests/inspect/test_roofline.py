"""The roofline: floor arithmetic, the peaks cache, XLA's cost per iteration, matching runs, the chart.

Measurement kernels are shrunk to a few kilobytes: the figures are meaningless here, only
their plumbing is tested.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from specs import tutorial_spec

from core.charts import roofline as roofline_chart
from core.inspect import roofline
from core.run import prepared
from core.spec import DatasetSpec

TINY = DatasetSpec(kind="simulated", n=30, p=4, d=1, seed=0)
MACHINE = roofline.Peaks(matmul_flops_per_s=1e11, exp_per_s=1e9, bytes_per_s=2e10,
                         device_kind="cpu", dtype="float32", host="here")


@pytest.fixture
def small_kernels(monkeypatch, tmp_path):
    """Tiny measurement kernels and a private cache dir (peaks.json lands in tmp_path)."""
    monkeypatch.setattr(roofline, "_MATMUL_SIZE", 32)
    monkeypatch.setattr(roofline, "_EXP_ELEMENTS", 1 << 10)
    monkeypatch.setattr(roofline, "_STREAM_ELEMENTS", 1 << 12)
    monkeypatch.setattr(roofline, "_REPEATS", 2)
    monkeypatch.setenv("PLNLAB_JAX_CACHE", str(tmp_path / "jax-cache"))
    return tmp_path / "peaks.json"


def test_floor_arithmetic_on_known_numbers():
    # 2e9 flops at 1e11/s = 20 ms, 1e7 exps at 1e9/s = 10 ms; 4e8 bytes at 2e10/s = 20 ms.
    bound = roofline.floor(2e9, 1e7, 4e8, MACHINE)
    assert bound.compute_s == pytest.approx(0.03) and bound.memory_s == pytest.approx(0.02)
    assert bound.seconds == pytest.approx(0.03) and bound.bound == "compute"
    memory_bound = roofline.floor(1e6, 0.0, 4e9, MACHINE)
    assert memory_bound.seconds == pytest.approx(0.2) and memory_bound.bound == "memory"


def test_peaks_are_measured_once_and_cached_beside_the_compile_cache(small_kernels, monkeypatch):
    import jax

    device = jax.devices("cpu")[0]
    first = roofline.peaks(device, "float32")
    assert small_kernels.exists()
    assert first.matmul_flops_per_s > 0 and first.exp_per_s > 0 and first.bytes_per_s > 0
    assert (first.dtype, first.device_kind) == ("float32", device.device_kind)
    stored = json.loads(small_kernels.read_text())
    assert [entry["dtype"] for entry in stored.values()] == ["float32"]

    def no_measuring(*args):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(roofline, "measure_peaks", no_measuring)
    assert roofline.peaks(device, "float32") == first
    assert roofline.device_peaks("cpu", "float32") == first
    remeasured = dataclasses.replace(first, matmul_flops_per_s=1.0)
    monkeypatch.setattr(roofline, "measure_peaks", lambda device, dtype: remeasured)
    assert roofline.peaks(device, "float32", remeasure=True) == remeasured
    assert roofline.peaks(device, "float32") == remeasured  # the re-measurement replaced the cache
    assert not list(small_kernels.parent.glob("*.tmp"))


def test_a_broken_peaks_file_is_measured_again(small_kernels):
    import jax

    small_kernels.write_text("{not json")
    assert roofline.peaks(jax.devices("cpu")[0], "float64").dtype == "float64"
    assert json.loads(small_kernels.read_text())


def test_analyse_gives_work_compulsory_bytes_and_a_floor(small_kernels):
    from core.data import datasets as data

    spec = tutorial_spec(dataset=TINY, strategy="scan", iterations=3, repeats=1)
    analysis = roofline.analyse(spec, cache=prepared.ExecutableCache(size=1))
    assert analysis.cost.flops > 0 and analysis.cost.transcendentals > 0
    prep = prepared.prepare(spec, data.load(TINY), cache=prepared.ExecutableCache(size=1))
    expected = roofline._nbytes(prep.data) + 2 * roofline._nbytes(prep.state)
    assert analysis.compulsory_bytes == expected
    assert 0 < analysis.model_bytes < analysis.compulsory_bytes
    assert analysis.floor is not None and analysis.floor.seconds > 0
    assert analysis.peak_bytes is None or analysis.peak_bytes > 0
    assert roofline.analyse_apart(spec).cost == analysis.cost


def test_eager_has_no_floor(small_kernels):
    analysis = roofline.analyse(tutorial_spec(dataset=TINY, strategy="eager", iterations=3, repeats=1))
    assert analysis.floor is None and analysis.cost.flops is None
    assert analysis.compulsory_bytes > 0


def _run(run_id, per_iter_ms, spec, host="here", status="ok", device_kind="cpu"):
    from types import SimpleNamespace

    return SimpleNamespace(id=run_id, created_at=float(run_id), per_iter_ms=per_iter_ms, status=status,
                           spec=json.loads(json.dumps(spec.to_dict())), versions={"host": host},
                           device_kind=device_kind)


def test_matching_runs_same_work_on_this_host_exact_settings_first():
    spec = tutorial_spec(dataset=TINY, strategy="scan", iterations=3, repeats=1)
    runs = [
        _run(1, 0.5, dataclasses.replace(spec, init="log_counts")),  # same problem, other init: fastest
        _run(2, 2.0, dataclasses.replace(spec, repeats=5)),  # same settings, repeats aside
        _run(3, 1.0, spec),
        _run(4, 0.1, spec, host="elsewhere"),
        _run(5, 0.1, spec, status="diverged"),
        _run(6, 0.1, dataclasses.replace(spec, iterations=4)),
        _run(7, 0.1, dataclasses.replace(spec, precision="float64")),
        _run(8, 0.1, spec, device_kind="NVIDIA H100"),
    ]
    found = roofline.matching_runs(runs, spec, MACHINE)
    assert [run.id for run in found] == [3, 2, 1]
    rows = roofline.times_floor(found, spec, roofline.Floor(compute_s=1e-4, memory_s=5e-5))
    assert [row["same_settings"] for row in rows] == [True, True, False]
    assert [row["x_floor"] for row in rows] == pytest.approx([10.0, 20.0, 5.0])
    assert math.isnan(roofline.times_floor(found, spec, roofline.Floor(0.0, 0.0))[0]["x_floor"])


def test_roof_frame_meets_at_the_ridge():
    roof = roofline_chart.roof_frame(1e11, 2e10, 0.1, 1000.0)
    assert list(roof["intensity"]) == [0.1, 5.0, 5.0, 1000.0]  # ridge = 1e11 / 2e10
    assert list(roof["gflops_per_s"]) == pytest.approx([2.0, 100.0, 100.0, 100.0])


def test_chart_point_sits_at_the_floor_and_the_measured_multiple():
    work = roofline_chart.equivalent_flops(2e9, 1e7, 1e11, 1e9)
    assert work == pytest.approx(3e9)  # each exp costs 100 matmul flops' time
    points = roofline_chart.point_frame(work, 4e8, 1e11, 2e10, measured_s=0.3)
    bound = roofline.floor(2e9, 1e7, 4e8, MACHINE)
    assert points["seconds"].iloc[0] == pytest.approx(bound.seconds)  # the chart's floor is the floor
    assert points["x_floor"].iloc[1] == pytest.approx(0.3 / bound.seconds)
    assert points["note"].iloc[1] == "10.0 × floor"


def test_chart_is_valid_vega_lite_with_log_axes():
    chart = roofline_chart.roofline_chart(1e11, 2e10, 1e9, 2e9, 1e7, 4e8, measured_s=0.3, measured_label="run #3")
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert spec["title"] == roofline_chart.TITLE
    scales = [layer["encoding"][axis]["scale"]["type"] for layer in spec["layer"] for axis in ("x", "y")]
    assert set(scales) == {"log"}
    # Ticked at 1, 2 or 5 times the powers of ten, every point inside the GFLOP/s axis.
    encoding = spec["layer"][0]["encoding"]
    for axis in ("x", "y"):
        ticks = encoding[axis]["axis"]["values"]
        assert ticks and all(f"{tick:.0e}"[0] in "125" for tick in ticks), (axis, ticks)
    bottom, top = encoding["y"]["scale"]["domain"]
    shown = [row["gflops_per_s"] for rows in spec["datasets"].values() for row in rows]
    assert bottom < min(shown) and max(shown) < top
    assert sorted(len(rows) for rows in spec["datasets"].values()) == [1, 1, 2, 4]  # notes, points, roof
    without = roofline_chart.roofline_chart(1e11, 2e10, 1e9, 2e9, 0.0, 4e8).to_dict()
    assert sorted(len(rows) for rows in without["datasets"].values()) == [1, 4]  # the floor alone and its note
