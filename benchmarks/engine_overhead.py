"""Steady-state overhead of the engine over a bare call of the same compiled executable.

    .venv/bin/python benchmarks/engine_overhead.py                   # scan, scan_analytic; oaks x1, x100
    .venv/bin/python benchmarks/engine_overhead.py --repeats 7 --rounds 5

For each strategy and size, `prepared.prepare` compiles the fit (or finds it in the
engine's cache) and places the data and the initial state. Then each round times the fit
in two ways, in alternating order so that drift in the machine's load does not favour
either one:

- engine: `engine.run(spec)` with `repeats=R`; its reported `run_s`, the median of R
  steady-state calls. It reuses the executable `prepare` cached (the result's cache
  column says "memory").
- bare: R calls of `executables["fit"](state, data)` followed by
  `jax.block_until_ready`, on the prepared executable, state and data; their median.
  The executable consumes (donates) its state, so each call gets a fresh copy of the
  initial state, made before its clock starts, as the engine does. (At these sizes the
  loop runs in one call: `prepared.chunk_iterations` is 0.)

The overhead is median(engine) / median(bare) - 1 over the rounds. Anything within the
round-to-round spread is noise. The target is under 5%. Benchmarks print figures; they are
not tests. The machine should be otherwise idle: on 2 cores, any other process shows up
in both columns.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# oaks replication -> iterations, as in `python -m core bench --sizes 1 100`.
ITERATIONS = {1: 400, 100: 100}


def _bare(prep, repeats: int) -> float:
    import jax

    fit = prep.executables["fit"]
    assert prep.problem.chunk == 0, "the bare call runs the whole loop in one call"
    times = []
    for _ in range(repeats):
        state = jax.block_until_ready(prep.strategy.fresh_state(prep.state))
        start = time.perf_counter()
        jax.block_until_ready(fit(state, prep.data))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(strategy: str, replicate: int, iterations: int, precision: str, repeats: int, rounds: int) -> dict:
    """Engine and bare steady-state seconds per round, for one strategy and oaks size."""
    import jax

    from core.data import datasets as data
    from core.run import engine, prepared
    from core.spec import DatasetSpec, FitSpec, OptimizerSpec

    spec = FitSpec(dataset=DatasetSpec(kind="oaks", replicate=replicate), strategy=strategy,
                   iterations=iterations, precision=precision, repeats=repeats,
                   optimizer=OptimizerSpec("seed"), init="seed", tol=0.0)  # every iteration, as both strategies take
    counts = data.load(spec.dataset)
    prep = prepared.prepare(spec, counts)
    jax.block_until_ready(prep.executables["fit"](prep.strategy.fresh_state(prep.state), prep.data))  # untimed
    engine_s, bare_s, caches = [], [], set()
    for round_ in range(rounds):
        order = ("engine", "bare") if round_ % 2 == 0 else ("bare", "engine")
        for which in order:
            if which == "engine":
                result = engine.run(spec, counts=counts)
                engine_s.append(result.run_s)
                caches.add(result.cache)
            else:
                bare_s.append(_bare(prep, repeats))
    return {"strategy": strategy, "dataset": spec.dataset.label, "iterations": iterations,
            "engine": engine_s, "bare": bare_s, "caches": caches}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", nargs="+", default=["scan", "scan_analytic"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 100], choices=sorted(ITERATIONS),
                        help="oaks replications (x1: 400 iterations, x100: 100)")
    parser.add_argument("--precision", default="float32", choices=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=7, help="steady-state calls per measurement (R)")
    parser.add_argument("--rounds", type=int, default=3, help="engine/bare pairs per row")
    args = parser.parse_args(argv)

    sys.path.insert(0, ROOT)
    from core.machine.host import native_settings

    native_settings()  # before numpy, scipy or jax load

    from core.machine import runtime

    runtime.configure()
    header = (f"{'strategy':<14} {'dataset':<10} {'iters':>5} {'engine ms/it':>12} {'bare ms/it':>10} "
              f"{'overhead %':>10} {'round spread %':>14}  cache")
    print(header)
    print("-" * len(header))
    for replicate in args.sizes:
        for strategy in args.strategies:
            row = measure(strategy, replicate, ITERATIONS[replicate], args.precision, args.repeats, args.rounds)
            engine_s, bare_s = statistics.median(row["engine"]), statistics.median(row["bare"])
            spread = 100 * (max(row["bare"]) - min(row["bare"])) / bare_s
            print(f"{row['strategy']:<14} {row['dataset']:<10} {row['iterations']:>5} "
                  f"{1e3 * engine_s / row['iterations']:>12.4f} {1e3 * bare_s / row['iterations']:>10.4f} "
                  f"{100 * (engine_s / bare_s - 1):>+10.2f} {spread:>14.1f}  {','.join(sorted(row['caches']))}",
                  flush=True)


if __name__ == "__main__":
    main()
