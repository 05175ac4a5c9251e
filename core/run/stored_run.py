"""Run a spec in this process and store its result (`core.run.lifecycle`): noted as under
way when it starts, replaced by its result when it ends, removed if it is cancelled or fails.
Anyone may ask the store to cancel a run under way (`RunStore.request_cancel`): the note's
lease sets the run's `cancel` event.
"""

from __future__ import annotations

import threading

from core.results.result import RunResult
from core.run import engine, lifecycle
from core.store.run_store import RunStore


def run_and_store(store: RunStore, spec, counts=None, cancel: threading.Event | None = None,
                  **engine_options) -> RunResult:
    """`engine.run(spec, counts, cancel=..., **engine_options)`, stored in `store`; returns
    the stored result. `cancel` is also set by a cancel request made through the store."""
    def fit(cancel: threading.Event) -> list[RunResult]:
        return [engine.run(spec, counts, cancel=cancel, **engine_options)]

    return lifecycle.fit_and_store(store, [spec], fit, cancel)[0]
