"""scan_namedtuple: `lax.scan` whose carry is a typed `NamedTuple` state instead of a dict.

NamedTuples are pytrees out of the box, so the compiled program is the same as scan's;
what changes is the code: fields are named and typed, updates are explicit
(`_replace`), and a misspelt key is an error rather than a new entry. It is the seed
tutorial's level 3 and should time exactly like scan.
"""

from __future__ import annotations

from core.fit.strategies.base import CompiledLoopStrategy, FitOutput, finished, loop_step, scan_loop


def _fit(state, data, optimizer, iterations, stopping=None):
    def body(carry, _):
        return loop_step(carry, data, optimizer)

    # jax.lax.scan(body, state, length=iterations), stopping at tol when asked.
    final, trace, run, stop = scan_loop(body, state, iterations, stopping, data.counts.dtype)
    return FitOutput(finished(final, data, optimizer), trace, run, stop)


class ScanNamedTuple(CompiledLoopStrategy):
    name = "scan_namedtuple"
    fit = staticmethod(_fit)
