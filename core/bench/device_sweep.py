"""The device-count sweep of the sharded strategy: which runs, each in its own process, and what they show.

Strong scaling fits one problem (oaks x100 by default) on 1, 2, 4... devices: ideally the
time per iteration falls as 1/k. Weak scaling keeps the rows per device fixed (oaks x25 per
device): ideally the time stays flat as n grows with k.

JAX fixes the number of simulated CPU devices when it starts
(XLA_FLAGS=--xla_force_host_platform_device_count), so on CPU each run is a fresh
`python -m core run --strategy sharded --devices k` process with that flag set, storing
into the same run store; `benchmarks/scaling.py` does the same. Simulated CPU devices
share the machine's cores: there the sweep shows the mechanics and the partitioning
overhead, not the speed-up that one GPU per device gives.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Callable

import numpy as np
import pandas as pd

from core.results.result import RunResult
from core.run.progress import PHASES, Cancelled
from core.spec import OAKS_REPLICATES, DatasetSpec, FitSpec, SpecError

# The project folder, from which `python -m core` runs (this file is core/bench/device_sweep.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICE_COUNTS = (1, 2, 4)
STRONG_REPLICATE = 100
WEAK_REPLICATE_PER_DEVICE = 25
# What the Scaling page offers: device counts, oaks sizes for strong scaling, and oaks
# sizes per device for weak scaling.
DEVICE_COUNT_CHOICES = (1, 2, 4, 8)
STRONG_REPLICATE_CHOICES = OAKS_REPLICATES
WEAK_REPLICATE_CHOICES = (1, 5, 25, 250)
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
SERIES = ("strong", "weak")


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One point of a scaling series.

    Attributes:
        series: "strong" (fixed n) or "weak" (fixed rows per device).
        devices: how many devices the run spans.
        spec: the sharded run; a weak point can share its spec with a strong one
            (e.g. oaks x100 on 4 devices is both), and then runs once.
    """

    series: str
    devices: int
    spec: FitSpec


def sweep_points(base: FitSpec, counts=DEVICE_COUNTS, strong_replicate: int = STRONG_REPLICATE,
                 weak_per_device: int = WEAK_REPLICATE_PER_DEVICE) -> list[SweepPoint]:
    """Strong points (oaks x`strong_replicate` on each count), then weak ones (x`weak_per_device` times k).

    Args:
        base: the settings to keep (precision, device, iterations, repeats, optimizer, init);
            its strategy, data and device count are replaced.
        counts: device counts, whole numbers >= 1.

    Raises:
        SpecError: a count or size that `FitSpec` refuses.
    """
    counts = sorted(set(counts))
    if not counts:
        raise SpecError("choose at least one device count")

    def spec(replicate: int, devices: int) -> FitSpec:
        return dataclasses.replace(base, strategy="sharded", devices=devices, tol=0.0,
                                   dataset=DatasetSpec(kind="oaks", replicate=replicate))

    strong = [SweepPoint("strong", k, spec(strong_replicate, k)) for k in counts]
    weak = [SweepPoint("weak", k, spec(weak_per_device * k, k)) for k in counts]
    return strong + weak


def distinct_specs(points: list[SweepPoint]) -> list[FitSpec]:
    """The specs to run, each once, in order of device count (the cheap counts first)."""
    unique = {point.spec.key: point.spec for point in sorted(points, key=lambda point: point.devices)}
    return list(unique.values())


def xla_flags_with_device_count(flags: str, count: int) -> str:
    """`flags` (an XLA_FLAGS value) with the simulated CPU device count set to `count`, other flags kept."""
    kept = re.sub(rf"{DEVICE_COUNT_FLAG}=\S*", "", flags or "").split()
    return " ".join([*kept, f"{DEVICE_COUNT_FLAG}={count}"])


def cli_arguments(spec: FitSpec, db_path: str) -> list[str]:
    """`python -m core run` arguments that build `spec` again (same key) and store it at `db_path`."""
    dataset = spec.dataset
    if dataset.kind == "oaks":
        data = ["--dataset", "oaks", "--replicate", str(dataset.replicate)]
    elif dataset.kind in ("simulated", "simulated_on_device"):
        data = ["--dataset", dataset.kind, "--n", str(dataset.n), "--p", str(dataset.p), "--d", str(dataset.d),
                "--seed", str(dataset.seed)]
    else:
        raise SpecError(f"a run in its own process needs data it can load itself; got {dataset.kind} data")
    return ["run", *data, "--strategy", spec.strategy, "--devices", str(spec.devices),
            "--iterations", str(spec.iterations), "--precision", spec.precision, "--device", spec.device,
            "--optimizer", spec.optimizer.name, "--lr", repr(float(spec.optimizer.lr)), "--init", spec.init,
            "--repeats", str(spec.repeats), "--tol", repr(float(spec.tol)), "--json", "--db", str(db_path)]


def subprocess_environment(spec: FitSpec, environ=None) -> dict[str, str]:
    """The environment of a run in its own process: ours (store, compilation cache), plus, on CPU,
    as many simulated devices as the run spans."""
    env = dict(os.environ if environ is None else environ)
    # As the command line sets them itself: quiet persistent-cache loads, OpenBLAS off XLA's cores.
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if spec.device == "cpu" and spec.devices:
        env["XLA_FLAGS"] = xla_flags_with_device_count(env.get("XLA_FLAGS", ""), spec.devices)
    return env


