"""Where a fit ended, checked in float64 on the host: the ELBO there, and how far from the
optimum its gradient says it is.

A fit's own stopping test reads its ELBO's relative change, which a wrong sum can fake: on
scRNA 400 x 100 in float32 a block sum that dropped rows (fixed since) made the fit stop,
"converged", 1.4e-3 below the optimum, its ELBO no longer moving. So before a run says
"converged" its final M and S are evaluated again here, in float64 NumPy, by code that
shares nothing with the compiled fit but the formulas: B and Sigma at their closed forms,
the profiled ELBO with the exact log Y!, and its gradient in M and log S.

How far: where the ELBO is close to its quadratic model, the optimum lies about half the
Newton decrement g' H^-1 g above it (H the curvature of -F). It is found here by
preconditioned conjugate gradients on H d = -g, each step's H v a difference of two
gradients (one more evaluation), preconditioned by the curvature model preconditioned
L-BFGS starts from (`core.fit.algorithms.preconditioned_lbfgs`: per cell A + Omega_jj in M
less Omega_jj along X's columns, 2 S^2 (A + Omega_jj) + S^4 A in log S, each column's ridge
at the data's curvature alone; each cell's curvature damped, as there, to at least its
gradient's size). Each step adds to the decrease the model promises, so
stopping early errs low; the model alone (no step) was 20 to 200 times low on the corpus,
where cells are coupled through Omega. The steps end when one more gains under `SETTLED` of
the total (on the small sets of the corpus: within 30 steps, and within 2 times of the true
gap), or at a budget of about `STEP_CELLS` cells evaluated. Where the budget ends them first
the gains have not settled and the estimate is a floor: it is then doubled (as if the
steps to come gained as much as the steps made). On microcosm 921 x 1209, p > n, a float32
fit stopped 2.4e-5 below the optimum with its ELBO changing by under 1e-7 an iteration; each
step there gained about the same (1.2e-7) for 100 steps, so 12 steps read 1.3e-6 and would
have passed it as converged; 53 steps, doubled, read 1.3e-5. Relative to |ELBO| the estimate
is `Certificate.gap`; a fit whose estimate is above `core.results.outcome.CONVERGED_GAP` has
not converged, whatever its ELBO change says.

The optimum it measures to is the one of the basin the fit is in: the profiled ELBO is not
concave, and on microcosm's data (96% zeros, p > n) fits that differ by float64 rounding
alone end at local optima 1.3e-5 and 4.5e-5 below the best known, each certified within
7e-13 of its own (docs/accuracy.md).

NumPy only: a float64 evaluation takes no compile (a jitted one would add a second or so to
a cold start) and runs in the worker after the timed section.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from core.fit import log_factorial

# The fraction of the estimate under which one more conjugate-gradient step's gain ends
# them. Each step is one evaluation of the ELBO's gradient, about 0.5 s on a 2-core CPU at
# 1e6 cells: the steps' budget is `STEP_CELLS` cells in all, within [MIN_STEPS, MAX_STEPS].
SETTLED = 0.02
STEP_CELLS = 60_000_000
MIN_STEPS = 4
MAX_STEPS = 60


class Certificate(NamedTuple):
    """A fit's final point, evaluated in float64.

    Attributes:
        elbo: the profiled ELBO at the final M, S (B and Sigma at their closed forms; exact log Y!).
        gap: the estimated relative distance to the optimum (module docstring); inf where
            the ELBO could not be evaluated (Sigma not positive definite).
        settled: whether the steps settled before their budget (else `gap` is the floor doubled).
        coef, covariance: B and Sigma at their closed forms there, float64 (None where Sigma
            was not positive definite): what the fit estimates (`core.results.estimates`).
    """

    elbo: float
    gap: float
    settled: bool = True
    coef: np.ndarray | None = None
    covariance: np.ndarray | None = None


class _Point(NamedTuple):
    elbo: float
    grad_mean: np.ndarray  # d(-F)/dM
    grad_log_sd: np.ndarray  # d(-F)/d(log S)
    rate: np.ndarray  # A
    residual: np.ndarray  # R
    variance: np.ndarray  # S^2
    diagonal: np.ndarray  # diag(Omega), (p,)
    coef: np.ndarray  # B
    covariance: np.ndarray  # Sigma


def _evaluate(Y, O, X, M, log_S, log_factorial_sum) -> _Point | None:
    n, p = Y.shape
    B = np.linalg.solve(X.T @ X, X.T @ M)
    R = M - X @ B
    S2 = np.exp(2.0 * log_S)
    sigma = (R.T @ R + np.diag(S2.sum(axis=0))) / n
    try:
        chol = np.linalg.cholesky(sigma)
    except np.linalg.LinAlgError:
        return None
    inverse_chol = np.linalg.solve(chol, np.eye(p))
    omega = inverse_chol.T @ inverse_chol
    A = np.exp(O + M + 0.5 * S2)
    elbo = -n * np.sum(np.log(np.diagonal(chol))) + np.sum(Y * (O + M) - A + log_S) - log_factorial_sum
    w = np.diagonal(omega)
    return _Point(float(elbo), -(Y - A - R @ omega), -(1.0 - S2 * (A + w)), A, R, S2, w, B, sigma)


class _Preconditioner:
    """The inverse of preconditioned L-BFGS's curvature model at a point, applied to (M, log S) pairs."""

    def __init__(self, point: _Point, X: np.ndarray) -> None:
        A, w, R, S2 = point.rate, point.diagonal, point.residual, point.variance
        self.X, self.R = X, R
        # Damped as the algorithm damps it (`preconditioned_lbfgs._damped`): each cell's
        # curvature at least its gradient's size. Near the optimum the gradient, and the
        # damping with it, vanish; away from it a cell whose model curvature has vanished (an
        # S of 1e-19: 1e-38 in log S) would otherwise weigh 1e38 times its gradient.
        damped_rate = np.maximum(A, np.abs(point.grad_mean) - w)
        self.mean = damped_rate + w
        self.sd = np.maximum(2.0 * S2 * (A + w) + S2 * S2 * A, np.abs(point.grad_log_sd))
        weight = damped_rate / (w * self.mean)
        # With the floor the algorithm adds (a level whose rates all underflow leaves C_j singular).
        cross = np.einsum("ik,il,ij->jkl", X, X, weight) + 1e-6 * (X.T @ X)[None] / w[:, None, None]
        self.along_x = np.linalg.inv(cross)  # (p, d, d)
        kappa = np.sum(A * ((R + S2) ** 2 + 2.0 * S2), axis=0)
        modelled = np.sum(self.mean * R * R + self.sd, axis=0)
        slope = np.abs(np.sum(point.grad_mean * R + point.grad_log_sd, axis=0))
        self.ridge = np.maximum(1.0 / np.maximum(np.maximum(kappa, slope), 1e-6 * modelled) - 1.0 / modelled, 0.0)

    def __call__(self, mean: np.ndarray, log_sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scaled = mean / self.mean
        projected = self.X.T @ scaled  # (d, p)
        shift = np.einsum("jkl,lj->kj", self.along_x, projected)  # (d, p)
        along_ridge = self.ridge * (np.sum(self.R * mean, axis=0) + np.sum(log_sd, axis=0))
        return (scaled + (self.X @ shift) / self.mean + along_ridge * self.R,
                log_sd / self.sd + along_ridge)


def certify(counts: np.ndarray, offsets: np.ndarray, covariates: np.ndarray, latent_mean: np.ndarray,
            latent_sd: np.ndarray) -> Certificate:
    """The float64 `Certificate` of (M, S) for the data (Y, O, X), all (n, p) but X (n, d)."""
    Y, O, X, M = (np.asarray(a, dtype=np.float64) for a in (counts, offsets, covariates, latent_mean))
    with np.errstate(all="ignore"):
        log_S = np.log(np.abs(np.asarray(latent_sd, dtype=np.float64)))
        constant = log_factorial.log_factorial_sum(Y)
        point = _evaluate(Y, O, X, M, log_S, constant)
        if point is None:
            return Certificate(float("nan"), float("inf"))
        if not np.isfinite(point.elbo):
            return Certificate(point.elbo, float("inf"), True, point.coef, point.covariance)
        decrease, settled = _newton_decrease(point, Y, O, X, M, log_S, constant, step_budget(Y.size))
    if not settled:
        decrease *= 2.0
    gap = decrease / abs(point.elbo) if np.isfinite(decrease) else float("inf")
    return Certificate(point.elbo, float(gap), settled, point.coef, point.covariance)


def step_budget(cells: int) -> int:
    """How many conjugate-gradient steps a data set of `cells` (n p) cells may take."""
    return int(min(MAX_STEPS, max(MIN_STEPS, STEP_CELLS // max(cells, 1))))


def _newton_decrease(point: _Point, Y, O, X, M, log_S, constant, steps: int) -> tuple[float, bool]:
    """What a Newton step from `point` would gain, g' H^-1 g / 2, by at most `steps` steps of
    preconditioned conjugate gradients (H v by a forward difference of gradients), and whether
    the steps settled (or ended for want of a direction with curvature) before `steps`."""
    precondition = _Preconditioner(point, X)
    g = (point.grad_mean, point.grad_log_sd)
    residual = (-g[0], -g[1])
    z = precondition(*residual)
    direction = z
    rz = _dot(residual, z)
    decrease = 0.0
    for _ in range(steps):
        size = max(np.max(np.abs(direction[0])), np.max(np.abs(direction[1])))
        if not size > 0:
            return decrease, True
        # A move of 1e-4 at most in a cell: at 1e-6 the differences' rounding (gradients of
        # counts in the thousands) grew the gains again after 10 steps on oaks ~ 1 + tree, and
        # 1e-4 gives central differences' gains to two digits.
        epsilon = 1e-4 / size
        moved = _evaluate(Y, O, X, M + epsilon * direction[0], log_S + epsilon * direction[1], constant)
        if moved is None:
            return decrease, False
        curvature = ((moved.grad_mean - g[0]) / epsilon, (moved.grad_log_sd - g[1]) / epsilon)
        bend = _dot(direction, curvature)
        if not bend > 0:
            # No positive curvature along it: the quadratic model says nothing more (near the
            # optimum, where the gradient is at the differences' rounding). At the first step
            # nothing has been summed, and 0 would certify a point whose first direction bends
            # the wrong way (a saddle): what the curvature model alone promises, r' P r / 2,
            # stands in.
            return (decrease, True) if decrease > 0 else (0.5 * rz, True)
        alpha = rz / bend
        gain = 0.5 * alpha * rz
        decrease += gain
        if gain <= SETTLED * decrease:
            return decrease, True
        residual = (residual[0] - alpha * curvature[0], residual[1] - alpha * curvature[1])
        z = precondition(*residual)
        rz_next = _dot(residual, z)
        direction = (z[0] + rz_next / rz * direction[0], z[1] + rz_next / rz * direction[1])
        rz = rz_next
    return decrease, False


def _dot(a, b) -> float:
    return float(np.sum(a[0] * b[0]) + np.sum(a[1] * b[1]))
