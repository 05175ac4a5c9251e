"""scan_analytic: scan's loop with hand-derived gradients, packed parameters and a cheaper Omega (one triangular solve).

Same loop, same optimizer and the same ELBO trajectory as scan, up to floating-point
rounding. The whole loop is still one `lax.scan`, compiled ahead of time. What changes is
what each iteration asks of XLA, which matters most at small n, where the p x p linear
algebra and the cost of each operation outweigh the arithmetic:

- The gradient is written out (dM = Y - A - R Omega, dS = 1/S - S (A + diag Omega),
  dB = X^T R Omega), with R = M - X B formed once per iteration. Two (n, p) x (p, p)
  matrix products remain: R Omega, and R^T R for the new Sigma. Autodiff of the ELBO
  forms R^T R for the trace and then R (Omega + Omega^T) for its gradient, which makes
  three.
- Omega = Sigma^-1 = W^T W, with W = L^-1 from the Cholesky factor L of Sigma. That takes
  one LAPACK triangular solve (right-sided, the faster kind on CPU) and one p x p
  product, where `cho_solve(L, I)` takes two left-sided solves, each slower than that
  product. log det(Omega) = -2 sum(log diag L) comes with it.
- Inside the loop, B, M and S are packed rows of one (2n + d, p) array, and so are the
  optimizer's moments. The optimizer then runs as a few fused loops over one array
  instead of one set per parameter. This gives the same result for element-wise
  transformations (the gradient optimizers seed, adam and rprop). The state is unpacked to `PLNParams`
  when the loop ends.
- The ELBO of the new parameters (its exponential A, its logarithm and their sum) is
  computed at the end of the iteration that makes them. It is carried, with A and R, into
  the next iteration, which adds the part of the trace term that needs R Omega, reports
  it and uses A and R for its gradient. Sums are matrix-vector products with a float64
  result (`model.wide_sum`), which XLA fuses into the loop that makes the terms.
- Accuracy in float32: the ELBO reported is that of (B, M, S, Omega) as held, Omega
  included, with the whole trace term tr(Omega (R^T R + D)): its R part as
  sum((R Omega) * R), from the R Omega that the next gradient forms anyway. At the closed
  form the ELBO is stationary in Omega, so the float32 errors of Sigma's Gram over n rows
  and of its inverse cancel to first order; taking the trace term as n p, as the closed
  form would give in exact arithmetic, leaves them in (up to 1.7e-6 of the ELBO at oaks
  x1000; summing in float32 left 1e-2). log det(Omega) is -log det(Sigma) from Sigma's
  Cholesky factor plus tr(Sigma Omega) - p, the first-order effect of the float32 inverse
  (a p x p product-sum; no second Cholesky, and none of a float32 Omega that rounding has
  left indefinite). The terms are assembled in float64 and the ELBO reported in the fit's
  dtype.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from core.fit import model
from core.fit.strategies.base import CompiledLoopStrategy, FitOutput, FitState, as_algorithm, scan_loop


class _Carry(NamedTuple):
    """The loop state: the fit state in packed form, plus what the next ELBO reuses.

    Attributes:
        packed: B, M, S as rows [M; S; B] of one (2n + d, p) array.
        precision: Omega, (p, p).
        opt_state: the optimizer's state, with every `PLNParams` in it packed the same way.
        residual: R = M - X B, (n, p).
        rate: A = exp(O + M + S^2 / 2), (n, p).
        elbo: the ELBO at these parameters and this Omega less its -tr(Omega R^T R)/2 part,
            float64 (the next iteration adds that part, from the R Omega it forms).
    """

    packed: jax.Array
    precision: jax.Array
    opt_state: Any
    residual: jax.Array
    rate: jax.Array
    elbo: jax.Array


def _pack(params: model.PLNParams) -> jax.Array:
    # M first, then S, then B: every slice taken back is a run of whole rows in memory.
    return jnp.concatenate([params.latent_mean, params.latent_sd, params.coef], axis=0)


def _unpack(packed: jax.Array, n: int) -> model.PLNParams:
    return model.PLNParams(coef=packed[2 * n:], latent_mean=packed[:n], latent_sd=packed[n:2 * n])


def _is_params(node) -> bool:
    return isinstance(node, model.PLNParams)


def _pack_state(opt_state):
    """Pack every `PLNParams` subtree of an optax state (moments, step sizes)."""
    return jax.tree_util.tree_map(lambda node: _pack(node) if _is_params(node) else node, opt_state,
                                  is_leaf=_is_params)


def _unpack_state(packed_state, like, n: int):
    """The inverse of `_pack_state`, given the unpacked state `like` for its structure."""
    treedef = jax.tree_util.tree_structure(like, is_leaf=_is_params)
    leaves = [_unpack(leaf, n) if _is_params(original) else leaf
              for leaf, original in zip(treedef.flatten_up_to(packed_state), treedef.flatten_up_to(like))]
    return treedef.unflatten(leaves)


def _rate_and_sum(M: jax.Array, S: jax.Array, data: model.PLNData) -> tuple[jax.Array, jax.Array]:
    """A = exp(O + M + S^2/2), (n, p), and sum(Y (O + M) - A + log(S^2) / 2) in float64."""
    Y, O, _, _ = data
    S2 = S * S
    A = jnp.exp(O + M + 0.5 * S2)
    terms = Y * (O + M) - A + 0.5 * jnp.log(S2)
    # A matrix-vector product with a float64 result: XLA fuses it into the loop that makes
    # the terms and accumulates each row in float64 (a float32 ones(n) @ rows lost 1e-2).
    return A, model.wide_sum(terms)


def _diagonal_term(Omega: jax.Array, column_sums: jax.Array) -> jax.Array:
    """tr(Omega D) = sum(diag(Omega) * colsum(S^2)), the trace term's part without R."""
    return jnp.sum(jnp.diagonal(Omega) * column_sums)


