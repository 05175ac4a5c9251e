"""jit_per_function: each building block (value_and_grad, optimizer update, apply_updates, Sigma, its inverse) is jitted on its own; a Python loop calls them.

Five executables per iteration instead of hundreds of primitives, and XLA fuses the
work inside each one (the ELBO's exp, products and sums become a few loops). Arrays
still cross executable boundaries every iteration and Python still dispatches five
calls per iteration. It is the seed tutorial's level 1. The pieces are those of a
gradient step on B, M and S: the profiled optimizers (pyplnmodels_rprop, lbfgs ...)
evaluate, update and line-search in other pieces and run under the other strategies.
"""

from __future__ import annotations

import jax
import optax

from core.fit import model
from core.fit.algorithms.gradient import negative_wide_elbo
from core.fit.strategies.base import FitState, PythonLoopStrategy


class JitPerFunction(PythonLoopStrategy):
    name = "jit_per_function"

    def lower(self, problem, state, data, tol):
        optimizer = problem.transformation  # a gradient optimizer (core.spec.refusal)
        params = state.params
        covariance = model.closed_form_covariance(params, data)
        return {
            "value_and_grad": jax.jit(jax.value_and_grad(negative_wide_elbo)).lower(params, state.precision, data),
            "update": jax.jit(optimizer.update).lower(params, state.opt_state, params),
            "apply_updates": jax.jit(optax.apply_updates).lower(params, params),
            "covariance": jax.jit(model.closed_form_covariance).lower(params, data),
            "inverse": jax.jit(model.precision_from_covariance).lower(covariance),
        }

    def step(self, executables, problem, state, data):
        loss, grads = executables["value_and_grad"](state.params, state.precision, data)
        updates, opt_state = executables["update"](grads, state.opt_state, state.params)
        params = executables["apply_updates"](state.params, updates)
        precision = executables["inverse"](executables["covariance"](params, data))
        return FitState(params=params, precision=precision, opt_state=opt_state), -loss
