"""Fitting a spec on the cluster and keeping the result in the submitter's store.

The store stays with the submitter (the dashboard's server, or the command line): a worker
never needs its file. The run is noted in the store when it is submitted
(`RunStore.begin`), so that it shows as under way and a cancel asked through the store
(`RunStore.request_cancel`) reaches it; the note becomes the result when the result comes
back, or an "interrupted" run, with the reason, when the worker running it died. A run
cancelled or refused leaves nothing.
"""

from __future__ import annotations

import threading
import time

from core.cluster import submit, tasks
from core.cluster.connection import Cluster
from core.cluster.errors import RunInterrupted, WorkerDied
from core.data.counts import CountData
from core.machine import budget
from core.results.result import RunResult
from core.run.progress import ProgressCallback
from core.spec import FitSpec
from core.store.records import StoreError, interrupted_result
from core.store.run_store import RunStore


def run_label(spec: FitSpec) -> str:
    """What others see of the run on the cluster's board and the device queues."""
    return f"{spec.strategy} · {spec.dataset.label} · {spec.precision}"


def run_and_store(cluster: Cluster, store: RunStore, spec: FitSpec, counts: CountData | None = None,
                  on_progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
                  owner: str = "dashboard", cold: bool = False, owner_id: str = "") -> RunResult:
    """Fits `spec` on a worker (`core.cluster.tasks.fit`) under this process's time budget
    (`core.machine.budget.max_run_seconds`) and stores the result, owned by `owner_id`
    (`RunResult.owner`; an interrupted run too); returns the stored result. `owner` is how
    others see the run queued ("dashboard", "command line").

    Raises:
        RunInterrupted: the worker died mid-run; the run is stored as interrupted.
        SpecError, DataError: refused before it ran (nothing stored).
        core.run.progress.Cancelled: cancelled (nothing stored).
    """
    def fit(seconds: float, cancel: threading.Event) -> list[RunResult]:
        result, _ = submit.call(cluster, tasks.fit, spec, counts, owner, cold, seconds, platform=spec.device,
                                label=run_label(spec), owner=owner, on_progress=on_progress, cancel=cancel)
        return [result]

    return _noted_while_running(store, [spec], fit, cancel, owner_id)[0]


def run_together_and_store(cluster: Cluster, store: RunStore, specs: list[FitSpec], counts: CountData | None = None,
                           on_progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
                           owner: str = "dashboard", owner_id: str = "", cold: bool = False) -> list[RunResult]:
    """Fits `specs` side by side on one worker, their repeats in turn
    (`core.cluster.tasks.fit_together`; `cold`: each compiled from scratch), and stores every
    result, as `run_and_store` does one;
    progress reports say which spec they are about (`Progress.member`). A worker that dies
    stores every spec as interrupted and raises `RunInterrupted` for the first."""
    def fit(seconds: float, cancel: threading.Event) -> list[RunResult]:
        label = f"{len(specs)} strategies timed together · {specs[0].dataset.label} · {specs[0].precision}"
        results, _ = submit.call(cluster, tasks.fit_together, specs, counts, owner, seconds, cold,
                                 platform=specs[0].device, label=label, owner=owner, on_progress=on_progress,
                                 cancel=cancel)
        return results

    return _noted_while_running(store, specs, fit, cancel, owner_id)


def _noted_while_running(store: RunStore, specs: list[FitSpec], fit, cancel: threading.Event | None,
                         owner_id: str) -> list[RunResult]:
    """Notes `specs` in the store as under way, calls `fit(seconds, cancel)` and stores what
    it returns in place of the notes, owned by `owner_id`; see `run_and_store`."""
    seconds = budget.max_run_seconds()
    cancel = cancel if cancel is not None else threading.Event()
    submitted = time.time()
    flights = store.begin_all([spec.to_dict() for spec in specs], cancelled=cancel, owner=owner_id)
    try:
        results = fit(seconds, cancel)
    except WorkerDied as died:
        records = [interrupted_result(spec.to_dict(), died.started_at or submitted, died.host or "?", died.pid,
                                      reason=died.reason,
                                      worker=f"{died.worker} on {died.host}" if died.worker else "", owner=owner_id)
                   for spec in specs]
        for flight, record in zip(flights, records):
            store.finish(flight, record)
        raise RunInterrupted(records[0]) from None
    except BaseException:  # cancelled, refused, or the caller stopped: no run to keep
        for flight in flights:
            try:
                store.abandon(flight)
            except StoreError:
                pass
        raise
    for flight, result in zip(flights, results):
        result.owner = owner_id
        store.finish(flight, result)
    return results
