"""From the command to the answer: `python -m core solve` in a fresh process against a script
that fits the same data with pyPLNmodels, side by side.

    .venv/bin/python benchmarks/cold_start.py                    # oaks x1, float32, 5 rounds
    .venv/bin/python benchmarks/cold_start.py --rounds 8 --replicate 10

Each round runs three fresh processes, timed from their start to their exit (imports,
data, compilation, the fit, storing the run):

- cold: `python -m core solve --dataset oaks ...` with an empty persistent compilation
  cache (a new folder in `PLNLAB_JAX_CACHE`) and a new run store;
- warm: the same command again, with the cache and the store the cold one left (what a
  user's second `solve` of the day meets);
- pyPLNmodels: `Pln(oaks["endog"], offsets=oaks["offsets"]).fit()` after
  `from pyPLNmodels import Pln, load_oaks`, as its documentation writes it (its defaults:
  400 iterations of Rprop, float32, on the CPU here), twice: with torch's default threads,
  and with one thread (`OMP_NUM_THREADS=1`). On a shared machine torch's threads wait for
  each other whenever another process holds a core, which slowed the script from 6 s to
  50 s while this was written; the ratios are taken against the faster of the two, so that
  a busy machine does not flatter `solve`.

The pyPLNmodels scripts run first in even rounds and last in odd ones, so that a trend in
the machine's load does not favour one side. Printed: each contender's median and range in
seconds (wall) and the CPU time its process used (user + system: what the machine's load
changes least), the ELBO each reached (pyPLNmodels' re-expressed with the exact log Y!), what
`solve` reported of its compilation, and the ratios of the medians against the goals (cold
at most 0.5x pyPLNmodels', warm at most 0.25x), with the range of the per-round ratios.
Exit status 1 when a process it runs fails. Benchmarks print figures; they are not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOALS = {"cold": 0.5, "warm": 0.25}
# The pyPLNmodels script's rows: torch's default threads, and one.
PYPLNMODELS = {"pyPLNmodels": "default", "pyPLNmodels 1T": "one"}
# What a pyPLNmodels user writes; the last line hands its answer to this benchmark.
PYPLNMODELS_SCRIPT = """
from pyPLNmodels import Pln, load_oaks

oaks = load_oaks()
pln = Pln(oaks["endog"], offsets=oaks["offsets"]).fit()
print("ELBO", float(pln.elbo))
"""


class Failed(Exception):
    """A process the benchmark runs exited with an error."""


class Timing(NamedTuple):
    """One fresh process: wall seconds from its start to its exit, and the CPU seconds
    (user + system) it and its children used."""

    wall: float
    cpu: float


def _timed(command: list[str], env: dict[str, str]) -> tuple[Timing, str]:
    """(its timing, its stdout) of `command` run in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise Failed(f"{' '.join(command[:4])} ... exited with {done.returncode}: {done.stderr[-1500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu), done.stdout


def _solve(args, folder: str) -> tuple[Timing, dict]:
    """`python -m core solve` with the compilation cache and the run store in `folder`."""
    env = {**os.environ, "PLNLAB_JAX_CACHE": os.path.join(folder, "jax-cache"), "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "core", "solve", "--dataset", "oaks", "--replicate", str(args.replicate),
               "--precision", args.precision, "--db", os.path.join(folder, "runs.sqlite3"), "--json"]
    timing, out = _timed(command, env)
    return timing, json.loads(out.strip().splitlines()[-1])


def _pyplnmodels(threads: str) -> tuple[Timing, float]:
    """(timing, ELBO as pyPLNmodels reports it, with Stirling's log Y!) with torch's
    default threads ("default") or one."""
    env = dict(os.environ)
    if threads == "one":
        env["OMP_NUM_THREADS"] = "1"
    timing, out = _timed([sys.executable, "-c", PYPLNMODELS_SCRIPT], env)
    return timing, float(out.split("ELBO")[-1])


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})"