def _precision_and_logdet(covariance: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Omega = Sigma^-1 = W^T W with W = L^-1, and log det(Omega) = -2 sum(log diag L)."""
    p = covariance.shape[0]
    # Sigma is symmetric and LAPACK wants it column-major. Through the transpose, the
    # fusion that makes Sigma writes it in that layout straight, not element by transposed
    # element. Only one triangle is read, so it is not symmetrised first.
    chol = jax.lax.linalg.cholesky(covariance.T, symmetrize_input=False)
    inverse = jax.lax.linalg.triangular_solve(chol, jnp.eye(p, dtype=covariance.dtype),
                                              left_side=False, lower=True)
    # Without the barrier XLA folds the transpose into the product as a dot that contracts
    # over rows, which runs slower on CPU than the row-major copy of W^T plus the plain
    # product it makes here.
    inverse_t = jax.lax.optimization_barrier(inverse.T)
    return inverse_t @ inverse_t.T, -2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))


def _fit(state: FitState, data: model.PLNData, optimizer, iterations: int, stopping=None):
    """The whole fit as one scan: `iterations` steps from `state` (fewer with `stopping`).
    Returns FitOutput, ELBO (iterations,)."""
    optimizer = as_algorithm(optimizer).transformation  # gradient optimizers only (core.spec.refusal)
    Y, O, X, log_factorial_sum = data
    n, p = Y.shape
    B, M, S = state.params
    packed_state = _pack_state(state.opt_state)
    packed_params = _pack(state.params)
    # The packed state must be what the optimizer would make for the packed parameters.
    if (jax.tree_util.tree_structure(packed_state)
            != jax.tree_util.tree_structure(jax.eval_shape(optimizer.init, packed_params))):
        raise ValueError("scan_analytic packs the parameters; this optimizer's state does not mirror them")

    wide = model.wide_dtype(Y.dtype)
    constant = 0.5 * n * p - jnp.asarray(log_factorial_sum, wide)

    def elbo_without_quadratic(Omega, logdet, terms_sum, column_sums):
        """The ELBO less -tr(Omega R^T R)/2, which the next iteration adds from its R Omega."""
        return (0.5 * n * logdet + terms_sum + constant
                - 0.5 * _diagonal_term(Omega, column_sums).astype(wide))

    # The starting Omega need not be a closed form (the seed init uses I): the trace term is
    # evaluated for it as for every other, so the first iteration needs no special case.
    R = M - X @ B
    A, terms_sum = _rate_and_sum(M, S, data)
    Omega = state.precision
    logdet = model._logdet_spd(Omega).astype(wide)
    start = _Carry(packed_params, Omega, packed_state, R, A,
                   elbo_without_quadratic(Omega, logdet, terms_sum, jnp.sum(S * S, axis=0)))

    def step(carry: _Carry, _):
        S = _unpack(carry.packed, n).latent_sd
        Omega, R, A = carry.precision, carry.residual, carry.rate
        R_omega = R @ Omega
        # tr(Omega R^T R) = sum((R Omega) * R), from the R Omega the gradient needs anyway.
        reported = carry.elbo - 0.5 * model.wide_sum(R_omega * R)
        # The optimizer minimises -ELBO: these are the ELBO's gradients, negated.
        loss_gradient = model.PLNParams(
            coef=-(X.T @ R_omega),
            latent_mean=-(Y - A - R_omega),
            latent_sd=-(1.0 / S - S * (A + jnp.diagonal(Omega))),
        )
        updates, opt_state = optimizer.update(_pack(loss_gradient), carry.opt_state, carry.packed)
        packed = optax.apply_updates(carry.packed, updates)

        B, M, S = _unpack(packed, n)
        R = M - X @ B
        column_sums = jnp.sum(S * S, axis=0)
        covariance = (R.T @ R + jnp.diag(column_sums)) / n
        Omega, logdet = _precision_and_logdet(covariance)
        # log det of the float32 Omega itself: its inverse's rounding, to first order.
        inversion = jnp.sum(covariance.astype(wide) * Omega.T.astype(wide)) - p
        A, terms_sum = _rate_and_sum(M, S, data)
        elbo = elbo_without_quadratic(Omega, logdet.astype(wide) + inversion, terms_sum, column_sums)
        # float64 out: the stopping test compares it; scan_loop rounds the trace to Y.dtype.
        return _Carry(packed, Omega, opt_state, R, A, elbo), reported

    final, trace, run, stop = scan_loop(step, start, iterations, stopping, Y.dtype)
    params = _unpack(final.packed, n)
    opt_state = _unpack_state(final.opt_state, state.opt_state, n)
    return FitOutput(FitState(params=params, precision=final.precision, opt_state=opt_state), trace, run, stop)


class ScanAnalytic(CompiledLoopStrategy):
    name = "scan_analytic"
    fit = staticmethod(_fit)
