"""One program, one speed; differences tested: what the Run page says of strategies timed
together, at the front door's defaults. Prints figures; not a test.

    .venv/bin/python benchmarks/significance.py --sizes 1 100

For each oaks size, times together (one turn on the device, repeats in turn, calibrated as
the dashboard calibrates them) the three strategies that lower to one program at the
defaults (scan, scan_namedtuple, scan_pytree_class), then two genuinely different pairs
(jit_step against scan, at the defaults; eager against scan, with the tutorial's optimizer,
which eager can afford at 40 iterations). For each pair it prints the program fingerprints,
the calibrated repeat counts, the ratio with its interval and the verdict with its test and
p-value: exactly what the Run and Compare pages show (`core.results.spread`).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from core.machine.host import native_settings  # noqa: E402

native_settings()

from core.results import spread  # noqa: E402
from core.run import engine, repeats  # noqa: E402
from core.spec import DEFAULTS, DatasetSpec, FitSpec, OptimizerSpec  # noqa: E402


def front_door(strategy: str, replicate: int) -> FitSpec:
    """The spec the sidebar makes for `strategy` on oaks x`replicate` at its defaults."""
    optimizer = DEFAULTS.optimizer_for(strategy)
    return FitSpec(dataset=DatasetSpec(kind="oaks", replicate=replicate), strategy=strategy,
                   iterations=DEFAULTS.iterations, precision=DEFAULTS.precision, device=DEFAULTS.device,
                   optimizer=OptimizerSpec(optimizer, DEFAULTS.lr), repeats=DEFAULTS.repeats,
                   tol=DEFAULTS.tol)


def report(title: str, specs: list[FitSpec]) -> None:
    results = engine.run_together(specs)
    print(f"\n{title}")
    for result in results:
        print(f"  {result.strategy:18s} program {result.program or '(none)':16s}  {len(result.repeat_times):2d} "
              f"repeats  median {result.run_s * 1e3:9.3f} ms  "
              f"({result.run_s_min * 1e3:.3f}-{result.run_s_max * 1e3:.3f})  cache {result.cache}"
              + (f"  UNSTABLE: {result.unstable}" if result.unstable else ""))
    for first, second in itertools.combinations(results, 2):
        found = spread.speedup(spread.Spread.of_run(first), spread.Spread.of_run(second))
        print(f"  {second.strategy} over {first.strategy}: {found.label}; {found.why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100], help="oaks replication factors")
    args = parser.parse_args()
    print(f"calibration: {repeats.min_measured_seconds():g} s measured per fit, at least {DEFAULTS.repeats} and at "
          f"most {repeats.MAX_REPEATS} repeats")
    for k in args.sizes:
        report(f"oaks x{k}: the three strategies of one program, at the defaults",
               [front_door(name, k) for name in ("scan", "scan_namedtuple", "scan_pytree_class")])
        report(f"oaks x{k}: jit_step against scan, at the defaults", [front_door(name, k)
                                                                      for name in ("scan", "jit_step")])
        tutorial = [dataclasses.replace(front_door(name, k), optimizer=OptimizerSpec("seed", DEFAULTS.lr),
                                        init="seed", tol=0.0, iterations=40) for name in ("eager", "scan")]
        report(f"oaks x{k}: eager against scan, the tutorial's optimizer, 40 iterations", tutorial)


if __name__ == "__main__":
    main()
