"""Fitting a spec on the cluster and keeping the result in the submitter's store.

The store stays with the submitter (the dashboard's server, or the command line): a worker
never needs its file. The run's life in the store is the one every run has
(`core.run.lifecycle`): noted when it is submitted, so that it shows as under way and a
cancel asked through the store reaches it; the note becomes the result when the result
comes back, or an "interrupted" run, with the reason, when the worker running it died
(`WorkerDied` is a `lifecycle.Died`). A run cancelled or refused leaves nothing.
"""

from __future__ import annotations

import threading

from core.cluster import submit, tasks
from core.cluster.connection import Cluster
from core.coordination import budget
from core.data.counts import CountData
from core.results.result import RunResult
from core.run import lifecycle
from core.run.progress import ProgressCallback
from core.spec import FitSpec
from core.store.run_store import RunStore


def run_and_store(cluster: Cluster, store: RunStore, spec: FitSpec, counts: CountData | None = None,
                  on_progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
                  owner: str = "dashboard", cold: bool = False, owner_id: str = "") -> RunResult:
    """Fits `spec` on a worker (`core.cluster.tasks.fit`) under this process's time budget
    (`core.coordination.budget.max_run_seconds`) and stores the result, owned by `owner_id`
    (`RunResult.owner`; an interrupted run too); returns the stored result. `owner` is how
    others see the run queued ("dashboard", "command line").

    Raises:
        RunInterrupted: the worker died mid-run; the run is stored as interrupted.
        SpecError, DataError: refused before it ran (nothing stored).
        core.run.progress.Cancelled: cancelled (nothing stored).
    """
    seconds = budget.max_run_seconds()

    def fit(cancel: threading.Event) -> list[RunResult]:
        result, _ = submit.call(cluster, tasks.fit, spec, counts, owner, cold, seconds, platform=spec.device,
                                label=lifecycle.label(spec), owner=owner, on_progress=on_progress, cancel=cancel)
        return [result]

    return lifecycle.fit_and_store(store, [spec], fit, cancel, owner_id)[0]


def run_together_and_store(cluster: Cluster, store: RunStore, specs: list[FitSpec], counts: CountData | None = None,
                           on_progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
                           owner: str = "dashboard", owner_id: str = "", cold: bool = False) -> list[RunResult]:
    """Fits `specs` side by side on one worker, their repeats in turn
    (`core.cluster.tasks.fit_together`; `cold`: each compiled from scratch), and stores every
    result, as `run_and_store` does one;
    progress reports say which spec they are about (`Progress.member`). A worker that dies
    stores every spec as interrupted and raises `RunInterrupted` for the first."""
    seconds = budget.max_run_seconds()

    def fit(cancel: threading.Event) -> list[RunResult]:
        results, _ = submit.call(cluster, tasks.fit_together, specs, counts, owner, seconds, cold,
                                 platform=specs[0].device, label=lifecycle.label(specs), owner=owner,
                                 on_progress=on_progress, cancel=cancel)
        return results

    return lifecycle.fit_and_store(store, specs, fit, cancel, owner_id)
