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
  relative change |ELBO_k - ELBO_k-1| / |ELBO_k| is under the spec's `tol`, *and* that change
  is above what the ELBO of the fit's precision resolves (`RESOLUTION`). With `tol = 0` the
  spec asked for a fixed number of iterations, not for convergence, and `converged` is None;
  the last change is kept either way. The last change is the one the stopping test read
  where the runnable reports it (`Measurement.final_change`), else the trace's.
- **Stalled**: a stop on a change at or under `RESOLUTION` (a tie: a step that changed
  nothing, or a change the ELBO cannot tell from its rounding) says the optimizer stopped
  moving, not that it arrived: at oaks x1000 in float32 such a stop came 2.5e-5 from the
  optimum where tol promised 1e-5. `stalled` is True and `converged` False.
- **Certified**: where the fit's final point was evaluated again in float64
  (`core.fit.certificate`), the gradient there decides instead of the change alone: a stop
  (on a change under tol, or a stall) is `converged` when the estimated relative distance to
  the optimum is at most `CONVERGED_GAP`, and `short` (not converged, with the estimate)
  when it is above. A stopping test can be fooled by a wrong sum (a float32 fit of scRNA
  stopped "converged" 1.4e-3 below the optimum when a block sum dropped rows); the
  float64 gradient cannot be fooled by the same sum.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

# How many times further from 0 than its start an ELBO must end to count as blown up.
BLOW_UP_FACTOR = 1e3

# The smallest relative ELBO change a fit of each precision can tell from none: what its
# stopping test reads is no more accurate. float32: 3e-8. Along the default fit at oaks
# x1000 the float64-accumulated ELBO it reads lies between -1.9e-8 and +2.2e-8 of the float64
# ELBO of the same parameters (benchmarks/float32_convergence.py), so a smaller change may be
# the difference of two such errors (the gradient optimizers' ELBO comes within about 5e-8
# there). Not float32's own 6e-8: L-BFGS converges faster than linearly, and a float32 fit of
# a small problem steps from a change of 1.07e-7 to a true one of 3.6e-8. float64: 2^-40 =
# 9e-13, some thousand roundings of sums over millions of terms fifty times the ELBO. Both
# lie under the default tolerances (1e-7, 1e-9).
RESOLUTION = {"float32": 3e-8, "float64": 2.0**-40}

# The largest estimated relative distance to the optimum (`core.fit.certificate`) at which a
# fit may say it has converged. The estimate came within 3 times of the true distance on the
# small sets of the corpus (`tests/fit/test_corpus.py`), so a fit that says it converged there
# is within the 1e-5 at which time to solution counts a fit as arrived. Not lower: simulated
# 95% zeros in float32 ends 1.5e-6 below its optimum and reads 2.7e-6. On microcosm 921 x 1209,
# in its long flat valley, it read 3.8 to 4.2 times low (1.6e-6 at 6.0e-6, 5.4e-6 at 2.3e-5),
# so a stop there reading just under this could lie up to 1.3e-5 below; the default stops
# nowhere near that reading there (float32 at 5.4e-6, "short"; float64's tol 1e-9 runs on
# through that stretch, whose ELBO changes by 1e-8 to 3e-8 an iteration). docs/accuracy.md.
CONVERGED_GAP = 3e-6


def certified_verdict(final_change: float | None, tol: float, precision: str, stopped_early: bool,
                      estimated_gap: float | None) -> tuple[bool | None, bool, bool]:
    """(converged, stalled, short) of a finished fit: see the module docstring. `short`: it
    stopped, but its float64 gradient puts it more than `CONVERGED_GAP` from the optimum."""
    if tol <= 0 or final_change is None:
        return None, False, False
    met = bool(final_change < tol or stopped_early)
    stall = stalled(final_change, tol, precision, stopped_early)
    if estimated_gap is None or not math.isfinite(final_change):
        return met and not stall, stall, False
    close = estimated_gap <= CONVERGED_GAP
    return met and close, stall and not close, met and not close and not stall


# Above this estimate (relative to |ELBO|) the certificate's quadratic model is no distance: a
# converged fit with one cell's S set to 1e-19, 4.6e-4 below, read 7e9 (along that cell the
# curvature vanishes). Below it the estimates tried came within 5 times of the truth (one
# cell's M at -60, 1.2e-2 below, read 2e-2).
FAR_GAP = 0.1


