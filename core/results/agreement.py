"""Whether runs of one problem computed the same fit, judged by the criterion that fits their optimizer.

Strategies differ only in what they compile, so they round differently and nothing more.
How far that rounding carries depends on the optimizer (tests/fit/test_agreement.py):

- Runs that have converged sit at one optimum: their final ELBOs agree to `SAME_OPTIMUM`.
- Before that, an optimizer that amplifies rounding lets trajectories part: rprop steps by the
  sign of each gradient, and where a gradient is rounding noise (B at its closed form, every
  coordinate near the optimum) the sign is the noise's, so one ulp can move the whole trace by
  1e-2; RAdam's and Adam's normalised steps do the same more gently. Mid-run, such runs are
  within their optimizer's drift (`DRIFT`) and meet at the optimum: not a disagreement.
- Otherwise final ELBOs agree to rounding (`ROUNDING`), as they do over the first iterations
  for every optimizer.
- A run that stalled (its last change at or under what its precision resolves,
  `core.results.outcome.stalled`) came to rest short of the optimum, where its steps stopped
  changing the ELBO: it is not converged, and runs that stalled at different points are
  apart by up to how far each stopped short (`STALLED_GAP`), not at two optima.

A new optimizer says here whether, and how far, it amplifies rounding; one that is not
listed is held to rounding.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import numpy as np
import pandas as pd

from core.results.outcome import RESOLUTION

# Relative spread of final ELBOs that rounding explains while trajectories follow each other.
ROUNDING = {"float32": 1e-5, "float64": 1e-9}
# Relative spread of the final ELBOs of converged runs: one optimum, as near as a stop at a
# relative change of 1e-7 comes to it. What convergence promises (and tests/fit check against
# an independent long run): within 1e-5 of the optimum in float32, 1e-7 in float64. Two
# float32 runs that stop a few iterations apart (their stop tests round differently) sit
# about 1e-6 apart on oaks.
SAME_OPTIMUM = {"float32": 1e-5, "float64": 1e-7}
# A run whose last relative ELBO change is under this has come to rest.
CONVERGED_CHANGE = 1e-7
# How far short of the optimum a stalled run may stop: twice the widest seen (float32 at oaks
# x1000, before its cross products were summed in float64: 2.5e-5).
STALLED_GAP = {"float32": 5e-5, "float64": 1e-7}
# Optimizers that amplify rounding: why, and how far apart their runs drift before they meet
# (measured on oaks and a corner of it; the widest gap seen, rounded up).
DRIFT = {
    "rprop": ("rprop steps by the sign of each gradient, and where a gradient is rounding noise the sign is "
              "the noise's", 3e-2),
    "seed": ("RAdam's normalised step, clipped at 0.1, moves by up to 0.1 where a gradient is rounding noise",
             1e-1),
    "adam": ("Adam's normalised step moves by about lr where a gradient is rounding noise", 1e-3),
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the final ELBOs of a set of runs say.

    Attributes:
        state: "agree", "drift" (apart, within what the optimizer's amplified rounding
            explains before convergence), "differ", "mixed" (runs of different optimizers,
            learning rates or starts) or "unknown" (fewer than two finished runs).
        spread: the largest relative difference of the final ELBOs (NaN when unknown).
        limit: the spread the state was judged against (NaN when not judged).
        reason: one sentence a reader can check.
    """

    state: str
    spread: float
    limit: float
    reason: str


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


def _precision(precisions: Iterable[str]) -> str:
    """float64 only when every run is float64."""
    return "float64" if set(precisions) == {"float64"} else "float32"


def _stalled(finished: pd.DataFrame, changes: pd.Series) -> int:
    """How many of the runs ended on a change their precision cannot tell from none."""
    if changes.empty:
        return 0
    precisions = finished["precision"] if "precision" in finished else pd.Series("float32", index=finished.index)
    resolution = precisions.map(lambda precision: RESOLUTION.get(precision, 0.0)).to_numpy(float)
    return int((changes.to_numpy(float) <= resolution).sum())


def verdict(runs: pd.DataFrame) -> Verdict:
    """Judge the finished runs of `runs` (one row per run: final_elbo, status, precision,
    optimizer, lr, init, final_change; missing columns are taken as unknown)."""
    finished = runs[runs["status"] == "ok"] if "status" in runs else runs
    value = spread(finished["final_elbo"]) if "final_elbo" in finished else float("nan")
    if len(finished) < 2 or value != value:
        return Verdict("unknown", float("nan"), float("nan"), "needs two finished runs")
    algorithms = {col: finished[col].astype(str).unique() for col in ("optimizer", "lr", "init") if col in finished}
    if any(len(values) > 1 for values in algorithms.values()):
        return Verdict("mixed", value, float("nan"),
                       "the runs use different optimizers, learning rates or starts: their ELBOs meet only at the "
                       "optimum")
    precision = _precision(finished.get("precision", []))
    changes = pd.to_numeric(finished.get("final_change", pd.Series(dtype=float)), errors="coerce")
    stalled = _stalled(finished, changes)
    converged = len(changes) == len(finished) and bool((changes < CONVERGED_CHANGE).all()) and not stalled
    if converged:
        limit = SAME_OPTIMUM[precision]
        if value <= limit:
            return Verdict("agree", value, limit, "converged runs at one optimum")
        return Verdict("differ", value, limit, "converged runs at different optima")
    if value <= ROUNDING[precision]:
        return Verdict("agree", value, ROUNDING[precision], "rounding noise only")
    if stalled and value <= STALLED_GAP[precision]:
        return Verdict("drift", value, STALLED_GAP[precision],
                       f"{stalled} of {len(finished)} runs stalled at their precision's resolution, short of the "
                       "optimum and each where its steps stopped changing the ELBO; run in float64 to compare them "
                       "exactly")
    optimizer = algorithms.get("optimizer", [""])[0]
    if optimizer in DRIFT:
        why, band = DRIFT[optimizer]
        if value <= band:
            return Verdict("drift", value, band,
                           f"mid-run, within {optimizer}'s drift: {why}, so trajectories part before they meet at "
                           "the optimum; run to convergence to compare them exactly")
    return Verdict("differ", value, ROUNDING[precision], "more than rounding noise explains for this optimizer")
