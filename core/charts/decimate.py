"""Long curves thinned for display without losing their shape.

A stored ELBO curve may hold a million points; a chart a few inches wide shows a few
thousand at most, and every point shipped costs the server's memory and the browser's
time. `envelope` keeps, in each of equal buckets along the curve, its lowest and highest
point (in their order), plus the first and the last: the drawn line has the same extremes,
spikes and plateaus as the whole curve (a min/max decimation, as oscilloscopes do).
"""

from __future__ import annotations

import numpy as np

DISPLAY_POINTS = 2000


def envelope(values: np.ndarray, max_points: int = DISPLAY_POINTS) -> np.ndarray:
    """Indices (increasing) of at most `max_points` points of `values` that keep its shape.

    Args:
        values: (length,) a curve; non-finite values are kept where they are extremes of
            nothing (they never win a bucket over a finite value).
        max_points: how many points to keep, at least 4.

    Returns:
        All indices when the curve is short enough; else the first, the last, and the
        argmin and argmax of each of (max_points - 2) // 2 equal buckets in between.
    """
    values = np.asarray(values, dtype=np.float64)
    length = len(values)
    if length <= max_points:
        return np.arange(length)
    buckets = (max(4, max_points) - 2) // 2
    low = np.where(np.isfinite(values), values, np.inf)
    high = np.where(np.isfinite(values), values, -np.inf)
    edges = np.linspace(1, length - 1, buckets + 1).astype(np.int64)
    kept = [np.array([0, length - 1])]
    for start, stop in zip(edges[:-1], edges[1:]):
        if stop > start:
            kept.append(np.array([start + np.argmin(low[start:stop]), start + np.argmax(high[start:stop])]))
    return np.unique(np.concatenate(kept))
