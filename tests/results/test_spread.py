"""Spread arithmetic: speed-ups carry the range of their repeats, and overlapping ranges are noise."""

import math

import pytest

from core.results.spread import NOT_SIGNIFICANT, NOT_TOLD_APART, Ratio, Spread, ratio, speedup, times, value_range


def test_a_speedup_spans_the_extremes_of_both_ranges():
    eager, scan = Spread(2.35, 2.10, 2.60, 3), Spread(0.10, 0.098, 0.102, 3)
    found = speedup(eager, scan)
    assert found.value == pytest.approx(23.5)
    assert found.low == pytest.approx(2.10 / 0.102) and found.high == pytest.approx(2.60 / 0.098)
    assert found.significant is True
    assert found.label == "×23.5 (×21–×27)"


def test_overlapping_ranges_are_labelled_as_noise_not_as_a_speedup():
    first, second = Spread(0.100, 0.095, 0.110, 5), Spread(0.104, 0.099, 0.112, 5)
    found = speedup(first, second)
    assert found.significant is False
    # Their ranges alone judged them (no repeats kept for a test): not told apart, which is no
    # finding that they are alike.
    assert found.untested and found.brief == NOT_TOLD_APART
    assert found.label.startswith(f"{NOT_TOLD_APART}: too few repeats") and "×0.96" not in found.label.split("(")[0]
    # With the repeats kept, a test decides: no significant difference.
    samples = dict(first=(0.095, 0.098, 0.100, 0.104, 0.110, 0.097, 0.101, 0.103),
                   second=(0.099, 0.100, 0.104, 0.106, 0.112, 0.096, 0.102, 0.105))
    tested = speedup(Spread(0.1005, 0.095, 0.110, 8, samples["first"]),
                     Spread(0.1035, 0.096, 0.112, 8, samples["second"]))
    assert tested.significant is False and not tested.untested
    assert tested.label.startswith(NOT_SIGNIFICANT) and tested.brief == "within noise"
    # Ranges that only touch still overlap: the difference could be nothing at all.
    assert Spread(1.0, 0.9, 1.0).overlaps(Spread(1.1, 1.0, 1.2))
    assert not Spread(1.0, 0.9, 0.99).overlaps(Spread(1.1, 1.0, 1.2))


def test_a_single_repeat_has_no_range_to_judge_by():
    found = speedup(Spread(2.0, 2.0, 2.0, 1), Spread(0.5, 0.4, 0.6, 3))
    assert found.significant is None and found.value == 4.0
    assert found.label == "×4 (1 repeat: no range)"
    assert value_range(Spread(3.0, 3.0, 3.0, 1), "ms") == "3 ms (1 repeat)"


def test_a_ratio_to_a_baseline_is_the_inverse_of_a_speedup():
    baseline, faster = Spread(1.0, 0.9, 1.1), Spread(0.25, 0.24, 0.26)
    assert ratio(faster, baseline).value == pytest.approx(1 / speedup(baseline, faster).value)
    assert ratio(faster, baseline).low == pytest.approx(0.24 / 1.1)
    assert ratio(faster, baseline).high == pytest.approx(0.26 / 0.9)


def test_per_iteration_spread_scales_the_run_range_and_pooling_widens_it():
    row = {"run_s": 0.3, "run_s_min": 0.27, "run_s_max": 0.36, "per_iter_ms": 2.0, "repeats": 3}
    per_iter = Spread.of_run(row, "per_iter_ms")
    assert (per_iter.median, per_iter.low, per_iter.high) == pytest.approx((2.0, 1.8, 2.4))
    pooled = Spread.pooled([Spread(1.0, 0.9, 1.2, 3), Spread(1.4, 1.3, 1.5, 3), Spread(1.1, 1.0, 1.3, 3)])
    assert (pooled.median, pooled.low, pooled.high, pooled.repeats) == (1.1, 0.9, 1.5, 9)
    with pytest.raises(ValueError):
        Spread.of_run(row, "compile_s")  # measured once: there is no range


def test_rows_without_a_repeat_count_infer_one_from_their_range():
    assert Spread.of_run({"run_s": 1.0, "run_s_min": 0.9, "run_s_max": 1.1}).known
    assert not Spread.of_run({"run_s": 1.0, "run_s_min": 1.0, "run_s_max": 1.0}).known


def test_a_zero_or_missing_timing_gives_no_ratio_rather_than_an_error():
    assert math.isnan(speedup(Spread(1.0, 1.0, 1.0), Spread(0.0, 0.0, 0.0)).value)
    assert speedup(Spread(1.0, 1.0, 1.0), Spread(0.0, 0.0, 0.0)).label == "n/a"


def test_times_formats_for_a_projector():
    assert [times(v) for v in (250.0, 23.54, 4.0, 1.044, 0.25)] == ["×250", "×23.5", "×4", "×1.04", "×0.25"]
    assert [times(v, short=True) for v in (26.4, 1.1, 0.97)] == ["×26", "×1.1", "×0.97"]
    # A bound near 1 keeps the digit that tells it from 1 ("×1" read as no gain at all).
    assert [times(v, short=True) for v in (1.0213, 0.9612, 1.0)] == ["×1.02", "×0.961", "×1"]
    # A range whose two bounds would read alike gets the digit that tells them apart.
    assert Ratio(1.18, 1.16, 1.21, True).span == "×1.16–×1.21"
    assert Ratio(23.5, 21.2, 26.4, True).span == "×21–×26"
    # Two digits would put the value shown outside its range ("×1.69 (×1.7–×2.1)"): three.
    assert Ratio(1.6949, 1.6949, 2.1, True).label == "×1.69 (×1.69–×2.1)"
    assert Ratio(1.80, 1.6949, 2.1, True).label == "×1.8 (×1.7–×2.1)"
    assert value_range(Spread(3.474, 3.41, 3.6, 3), "ms") == "3.47 ms (3.41–3.6)"


def test_a_range_that_reaches_x1_is_no_difference_even_when_the_ranges_just_miss():
    # x0.34 to x0.999: printed "x0.34–x1", it reads as a slowdown the repeats do not show.
    found = speedup(Spread(1.0, 0.34, 0.999), Spread(1.2, 1.0, 1.5))
    assert not Spread(1.0, 0.34, 0.999).overlaps(Spread(1.2, 1.0, 1.5))
    assert found.significant is False and found.label.startswith(NOT_SIGNIFICANT)
    assert speedup(Spread(1.0, 0.9, 1.1), Spread(0.5, 0.45, 0.55)).significant is True
