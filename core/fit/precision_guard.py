"""What float32 cannot hold for a data set, told before a float32 fit runs.

Each cell contributes Y (O + M) - A - log Y! to the ELBO: three numbers of size about
Y (1 + |log Y|) near the optimum (O + M ~ log Y, A ~ Y) that cancel to about
-log(2 pi Y) / 2. float32 rounds each of them (and O + M, the argument of exp) to
u = 2^-24 of its size *before any sum*, so a cell with Y = 1e9 carries an error of about
a thousand however accurately the sum is then accumulated (`core.fit.model.wide_sum` fixes
the accumulation, not this). A small table with one count of 1e9 was fitted in float32 to
an ELBO of -1,888 where float64 gives -535.4.

The check needs no fit. The ELBO is at most log p(Y) <= the saturated Poisson
log-likelihood, so |ELBO| >= L = sum over Y > 0 of (log Y! - Y log Y + Y). The rounding of
independent cells adds up as a root sum of squares, so the ELBO's relative error is about

    estimate = u sqrt(sum t^2) / L,    t = Y (1 + |log Y|),

which is one cell's rounding when one large count dominates. Measured against float64 on
oaks with one count raised (accurate sums, 3,000 rprop iterations): a count of 1e5 gives
an estimate of 4e-6 and an error of 3e-6; 1e6, 5e-5 and 5e-6; 1e7, 6e-4 and 1e-4; 1e9,
7e-2 and 7e-3: the estimate bounds the error within about ten times. Oaks itself (largest
count 2,228) gives 3e-7, and less when replicated.

- Refused: counts above 2^24, which float32 does not even hold as whole numbers, or an
  estimate above `REFUSE_ABOVE`, the tolerance time to solution is measured at: beyond it
  a float32 ELBO trace can no longer tell when a fit has converged. Such data also push
  float32 fits over the edge: with every oaks count times 1000 (estimate 2e-4), cond(Sigma)
  reaches 8e8 > 1/u, the float32 Omega is indefinite and the fit goes NaN.
- Flagged: an estimate above `WARN_ABOVE`, the accuracy the lab promises for a float32
  ELBO. The run goes ahead (its timings and fitted parameters are sound: the float64 ELBO
  of its parameters matches the float64 fit's) and carries the warning.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from core.fit.log_factorial import count_frequencies, log_gamma

UNIT_ROUNDOFF_FLOAT32 = 2.0**-24
# float32 holds every whole number up to 2^24 = 16,777,216 exactly, and not all above it.
EXACT_INTEGERS_FLOAT32 = 2**24
# The relative accuracy promised for every float32 ELBO (see `core.fit.model.wide_sum`).
WARN_ABOVE = 1e-6
# The relative ELBO change under which time to solution counts a fit as arrived.
REFUSE_ABOVE = 1e-5


@dataclasses.dataclass(frozen=True)
class Float32Check:
    """What float32 can do with a data set.

    Attributes:
        estimate: the likely relative error of a float32 ELBO from rounding each cell's terms.
        max_count: the largest count.
        refusal: why float32 must not be used (a sentence naming float64), or None.
        warning: why a float32 ELBO may be off by more than `WARN_ABOVE`, or None.
    """

    estimate: float
    max_count: float
    refusal: str | None
    warning: str | None


def check_float32(counts: np.ndarray) -> Float32Check:
    """Whether a float32 fit of `counts` can report an ELBO the lab stands by.

    Args:
        counts: (n, p) whole numbers >= 0, as validated by `core.data.counts.validate`.

    Returns:
        The estimate and, when it applies, the refusal or the warning.
    """
    values, times = count_frequencies(counts)
    if values.size == 0:
        return Float32Check(0.0, 0.0, None, None)
    log_values = np.log(values)
    # log Y! - Y log Y + Y is about log(2 pi Y) / 2 > 0.9 for every Y >= 1: L > 0.
    elbo_floor = float(np.sum(times * (log_gamma(values + 1.0) - values * log_values + values)))
    sizes = values * (1.0 + np.abs(log_values))
    estimate = UNIT_ROUNDOFF_FLOAT32 * float(np.sqrt(np.sum(times * sizes * sizes))) / elbo_floor
    max_count = float(values[-1])
    refusal = warning = None
    if max_count > EXACT_INTEGERS_FLOAT32:
        refusal = (f"float32 cannot fit these counts: the largest, {max_count:,.0f}, is above 2^24 = "
                   f"{EXACT_INTEGERS_FLOAT32:,}, beyond which float32 does not hold whole numbers exactly, and "
                   f"its rounding would move the ELBO by about {estimate:.0e} of itself; choose float64")
    elif estimate > REFUSE_ABOVE:
        refusal = (f"float32 cannot fit these counts: rounding the ELBO terms of counts as large as "
                   f"{max_count:,.0f} would move the ELBO by about {estimate:.0e} of itself, more than the "
                   f"{REFUSE_ABOVE:.0e} at which a fit counts as converged; choose float64")
    elif estimate > WARN_ABOVE:
        # Two digits: at one, an estimate of 1.2e-6 read "about 1e-06, more than the 1e-06".
        warning = (f"float32 rounding of the ELBO terms of counts as large as {max_count:,.0f} may move the ELBO "
                   f"by about {estimate:.1e} of itself, more than the {WARN_ABOVE:.0e} this lab promises for a "
                   "float32 ELBO (the fitted parameters are not affected): compare ELBOs in float64")
    return Float32Check(estimate, max_count, refusal, warning)
