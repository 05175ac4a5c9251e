"""while_loop: a `lax.while_loop` that stops once the relative ELBO change falls under `tol`.

It is the seed tutorial's unused `tol` made to work: the stopping test runs on the
device, so a converged fit ends early without returning to Python each iteration. The
tolerance is an argument, not a constant, so changing it does not recompile; `tol = 0`
runs every iteration. Iterations past the stop are NaN in the returned trace.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from core.fit.strategies.base import FitOutput, Strategy, empty_trace, fit_step


def _fit(state, data, tol, optimizer, iterations):
    dtype = data.counts.dtype

    def keep_going(carry):
        i, _, _, _, change = carry
        return (i < iterations) & (change >= tol)

    def body(carry):
        i, state, trace, previous, _ = carry
        state, value = fit_step(state, data, optimizer)
        change = jnp.abs(value - previous) / jnp.abs(value)
        return i + 1, state, trace.at[i].set(value), value, change

    start = (jnp.asarray(0), state, empty_trace(iterations, dtype), jnp.asarray(jnp.inf, dtype), jnp.asarray(jnp.inf, dtype))
    count, final, trace, _, _ = jax.lax.while_loop(keep_going, body, start)
    return FitOutput(final, trace, count)


class WhileLoop(Strategy):
    name = "while_loop"
    donates_state = True  # as the other compiled loops (see CompiledLoopStrategy)

    def lower(self, problem, state, data, tol):
        fit = functools.partial(_fit, optimizer=problem.transformation, iterations=problem.iterations)
        return {"fit": jax.jit(fit, donate_argnums=0).lower(state, data, tol)}

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        return executables["fit"](state, data, tol)
