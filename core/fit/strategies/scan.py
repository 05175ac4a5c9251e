"""scan: the whole loop is one `lax.scan` with a dict carry, compiled ahead of time (`jit(...).lower().compile()`).

One executable runs every iteration on the device without returning to Python, and
the per-iteration ELBO is stacked by the scan itself. Compilation is paid once for the
whole loop (its length is compiled in). It is the seed tutorial's level 2, whose carry
is a plain dict.
"""

from __future__ import annotations

from core.fit.strategies.base import CompiledLoopStrategy, FitOutput, FitState, finished, loop_step, scan_loop


def _fit(state, data, optimizer, iterations, stopping=None):
    def body(carry, _):
        new_state, value = loop_step(FitState(**carry), data, optimizer)
        return new_state._asdict(), value

    # jax.lax.scan(body, state._asdict(), length=iterations), stopping at tol when asked.
    carry, trace, run, stop = scan_loop(body, state._asdict(), iterations, stopping, data.counts.dtype)
    return FitOutput(finished(FitState(**carry), data, optimizer), trace, run, stop)


class Scan(CompiledLoopStrategy):
    name = "scan"
    fit = staticmethod(_fit)
