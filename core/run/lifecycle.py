"""A run's life in the store, wherever it is fitted: spec in, stored result out.

One lifecycle for a fit in this process (`core.run.stored_run`) and on a worker
(`core.cluster.stored`): the store notes the runs as under way (`RunStore.begin_all`: the
one record of a run under way, which a cancel asked through the store reaches by the
`cancel` event), the body fits them in the name of their batch's key
(`core.coordination.under_way`: the cluster's board and the device queue list the runs by
it, and each note's key begins with it), and then

- their results replace the notes, owned by the owner, in one place;
- the process fitting them died (`Died`): each is stored as "interrupted", with what is
  known of the death, and `RunInterrupted` names the first;
- anything else (cancelled, refused, the caller stopped): the notes go, nothing is kept.

A note left by a process that died without saying so (kill -9 of the submitter) becomes an
"interrupted" run at the next look at the store (`core.store.in_flight`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from core.coordination import under_way
from core.results.result import RunResult
from core.spec import FitSpec
from core.store.records import StoreError, interrupted_result
from core.store.run_store import RunStore


class Died(RuntimeError):
    """The process fitting a run died before it finished.

    Attributes:
        reason: one line saying so, naming the process, its host and what it was doing.
        worker, host, pid: the process that died ("" / 0 where unknown).
        started_at: epoch seconds the fit started there (0 if unknown).
    """

    def __init__(self, reason: str, worker: str = "", host: str = "", pid: int = 0, started_at: float = 0.0) -> None:
        super().__init__(reason)
        self.reason, self.worker, self.host, self.pid, self.started_at = reason, worker, host, pid, started_at


class RunInterrupted(RuntimeError):
    """The process fitting the run died; the run is stored as interrupted (`result`)."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"interrupted: {result.error}; stored as run #{result.id}")
        self.result = result


def label(specs: FitSpec | list[FitSpec]) -> str:
    """What others see of a run under way (or of fits timed together): on the cluster's board
    and in the device queues."""
    if isinstance(specs, FitSpec):
        return f"{specs.strategy} · {specs.dataset.label} · {specs.precision}"
    if len(specs) == 1:
        return label(specs[0])
    return f"{len(specs)} strategies timed together · {specs[0].dataset.label} · {specs[0].precision}"


def fit_and_store(store: RunStore, specs: list[FitSpec], fit: Callable[[threading.Event], list[RunResult]],
                  cancel: threading.Event | None = None, owner_id: str = "") -> list[RunResult]:
    """Notes `specs` as under way, calls `fit(cancel)` serving their batch's key
    (`core.coordination.under_way`: fits timed together are one task and one turn of the
    device) and stores the results it returns in place of the notes, owned by `owner_id`
    (`RunResult.owner`); returns them, stored.

    Raises:
        RunInterrupted: `fit` raised `Died`; every spec is stored as interrupted.
        Whatever `fit` raised otherwise (nothing stored).
    """
    cancel = cancel if cancel is not None else threading.Event()
    submitted = time.time()
    batch, keys = under_way.note_keys(len(specs))
    flights = store.begin_all([spec.to_dict() for spec in specs], cancelled=cancel, owner=owner_id, keys=keys)
    try:
        with under_way.serving(batch):
            results = fit(cancel)
    except Died as died:
        records = [interrupted_result(spec.to_dict(), died.started_at or submitted, died.host or "?", died.pid,
                                      reason=died.reason,
                                      worker=f"{died.worker} on {died.host}" if died.worker else "", owner=owner_id)
                   for spec in specs]
        for flight, record in zip(flights, records):
            store.finish(flight, record)
        raise RunInterrupted(records[0]) from None
    except BaseException:  # cancelled, refused, or the caller stopped: no run to keep
        for flight in flights:
            with contextlib.suppress(StoreError):
                store.abandon(flight)
        raise
    for flight, result in zip(flights, results):
        if owner_id:
            result.owner = owner_id
        store.finish(flight, result)
    return results
