"""How long a Cancel takes to stop a fit running on a worker.

Prints figures; not a test.

    .venv/bin/python benchmarks/cancel_latency.py --rounds 10

Starts the embedded cluster (one worker process, as the dashboard does) and, each round,
starts a long eager fit on the worker (`core.cluster.stored.run_and_store`, as the Run
button does), sets its cancel event once the fit reports its first ELBO (it is running on
the worker then), and times the path a Cancel takes: the submitter tells the task (a Dask
event), the task's watcher sets the engine's event, the fit stops at its next iteration
and the task ends; `Cancelled` reaches the submitter. Reported: that time (median and
range), and, since a cancelled task must not hold the worker, how long the next short fit
takes to come back. Each round checks that the worker still answers, that the store kept
nothing, and that the worker's memory stays bounded; it stops with an error otherwise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from core.machine.host import native_settings  # noqa: E402

native_settings()

from worker_overhead import answering_worker  # noqa: E402 - beside this script

from core.cluster import connection, stored  # noqa: E402
from core.run.progress import Cancelled  # noqa: E402
from core.spec import DatasetSpec, FitSpec, OptimizerSpec  # noqa: E402
from core.store.run_store import RunStore  # noqa: E402

MAX_WORKER_GROWTH_MB = 300.0
DATA = DatasetSpec(kind="simulated", n=40, p=5)
# Minutes uncancelled: a round that is not cancelled shows as a timeout, not as a fast figure.
LONG = FitSpec(dataset=DATA, strategy="eager", iterations=20_000, optimizer=OptimizerSpec("adam"), repeats=1)
SHORT = FitSpec(dataset=DATA, strategy="scan", iterations=10, optimizer=OptimizerSpec("adam"), repeats=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)

    store = RunStore(os.path.join(tempfile.mkdtemp(prefix="plnlab-cancel-"), "runs.sqlite3"))
    cluster = connection.start_local()
    stopped, next_fit = [], []
    try:
        stored.run_and_store(cluster, store, SHORT)  # warm: imports and the short fit's compile
        first_rss = answering_worker(cluster)["rss_bytes"] / 1e6
        kept = store.count()
        for round_index in range(args.rounds):
            cancel = threading.Event()
            asked = []

            def on_progress(progress, cancel=cancel, asked=asked):
                if progress.elbo is not None and not cancel.is_set():
                    asked.append(time.perf_counter())
                    cancel.set()

            try:
                stored.run_and_store(cluster, store, LONG, on_progress=on_progress, cancel=cancel)
                raise SystemExit("the long fit finished: the cancel never reached it")
            except Cancelled:
                stopped.append(time.perf_counter() - asked[0])
            begin = time.perf_counter()
            stored.run_and_store(cluster, store, SHORT)
            next_fit.append(time.perf_counter() - begin)
            worker = answering_worker(cluster)
            if store.count() != kept + round_index + 1 or store.in_flight():
                raise SystemExit("the store kept a cancelled run or a note: stopping")
            growth = worker["rss_bytes"] / 1e6 - first_rss
            print(f"round {round_index + 1}: stopped {1e3 * stopped[-1]:.0f} ms after the cancel; the next fit "
                  f"back in {next_fit[-1]:.2f} s; worker RSS {worker['rss_bytes'] / 1e6:.0f} MB", flush=True)
            if growth > MAX_WORKER_GROWTH_MB:
                raise SystemExit(f"the worker's memory grew by {growth:.0f} MB: stopping")
    finally:
        cluster.close()

    def summary(values: list[float], scale: float = 1.0) -> str:
        return f"{scale * statistics.median(values):.0f} ({scale * min(values):.0f}-{scale * max(values):.0f})"

    print(f"\ncancel to Cancelled raised here, ms: {summary(stopped, 1e3)}")
    print(f"the next short fit, ms: {summary(next_fit, 1e3)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
