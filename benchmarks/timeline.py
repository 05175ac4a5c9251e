"""Inside one iteration: what the Under-the-hood timeline shows, as figures. Not a test.

    .venv/bin/python benchmarks/timeline.py --sizes 1 100
    .venv/bin/python benchmarks/timeline.py --sizes 1 --optimizer seed --init seed   # jit_per_function too

For each oaks size, traces a few iterations of eager, jit_per_function, jit_step and scan
at the front door's defaults (`core.inspect.timeline`, as the page does; a strategy that
cannot run the optimizer is named and left out) and prints, per strategy: ms per iteration
without and with the profiler, executables launched from the host and jit calls per
iteration, XLA ops per iteration, the share of the run with no XLA program running (the
gaps: Python, launching, waiting), and its heaviest ops; then, for the compiled strategies
whose ops fall in named parts of the algorithm (`core.inspect.iteration_parts`), µs per
iteration by part.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script

from core.machine.host import native_settings  # noqa: E402

native_settings()

from core.inspect import timeline, trace_findings  # noqa: E402
from core.spec import DEFAULTS, DatasetSpec, FitSpec, OptimizerSpec  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 100], help="oaks replications")
    parser.add_argument("--precision", choices=("float32", "float64"), default=DEFAULTS.precision)
    parser.add_argument("--optimizer", default=DEFAULTS.optimizer)
    parser.add_argument("--init", default=None, help="default: the optimizer's")
    parser.add_argument("--iterations", type=int, default=timeline.ITERATIONS)
    args = parser.parse_args()
    for size in args.sizes:
        spec = FitSpec(dataset=DatasetSpec(kind="oaks", replicate=size), strategy="scan", iterations=args.iterations,
                       precision=args.precision, device="cpu", optimizer=OptimizerSpec(args.optimizer),
                       init=args.init, repeats=1, tol=DEFAULTS.tol_for(args.precision))
        traced = timeline.trace_strategies(spec, iterations=args.iterations)
        print(f"\n{traced.dataset} ({traced.n} x {traced.p}), {traced.precision}, {traced.optimizer}, "
              f"{args.iterations} iterations traced; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
              f"trace file {len(traced.perfetto) / 1e3:,.0f} kB")
        for name, why in traced.skipped:
            print(f"  {name}: left out ({why.split(';')[0]})")
        print(f"  {'strategy':16s} {'ms/it':>8s} {'traced':>8s} {'launch/it':>9s} {'jit/it':>7s} {'ops/it':>7s} "
              f"{'gaps':>6s}  heaviest op")
        for row, trace in zip(trace_findings.summary_rows(traced), traced.traces):
            top = trace.top_ops[0] if trace.top_ops else None
            heaviest = f"{top.name} {top.us_per_iteration:,.0f} µs" if top else "-"
            print(f"  {row['strategy']:16s} {row['ms/it']:8.3f} {row['ms/it traced']:8.3f} {row['launches/it']:9.1f} "
                  f"{trace.per_iteration(trace.jit_calls):7.1f} {row['XLA ops/it']:7.0f} {row['gaps']:6.1%}  "
                  f"{heaviest}")
        for trace in traced.traces:
            if trace.parts:
                print(f"  {trace.strategy} by part: " + ", ".join(
                    f"{part.name} {part.us_per_iteration:,.0f} µs" for part in trace.parts))


if __name__ == "__main__":
    main()
