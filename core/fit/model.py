"""The Poisson log-normal (PLN) model: ELBO, closed forms and initialisations.

Pure JAX functions. Inside the maths the paper's letters are clearer than long names:
Y counts (n, p), O log-offsets (n, p), X covariates (n, d), B coefficients (d, p),
M and S the variational means and standard deviations (n, p), Sigma the latent
covariance (p, p) and Omega = Sigma^-1. M is *uncentred*: q(Z_i) = N(M_i, diag(S_i^2))
and the residual is R = M - X B. With A = exp(O + M + S^2 / 2) and D = diag(sum_i S_i^2):

    ELBO = n/2 logdet(Omega) + sum(Y (O + M) - A + 1/2 log S^2)
           - 1/2 tr(Omega (R^T R + D)) - sum(log Y!) + n p / 2

At the closed forms B = (X^T X)^-1 X^T M and Sigma = (R^T R + D) / n the trace term is
n p and the ELBO is the profiled ELBO that pyPLNmodels maximises.

The seed tutorial wrote the trace as tr(M^T M + D Omega), which drops Omega from the
M^T M part, and log(det(Omega)), which overflows to inf in float32 for p = 114; here the
trace pairs Omega with both terms and log-determinants come from Cholesky factors.

Accuracy in float32: at the optimum the ELBO is a small difference of large sums (on oaks,
sum Y (O + M) and sum log Y! are 50 and 40 times the ELBO), so every float32 rounding of a
sum or of a partial sum costs about 3e-6 of the ELBO, and a float32 ELBO over a million
cells came out up to 1e-5 (scan) and 1e-2 (scan_analytic) off. So the (n, p) terms are
summed by `wide_sum` (accumulated in float64, fused into the loop that makes the terms, no
slower than the float32 sum), sum(log Y!) is kept in float64, the terms are assembled in
float64, and the trace term is sum((R Omega) * R) rather than tr(Omega R^T R) through a
float32 Gram over n rows. The ELBO is then within 2e-7 of the float64 ELBO of the same
parameters at oaks x100 and x1000; it is returned in the fit's dtype, and the elementwise
work, the gradients and the state stay in it (float32 gradients are bit-identical: Omega
is exactly symmetric). What float32 cannot hold whatever the sums (counts whose own terms
round by more than the ELBO's accuracy) is told before a fit by `core.fit.precision_guard`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from core.fit import log_factorial


class PLNData(NamedTuple):
    """The data of one fit, all of the fit's dtype.

    Attributes:
        counts: Y, (n, p), non-negative integers stored as floats.
        offsets: O, (n, p), log-offsets.
        covariates: X, (n, d).
        log_factorial_sum: scalar, sum(log Y!) computed exactly (log-gamma) on the host, float64
            whatever the fit's dtype (about 40 times the ELBO: float32 would round it by 2e-6
            of the ELBO at oaks x1000).
    """

    counts: jax.Array
    offsets: jax.Array
    covariates: jax.Array
    log_factorial_sum: jax.Array


class PaddedPLNData(NamedTuple):
    """`PLNData` with padding rows that do not count, for layouts of equal row blocks.

    The sharded strategy splits rows over devices in equal blocks, so n is padded up to a
    multiple of the device count. Padded rows hold Y = 0, O = 0 and X = 0 (so X^T X and
    X^T M ignore them). Every function here weights row terms by `row_mask` and takes
    n = sum(row_mask): the ELBO, the closed forms and the gradient for real rows are those
    of the real rows alone, and the gradient for padded rows of M and S is exactly 0.

    Attributes:
        counts, offsets, covariates, log_factorial_sum: as in `PLNData`, with n_padded rows.
        row_mask: (n_padded,), 1 on real rows and 0 on padding, of the data's dtype.
    """

    counts: jax.Array
    offsets: jax.Array
    covariates: jax.Array
    log_factorial_sum: jax.Array
    row_mask: jax.Array


def _real_rows(data: PLNData | PaddedPLNData) -> tuple[Callable[[jax.Array], jax.Array], Any]:
    """(keep, n): `keep` zeroes the padded rows of an (n_padded, k) array, n counts real rows.

    For unpadded data `keep` is the identity and n the row count, so the traced maths is
    exactly the unpadded formula.
    """
    if isinstance(data, PaddedPLNData):
        weights = data.row_mask[:, None]
        return (lambda rows: rows * weights), jnp.sum(data.row_mask)
    return (lambda rows: rows), data.counts.shape[0]


class PLNParams(NamedTuple):
    """The parameters moved by the optimizer.

    Attributes:
        coef: B, (d, p).
        latent_mean: M, (n, p), uncentred variational means.
        latent_sd: S, (n, p), variational standard deviations.
    """

    coef: jax.Array
    latent_mean: jax.Array
    latent_sd: jax.Array


def exact_log_factorial_sum(counts: np.ndarray) -> float:
    """sum(log Y!), in float64 on the host (`core.fit.log_factorial`).

    Computed once outside any compiled code: it is a constant of the fit, and jaxlib
    0.10.2 miscompiles some fused reductions on CPU (jax-ml/jax#39103).
    """
    return log_factorial.log_factorial_sum(counts)


def stirling_log_factorial_sum(counts: np.ndarray) -> float:
    """sum(log Y!) with Stirling's formula, as pyPLNmodels (and the seed tutorial) use.

    Differs from the exact sum by a constant (about 570 on oaks); provided so that
    numbers from pyPLNmodels can be re-expressed with the exact term.
    """
    y = np.asarray(counts, dtype=np.float64)
    y = y + (y == 0)
    return float(np.sum(0.5 * np.log(2 * np.pi * y) + y * np.log(y / np.e)))


def make_data(counts, offsets, covariates, dtype) -> PLNData:
    """Host arrays -> `PLNData` of `dtype`, sum(log Y!) in float64 (still on the host; the
    engine places it)."""
    dtype = np.dtype(dtype)
    return PLNData(
        counts=np.asarray(counts, dtype=dtype),
        offsets=np.asarray(offsets, dtype=dtype),
        covariates=np.asarray(covariates, dtype=dtype),
        log_factorial_sum=np.asarray(exact_log_factorial_sum(counts), dtype=np.float64),
    )


def wide_dtype(dtype) -> jnp.dtype:
    """The accumulator for sums of `dtype` terms: float64 when JAX has it enabled (always
    in the lab, `core.machine.runtime.configure`), else `dtype` itself."""
    return jnp.dtype(jnp.float64) if jax.config.jax_enable_x64 else jnp.dtype(dtype)


def wide_sum(terms: jax.Array) -> jax.Array:
    """sum(terms) over an (n, p) array, accumulated in float64; a scalar of `wide_dtype`.

    Row sums are the matrix-vector product terms @ ones(p) with a float64 result: XLA fuses
    it into the loop that makes `terms`, converting in registers and accumulating each row
    in float64, with no (n, p) temporary (`jnp.sum(terms, dtype=float64)`, as exact, writes a
    float64 copy first). The n row sums then add up in float64. Use it for every sum of an
    ELBO's (n, p) terms: a float32 sum of them loses up to 1e-5 of the ELBO.
    """
    wide = wide_dtype(terms.dtype)
    rows = jax.lax.dot(terms, jnp.ones((terms.shape[-1],), terms.dtype), preferred_element_type=wide)
    return jnp.sum(rows)


def _logdet_spd(matrix: jax.Array) -> jax.Array:
    """log det of a symmetric positive-definite matrix via its Cholesky factor."""
    chol = jnp.linalg.cholesky(matrix)
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))


def elbo(params: PLNParams, precision: jax.Array, data: PLNData | PaddedPLNData) -> jax.Array:
    """The ELBO at any B, M, S and Omega (not only at the closed forms).

    Large sums are accumulated and the terms assembled in float64 (`wide_elbo`); the
    elementwise work stays in the data's dtype.

    Args:
        params: B (d, p), M (n, p), S (n, p).
        precision: Omega, (p, p), symmetric positive-definite.
        data: Y, O, X and sum(log Y!) (padded rows, if any, count for nothing).

    Returns:
        Scalar ELBO (a negative number for count data), of the data's dtype.
    """
    return wide_elbo(params, precision, data).astype(data.counts.dtype)


def wide_elbo(params: PLNParams, precision: jax.Array, data: PLNData | PaddedPLNData) -> jax.Array:
    """The ELBO with its sums accumulated and its terms assembled in float64, returned so
    (`wide_dtype`; `elbo` rounds it to the data's dtype): what a stopping test compares,
    since a float32 ELBO cannot tell changes under its rounding (1.2e-7 of it) from none.
    The elementwise work stays in the data's dtype, and so do the gradients taken through it.

    Args, shapes: as `elbo`.
    """
    B, M, S = params
    Y, O, X = data.counts, data.offsets, data.covariates
    keep, n = _real_rows(data)
    p = Y.shape[1]
    wide = wide_dtype(Y.dtype)
    S2 = S * S
    A = jnp.exp(O + M + 0.5 * S2)
    R = keep(M - X @ B)
    # tr(Omega (R^T R + D)) = sum((R Omega) * R) + sum(diag(Omega) colsum(S^2)): no float32
    # Gram over n rows, and under autodiff the same (n, p) x (p, p) products.
    trace = wide_sum((R @ precision) * R) + jnp.sum(
        jnp.diagonal(precision) * jnp.sum(keep(S2), axis=0)).astype(wide)
    n = jnp.asarray(n, wide)
    return (
        0.5 * n * _logdet_spd(precision.astype(wide))
        + wide_sum(keep(Y * (O + M) - A + 0.5 * jnp.log(S2)))
        - 0.5 * trace
        - jnp.asarray(data.log_factorial_sum, wide)
        + 0.5 * n * p
    )


def negative_elbo(params: PLNParams, precision: jax.Array, data: PLNData | PaddedPLNData) -> jax.Array:
    """The loss the optimizer minimises: -ELBO."""
    return -elbo(params, precision, data)


def closed_form_coef(latent_mean: jax.Array, covariates: jax.Array) -> jax.Array:
    """B = (X^T X)^-1 X^T M, (d, p), by a Cholesky solve rather than an inverse.

    X^T M and X^T X are sums over the n rows, added up in float64 (`wide_cross`) and solved
    there; B is returned in M's dtype. In float32 those sums lose about 2e-4 of B at
    oaks x1000 (116,000 rows), which shifts every row of R = M - X B by the same amount:
    the profiled gradient R Omega then carries an error as large as the gradient itself
    near the optimum, and L-BFGS stalls at 1e-5 of the optimum.
    """
    X, M = covariates, latent_mean
    return jsl.cho_solve(jsl.cho_factor(wide_cross(X, X)), wide_cross(X, M)).astype(M.dtype)


# Rows per block of `wide_cross`: short enough that a float32 sum over a block stays
# within about 1e-7 of itself.
ROW_BLOCK = 256


def wide_cross(left: jax.Array, right: jax.Array) -> jax.Array:
    """left^T right, (k, m) from (n, k) and (n, m), of `wide_dtype`: summed over the n rows
    in float32 blocks of `ROW_BLOCK` rows whose products add up in float64.

    At oaks x1000 it gives X^T M to 3e-7 where the float32 product lost 2e-4 to 3e-4, in a
    third to a half of the time of a product with a float64 result (which converts both
    operands to float64 first: 4 to 10 times the float32 product's time there; shared 2-core
    CPU, `benchmarks/float32_convergence.py`). Operands already of the wide dtype take the
    plain product.
    """
    wide = wide_dtype(right.dtype)
    if right.dtype == wide:
        return left.T @ right
    n = left.shape[0]
    blocks = n // ROW_BLOCK
    if blocks < 2:
        # One block or less: the whole sum is one float32 block's.
        return jax.lax.dot(left.T, right, preferred_element_type=wide)
    head = blocks * ROW_BLOCK
    tail = jax.lax.dot(left[head:].T, right[head:], preferred_element_type=wide)
    per_block = jnp.einsum("rbk,rbm->rkm", left[:head].reshape(blocks, ROW_BLOCK, -1),
                           right[:head].reshape(blocks, ROW_BLOCK, -1))
    return jnp.sum(per_block.astype(wide), axis=0) + tail


def closed_form_covariance(params: PLNParams, data: PLNData | PaddedPLNData) -> jax.Array:
    """Sigma = (R^T R + D) / n with R = M - X B, (p, p), over the real rows."""
    B, M, S = params
    keep, n = _real_rows(data)
    R = keep(M - data.covariates @ B)
    return (R.T @ R + jnp.diag(jnp.sum(keep(S * S), axis=0))) / n


def precision_from_covariance(covariance: jax.Array) -> jax.Array:
    """Omega = Sigma^-1 by Cholesky solve, symmetrised against rounding."""
    eye = jnp.eye(covariance.shape[0], dtype=covariance.dtype)
    omega = jsl.cho_solve(jsl.cho_factor(covariance), eye)
    return 0.5 * (omega + omega.T)


def closed_form_precision(params: PLNParams, data: PLNData | PaddedPLNData) -> jax.Array:
    """Omega at the closed-form Sigma for the current B, M, S."""
    return precision_from_covariance(closed_form_covariance(params, data))


def profiled_elbo(latent_mean: jax.Array, latent_sd: jax.Array, data: PLNData | PaddedPLNData) -> jax.Array:
    """The ELBO with B and Sigma at their closed forms (what pyPLNmodels maximises).

    Here the trace term is exactly n p, so
    ELBO = -n/2 logdet(Sigma) + sum(Y (O + M) - A + 1/2 log S^2) - sum(log Y!).
    No trace term is evaluated to cancel the rounding of Sigma, so Sigma's Gram R^T R is
    formed in float64 (in float32 over n rows it moves the ELBO by up to 1.7e-6 at oaks
    x1000); this function is in no fit loop. Returns a scalar of the data's dtype.
    """
    M, S = latent_mean, latent_sd
    Y, O, X = data.counts, data.offsets, data.covariates
    keep, n = _real_rows(data)
    wide = wide_dtype(Y.dtype)
    B = closed_form_coef(M, X)
    R = keep(M - X @ B).astype(wide)
    n = jnp.asarray(n, wide)
    sigma = (R.T @ R + jnp.diag(jnp.sum(keep(S * S).astype(wide), axis=0))) / n
    S2 = S * S
    A = jnp.exp(O + M + 0.5 * S2)
    value = (-0.5 * n * _logdet_spd(sigma)
             + wide_sum(keep(Y * (O + M) - A + 0.5 * jnp.log(S2)))
             - jnp.asarray(data.log_factorial_sum, wide))
    return value.astype(Y.dtype)


def init_params(data: PLNData | PaddedPLNData, init: str) -> tuple[PLNParams, jax.Array]:
    """Starting B, M, S and Omega.

    Args:
        data: the fit's data; dtypes follow `data.counts`.
        init: "seed" is the tutorial's M = 0, S = 1, B = 0, Omega = I. "log_counts" is
            pyPLNmodels': M = log(Y + (Y == 0)), S = 0.5, with B and Omega at their
            closed forms for that M and S. "log_rates" is the same less the log-offsets,
            M = log(Y + (Y == 0)) - O: pyPLNmodels' start ignores the offsets, so its
            A = exp(O + M + S^2/2) starts near Y exp(O) (on oaks O spans 4.3 to 9.4),
            where this one starts near Y (the line-search optimizers then take 15% to
            60% fewer iterations on oaks). "log_rates_sd" is log_rates with each cell's S
            from its count, S = 1 / sqrt(Y + 1): about the spread of log Y for a Poisson
            count (1 / sqrt(Y) by the delta method), and near the optimum's S^2 = 1 / (A +
            Omega_jj): a count of 1,000 starts at S = 0.03, not 0.5. The default fit took
            fewer iterations to within 1e-5 of the optimum on most of the corpus
            (microcosm 400 x 100: 44 instead of 97; counts to 1e5: 2 instead of 16; 18%
            fewer in all), one more on oaks with `tree`, three more on one crossover
            chromosome (docs/accuracy.md). The default of the optimizers that find their
            steps, not of those that step by a set size: the tutorial's optimizer (`seed`),
            which moves S by up to 0.1 a step, takes an S of 0.03 through zero and diverges
            at its second iteration (`catalog.Optimizer.start`).

    Returns:
        (params, precision). M and S are laid out like Y (`*_like`), so that row-sharded
        data gives row-sharded M and S without gathering them on one device.
    """
    Y, X = data.counts, data.covariates
    p = Y.shape[1]
    d = X.shape[1]
    dtype = Y.dtype
    if init == "seed":
        params = PLNParams(
            coef=jnp.zeros((d, p), dtype),
            latent_mean=jnp.zeros_like(Y, dtype),
            latent_sd=jnp.ones_like(Y, dtype),
        )
        return params, jnp.eye(p, dtype=dtype)
    if init in ("log_counts", "log_rates", "log_rates_sd"):
        M = jnp.log(Y + (Y == 0).astype(dtype))
        if init != "log_counts":
            M = M - data.offsets
        S = 1.0 / jnp.sqrt(Y + 1.0) if init == "log_rates_sd" else jnp.full_like(Y, 0.5, dtype)
        params = PLNParams(coef=closed_form_coef(M, X), latent_mean=M, latent_sd=S)
        return params, closed_form_precision(params, data)
    raise ValueError(f"init must be 'seed', 'log_counts', 'log_rates' or 'log_rates_sd'; got {init!r}")
