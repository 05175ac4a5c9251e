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
- After the first iteration, Omega is the closed form for the current B, M and S, so the
  trace term tr(Omega (R^T R + D)) equals n p (see `core.fit.model`) and is not evaluated. The
  first iteration, whose Omega is the starting one, evaluates it.
- The ELBO of the new parameters (its exponential A, its logarithm and their sum) is
  computed at the end of the iteration that makes them. It is carried, with A and R, into
  the next iteration, which reports it and uses A and R for its gradient. Sums are
  matrix-vector products, which XLA fuses into one pass rather than a multi-pass
  reduction.
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
        elbo: the ELBO at these parameters and this Omega.
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
    """A = exp(O + M + S^2/2), (n, p), and sum(Y (O + M) - A + log(S^2) / 2)."""
    Y, O, _, _ = data
    n, p = Y.shape
    S2 = S * S
    A = jnp.exp(O + M + 0.5 * S2)
    terms = Y * (O + M) - A + 0.5 * jnp.log(S2)
    # As matrix-vector products, XLA fuses the sum into the loop that makes the terms; as a
    # reduction, it makes a separate, multi-pass reduction over them.
    return A, jnp.ones((n,), terms.dtype) @ (terms @ jnp.ones((p,), terms.dtype))


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

    # The first ELBO, with the full trace term: the starting Omega need not be a closed form
    # (the seed init uses I).
    R = M - X @ B
    A, terms_sum = _rate_and_sum(M, S, data)
    Omega = state.precision
    trace_term = jnp.sum(Omega * (R.T @ R)) + jnp.sum(jnp.diagonal(Omega) * jnp.sum(S * S, axis=0))
    first_elbo = (0.5 * n * model._logdet_spd(Omega) + terms_sum - 0.5 * trace_term
                  - log_factorial_sum + 0.5 * n * p)
    start = _Carry(packed_params, Omega, packed_state, R, A, first_elbo)

    def step(carry: _Carry, _):
        S = _unpack(carry.packed, n).latent_sd
        Omega, R, A = carry.precision, carry.residual, carry.rate
        R_omega = R @ Omega
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
        covariance = (R.T @ R + jnp.diag(jnp.sum(S * S, axis=0))) / n
        Omega, logdet = _precision_and_logdet(covariance)
        A, terms_sum = _rate_and_sum(M, S, data)
        # Omega is the closed form here, so the trace term is n p and cancels the constant.
        elbo = 0.5 * n * logdet + terms_sum - log_factorial_sum
        return _Carry(packed, Omega, opt_state, R, A, elbo), carry.elbo

    final, trace, run, stop = scan_loop(step, start, iterations, stopping, Y.dtype)
    params = _unpack(final.packed, n)
    opt_state = _unpack_state(final.opt_state, state.opt_state, n)
    return FitOutput(FitState(params, final.precision, opt_state), trace, run, stop)


class ScanAnalytic(CompiledLoopStrategy):
    name = "scan_analytic"
    fit = staticmethod(_fit)
