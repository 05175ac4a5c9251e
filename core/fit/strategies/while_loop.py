"""while_loop: a `lax.while_loop` that stops once the relative ELBO change falls under `tol`.

It is the seed tutorial's unused `tol` made to work: the stopping test runs on the
device, so a converged fit ends early without returning to Python each iteration. The
tolerance is an argument, not a constant, so changing it does not recompile; `tol = 0`
runs every iteration (a fit whose ELBO is not a number stops there). Iterations past the
stop are NaN in the returned trace. Where the other compiled loops hold their state once
stopped, this one exits.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from core.fit.strategies.base import FitOutput, Strategy, after, empty_trace, finished, loop_step, start_stop


def _fit(state, data, tol, stop, optimizer, iterations):
    def keep_going(carry):
        i, _, _, stop = carry
        return (i < iterations) & ~stop.done

    def body(carry):
        i, state, trace, stop = carry
        state, value = loop_step(state, data, optimizer)
        return i + 1, state, trace.at[i].set(value.astype(trace.dtype)), after(stop, value, tol)

    start = (jnp.asarray(0, jnp.int32), state, empty_trace(iterations, data.counts.dtype), stop)
    count, final, trace, stop = jax.lax.while_loop(keep_going, body, start)
    return FitOutput(finished(final, data, optimizer), trace, count, stop)


class WhileLoop(Strategy):
    name = "while_loop"
    donates_state = True  # as the other compiled loops (see CompiledLoopStrategy)
    chunkable = True

    def lower(self, problem, state, data, tol):
        fit = functools.partial(_fit, optimizer=problem.algorithm, iterations=problem.iterations_per_call)
        stop = start_stop(problem.iterations, problem.dtype)
        return {"fit": jax.jit(fit, donate_argnums=0).lower(state, data, tol, stop)}

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        # It always stops (at tol, or where the ELBO is not a number), so it always passes its Stop on.
        return self.run_calls(lambda start, stop: executables["fit"](start, data, tol, stop), problem, state,
                              start_stop(problem.iterations, problem.dtype), on_iteration)
