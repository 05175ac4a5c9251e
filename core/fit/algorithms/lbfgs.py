"""lbfgs: `optax.lbfgs` with its zoom line search on the profiled ELBO, in scaled coordinates.

The variables are z = (M, log S), so that S stays positive without bounds, in
coordinates w fixed at the start, z = z0 + w / sqrt(h): the profiled objective is badly
scaled (on oaks its curvature in M spans 1e-7 to 2e3, following A), and stock L-BFGS,
whose first step and memory assume a scale shared by every coordinate, needs more than
350 iterations to come within 1e-3 of the optimum on oaks. With h the curvature expected
near the optimum, h_M = Y + diag(Omega_0) (where A ~ Y for counted cells) and h_log S = 2
(the curvature in log S at the optimum of the S stationarity condition, 2 S^2 (A + diag
Omega) = 2), it takes about 90.

The objective handed to optax is -F with F's analytic gradient (`core.fit.profiled`,
through a `jax.custom_vjp`), so each of the line search's evaluations costs one pass; its
value is in the fit's dtype, as optax's line search mixes it with the parameters. So in
float32 the ELBO this algorithm reports, and its stopping test, see float32's rounding
(1.2e-7 of the ELBO): near the optimum its line search stalls and the change is 0.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax

from core.fit import model, profiled
from core.fit.algorithms.base import Algorithm, FitState, Latent, closed_form_state

MEMORY = 10
LINE_SEARCH_STEPS = 20


class LbfgsState(NamedTuple):
    """Attributes:
        scaled: w, the variables optax moves (M and log S coordinates), (n, p) each.
        optax_state: optax.lbfgs's state (memory, line-search value and gradient).
        origin: z0 = (M, log S) at the start.
        scale: sqrt(h), the fixed scaling (see the module docstring).
    """

    scaled: Latent
    optax_state: Any
    origin: Latent
    scale: Latent


def _latent(scaled: Latent, origin: Latent, scale: Latent) -> Latent:
    """(M, S) from the scaled coordinates."""
    mean = origin.latent_mean + scaled.latent_mean / scale.latent_mean
    log_sd = origin.latent_sd + scaled.latent_sd / scale.latent_sd
    return Latent(mean, jnp.exp(log_sd))


def _objective(origin: Latent, scale: Latent, data):
    """w -> -F(M, S) with the analytic gradient in w."""

    @jax.custom_vjp
    def loss(scaled):
        latent = _latent(scaled, origin, scale)
        return (-profiled.evaluate(latent.latent_mean, latent.latent_sd, data).elbo).astype(scaled.latent_mean.dtype)

    def forward(scaled):
        latent = _latent(scaled, origin, scale)
        found = profiled.evaluate(latent.latent_mean, latent.latent_sd, data)
        # dz/dw = 1 / scale; d/d(log S) = S d/dS.
        gradient = Latent(-found.grad_mean / scale.latent_mean, -found.grad_sd * latent.latent_sd / scale.latent_sd)
        return (-found.elbo).astype(scaled.latent_mean.dtype), gradient

    def backward(gradient, cotangent):
        return (jax.tree.map(lambda g: cotangent * g, gradient),)

    loss.defvjp(forward, backward)
    return loss


@functools.cache
def _transformation() -> optax.GradientTransformationExtraArgs:
    """optax.lbfgs as this algorithm sets it up (built once per process)."""
    return optax.lbfgs(memory_size=MEMORY,
                       linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=LINE_SEARCH_STEPS,
                                                                 initial_guess_strategy="one"))


# Jitted on its own: run op by op (the eager strategy), optax's value-from-state `cond` and
# its zoom line search's while loops close over this iteration's arrays, so each was a new
# program compiled (or loaded from the persistent cache) at every iteration, and JAX's cache
# of primitive executables kept every copy (thousands of memory mappings a run, until the
# process crashed). As one function of its inputs it is compiled once per shape, and
# inlined in the compiled strategies.
@jax.jit
def _move(own: "LbfgsState", data) -> tuple[jax.Array, Latent, Any]:
    """One optax.lbfgs step of the scaled variables -> (-F at the start, new w, new optax state)."""
    loss = _objective(own.origin, own.scale, data)
    value, grad = optax.value_and_grad_from_state(loss)(own.scaled, state=own.optax_state)
    updates, optax_state = _transformation().update(grad, own.optax_state, own.scaled, value=value, grad=grad,
                                                    value_fn=loss)
    return value, optax.apply_updates(own.scaled, updates), optax_state


class Lbfgs(Algorithm):
    """optax.lbfgs(memory_size=10, zoom line search) on the scaled profiled objective."""

    family: ClassVar[str] = "profiled"
    name = "lbfgs"

    @property
    def lbfgs(self) -> optax.GradientTransformationExtraArgs:
        return _transformation()

    def init(self, params, precision, data):
        origin = Latent(params.latent_mean, jnp.log(params.latent_sd))
        params, precision = closed_form_state(Latent(params.latent_mean, params.latent_sd), data)
        curvature_mean = data.counts + jnp.diagonal(precision)
        scale = Latent(jnp.sqrt(curvature_mean), jnp.full_like(curvature_mean, jnp.sqrt(2.0)))
        scaled = jax.tree.map(jnp.zeros_like, origin)
        return FitState(params=params, precision=precision,
                        opt_state=LbfgsState(scaled, self.lbfgs.init(scaled), origin, scale))

    def step(self, state, data):
        own = state.opt_state
        value, scaled, optax_state = _move(own, data)
        params, precision = closed_form_state(_latent(scaled, own.origin, own.scale), data)
        new = own._replace(scaled=scaled, optax_state=optax_state)
        return FitState(params=params, precision=precision, opt_state=new), (-value).astype(model.wide_dtype(value.dtype))

