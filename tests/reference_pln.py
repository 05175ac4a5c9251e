"""An independent NumPy/SciPy implementation of PLN, for checking `core` against.

It shares no code with `core.fit.model`: the ELBO is written from the formula in its own
words, log-determinants come from `np.linalg.slogdet`, and the fit maximises the
profiled ELBO over M and S with SciPy's L-BFGS-B and hand-derived gradients.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import gammaln


def full_elbo(Y, O, X, B, M, S, Omega):
    """ELBO at any B, M, S, Omega, with the exact log Y!."""
    n, p = Y.shape
    R = M - X @ B
    A = np.exp(O + M + S**2 / 2)
    middle = np.sum(Y * (O + M) - A + np.log(S**2) / 2)
    trace = np.trace(Omega @ (R.T @ R + np.diag((S**2).sum(axis=0))))
    return n / 2 * np.linalg.slogdet(Omega)[1] + middle - trace / 2 - gammaln(Y + 1).sum() + n * p / 2


def closed_forms(Y, X, M, S):
    """(B, Sigma) maximising the ELBO for fixed M, S."""
    B = np.linalg.lstsq(X, M, rcond=None)[0]
    R = M - X @ B
    Sigma = (R.T @ R + np.diag((S**2).sum(axis=0))) / Y.shape[0]
    return B, Sigma


def profiled_elbo_and_grad(Y, O, X, M, S):
    """Profiled ELBO (B, Sigma at closed forms) and its gradients in M and S.

    By the envelope theorem the gradients are the partial derivatives at the closed
    forms: dM = Y - A - R Omega and dS = 1/S - S A - S diag(Omega).
    """
    n = Y.shape[0]
    B, Sigma = closed_forms(Y, X, M, S)
    Omega = np.linalg.inv(Sigma)
    R = M - X @ B
    A = np.exp(O + M + S**2 / 2)
    value = -n / 2 * np.linalg.slogdet(Sigma)[1] + np.sum(Y * (O + M) - A + np.log(S**2) / 2) - gammaln(Y + 1).sum()
    grad_M = Y - A - R @ Omega
    grad_S = 1 / S - S * A - S * np.diag(Omega)[None, :]
    return value, grad_M, grad_S


def fit(Y, O, X, max_iter=20000, gtol=1e-7):
    """Maximise the profiled ELBO from pyPLNmodels' start; returns (elbo, M, S)."""
    n, p = Y.shape
    M0 = np.log(Y + (Y == 0))
    S0 = np.full((n, p), 0.5)

    def negative(theta):
        M, S = theta[: n * p].reshape(n, p), theta[n * p :].reshape(n, p)
        value, grad_M, grad_S = profiled_elbo_and_grad(Y, O, X, M, S)
        return -value, -np.concatenate([grad_M.ravel(), grad_S.ravel()])

    bounds = [(None, None)] * (n * p) + [(1e-6, None)] * (n * p)
    solution = minimize(negative, np.concatenate([M0.ravel(), S0.ravel()]), jac=True, method="L-BFGS-B",
                        bounds=bounds, options={"maxiter": max_iter, "gtol": gtol, "maxcor": 30})
    theta = solution.x
    return -solution.fun, theta[: n * p].reshape(n, p), theta[n * p :].reshape(n, p)
