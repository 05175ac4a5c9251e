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
    seconds = budget.max_run_seconds()
    cancel = cancel if cancel is not None else threading.Event()
    submitted = time.time()
    flight = store.begin(spec.to_dict(), cancelled=cancel, owner=owner_id)
    try:
        result, _ = submit.call(cluster, tasks.fit, spec, counts, owner, cold, seconds, platform=spec.device,
                                label=run_label(spec), owner=owner, on_progress=on_progress, cancel=cancel)
    except WorkerDied as died:
        record = interrupted_result(spec.to_dict(), died.started_at or submitted, died.host or "?", died.pid,
                                    reason=died.reason,
                                    worker=f"{died.worker} on {died.host}" if died.worker else "", owner=owner_id)
        store.finish(flight, record)
        raise RunInterrupted(record) from None
    except BaseException:  # cancelled, refused, or the caller stopped: no run to keep
        try:
            store.abandon(flight)
        except StoreError:
            pass
        raise
    result.owner = owner_id
    store.finish(flight, result)
    return result
