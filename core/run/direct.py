"""A fit without the engine: compiled as the scan strategy compiles it, run once, untimed.

For what needs a fit's answer and not its timing: the corpus's reference optima
(`benchmarks/corpus_reference.py`) and the corpus tests. Runs come back with their ELBO
trace, their final M and S on the host, and the change the stopping test read.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from core.data.counts import CountData
from core.fit import model, strategies
from core.machine import runtime
from core.run.prepared import initial_state
from core.spec import OptimizerSpec


class DirectFit(NamedTuple):
    """Attributes:
        elbo: the ELBO of every iteration run, float64 (as the fit's dtype rounded it).
        latent_mean, latent_sd: M and S at the end, float64 on the host.
        tested_change: the last relative change the stopping test read, or None (tol 0).
    """

    elbo: np.ndarray
    latent_mean: np.ndarray
    latent_sd: np.ndarray
    tested_change: float | None


def fit(counts: CountData, optimizer: str, init: str, precision: str, iterations: int, tol: float = 0.0,
        strategy: str = "scan", compiler_options: dict | None = None) -> DirectFit:
    """Fit `counts` with `optimizer` from `init` for at most `iterations` (stopping at a
    relative ELBO change under `tol` when > 0) on JAX's default device.

    `compiler_options` are XLA's, for the fit's program: tests that run many fits compile
    them with XLA's quicker settings (the same arithmetic, built in a third of the time).
    """
    runtime.configure()
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, precision))
    problem = strategies.Problem(counts.n, counts.p, counts.d, precision, iterations, OptimizerSpec(optimizer),
                                 stops=tol > 0)
    runner = strategies.get(strategy)
    state = initial_state(data, init, problem, jax.devices()[0].platform)
    tolerance = jnp.asarray(tol, precision)
    lowered = runner.lower(problem, state, data, tolerance) if runner.compiled_ahead else {}
    executables = {name: item.compile(compiler_options) for name, item in lowered.items()}
    output = jax.block_until_ready(runner.run(executables, problem, runner.fresh_state(state), data, tolerance))
    ran = int(output.iterations_run)
    change = None if output.stop is None else float(output.stop.change)
    params = output.state.params
    return DirectFit(np.asarray(output.elbo, dtype=np.float64)[:ran],
                     np.asarray(params.latent_mean, dtype=np.float64), np.asarray(params.latent_sd, dtype=np.float64),
                     change if change is not None and np.isfinite(change) else None)
