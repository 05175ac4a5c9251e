"""scan_pytree_class: `lax.scan` over a class registered with `register_pytree_node_class`, whose methods return new objects.

A class with methods reads like the textbook model, and registering it as a pytree
lets jit and scan carry it; the compiled program matches scan's. The seed tutorial's
level 4 got this wrong in two ways that are easy to copy: its methods assigned to a
global instead of `self`, and its `tree_unflatten` rebuilt the object without Sigma and
Omega, so Omega silently stayed the identity. Here every array is a pytree child and the
methods are pure: they return an updated copy.
"""

from __future__ import annotations

import jax
import optax
from jax.tree_util import register_pytree_node_class

from core.fit import model
from core.fit.algorithms import Algorithm
from core.fit.algorithms.gradient import negative_wide_elbo
from core.fit.strategies.base import CompiledLoopStrategy, FitOutput, FitState, as_algorithm, finished, scan_loop


@register_pytree_node_class
class PLNFit:
    """The fit as an object: parameters, precision and optimizer state as pytree children."""

    def __init__(self, params: model.PLNParams, precision: jax.Array, opt_state: optax.OptState):
        self.params = params
        self.precision = precision
        self.opt_state = opt_state

    def elbo_and_grads(self, data: model.PLNData):
        loss, grads = jax.value_and_grad(negative_wide_elbo)(self.params, self.precision, data)
        return -loss, grads

    def gradient_step(self, grads, optimizer: optax.GradientTransformation) -> "PLNFit":
        updates, opt_state = optimizer.update(grads, self.opt_state, self.params)
        return PLNFit(optax.apply_updates(self.params, updates), self.precision, opt_state)

    def update_precision(self, data: model.PLNData) -> "PLNFit":
        return PLNFit(self.params, model.closed_form_precision(self.params, data), self.opt_state)

    def advance(self, optimizer: Algorithm | optax.GradientTransformation,
                data: model.PLNData) -> tuple["PLNFit", jax.Array]:
        """One iteration -> (the next fit, the ELBO of this one)."""
        algorithm = as_algorithm(optimizer)
        if algorithm.family == "gradient":
            value, grads = self.elbo_and_grads(data)
            return self.gradient_step(grads, algorithm.transformation).update_precision(data), value
        # The profiled algorithms' steps are whole (closed forms, line searches): delegated,
        # as a compiled loop's (`core.fit.strategies.base.loop_step`).
        state, value = algorithm.loop_step(
            FitState(params=self.params, precision=self.precision, opt_state=self.opt_state), data)
        return PLNFit(state.params, state.precision, state.opt_state), value

    def tree_flatten(self):
        # Every array is a child: anything left in aux_data would be treated as a
        # compile-time constant, and anything left out would be lost on unflatten. In
        # FitState's order, so that the loop is scan's program (`FitState`).
        return (self.opt_state, self.params, self.precision), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        opt_state, params, precision = children
        return cls(params, precision, opt_state)


def _fit(state, data, optimizer, iterations, stopping=None):
    def body(fit: PLNFit, _):
        return fit.advance(optimizer, data)

    start = PLNFit(state.params, state.precision, state.opt_state)
    # jax.lax.scan(body, start, length=iterations), stopping at tol when asked.
    final, trace, run, stop = scan_loop(body, start, iterations, stopping, data.counts.dtype)
    state = FitState(params=final.params, precision=final.precision, opt_state=final.opt_state)
    return FitOutput(finished(state, data, optimizer), trace, run, stop)


class ScanPytreeClass(CompiledLoopStrategy):
    name = "scan_pytree_class"
    fit = staticmethod(_fit)
