"""How near the default fit comes to the optimum in float32, and how accurate the ELBO its
stopping test reads is, along the fit.

    .venv/bin/python benchmarks/float32_convergence.py                  # oaks x1000, 120 iterations
    .venv/bin/python benchmarks/float32_convergence.py --replicate 100 --iterations 80 --every 10

Runs preconditioned L-BFGS from log_rates (the lab's default fit) in float32, one jitted
iteration at a time, and every --every iterations prints: the ELBO the iteration reports
(float64-accumulated, what the stopping test compares), its relative change, its error
against the float64 ELBO of the same float32 parameters, and the float64 ELBO's distance to
the optimum. The optimum is a float64 fit's (same algorithm, tol 1e-12), or --optimum. Then
times X^T M three ways, interleaved: float32, `model.wide_cross` (float32 blocks added in
float64) and a product with a float64 result. Benchmarks print figures; they are not tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script

from core.data.datasets import load_oaks  # noqa: E402
from core.fit import model, profiled  # noqa: E402
from core.fit.algorithms.preconditioned_lbfgs import PreconditionedLbfgs  # noqa: E402
from core.fit.strategies import init_state  # noqa: E402
from core.machine.runtime import configure  # noqa: E402


def _optimum(data64, iterations: int) -> float:
    """The float64 fit's ELBO once its relative change is under 1e-12 (or after `iterations`)."""
    algorithm = PreconditionedLbfgs()
    state, step = init_state(data64, "log_rates", algorithm), jax.jit(algorithm.step)
    previous = -np.inf
    for _ in range(iterations):
        state, value = step(state, data64)
        if abs(float(value) - previous) <= 1e-12 * abs(float(value)):
            break
        previous = float(value)
    return float(value)


def _timed(function, *args, rounds: int = 7) -> float:
    jax.block_until_ready(function(*args))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=120)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--optimum", type=float, default=None, help="skip the float64 fit")
    args = parser.parse_args()
    configure()
    counts = load_oaks(args.replicate)
    data64 = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float64"))
    data32 = jax.device_put(model.PLNData(*(jnp.asarray(a, jnp.float32) for a in data64[:3]),
                                          data64.log_factorial_sum))
    optimum = args.optimum if args.optimum is not None else _optimum(data64, 400)
    print(f"oaks x{args.replicate}, float32, preconditioned_lbfgs from log_rates; optimum {optimum:,.3f}")
    print(f"{'iteration':>9} {'reported ELBO':>18} {'change':>9} {'its error':>10} {'to optimum':>10}")
    algorithm = PreconditionedLbfgs()
    state, step = init_state(data32, "log_rates", algorithm), jax.jit(algorithm.step)
    exact = jax.jit(lambda M, S: profiled.evaluate(M.astype(jnp.float64), S.astype(jnp.float64), data64).elbo)
    previous = np.nan
    for i in range(args.iterations):
        held = state.params
        state, value = step(state, data32)  # the ELBO of `held`
        value = float(value)
        if i % args.every == 0 or i == args.iterations - 1:
            truth = float(exact(held.latent_mean, held.latent_sd))
            print(f"{i:>9} {value:>18,.3f} {abs(value - previous) / abs(value):>9.1e} "
                  f"{(value - truth) / abs(truth):>+10.1e} {(optimum - truth) / abs(optimum):>10.1e}", flush=True)
        previous = value
    M, X = state.params.latent_mean, data32.covariates
    ways = {"float32": jax.jit(lambda X, M: X.T @ M), "wide_cross": jax.jit(model.wide_cross),
            "float64 result": jax.jit(lambda X, M: jax.lax.dot(X.T, M, preferred_element_type=jnp.float64))}
    reference = np.asarray(X, np.float64).T @ np.asarray(M, np.float64)
    for name, way in ways.items():
        error = np.max(np.abs(np.asarray(way(X, M), np.float64) - reference)) / np.max(np.abs(reference))
        print(f"X^T M {name:>15}: {1e3 * _timed(way, X, M):7.1f} ms (median of 7), relative error {error:.1e}")


if __name__ == "__main__":
    main()
