"""The profiled ELBO F(M, S) (B and Sigma at their closed forms) with its gradient, in one pass.

What the profiled optimizers (`core.fit.algorithms`) evaluate. For given M, S:

    B = (X^T X)^-1 X^T M,  R = M - X B,  Sigma = (R^T R + D) / n,  Omega = Sigma^-1,
    dF/dM = Y - A - R Omega,   dF/dS = 1/S - S (A + diag Omega)

(envelope theorem: B and Sigma are stationary points of the full ELBO, so these are its
partial derivatives there). With fewer rows than columns Omega comes through the rows' n x n
matrix rather than Sigma's own factor (`precision_terms`).

The value is the *full* ELBO at (B, M, S, Omega), trace term included, not the shorter
profiled formula: the full ELBO is stationary in Omega, so the rounding of a float32
Sigma (its Gram R^T R over n rows) enters only to second order, where the profiled
formula's -n/2 logdet(Sigma) takes it to first order (up to 1.7e-6 of the ELBO at oaks
x1000). The trace term's R Omega is the gradient's anyway. All (n, p) terms are formed in
float64 from the fit's numbers and summed in one `model.wide_sum`, the log-determinant is
that of the Omega the trace term uses, and B's sums over rows add up in float64
(`model.closed_form_coef`): near the optimum the line searches and the stopping test compare
ELBOs that differ by 1e-7 of their size, and at oaks x1000 in float32 this ELBO is within
about 2e-8 of the float64 ELBO of the same parameters.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from core.fit import model, row_path

# The name of the p x p work of an evaluation (Sigma's factor, Omega, its log-determinant) in
# compiled programs' operation names.
P_BY_P_SCOPE = "p_by_p"


class Evaluation(NamedTuple):
    """The profiled ELBO at (M, S) and what its evaluation made on the way.

    Attributes:
        elbo: scalar F(M, S), of `model.wide_dtype` (float64 in the lab, for comparisons
            of nearby values; cast it for traces).
        grad_mean: dF/dM, (n, p) (0 on padded rows).
        grad_sd: dF/dS, (n, p) (0 on padded rows).
        rate: A = exp(O + M + S^2 / 2), (n, p).
        coef: B at its closed form, (d, p).
        precision: Omega at its closed form, (p, p).
        grad_log_sd: dF/d(log S) = S dF/dS = 1 - S^2 (A + diag Omega), (n, p), for optimizers
            that move log S: made without 1 / S, which XLA turns into one more exp.
        residual: R = M - X B, (n, p) (0 on padded rows), for optimizers that model the
            curvature along it (one pass over M fewer than making it again).
        precision_diagonal: diag(Omega), (p,): made without Omega where Omega comes through
            the rows (`precision_terms`), so that an optimizer that reads the diagonal alone
            leaves Omega's p x p product out of its compiled loop (`forms_precision`).
    """

    elbo: jax.Array
    grad_mean: jax.Array
    grad_sd: jax.Array
    rate: jax.Array
    coef: jax.Array
    precision: jax.Array
    grad_log_sd: jax.Array | None = None
    residual: jax.Array | None = None
    precision_diagonal: jax.Array | None = None


def precision_and_logdet(covariance: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(Omega, log det Omega): Omega = W^T W with W = L^-1, L the Cholesky factor of Sigma;
    Omega of Sigma's dtype, its log-determinant of `model.wide_dtype`.

    One right-sided triangular solve and one p x p product (see
    `core.fit.strategies.scan_analytic` for why this beats `cho_solve(L, I)` on CPU). The
    log-determinant is that of the Omega returned, factored again in float64 (p^3 / 3 work,
    nothing beside the n p^2 of an evaluation where n is large): the ELBO is stationary in
    Omega only when its log det and its trace term are of one matrix. -2 sum(log diag L) in
    float32 is of the inverse of Sigma, which the rounding of W^T W departs from: at oaks
    x1000 that moved the ELBO by 1.4 (5e-8 of it). In float64 that departure is float64's
    rounding, and -2 sum(log diag L) is used.
    """
    p = covariance.shape[0]
    # Named, so that a profile tells the p x p work from the n x p work (benchmarks/iteration_profile.py).
    with jax.named_scope(P_BY_P_SCOPE):
        chol = jnp.linalg.cholesky(covariance)
        inverse = jax.lax.linalg.triangular_solve(chol, jnp.eye(p, dtype=covariance.dtype), left_side=False,
                                                  lower=True)
        precision = inverse.T @ inverse
        if precision.dtype == jnp.float64:
            # W^T W departs from Sigma^-1 by float64's rounding alone (about 1e-16 of it), so the
            # factor already made gives its log-determinant; factoring it again was a tenth of an
            # iteration at p > n (60 x 150), where the p x p work is half of one.
            return precision, -2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))
        return precision, model._logdet_spd(precision.astype(model.wide_dtype(precision.dtype)))