def how_far(estimated_gap: float) -> str:
    """What the float64 check says of the distance to the optimum, for a line that begins
    "checked in float64, "."""
    if estimated_gap > FAR_GAP:
        return "its gradient puts it far below the optimum, too far for the distance to be estimated"
    # "About" is good to a few times, as measured (above): said, since a reader takes a
    # number as closer than that (3 iterations from the start read 1e-4 where it was 4.8e-4).
    return f"its gradient puts it about {estimated_gap:.0e} (relative) below the optimum, to within a few times"


def short_note(estimated_gap: float) -> str:
    """One line saying that a fit stopped short of the optimum, and how far it believes it is."""
    return (f"stopped short of the optimum, not converged: the ELBO stopped changing, but, checked in "
            f"float64, {how_far(estimated_gap)}; run more "
            "iterations, with a smaller tol, or in float64")


def capped_note(final_change: float, tol: float, iterations: int, estimated_gap: float | None) -> str:
    """One line saying that a fit ran all its iterations without meeting its tolerance, and,
    where its float64 gradient says (`core.fit.certificate`), how far it believes it is."""
    checked = (f"; checked in float64, {how_far(estimated_gap)}"
               if estimated_gap is not None and math.isfinite(estimated_gap) else "")
    return (f"not converged: the relative ELBO change was still {final_change:.1e} after all {iterations:,} "
            f"iterations, above the tolerance {tol:g}{checked}; run more iterations")


def stalled(final_change: float | None, tol: float, precision: str, stopped_early: bool) -> bool:
    """Whether a fit with tolerance `tol` that ended on relative change `final_change`
    stopped because it stalled at its precision's resolution (module docstring)."""
    if tol <= 0 or final_change is None:
        return False
    return (stopped_early or final_change < tol) and final_change <= RESOLUTION.get(precision, 0.0)


def stall_note(final_change: float, precision: str) -> str:
    """One line saying that a fit stalled (see `stalled`), and what to do."""
    advice = "; run in float64 to converge further" if precision == "float32" else ""
    return (f"stalled at {precision} resolution, not converged: the last relative ELBO change, {final_change:.1e}, "
            f"is at or under the {RESOLUTION.get(precision, 0.0):.0e} a {precision} fit can tell from none{advice}")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What an ELBO trace says about the fit.

    Attributes:
        elbo: the trace kept: everything before the first non-finite value, float64.
        diverged_at: the iteration where the fit went wrong, or None.
        error: for a diverged fit, what happened and where; else None.
        final_change: the last relative ELBO change, or None (diverged, or fewer than 2 values).
        converged: when tol > 0, whether the fit stopped early or `final_change < tol`, on a
            change above `RESOLUTION`; None when tol = 0 or the fit diverged.
        stalled: whether it stopped on a change at or under `RESOLUTION` (see `stalled`)
            and its float64 gradient, when known, does not say it arrived.
        short: it stopped, but its float64 gradient puts it short of the optimum.
    """

    elbo: np.ndarray
    diverged_at: int | None
    error: str | None
    final_change: float | None
    converged: bool | None
    stalled: bool = False
    short: bool = False

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


def judge(elbo, tol: float, iterations: int | None = None, precision: str = "float64",
          tested_change: float | None = None, estimated_gap: float | None = None) -> Outcome:
    """Judge an ELBO trace (one value per iteration run) against the spec's `tol`, its
    iteration cap `iterations` (None: the trace ran them all) and its `precision`;
    `tested_change` is the last relative change as the stopping test read it, when the
    runnable reports one (it then stands for the trace's); `estimated_gap` is where the
    float64 re-evaluation of the final point puts it (`core.fit.certificate`), when known."""
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
    final_change = tested_change
    if final_change is None and trace.size >= 2 and trace[-1] != 0.0:
        final_change = float(abs(trace[-1] - trace[-2]) / abs(trace[-1]))
    stopped_early = iterations is not None and trace.size < iterations
    converged, stall, short = certified_verdict(final_change, tol, precision, stopped_early, estimated_gap)
    return Outcome(trace, None, None, final_change, converged, stall, short)


def finished_as(status: str, converged, stalled, short) -> str:
    """A run's status in one word: for one that finished ("ok"), what its stopping test and
    float64 check said ("converged", "not converged", "stalled", "short"), so that a table
    agrees with the notes that say "not converged"; else its status (diverged, ...)."""
    if status != "ok" or converged is None or converged != converged:  # None or NaN: no tolerance was set
        return status
    if converged:
        return "converged"
    return "stalled" if stalled else "short" if short else "not converged"
