"""Thinning long curves for display keeps their shape: the extremes, spikes and ends."""

import numpy as np

from core.charts.decimate import envelope


def test_short_curves_are_kept_whole():
    np.testing.assert_array_equal(envelope(np.arange(10.0), 2000), np.arange(10))


def test_a_long_curve_keeps_its_ends_extremes_and_spikes_within_the_budget():
    rng = np.random.default_rng(0)
    curve = -1e5 + np.cumsum(rng.normal(size=200_000))
    curve[123_457] += 500.0  # one spike up
    curve[7] -= 500.0  # one spike down
    kept = envelope(curve, 2000)
    assert len(kept) <= 2000 and np.all(np.diff(kept) > 0)
    assert {0, 199_999, 7, 123_457, int(curve.argmax()), int(curve.argmin())} <= set(kept.tolist())
    # Every bucket's range is drawn: the thinned curve spans what the whole one spans.
    assert curve[kept].min() == curve.min() and curve[kept].max() == curve.max()


def test_non_finite_values_never_hide_finite_extremes():
    curve = np.linspace(-2.0, -1.0, 10_000)
    curve[5000:5010] = np.nan
    kept = envelope(curve, 100)
    assert np.isfinite(curve[kept]).all() and {0, 9999} <= set(kept.tolist())