def tracing_platform() -> str:
    """The platform ("cpu", "gpu", "tpu") of the program being traced: the device the fit
    runs on (`jax.default_device`, which the engine sets), else JAX's default backend. Inside
    a trace the arrays are abstract and carry no device to ask."""
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else device.platform


def forms_precision(data: model.PLNData | model.PaddedPLNData) -> bool:
    """Whether an evaluation on `data` needs Omega itself on its way (Sigma's own factor:
    R Omega is a product with it), rather than only R Omega and diag Omega (through the
    rows, where Omega is one product more, of p^2 n)."""
    rows, p = data.counts.shape
    return not row_path.through_rows(rows, p, jnp.dtype(data.counts.dtype).name, tracing_platform())


def precision_terms(residual: jax.Array, column_variance: jax.Array, n) -> tuple[jax.Array, ...]:
    """(Omega, log det Omega, R Omega, diag Omega) for Sigma = (R^T R + D) / n, D =
    diag(`column_variance`): Omega, R Omega and its diagonal of R's dtype, the log-determinant
    of `model.wide_dtype`.

    Sigma's factor costs p^3 and R Omega n p^2. With fewer rows than columns (p > n: rare
    species, single cells) the n x n matrix K = I + R D^-1 R^T does it in n^2 p (Woodbury):
    R Omega = n K^-1 R D^-1, Omega = n (D^-1 - D^-1 R^T K^-1 R D^-1), log det Sigma =
    log det(D / n) + log det K. An iteration took 0.5 to 0.8 times as long on p > n sets in
    float64 (`row_path.through_rows` says where, docs/accuracy.md has the figures). That path
    runs in float64 whatever R's dtype, so that the trace term and the log-determinant are of
    one matrix to float64's rounding, as the ELBO's stationarity in Omega needs
    (`precision_and_logdet`).
    """
    rows, p = residual.shape
    if not row_path.through_rows(rows, p, jnp.dtype(residual.dtype).name, tracing_platform()):
        precision, logdet = precision_and_logdet((residual.T @ residual + jnp.diag(column_variance)) / n)
        return precision, logdet, residual @ precision, jnp.diagonal(precision)
    wide = model.wide_dtype(residual.dtype)
    with jax.named_scope(P_BY_P_SCOPE):
        R, D = residual.astype(wide), column_variance.astype(wide)
        scaled = R / D  # R D^-1
        # Padded rows of R are 0: K is the identity there, and they add nothing below.
        chol = jnp.linalg.cholesky(jnp.eye(rows, dtype=wide) + scaled @ R.T)
        half = jax.lax.linalg.triangular_solve(chol, scaled, left_side=True, lower=True)  # L^-1 R D^-1
        solved = jax.lax.linalg.triangular_solve(chol, half, left_side=True, lower=True, transpose_a=True)
        n_wide = jnp.asarray(n, wide)
        logdet = -(jnp.sum(jnp.log(D / n_wide)) + 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol))))
        diagonal = n_wide * (1.0 / D - jnp.sum(half * half, axis=0))
        precision = n_wide * (jnp.diag(1.0 / D) - half.T @ half)
    dtype = residual.dtype
    return precision.astype(dtype), logdet, (n_wide * solved).astype(dtype), diagonal.astype(dtype)


