"""What a run pays when its executables are compiled, loaded from disk, or reused in memory.

    .venv/bin/python benchmarks/disk_cache.py                       # every compiled strategy, oaks x1
    .venv/bin/python benchmarks/disk_cache.py --strategies scan jit_step --rounds 3

Each round starts from an empty persistent compilation cache (a fresh temporary folder)
and, for each strategy, runs `python -m core run` three times: twice in separate
processes (the first compiles, the second loads from disk) and then a second run inside
the second process (memory). Printed per strategy: the cache label of each run, and the
median over rounds of trace+lower and of the XLA phase (compile, or the disk load that
takes its place). A disk hit still traces and lowers (JAX keys its persistent cache on
the lowered computation), then loads instead of compiling. Benchmarks print figures; they
are not tests. The machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATEGIES = ("jit_per_function", "jit_step", "scan", "scan_namedtuple", "scan_pytree_class", "fori_loop",
              "while_loop", "scan_analytic", "sharded")
# Runs in one process, twice: the second finds the executables in memory.
_TWICE = """
import json, sys
from core.machine.host import native_settings
native_settings()
from core.machine import runtime
from core.run import engine
from core.spec import FitSpec
runtime.configure()
spec = FitSpec(strategy=sys.argv[1], iterations=int(sys.argv[2]), repeats=1)
for _ in range(int(sys.argv[3])):
    r = engine.run(spec)
    print(json.dumps({"cache": r.cache, "trace_lower_s": r.trace_lower_s, "compile_s": r.compile_s}))
"""


def _runs(strategy: str, iterations: int, times: int, cache_dir: str) -> list[dict]:
    env = {**os.environ, "PLNLAB_JAX_CACHE": cache_dir, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", _TWICE, strategy, str(iterations), str(times)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"oaks x1, {args.iterations} iterations, float32, cpu; median of {args.rounds} rounds (seconds)")
    print(f"{'strategy':<18} {'labels':<34} {'trace+lower':>33} {'XLA compile / load':>33}")
    for strategy in args.strategies:
        rows = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="plnlab-cache-") as cache_dir:
                rows.append(_runs(strategy, args.iterations, 1, cache_dir) + _runs(strategy, args.iterations, 2,
                                                                                   cache_dir))
        labels = " / ".join(run["cache"] for run in rows[-1])

        def median(key, index):
            return statistics.median(row[index][key] for row in rows)

        trace = " / ".join(f"{median('trace_lower_s', i):.3f}" for i in range(3))
        xla = " / ".join(f"{median('compile_s', i):.3f}" for i in range(3))
        print(f"{strategy:<18} {labels:<34} {trace:>33} {xla:>33}", flush=True)


if __name__ == "__main__":
    main()
