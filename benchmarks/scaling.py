"""Strong and weak scaling of the sharded strategy over 1, 2 and 4 devices; prints tables.

    .venv/bin/python benchmarks/scaling.py                 # simulated CPU devices
    .venv/bin/python benchmarks/scaling.py --big           # + n = 1,000,000 drawn on the devices
    .venv/bin/python benchmarks/scaling.py --device gpu --counts 1 2 4 8

Strong scaling fits one problem (oaks x100, n = 11,600, p = 114) on more and more
devices; weak scaling keeps the rows per device fixed (oaks x25 per device). Each device
count runs in its own process, because JAX fixes the number of simulated CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count) when it starts; on GPUs the count is
CUDA_VISIBLE_DEVICES's. `--big` draws n = 1,000,000 rows directly on the devices
(`core.data.on_device`), so the rows never exist on the host, and reports the bytes
each device holds.

Simulated CPU devices are threads of one process sharing the machine's cores: with 2
cores, 4 devices cannot run 4 times faster, and the tables measure the partitioning
overhead more than any speed-up. Real speed-ups need real devices (one GPU each).
OPENBLAS_NUM_THREADS=1 is set in the workers: jaxlib's CPU triangular solves call
OpenBLAS, whose own threads otherwise fight XLA's for the same cores and slow every
strategy, the sharded one most (one OpenBLAS caller per device).

Benchmarks print figures; they are not tests. `--store` also keeps every run in the run
store (`--db`), where the dashboard's pages can show it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from core.bench.device_sweep import STRONG_REPLICATE, WEAK_REPLICATE_PER_DEVICE  # noqa: E402  (the Scaling page's sizes)


def _worker(args) -> None:
    """Run the jobs of one device count in this process; one JSON line per result."""
    import jax

    from core.data.on_device import simulate_on_devices
    from core.fit import sharding, strategies
    from core.inspect.layout import bytes_per_device, peak_bytes_per_device
    from core.machine import runtime
    from core.run import engine, stored_run
    from core.spec import DatasetSpec, FitSpec, OptimizerSpec
    from core.store.run_store import RunStore

    runtime.configure()
    store = RunStore(args.db) if args.store else None
    count = len(jax.devices(args.device))
    for job in json.loads(args.jobs):
        if job["kind"] == "fit":
            # The device count in the spec, as the Scaling page's sweep stores it.
            spec = FitSpec(dataset=DatasetSpec(kind="oaks", replicate=job["replicate"]), strategy=job["strategy"],
                           iterations=args.iterations, precision=args.precision, device=args.device,
                           repeats=args.repeats, devices=count if job["strategy"] == "sharded" else 0,
                           # every iteration run: a time per iteration
                           optimizer=OptimizerSpec("seed"), init="seed", tol=0.0)
            if store is not None:
                result = stored_run.run_and_store(store, spec, owner="benchmark")
            else:
                result = engine.run(spec, owner="benchmark")
            print(json.dumps({**job, "devices": result.devices, "n": result.n, "per_iter_ms": result.per_iter_ms,
                              "run_s_min": result.run_s_min, "run_s_max": result.run_s_max,
                              "compile_s": result.compile_s, "final_elbo": result.final_elbo}), flush=True)
        else:  # "big": rows drawn on the devices, fitted through the strategy's own interface
            device = runtime.resolve_device(args.device)
            mesh = sharding.mesh_for(args.device)
            start = time.perf_counter()
            data, _ = jax.block_until_ready(simulate_on_devices(job["n"], job["p"], 1, seed=0, mesh=mesh,
                                                                dtype=args.precision))
            draw_s = time.perf_counter() - start
            problem = strategies.Problem(job["n"], job["p"], 1, args.precision, args.iterations, OptimizerSpec())
            strategy = strategies.get("sharded")
            state = strategy.place_state(strategies.init_state(data, "seed", problem.transformation), device)
            executables = strategy.compile(strategy.lower(problem, state, data, None))
            output = jax.block_until_ready(strategy.run(executables, problem, strategy.fresh_state(state), data, None))
            times = []
            for _ in range(args.repeats):
                fresh = jax.block_until_ready(strategy.fresh_state(state))  # the run consumes its state
                start = time.perf_counter()
                jax.block_until_ready(strategy.run(executables, problem, fresh, data, None))
                times.append(time.perf_counter() - start)
            held = bytes_per_device((data, state))
            print(json.dumps({**job, "devices": mesh.size, "draw_s": draw_s,
                              "per_iter_ms": 1e3 * sorted(times)[len(times) // 2] / args.iterations,
                              "final_elbo": float(output.elbo[-1]), "bytes_per_device": held,
                              "peak_bytes_per_device": peak_bytes_per_device(mesh.devices.flat)}), flush=True)


def _run_count(count: int, jobs: list[dict], args) -> list[dict]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    if args.device == "cpu":
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={count}"
    else:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(count))
    command = [sys.executable, __file__, "--worker", "--jobs", json.dumps(jobs), "--iterations",
               str(args.iterations), "--repeats", str(args.repeats), "--precision", args.precision,
               "--device", args.device] + (["--store"] if args.store else []) + (["--db", args.db] if args.db else [])
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"worker with {count} devices failed:\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _table(title: str, rows: list[dict], baseline_ms: float, note: str, weak: bool = False) -> str:
    lines = [title, note, f"{'devices':>7} {'n':>9} {'rows/device':>11} {'ms/iteration':>12} {'(min-max)':>17} "
             f"{'speed-up':>8} {'efficiency':>10}"]
    for row in rows:
        k, per_iter = row["devices"], row["per_iter_ms"]
        spread = f"{1e3 * row['run_s_min'] / row['iterations']:.1f}-{1e3 * row['run_s_max'] / row['iterations']:.1f}"
        if weak:  # ideal weak scaling keeps the time flat as n grows with k
            speed, efficiency = "-", baseline_ms / per_iter
        else:
            speed, efficiency = f"{baseline_ms / per_iter:.2f}", baseline_ms / per_iter / k
        lines.append(f"{k:>7} {row['n']:>9,} {row['n'] // k:>11,} {per_iter:>12.2f} {spread:>17} "
                     f"{speed:>8} {efficiency:>10.2f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4], help="device counts")
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", choices=("float32", "float64"), default="float32")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--big", action="store_true", help="also fit n = 1,000,000 drawn on the devices")
    parser.add_argument("--big-n", type=int, default=1_000_000)
    parser.add_argument("--big-p", type=int, default=20)
    parser.add_argument("--store", action="store_true", help="keep the runs in the run store")
    parser.add_argument("--db", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", default="[]", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"sharded strategy scaling: {args.device}, {args.precision}, seed optimizer, {args.iterations} iterations, "
          f"median of {args.repeats} repeats\nmachine: {os.cpu_count()} cores, load average {load:.1f} at start")
    if args.device == "cpu":
        print(f"CAVEAT: the {max(args.counts)} simulated CPU devices are threads sharing these {os.cpu_count()} cores "
              "(and whatever else runs here): the tables show partitioning overhead, not the speed-up real devices give.")
    strong, weak, scan, big = [], [], None, []
    for count in args.counts:
        jobs = [{"kind": "fit", "strategy": "sharded", "replicate": STRONG_REPLICATE, "table": "strong"}]
        if count * WEAK_REPLICATE_PER_DEVICE != STRONG_REPLICATE:
            jobs.append({"kind": "fit", "strategy": "sharded", "replicate": count * WEAK_REPLICATE_PER_DEVICE,
                         "table": "weak"})
        if count == 1:
            jobs.append({"kind": "fit", "strategy": "scan", "replicate": STRONG_REPLICATE, "table": "scan"})
        if args.big:
            jobs.append({"kind": "big", "n": args.big_n, "p": args.big_p, "table": "big"})
        for row in _run_count(count, jobs, args):
            row["iterations"] = args.iterations
            if row["table"] == "strong":
                strong.append(row)
                if count * WEAK_REPLICATE_PER_DEVICE == STRONG_REPLICATE:
                    weak.append(row)
            elif row["table"] == "weak":
                weak.append(row)
            elif row["table"] == "scan":
                scan = row
            else:
                big.append(row)
        sys.stderr.write(f"  {count} device(s) done\n")
    print()
    if scan is not None:
        print(f"reference: scan on 1 device, oaks x{STRONG_REPLICATE}: {scan['per_iter_ms']:.2f} ms/iteration")
    print(_table(f"\nstrong scaling: oaks x{STRONG_REPLICATE} (n = {116 * STRONG_REPLICATE:,}, p = 114) on each count",
                 strong, strong[0]["per_iter_ms"], "speed-up = t(1 device) / t(k); efficiency = speed-up / k"))
    weak.sort(key=lambda row: row["devices"])
    print(_table(f"\nweak scaling: oaks x{WEAK_REPLICATE_PER_DEVICE} per device ({116 * WEAK_REPLICATE_PER_DEVICE:,} "
                 "rows each, p = 114)", weak, weak[0]["per_iter_ms"],
                 "efficiency = t(1 device) / t(k); 1.00 is perfect (flat time as n grows with k)", weak=True))
    finals = {row["devices"]: row["final_elbo"] for row in strong}
    spread = max(abs(v - finals[1]) / abs(finals[1]) for v in finals.values()) if 1 in finals else float("nan")
    print(f"\nstrong-scaling final ELBOs agree across device counts to {spread:.1e} (relative)")
    if big:
        print(f"\nbig data: n = {args.big_n:,}, p = {args.big_p}, drawn on the devices "
              "(no host array of the rows exists), seed optimizer")
        print(f"{'devices':>7} {'draw s':>7} {'ms/iteration':>12} {'MiB per device (data + state)':>30} "
              f"{'allocator peak MiB':>18}")
        for row in big:
            held = sorted(row["bytes_per_device"].values())
            peaks = [v for v in row["peak_bytes_per_device"].values() if v is not None]
            peak = f"{max(peaks) / 2**20:.0f}" if peaks else "n/a (CPU)"
            print(f"{row['devices']:>7} {row['draw_s']:>7.1f} {row['per_iter_ms']:>12.1f} "
                  f"{held[0] / 2**20:>14.1f} - {held[-1] / 2**20:<13.1f} {peak:>18}")


if __name__ == "__main__":
    main()