def evaluate(latent_mean: jax.Array, latent_sd: jax.Array, data: model.PLNData | model.PaddedPLNData,
             log_sd: jax.Array | None = None) -> Evaluation:
    """F(M, S), its gradient and the closed forms, for M, S (n, p) of the data's dtype.

    `log_sd`, log S where the optimizer moves it (S its exp): a float64 evaluation's entropy
    term reads it instead of taking a log of every cell again (log is among the costliest
    float64 operations per cell: at 500 x 30 it was a twentieth of an iteration). float32
    keeps log(S^2) / 2: the two differ by float32's rounding, and on plain Poisson counts
    (poisson 300x20), where a float32 fit ends at its ELBO's resolution, that moved its stop
    from 2.1e-6 below the optimum, certified at 4.8e-7, to 2.2e-6, where the certificate
    read 5.7e-6 and said "short" (the test suite's XLA settings).
    """
    M, S = latent_mean, latent_sd
    Y, O = data.counts, data.offsets
    keep, n = model._real_rows(data)
    p = Y.shape[1]
    wide = model.wide_dtype(Y.dtype)
    B, R, S2, (precision, logdet, R_omega, diagonal) = _closed_forms(M, S, data)
    # Each cell's terms are formed in float64 from the fit's numbers (converted in registers,
    # in the loop that sums them): rounding O + M + S^2 / 2 and the products in float32 moved
    # the ELBO of oaks x1000 by about 3 (1e-7 of it, the relative change a stopping test at
    # 1e-7 must read), and by under 0.7 (2e-8) so. exp runs in the fit's dtype at the rounded
    # exponent and is corrected to first order by the exponent's rounding (exp(a + r) =
    # exp(a) (1 + r)): a float64 exp, within 1e-8, cost 30% more per evaluation there. The
    # gradient takes that A.
    Y_, O_, M_, S_ = (array.astype(wide) for array in (Y, O, M, S))
    exponent = O_ + M_ + 0.5 * S_ * S_
    rounded = exponent.astype(Y.dtype)
    # Materialized once: without the barrier XLA fuses the exp into each of A's consumers
    # and computes it up to three times an evaluation (each exp over (n, p) costs about as
    # much as reading the array).
    A = jax.lax.optimization_barrier(jnp.exp(rounded))
    A_wide = A.astype(wide) * (1.0 + (exponent - rounded.astype(wide)))
    # tr(Omega (R^T R + D)) split per cell: sum((R Omega) * R) + sum(S^2 * diag(Omega)).
    entropy = log_sd if log_sd is not None and Y.dtype == jnp.float64 else 0.5 * jnp.log(S2)
    terms = keep(Y_ * (O_ + M_) - A_wide + entropy.astype(wide)
                 - 0.5 * (R_omega.astype(wide) * R.astype(wide)) - 0.5 * S_ * S_ * diagonal.astype(wide))
    n_wide = jnp.asarray(n, wide)
    value = (0.5 * n_wide * logdet + model.wide_sum(terms)
             - jnp.asarray(data.log_factorial_sum, wide) + 0.5 * n_wide * p)
    return Evaluation(
        elbo=value,
        grad_mean=keep(Y - A - R_omega),
        grad_sd=keep(1.0 / S - S * (A + diagonal)),
        rate=A,
        coef=B,
        precision=precision,
        grad_log_sd=keep(1.0 - S2 * (A + diagonal)),
        residual=R,
        precision_diagonal=diagonal,
    )


def _closed_forms(M: jax.Array, S: jax.Array, data) -> tuple[jax.Array, jax.Array, jax.Array, tuple]:
    """(B, R, S^2, `precision_terms`) at M, S."""
    keep, n = model._real_rows(data)
    B = model.closed_form_coef(M, data.covariates)
    R = keep(M - data.covariates @ B)
    S2 = S * S
    return B, R, S2, precision_terms(R, jnp.sum(keep(S2), axis=0), n)


def precision_at(latent_mean: jax.Array, latent_sd: jax.Array, data) -> jax.Array:
    """Omega at its closed form for M, S, as `evaluate` makes it."""
    return _closed_forms(latent_mean, latent_sd, data)[3][0]
