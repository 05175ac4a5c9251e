"""Where one preconditioned_lbfgs iteration spends its time, by part of the iteration.

    .venv/bin/python benchmarks/iteration_profile.py                   # oaks x100, float32
    .venv/bin/python benchmarks/iteration_profile.py --replicate 1000 --iterations 20
    .venv/bin/python benchmarks/iteration_profile.py --corpus "scrna 2000x3000" --iterations 5

Runs `--iterations` iterations as the scan strategy does (one compiled `lax.scan` over the
algorithm's loop step, from the default start), once to compile and once under JAX's
profiler, and adds up the time of every compiled kernel by the part of the step its
operation comes from: the descent direction (the L-BFGS recursion, `_descent_direction`),
the line search (its evaluations of the profiled ELBO and its gradient, one in most
iterations, and the acceptance test,
`_safe_search`) less its p x p work, that p x p work (Sigma's Cholesky factor, Omega and
its log-determinant: what grows as p^3, timed apart for big p) and the rest (the step, the
curvature pair and the memory update). Prints
milliseconds per iteration for each part, the heaviest kernels, the wall time per
iteration of an unprofiled run beside the kernels' sum (far apart, the rest is time
between kernels: launches, the host's waits on a loop's test), and the line search's
evaluations per iteration. Control flow (a while loop's own event, which spans its body's
kernels on a CPU) is not counted twice. On a shared CPU the kernels' times include waits
for a core: compare parts within one run, not figures across runs. Benchmarks print
figures; they are not tests.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script

from core.machine.host import native_settings  # noqa: E402

# Before numpy and jax load: OpenBLAS's spinning threads otherwise slow every kernel (the
# command line sets the same).
native_settings()

import jax  # noqa: E402

from core.data import corpus  # noqa: E402
from core.data.datasets import load_oaks  # noqa: E402
from core.fit import model  # noqa: E402
from core.fit.algorithms import preconditioned_lbfgs  # noqa: E402
from core.inspect import iteration_parts  # noqa: E402
from core.machine.runtime import configure  # noqa: E402
from core.spec import DEFAULTS  # noqa: E402


def _kernel_times(trace_dir: str) -> tuple[collections.Counter, collections.Counter]:
    """(total microseconds, count) per event name in the profiler's Perfetto trace."""
    path = next(pathlib.Path(trace_dir).rglob("perfetto_trace.json.gz"))
    events = json.load(gzip.open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    total, count = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("ph") == "X":
            total[event["name"]] += event.get("dur", 0)
            count[event["name"]] += 1
    return total, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=100)
    parser.add_argument("--corpus", default=None, metavar="SET", help="a corpus set instead of oaks (core.data.corpus)")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--precision", choices=("float32", "float64"), default="float32")
    parser.add_argument("--init", default=DEFAULTS.init, help=f"the start (default {DEFAULTS.init})")
    parser.add_argument("--kernels", type=int, default=12, help="how many of the heaviest kernels to list")
    args = parser.parse_args()
    configure()
    counts = corpus.load(args.corpus) if args.corpus else load_oaks(args.replicate)
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, args.precision))
    params, precision = model.init_params(data, args.init)
    algorithm = preconditioned_lbfgs.PreconditionedLbfgs()
    start = jax.jit(algorithm.init)(params, precision, data)
    fit = jax.jit(lambda state: jax.lax.scan(lambda s, _: algorithm.loop_step(s, data), state,
                                             length=args.iterations))
    compiled = fit.lower(start).compile()
    final, _ = jax.block_until_ready(compiled(start))
    evaluations = int(final.opt_state.evaluations - start.opt_state.evaluations) / args.iterations
    began = time.perf_counter()
    jax.block_until_ready(compiled(start))
    wall = (time.perf_counter() - began) / args.iterations

    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
        jax.block_until_ready(compiled(start))
        jax.profiler.stop_trace()
        total, count = _kernel_times(trace_dir)
    parts = iteration_parts.part_of_each_op(compiled.as_text())
    by_part = collections.Counter()
    for name, microseconds in total.items():
        if name in parts:
            by_part[parts[name]] += microseconds
    per_iteration = 1e-3 / args.iterations
    kernels = sum(by_part.values())
    problem = args.corpus or f"oaks x{args.replicate}"
    print(f"{problem} ({counts.n} x {counts.p}), {args.precision}, {args.iterations} iterations on "
          f"{jax.devices()[0].device_kind}: {wall * 1e3:.2f} ms per iteration (wall, unprofiled), "
          f"{evaluations:.1f} evaluations per iteration; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    # Two runs: the profiled one's kernels can outlast the unprofiled wall, so this is a
    # reading, not a split; far apart, the rest is time between kernels.
    print(f"kernels {kernels * per_iteration:.2f} ms per iteration (profiled) against the wall's {wall * 1e3:.2f} "
          f"(unprofiled)")
    print(f"{'part':20s} {'ms/iter':>8s} {'share':>6s}")
    for part, microseconds in by_part.most_common():
        print(f"{part:20s} {microseconds * per_iteration:8.2f} {microseconds / kernels:6.1%}")
    print("\nheaviest kernels (ms per iteration, calls per iteration):")
    for name, microseconds in sorted(((n, t) for n, t in total.items() if n in parts), key=lambda item: -item[1])[
            :args.kernels]:
        print(f"  {microseconds * per_iteration:7.2f}  x{count[name] / args.iterations:4.1f}  {parts[name]:18s} {name}")


if __name__ == "__main__":
    main()
