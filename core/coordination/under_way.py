"""Which run under way a thread is serving: the key of its in-flight note.

A run's life (`core.run.lifecycle`) notes it in the store under a key (`RunStore.begin_all`),
and everything that follows in its name takes that key with it: the cluster task fitting it
is sent under it (`core.cluster.submit`, as the task's token), the worker serves it under it
(`core.cluster.channel.TaskChannel`), and the device-queue ticket it waits with carries it
(`core.coordination.device_queue`). So the note, the board's entry and the queue's ticket
of one run are found by one key: a page lists each run once, and says where it stands.

A context variable, not an argument: the key passes through the engine and the cluster's
calls untouched, and each thread (a dashboard session, a worker's task) has its own.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_serving: contextvars.ContextVar[str] = contextvars.ContextVar("plnlab_run_under_way", default="")


def current() -> str:
    """The key of the run this thread serves, or "" (work for no stored run)."""
    return _serving.get()


@contextlib.contextmanager
def serving(key: str) -> Iterator[str]:
    """Within the block, this thread serves the run under way `key`, unless it serves one
    already: the outer key stays, and is yielded. (A cluster task that stores runs of its
    own, the command line's benchmark in a scratch store on a worker, waits in the device
    queue in the name of the task the board shows.)"""
    outer = _serving.get()
    if outer:
        yield outer
        return
    token = _serving.set(key)
    try:
        yield key
    finally:
        _serving.reset(token)
