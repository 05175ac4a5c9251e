"""diagonal_newton: variational EM with a diagonal Newton step in M and the fixed point in S.

With B and Omega at their closed forms for the current M, S (one evaluation of the
profiled ELBO, `core.fit.profiled`), each cell moves on its own:

    M <- M + clip((Y - A - R Omega) / (A + diag Omega), -1, 1)
    S <- (A' + diag Omega)^(-1/2),  A' = A exp(M_new - M_old)

The first is a Newton step on the ELBO's curvature in M_ij alone (A_ij + Omega_jj),
clipped because exp makes a step from far below the optimum overshoot; the second solves
the stationarity condition dF/dS = 1/S - S (A + diag Omega) = 0 with A at the new M.
No learning rate, no line search: one evaluation per iteration.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from core.fit import model, profiled
from core.fit.algorithms.base import Algorithm, FitState, Latent

# The largest move of one M_ij in one iteration (exp(1) in its rate).
MAX_STEP = 1.0


class NewtonState(NamedTuple):
    """The evaluation at the current M, S that the next step starts from.

    Attributes:
        gradient: dF/dM and dF/dS, (n, p) each.
        rate: A, (n, p).
        elbo: F, a scalar of `model.wide_dtype`.
    """

    gradient: Latent
    rate: jax.Array
    elbo: jax.Array


def _state(latent_mean, latent_sd, data) -> FitState:
    found = profiled.evaluate(latent_mean, latent_sd, data)
    own = NewtonState(Latent(found.grad_mean, found.grad_sd), found.rate, found.elbo)
    return FitState(model.PLNParams(found.coef, latent_mean, latent_sd), found.precision, own)


class DiagonalNewton(Algorithm):
    """Diagonal Newton in M, fixed point in S (see the module docstring)."""

    family: ClassVar[str] = "profiled"
    name = "diagonal_newton"

    def init(self, params, precision, data):
        return _state(params.latent_mean, params.latent_sd, data)

    def step(self, state, data):
        own = state.opt_state
        diagonal = jnp.diagonal(state.precision)
        move = jnp.clip(own.gradient.latent_mean / (own.rate + diagonal), -MAX_STEP, MAX_STEP)
        latent_mean = state.params.latent_mean + move
        latent_sd = jax.lax.rsqrt(own.rate * jnp.exp(move) + diagonal)
        return _state(latent_mean, latent_sd, data), own.elbo.astype(data.counts.dtype)
