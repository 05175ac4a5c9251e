"""The wire between a submitter and its task on a worker: progress one way, cancel the other.

- Progress, and the news that a task started or ended, go out as Dask events on one topic
  (`TOPIC`, `Worker.log_event`): the worker's batched stream sends them without the task
  waiting for an answer, so a report inside a timed call costs microseconds. Every client
  subscribed to the topic sees every task's news (`core.cluster.board`), which is how a
  server knows what the cluster is busy with.
- Cancel is a `distributed.Event` per task, set by the submitter; a thread in the task
  waits on it (the scheduler answers the moment it is set) and sets the `threading.Event`
  the engine checks between iterations, calls and repeats (Dask cannot stop a running
  task: the fit stops itself).
- A task runs once: it marks its start with a second event, and a task started again (its
  first worker died under a scheduler that retries, `allowed-failures` > 0) refuses to run,
  so a timed run is never silently retried on other terms.

Messages are msgpack-able dicts; `encode_progress` and `decode_progress` turn the engine's
`Progress` (whose queue tickets are dataclasses) into one and back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
from typing import Any

from core.coordination import under_way
from core.coordination.device_queue import Ticket
from core.run.progress import Progress

TOPIC = "plnlab"
# Every task this project submits has a key that starts so (`core.cluster.submit`), which is
# how the board finds them among the scheduler's.
KEY_PREFIX = "plnlab-"
# How long one wait for a cancel lasts before it is asked again: a waiting watcher costs the
# scheduler nothing, and the task's end wakes it at once (`TaskChannel.__exit__`).
CANCEL_WAIT_S = 1.0


def cancel_name(token: str) -> str:
    return f"plnlab-cancel-{token}"


def started_name(token: str) -> str:
    return f"plnlab-started-{token}"


class RanBefore(RuntimeError):
    """The task was started before, on a worker that died: it is not run a second time."""


def encode_progress(progress: Progress) -> dict[str, Any]:
    return {"phase": progress.phase, "done": int(progress.done), "total": int(progress.total),
            "elbo": None if progress.elbo is None else float(progress.elbo),
            "ahead": [dataclasses.asdict(ticket) for ticket in progress.ahead],
            "waited_s": float(progress.waited_s), "member": int(progress.member)}


def decode_progress(message: dict[str, Any]) -> Progress:
    ahead = tuple(Ticket(**ticket) if isinstance(ticket, dict) else ticket for ticket in message.get("ahead", ()))
    return Progress(message["phase"], message.get("done", 0), message.get("total", 0), message.get("elbo"), ahead,
                    message.get("waited_s", 0.0), message.get("member", 0))


class TaskChannel:
    """Inside a task: its reports to the submitter and the cancel the submitter may send.

    Args:
        token: the task's token (given by `core.cluster.submit`).
        label: what runs, as others see it on the board.

    Use as a context manager: entering marks the task started (or raises `RanBefore`),
    announces it and starts watching for a cancel; leaving stops the watch and announces
    the end.
    """

    def __init__(self, token: str, label: str) -> None:
        # Deferred: a worker's own modules; the submitter never builds a TaskChannel.
        from distributed import Event, get_worker

        self.token, self.label = token, label
        self.worker = get_worker()
        self.key = str(self.worker.get_current_task())
        self.cancel = threading.Event()
        self._remote_cancel = Event(cancel_name(token))
        self._started = Event(started_name(token))
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_cancel, name=f"plnlab-cancel-{token[:8]}", daemon=True)

    def __enter__(self) -> TaskChannel:
        if self._started.is_set():
            raise RanBefore("the worker that started this run died before it finished; a timed run is not "
                            "started again")
        self._started.set()
        # Tickets this task takes in the host's device queue carry its token: the board's key.
        self._serving = under_way.serving(self.token)
        self._serving.__enter__()
        self._send("started", worker=self.worker.address, name=str(self.worker.name), host=socket.gethostname(),
                   pid=os.getpid(), at=time.time(), label=self.label)
        self._watch.start()
        return self

    def __exit__(self, *exc) -> None:
        self._serving.__exit__(None, None, None)
        self._stop.set()
        # Setting the cancel event ends the watcher's wait at once (it sees the stop and
        # cancels nothing), unjoined: a wait left pending would hold the event on the
        # scheduler, and be cut off with an error logged there if the cluster closed meanwhile.
        with contextlib.suppress(Exception):  # the scheduler is gone; so is the wait
            self._remote_cancel.set()
        self._send("ended", worker=self.worker.address, at=time.time())
        # The task ran to its end here (finished, failed or cancelled): it will not run again,
        # so neither event is needed; clearing an event nobody waits on deletes it.
        for event in (self._remote_cancel, self._started):
            try:
                event.clear()
            except Exception:  # noqa: BLE001 - the scheduler is gone; so are its events
                pass

    def report(self, progress: Progress) -> None:
        """Sends `progress` to the submitter (a `ProgressCallback`)."""
        self._send("progress", **encode_progress(progress))

    def _send(self, kind: str, **fields) -> None:
        self.worker.log_event(TOPIC, {"token": self.token, "key": self.key, "kind": kind, **fields})

    def _watch_cancel(self) -> None:
        # A wait, not a poll: a cancel reaches the fit as soon as the submitter sets it (a poll
        # every 0.2 s took about 0.2 s and five requests a second to the scheduler per task).
        while not self._stop.is_set():
            try:
                if self._remote_cancel.wait(timeout=CANCEL_WAIT_S):
                    if not self._stop.is_set():
                        self.cancel.set()
                    return
            except Exception:  # noqa: BLE001 - the scheduler is gone: the task's result will be too
                return
