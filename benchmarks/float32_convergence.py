"""How near the default fit comes to the optimum in float32, and how accurate the ELBO its
stopping test reads is, along the fit.

    .venv/bin/python benchmarks/float32_convergence.py                  # oaks x1000, 120 iterations
    .venv/bin/python benchmarks/float32_convergence.py --replicate 100 --iterations 80 --every 10

Runs preconditioned L-BFGS from log_rates (the lab's default fit) in float32, one jitted
iteration at a time, and every --every iterations prints: the ELBO the iteration reports
(float64-accumulated, what the stopping test compares), its relative change, its error
against the float64 ELBO of the same float32 parameters, and the float64 ELBO's distance to
the optimum. The optimum is a float64 fit's (same algorithm, tol 1e-12), or --optimum. Then
times X^T M three ways: float32, `model.wide_cross` (float32 blocks added in float64) and a
product with a float64 result; and what wide_cross costs a whole iteration: `--rounds`
compiled runs of 15 iterations each, with it and with a plain float32 product, in turn.
Benchmarks print figures; they are not tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script

from core.machine.host import native_settings  # noqa: E402

# Before numpy and jax load, as the command line does: XLA's log level (its cache loader
# otherwise prints a line per executable it loads) and OpenBLAS's threads.
native_settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

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


def _iteration_cost(data32, rounds: int, iterations: int = 15) -> dict[str, list[float]]:
    """Milliseconds per iteration of the compiled default fit with `model.wide_cross` and with
    a plain float32 X^T M (traced with it swapped in), `rounds` runs each, taken in turn so
    that load on a shared machine falls on both alike."""
    algorithm = PreconditionedLbfgs()
    start = init_state(data32, "log_rates", algorithm)
    wide_cross, fits = model.wide_cross, {}
    try:
        for name in ("wide_cross", "float32 product"):
            if name != "wide_cross":
                model.wide_cross = lambda left, right: (left.T @ right).astype(model.wide_dtype(right.dtype))
            loop = jax.jit(lambda state: jax.lax.scan(lambda s, _: algorithm.step(s, data32), state, length=iterations))
            fits[name] = loop.lower(start).compile()  # traced now, with this X^T M
            jax.block_until_ready(fits[name](start))
    finally:
        model.wide_cross = wide_cross
    times: dict[str, list[float]] = {name: [] for name in fits}
    for round_ in range(rounds):
        for name in (list(fits) if round_ % 2 == 0 else list(fits)[::-1]):
            began = time.perf_counter()
            jax.block_until_ready(fits[name](start))
            times[name].append(1e3 * (time.perf_counter() - began) / iterations)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=120)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--optimum", type=float, default=None, help="skip the float64 fit")
    parser.add_argument("--rounds", type=int, default=6, help="timed runs of each, for the iteration's cost")
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
    times = _iteration_cost(data32, args.rounds)
    for name, each in times.items():
        print(f"one iteration, {name:>15}: median {np.median(each):7.1f} ms, fastest {min(each):7.1f} ms "
              f"({args.rounds} runs, in turn)")
    wide, plain = times["wide_cross"], times["float32 product"]
    print(f"wide_cross costs the iteration {np.median(wide) / np.median(plain):.3f}x (medians), "
          f"{min(wide) / min(plain):.3f}x (fastest runs)")


if __name__ == "__main__":
    main()
