"""How far each strategy's float32 ELBO lies from the float64 ELBO of the same parameters.

    .venv/bin/python benchmarks/float32_elbo.py                        # oaks x100 and x1000
    .venv/bin/python benchmarks/float32_elbo.py --replicates 100 --strategies scan scan_analytic

Parameters near the optimum (oaks x1 fitted by scan, rprop 0.01 from log counts, for
--fitted iterations; rows repeated K times, as oaks xK repeats them) are handed to each
strategy for one float32 iteration; its reported ELBO is compared with the float64 ELBO of
the parameters and Omega it held. scan_analytic, which carries its ELBO into the next
iteration, is also read at its second iteration. Prints the relative error per strategy
and replicate; the lab promises at most 1e-6 (tests/fit/test_float32_elbo.py checks x100).
Benchmarks print figures; they are not tests.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script

from core.data.datasets import load_oaks  # noqa: E402
from core.fit import model, strategies  # noqa: E402
from core.fit.strategies.base import FitState  # noqa: E402
from core.machine.runtime import configure  # noqa: E402
from core.spec import OptimizerSpec  # noqa: E402

RPROP = OptimizerSpec("rprop", 0.01)


def _run(name: str, problem: strategies.Problem, data, state: FitState):
    strategy = strategies.get(name)
    device = jax.devices("cpu")[0]
    placed, start = strategy.place_data(data, device), strategy.place_state(state, device)
    tol = jnp.asarray(0.0, "float32")
    executables = strategy.compile(strategy.lower(problem, start, placed, tol))
    return jax.block_until_ready(strategy.run(executables, problem, strategy.fresh_state(start), placed, tol))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--strategies", nargs="+", default=[n for n in strategies.names() if n != "eager"],
                        help="default: every strategy but eager (the same ELBO as jit_step, op by op)")
    parser.add_argument("--fitted", type=int, default=3000, help="iterations of the x1 fit")
    args = parser.parse_args()
    configure()
    small = load_oaks()
    small_data = jax.device_put(model.make_data(small.counts, small.offsets, small.covariates, "float32"))
    fit_problem = strategies.Problem(small.n, small.p, small.d, "float32", args.fitted, RPROP)
    start = strategies.init_state(small_data, "log_counts", fit_problem.transformation)
    fitted = _run("scan", fit_problem, small_data, start).state
    B, M, S = (np.asarray(a) for a in fitted.params)
    print(f"float32 ELBO vs the float64 ELBO of the same parameters (relative), one iteration from oaks x1 "
          f"fitted {args.fitted:,} iterations, rows repeated")
    print(f"{'strategy':<22}" + "".join(f"{'x' + format(k, ','):>12}" for k in args.replicates))
    errors: dict[str, list[str]] = {name: [] for name in args.strategies}
    for k in args.replicates:
        big = load_oaks(k)
        host32 = model.make_data(big.counts, big.offsets, big.covariates, "float32")
        data64 = jax.device_put(model.make_data(big.counts, big.offsets, big.covariates, "float64"))
        params = model.PLNParams(jnp.asarray(B), *(jnp.asarray(np.repeat(a, k, axis=0)) for a in (M, S)))
        state = FitState(params, model.closed_form_precision(params, jax.device_put(host32)),
                         fit_problem.transformation.init(params))

        def exact(held: FitState) -> float:
            up = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), (held.params, held.precision))
            return float(jax.jit(model.elbo)(*up, data64))

        reference = exact(state)
        for name in args.strategies:
            one = _run(name, strategies.Problem(big.n, big.p, big.d, "float32", 1, RPROP), host32, state)
            error = abs(float(one.elbo[0]) - reference) / abs(reference)
            if name == "scan_analytic":  # its second ELBO is carried from the iteration before
                two = _run(name, strategies.Problem(big.n, big.p, big.d, "float32", 2, RPROP), host32, state)
                error = max(error, abs(float(two.elbo[1]) - exact(one.state)) / abs(exact(one.state)))
            errors[name].append(f"{error:>12.1e}")
    for name in args.strategies:
        print(f"{name:<22}" + "".join(errors[name]))


if __name__ == "__main__":
    main()
