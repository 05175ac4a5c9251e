"""How a fit ended, read from its ELBO trace: diverged, converged, or stopped before converging.

Every runnable (JAX strategy or peer) hands the engine its per-iteration ELBO; this module
judges it the same way for all of them, wherever the fit stopped (a fixed iteration count,
while_loop's tolerance, or any stopping rule inside a compiled loop).

- **Diverged**: an ELBO that is not finite, or one that *ends* orders of magnitude below where
  it started (`BLOW_UP_FACTOR`). The ELBO is a lower bound on log p(Y) <= 0 that the fit
  raises, so a fit ending a thousand times further from 0 than its start has blown up (adam
  at lr 10 on oaks goes from -3.3e7 to -3.5e29 and stays there), even though every value is
  finite. `diverged_at` is the first iteration of the blow-up that never recovered, or the
  first non-finite one, whichever comes first.
- **Converged**: the fit stopped before its last iteration (the compiled loops stop only at
  `tol`, tested on a float64-accumulated ELBO that a float32 trace may round), or the last
  relative change |ELBO_k - ELBO_k-1| / |ELBO_k| is under the spec's `tol`. With `tol = 0` the spec asked for a fixed number of
  iterations, not for convergence, and `converged` is None; the last change is kept either way.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# How many times further from 0 than its start an ELBO must end to count as blown up.
BLOW_UP_FACTOR = 1e3


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What an ELBO trace says about the fit.

    Attributes:
        elbo: the trace kept: everything before the first non-finite value, float64.
        diverged_at: the iteration where the fit went wrong, or None.
        error: for a diverged fit, what happened and where; else None.
        final_change: the last relative ELBO change, or None (diverged, or fewer than 2 values).
        converged: when tol > 0, whether the fit stopped early or `final_change < tol`; None
            when tol = 0 or the fit diverged.
    """

    elbo: np.ndarray
    diverged_at: int | None
    error: str | None
    final_change: float | None
    converged: bool | None

    @property
    def status(self) -> str:
        return "ok" if self.diverged_at is None else "diverged"


def _blow_up_start(trace: np.ndarray) -> int | None:
    """The first iteration of the final stretch that lies BLOW_UP_FACTOR below the start, or None."""
    if trace.size < 2:
        return None
    # An ELBO is negative; the floor is measured from 0, at least one unit away, so that a
    # tiny data set whose ELBO starts near 0 is not called blown up for ending at -1.
    floor = -BLOW_UP_FACTOR * max(abs(float(trace[0])), 1.0)
    below = trace < floor
    if not below[-1]:
        return None
    above = np.flatnonzero(~below)
    return int(above[-1]) + 1 if above.size else 0


def judge(elbo, tol: float, iterations: int | None = None) -> Outcome:
    """Judge an ELBO trace (one value per iteration run) against the spec's `tol` and its
    iteration cap `iterations` (None: the trace ran them all)."""
    trace = np.asarray(elbo, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(trace))
    not_finite_at = int(bad[0]) if bad.size else None
    if not_finite_at is not None:
        trace = trace[:not_finite_at]
    blow_up_at = _blow_up_start(trace)
    if blow_up_at is not None:
        error = (f"ELBO blew up: from {trace[0]:.4g} at the start to {trace[-1]:.4g} at the end, more than "
                 f"{BLOW_UP_FACTOR:,.0f} times lower, from iteration {blow_up_at} on")
        if not_finite_at is not None:
            error += f"; not finite at iteration {not_finite_at}"
        return Outcome(trace, blow_up_at, error, None, None)
    if not_finite_at is not None:
        return Outcome(trace, not_finite_at, f"ELBO not finite at iteration {not_finite_at}", None, None)
    final_change = None
    if trace.size >= 2 and trace[-1] != 0.0:
        final_change = float(abs(trace[-1] - trace[-2]) / abs(trace[-1]))
    stopped_early = iterations is not None and trace.size < iterations
    converged = None if tol <= 0 or final_change is None else bool(final_change < tol or stopped_early)
    return Outcome(trace, None, None, final_change, converged)