def phase_of(line: str) -> str | None:
    """The phase a progress line of `python -m core run` reports, or None for any other line.

    On a pipe the command line writes one line per phase: "<label>: <phase> ...".
    """
    _, _, rest = line.partition(": ")
    word = rest.split()[0].rstrip(",;") if rest.split() else ""
    return word if word in PHASES else None


def run_in_own_process(spec: FitSpec, db_path: str, on_phase: Callable[[str], None] | None = None,
                       timeout_s: float | None = None, cancel: threading.Event | None = None) -> RunResult:
    """Run and store `spec` in a fresh `python -m core run` process; the stored run.

    Args:
        spec: the run; on CPU its `devices` simulated devices are set up for the process.
        db_path: the run store the process writes to.
        on_phase: called with each phase the process reports ("compile", "first_call", ...).
        timeout_s: the process is killed past this many seconds (None: no limit).
        cancel: set it to stop the process (as Ctrl-C would): `Cancelled` is raised.

    Raises:
        SpecError: the process refused the run (exit 2); its one-line message.
        RuntimeError: the process failed otherwise, with the end of what it wrote.
    """
    # Absolute: the process runs from the project folder, wherever this one was started.
    command = [sys.executable, "-m", "core", *cli_arguments(spec, os.path.abspath(db_path))]
    # stdout to a file: an ELBO curve of many iterations would fill a pipe nobody reads yet.
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=subprocess_environment(spec), stdout=out,
                                   stderr=subprocess.PIPE, text=True, bufsize=1)
        errors: list[str] = []
        stop_watch = threading.Event()

        def watch_cancel() -> None:
            while not stop_watch.wait(0.2):
                if cancel is not None and cancel.is_set() and process.poll() is None:
                    process.send_signal(signal.SIGINT)  # stops like Ctrl-C: no in-flight note left behind
                    return

        watcher = threading.Thread(target=watch_cancel, daemon=True)
        watcher.start()
        try:
            for line in process.stderr:
                errors.append(line.rstrip("\n"))
                phase = phase_of(line)
                if phase is not None and on_phase is not None:
                    on_phase(phase)
            code = process.wait(timeout=timeout_s)
        finally:
            stop_watch.set()
            watcher.join()  # the page was left, the run cancelled or timed out: do not leave a fit running
            if process.poll() is None:
                # SIGINT first: the command stops like Ctrl-C, removing its in-flight note,
                # rather than leaving an "interrupted" run behind.
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            process.stderr.close()
        out.seek(0)
        lines = out.read().strip().splitlines()
    last = next((line for line in reversed(errors) if line.strip()), "")
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled; nothing was stored")
    if code == 2:
        raise SpecError(last.removeprefix("python -m core: error: "))
    if code != 0 or not lines:
        raise RuntimeError(f"python -m core run exited with status {code}: {last or 'no message'}")
    return RunResult.from_dict(json.loads(lines[-1]))


def scaling_table(runs: pd.DataFrame, points: list[SweepPoint]) -> pd.DataFrame:
    """The sweep's stored results: one row per point that has a finished run.

    Args:
        runs: stored runs (`RunStore.frame()`): spec_key, n, per_iter_ms, status.
        points: from `sweep_points`.

    Returns:
        Columns series, devices, n, rows_per_device, per_iter_ms (median over the point's
        finished runs), runs, ideal_ms (strong: t(1 device) / k; weak: t(1 device)),
        speed_up (t(1) / t(k)) and efficiency (strong: speed-up / k; weak: t(1) / t(k));
        the last three are NaN in a series whose 1-device point has not run.
    """
    columns = ["series", "devices", "n", "rows_per_device", "per_iter_ms", "runs", "ideal_ms", "speed_up",
               "efficiency"]
    ok = runs[runs["status"] == "ok"] if not runs.empty else runs
    rows = []
    for point in points:
        mine = ok[ok["spec_key"] == point.spec.key] if not ok.empty else ok
        if mine.empty:
            continue
        n = int(mine["n"].iloc[0])
        rows.append({"series": point.series, "devices": point.devices, "n": n,
                     "rows_per_device": -(-n // point.devices), "per_iter_ms": float(mine["per_iter_ms"].median()),
                     "runs": len(mine)})
    table = pd.DataFrame(rows, columns=columns[:6])
    table["ideal_ms"] = table["speed_up"] = table["efficiency"] = np.nan
    for series in SERIES:
        mine = table["series"] == series
        single = table[mine & (table["devices"] == 1)]
        if single.empty:
            continue
        base = float(single["per_iter_ms"].iloc[0])
        k, measured = table.loc[mine, "devices"], table.loc[mine, "per_iter_ms"]
        table.loc[mine, "speed_up"] = base / measured
        if series == "strong":
            table.loc[mine, "ideal_ms"] = base / k
            table.loc[mine, "efficiency"] = base / measured / k
        else:
            table.loc[mine, "ideal_ms"] = base
            table.loc[mine, "efficiency"] = base / measured
    return table[columns].sort_values(["series", "devices"], ignore_index=True)
