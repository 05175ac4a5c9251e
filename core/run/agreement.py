"""Whether runs of one problem computed the same fit: the spread of their final ELBOs.

Strategies differ only in what they compile, so their final ELBOs may differ by
rounding and nothing more; the tolerance is what rounding can explain in each precision.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

# Relative spread of final ELBOs under which runs "agree" (rounding noise only).
TOLERANCE = {"float32": 1e-4, "float64": 1e-6}


def spread(final_elbos: pd.Series) -> float:
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


def tolerance(precisions: Iterable[str]) -> float:
    """The tolerance for runs of these precisions: float64's only when every run is float64."""
    return TOLERANCE["float64" if set(precisions) == {"float64"} else "float32"]
