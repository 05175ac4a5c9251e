"""Which way of making Omega is faster on this machine: Sigma's own p x p factor ("columns")
or the rows' n x n matrix in float64 ("rows"), timed side by side on the same data.

    .venv/bin/python benchmarks/row_path.py                                   # p > n sets of the corpus
    .venv/bin/python benchmarks/row_path.py --sets "microcosm 921x1209" "scrna 2000x3000" --device gpu

`core.fit.row_path.through_rows` chooses the way for a fit from its shape, precision and
platform; this benchmark overrides that choice for each of the two ways in turn and runs the
default optimizer's loop body as the scan strategy does (one compiled `lax.scan` of
`--iterations` iterations from log_rates), so the two columns are the same iterations by two
ways. For each set and precision it prints the steady-state milliseconds an iteration of
each way (median of `--rounds` calls after the first), their ratio, the way the rule picks
(marked *), and how far apart the two ways' ELBOs are after the last iteration (relative):
the ways are one computation, rounded differently. Compile times are printed beside them.
Benchmarks print figures; they are not tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script

from core.machine.host import native_settings  # noqa: E402

# Before numpy and jax load: OpenBLAS's spinning threads otherwise slow every kernel.
native_settings()

import jax  # noqa: E402

from core.data import corpus  # noqa: E402
from core.fit import model, row_path  # noqa: E402
from core.fit.algorithms import preconditioned_lbfgs  # noqa: E402
from core.machine.runtime import configure  # noqa: E402

WAYS = {"columns": False, "rows": True}
DEFAULT_SETS = ("simulated p>n", "crossover per chromosome 43x104", "microcosm 150x250", "scrna 100x300")


def _timed_way(counts, precision: str, device, iterations: int, rounds: int, rows: bool) -> dict:
    """Compile seconds, steady-state seconds an iteration and the last ELBO, with `rows`
    forcing the way (the patch is in force while the program is traced).

    JAX's caches are emptied first: the optimizer's module-level jitted parts (its line
    search, its direction) keep their traces, and the second way's program reused the
    first's line search (12 Cholesky factors in both programs at 60 x 150, 8 in the rows'
    own), so the two columns timed nearly one program."""
    jax.clear_caches()
    with mock.patch.object(row_path, "through_rows", lambda *_args, **_kwargs: rows), jax.default_device(device):
        data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, precision), device)
        params, omega = model.init_params(data, "log_rates")
        algorithm = preconditioned_lbfgs.PreconditionedLbfgs()
        start = jax.jit(algorithm.init)(params, omega, data)
        fit = jax.jit(lambda state: jax.lax.scan(lambda s, _: algorithm.loop_step(s, data), state,
                                                 length=iterations))
        began = time.perf_counter()
        compiled = fit.lower(start).compile()
        compile_seconds = time.perf_counter() - began
        _, elbos = jax.block_until_ready(compiled(start))
        seconds = []
        for _ in range(rounds):
            began = time.perf_counter()
            jax.block_until_ready(compiled(start))
            seconds.append((time.perf_counter() - began) / iterations)
    return {"compile": compile_seconds, "per_iteration": statistics.median(seconds), "elbo": float(elbos[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(DEFAULT_SETS), help="corpus sets (core.data.corpus)")
    parser.add_argument("--precisions", nargs="+", choices=("float32", "float64"), default=["float32", "float64"])
    parser.add_argument("--device", default="cpu", help="platform: cpu, gpu or tpu")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    configure()
    device = jax.devices(args.device)[0]
    print(f"Row paths on {device.device_kind} ({args.device}), {args.iterations} iterations a call, median of "
          f"{args.rounds} calls; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; * the rule's choice")
    print(f"{'set':34s} {'n x p':>10s} {'prec':7s} | {'columns ms':>10s} {'rows ms':>9s} {'rows/col':>8s} | "
          f"{'compile s (col, rows)':>21s} | ELBOs apart")
    for name in args.sets:
        counts = corpus.load(name)
        for precision in args.precisions:
            timed = {way: _timed_way(counts, precision, device, args.iterations, args.rounds, rows)
                     for way, rows in WAYS.items()}
            chosen = "rows" if row_path.through_rows(counts.n, counts.p, precision, args.device) else "columns"
            cells = {way: f"{timed[way]['per_iteration'] * 1e3:.2f}{'*' if way == chosen else ' '}" for way in WAYS}
            apart = abs(timed["rows"]["elbo"] - timed["columns"]["elbo"]) / abs(timed["columns"]["elbo"])
            print(f"{name:34s} {f'{counts.n}x{counts.p}':>10s} {precision:7s} | {cells['columns']:>10s} "
                  f"{cells['rows']:>9s} {timed['rows']['per_iteration'] / timed['columns']['per_iteration']:8.2f} | "
                  f"{timed['columns']['compile']:10.1f} {timed['rows']['compile']:10.1f} | {apart:.1e}", flush=True)


if __name__ == "__main__":
    main()