def _ratio(mine: list[float], theirs: list[float]) -> str:
    """Ratio of the medians, and the range of the ratios round by round."""
    rounds = [a / b for a, b in zip(mine, theirs)]
    return f"{statistics.median(mine) / statistics.median(theirs):.2f}x (rounds {min(rounds):.2f}x-{max(rounds):.2f}x)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--replicate", type=int, default=1, help="oaks rows repeated (pyPLNmodels' script: 1 only)")
    parser.add_argument("--precision", choices=("float32", "float64"), default="float32")
    args = parser.parse_args(argv)
    if args.replicate != 1:
        parser.error("the pyPLNmodels script fits oaks as load_oaks() gives it: --replicate 1")

    timings: dict[str, list[Timing]] = {"cold": [], "warm": [], **{name: [] for name in PYPLNMODELS}}
    solved: dict[str, list[dict]] = {"cold": [], "warm": []}
    pyplnmodels_elbo = None

    def pyplnmodels_scripts() -> float:
        for name, threads in PYPLNMODELS.items():
            timing, elbo = _pyplnmodels(threads)
            timings[name].append(timing)
        return elbo

    try:
        for round_index in range(args.rounds):
            if round_index % 2 == 0:
                pyplnmodels_elbo = pyplnmodels_scripts()
            with tempfile.TemporaryDirectory(prefix="plnlab-cold-start-") as folder:
                for phase in ("cold", "warm"):
                    timing, run = _solve(args, folder)
                    timings[phase].append(timing)
                    solved[phase].append(run)
            if round_index % 2 == 1:
                pyplnmodels_elbo = pyplnmodels_scripts()
            print(f"round {round_index + 1}: " + ", ".join(f"{name} {values[-1].wall:.2f} s"
                                                          for name, values in timings.items()), file=sys.stderr)
    except Failed as failure:
        print(f"cold_start: {failure}", file=sys.stderr)
        return 1

    sys.path.insert(0, ROOT)  # the figures below read the lab's data and model, untimed
    from core.data import datasets
    from core.fit.model import exact_log_factorial_sum, stirling_log_factorial_sum

    counts = datasets.load_oaks(args.replicate).counts
    # The ELBO holds -sum(log Y!): pyPLNmodels' Stirling sum out, the exact one in (as the peer does).
    exact_elbo = pyplnmodels_elbo + stirling_log_factorial_sum(counts) - exact_log_factorial_sum(counts)
    walls = {name: [t.wall for t in values] for name, values in timings.items()}
    cpus = {name: [t.cpu for t in values] for name, values in timings.items()}
    print(f"oaks x{args.replicate}, {args.precision}, cpu ({os.cpu_count()} CPUs); {args.rounds} rounds of fresh "
          "processes, seconds from start to exit: median (range)")
    print(f"{'':<15} {'wall s':<19} {'CPU s':<19} {'ELBO (exact log Y!)':>19}  compilation, fit")
    for phase in ("cold", "warm"):
        last = solved[phase][-1]
        labels = sorted({run["cache"] for run in solved[phase]})
        trace_lower_s = statistics.median(run["trace_lower_s"] for run in solved[phase])
        compile_s = statistics.median(run["compile_s"] for run in solved[phase])
        print(f"solve {phase:<9} {_spread(walls[phase]):<19} {_spread(cpus[phase]):<19} {last['final_elbo']:>19.6g}  "
              f"cache {'/'.join(labels)}, trace+lower {trace_lower_s:.2f} s, "
              f"{'compile' if phase == 'cold' else 'load'} {compile_s:.2f} s, {last['strategy']} + "
              f"{last['optimizer']}, {last['iterations_run']} iterations, converged {last['converged']}")
    for name, threads in PYPLNMODELS.items():
        print(f"{name:<15} {_spread(walls[name]):<19} {_spread(cpus[name]):<19} {exact_elbo:>19.6g}  eager PyTorch, "
              f"{threads} thread(s), 400 iterations (its default)")
    faster = min(PYPLNMODELS, key=lambda name: statistics.median(walls[name]))
    for phase, goal in GOALS.items():
        ratio = statistics.median(walls[phase]) / statistics.median(walls[faster])
        print(f"{phase} solve / {faster}: wall {_ratio(walls[phase], walls[faster])}, CPU "
              f"{_ratio(cpus[phase], cpus[faster])}; goal (wall) at most {goal}x: {'met' if ratio <= goal else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
