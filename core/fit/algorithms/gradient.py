"""Gradient steps with an optax transformation: on B, M and S (the seed tutorial's
algorithm), or on M and S with B and Omega profiled (pyPLNmodels' algorithm, with torch's
Rprop).

One iteration of the "gradient" family:

1. ELBO and its gradient with respect to B, M, S at the current Omega (autodiff of
   `model.wide_elbo`: the ELBO is accumulated in float64, the gradient is of the fit's
   dtype);
2. the transformation's update of B, M, S;
3. Omega <- Sigma^-1 at the closed-form Sigma for the new B, M, S.

The profiled gradient moves M and S only. Its state holds the evaluation of the current
point (`core.fit.profiled.evaluate`: the profiled ELBO, its analytic gradient, B and
Omega at their closed forms, in one pass), so one iteration is: the transformation's
update from that gradient, then the evaluation of the new point. That is what pyPLNmodels
computes (its autograd through the closed forms gives the same gradient, by the envelope
theorem), in one evaluation per iteration.

The ELBO returned for an iteration is that of the state it starts from.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import jax
import optax

from core.fit import model, profiled
from core.fit.algorithms.base import Algorithm, FitState, Latent


def negative_wide_elbo(params: model.PLNParams, precision: jax.Array, data) -> jax.Array:
    """The loss of the gradient family: -ELBO, accumulated in float64 (`model.wide_elbo`)."""
    return -model.wide_elbo(params, precision, data)


class GradientAlgorithm(Algorithm):
    """An optax transformation on B, M and S, Omega at its closed form after each update."""

    family: ClassVar[str] = "gradient"

    def __init__(self, name: str, transformation: optax.GradientTransformation) -> None:
        self.name = name
        self.transformation = transformation

    def init(self, params, precision, data):
        return FitState(params=params, precision=precision, opt_state=self.transformation.init(params))

    def step(self, state, data):
        loss, grads = jax.value_and_grad(negative_wide_elbo)(state.params, state.precision, data)
        updates, opt_state = self.transformation.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        precision = model.closed_form_precision(params, data)
        return FitState(params=params, precision=precision, opt_state=opt_state), -loss


class ProfiledGradientState(NamedTuple):
    """Attributes:
        transformation: the optax transformation's state, for (M, S).
        loss_gradient: d(-F)/dM and d(-F)/dS at the current point, (n, p) each.
        elbo: F at the current point, a scalar of `model.wide_dtype`.
    """

    transformation: Any
    loss_gradient: Latent
    elbo: jax.Array


def _evaluated(latent: Latent, transformation_state, data) -> FitState:
    found = profiled.evaluate(latent.latent_mean, latent.latent_sd, data)
    own = ProfiledGradientState(transformation_state, Latent(-found.grad_mean, -found.grad_sd), found.elbo)
    return FitState(params=model.PLNParams(found.coef, *latent), precision=found.precision, opt_state=own)


class ProfiledGradientAlgorithm(Algorithm):
    """An optax transformation on M and S; B and Omega at their closed forms (module docstring)."""

    family: ClassVar[str] = "profiled"

    def __init__(self, name: str, transformation: optax.GradientTransformation) -> None:
        self.name = name
        self.transformation = transformation

    def init(self, params, precision, data):
        # Whatever the initialisation gave for B and Omega, they are functions of M and S here.
        latent = Latent(params.latent_mean, params.latent_sd)
        return _evaluated(latent, self.transformation.init(latent), data)

    def step(self, state, data):
        own = state.opt_state
        latent = Latent(state.params.latent_mean, state.params.latent_sd)
        updates, transformation_state = self.transformation.update(own.loss_gradient, own.transformation, latent)
        return _evaluated(optax.apply_updates(latent, updates), transformation_state, data), own.elbo
