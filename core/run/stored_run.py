"""Run a spec and store its result, so that a run killed halfway is remembered.

The store notes the run when it starts and replaces the note by the result in one
transaction when it ends; a run cancelled or failed removes its note. A note left by a
process that died (kill -9, a server restart) becomes an "interrupted" run at the next
look at the store (`core.store.in_flight`). Anyone may ask the store to cancel a run under
way (`RunStore.request_cancel`): the note's lease sets the run's `cancel` event.
"""

from __future__ import annotations

import contextlib
import threading

from core.results.result import RunResult
from core.run import engine
from core.store.records import StoreError
from core.store.run_store import RunStore


def run_and_store(store: RunStore, spec, counts=None, cancel: threading.Event | None = None,
                  **engine_options) -> RunResult:
    """`engine.run(spec, counts, cancel=..., **engine_options)`, stored in `store`; returns
    the stored result. `cancel` is also set by a cancel request made through the store."""
    cancel = cancel if cancel is not None else threading.Event()
    flight = store.begin(spec.to_dict(), cancelled=cancel)
    try:
        result = engine.run(spec, counts, cancel=cancel, **engine_options)
    except BaseException:  # cancelled, failed, or the caller's thread stopped: no run to keep
        with contextlib.suppress(StoreError):
            store.abandon(flight)
        raise
    store.finish(flight, result)
    return result
