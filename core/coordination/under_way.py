"""Which run under way a thread is serving: the key its in-flight notes were written under.

A run's life (`core.run.lifecycle`) notes it in the store (`RunStore.begin_all`) under a
key made from its batch's (`note_keys`: fits timed together are one batch, one task and one
turn of the device), and everything that follows in its name takes the batch's key with it:
the cluster task fitting it is sent under it (`core.cluster.submit`, as the task's token),
the worker serves it under it (`core.cluster.channel.TaskChannel`), and the device-queue
ticket it waits with carries it (`core.coordination.device_queue`). So a note
(`batch_of` its key), the board's entry and the queue's ticket of one run are found by one
key: a page lists each run once, and says where it stands.

A context variable, not an argument: the key passes through the engine and the cluster's
calls untouched, and each thread (a dashboard session, a worker's task) has its own.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from typing import Iterator

_serving: contextvars.ContextVar[str] = contextvars.ContextVar("plnlab_run_under_way", default="")


def note_keys(count: int) -> tuple[str, list[str]]:
    """(the batch's key, a key for each of `count` notes timed together, made from it)."""
    batch = uuid.uuid4().hex
    return batch, [f"{batch}-{index}" for index in range(count)]


def batch_of(note_key: str) -> str:
    """The key a note's run is served under: its batch's (a note written before batches, its own)."""
    return note_key.split("-", 1)[0]


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
