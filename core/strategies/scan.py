"""scan: the whole loop is one `lax.scan` with a dict carry, compiled ahead of time (`jit(...).lower().compile()`).

One executable runs every iteration on the device without returning to Python, and
the per-iteration ELBO is stacked by the scan itself. Compilation is paid once for the
whole loop (its length is compiled in). It is the seed tutorial's level 2, whose carry
is a plain dict.
"""

from __future__ import annotations

import functools

import jax

from core.strategies.base import FitOutput, FitState, Strategy, fit_step


def _fit(state, data, optimizer, iterations):
    def body(carry, _):
        new_state, value = fit_step(FitState(**carry), data, optimizer)
        return new_state._asdict(), value

    carry, trace = jax.lax.scan(body, state._asdict(), length=iterations)
    return FitOutput(FitState(**carry), trace, iterations)


class Scan(Strategy):
    name = "scan"

    def lower(self, problem, state, data, tol):
        fit = functools.partial(_fit, optimizer=problem.transformation, iterations=problem.iterations)
        return {"fit": jax.jit(fit).lower(state, data)}

    def run(self, executables, problem, state, data, tol, on_iteration=None):
        return executables["fit"](state, data)
