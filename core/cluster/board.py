"""What the cluster is busy with, as one submitter sees it: whose runs wait, whose run on which
worker, and the messages meant for this submitter's own tasks.

A `Board` subscribes its client to the channel's topic (`core.cluster.channel.TOPIC`), so it
hears every task start and end on the cluster and every submitter's announcement of a run
it queued, whichever server or command line sent it. Messages for a task this process is
waiting on go to that task's inbox (`listen`). The scheduler itself is the judge of what is
still alive: `tasks()` asks it for every task of this project with its state, so a run
whose submitter or worker died drops off the board at the next look.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from typing import Any

from core.cluster.channel import KEY_PREFIX, TOPIC
from core.coordination.device_queue import Ticket

log = logging.getLogger(__name__)
# How long a view of the scheduler's tasks is reused: every rerun of every page draws the
# sidebar's queue line, and a round trip per rerun would be waste.
TASKS_TTL_S = 1.0
# Entries of the board whose task the scheduler does not know are forgotten after this long
# (an announcement may arrive before its task reaches the scheduler).
GRACE_S = 10.0


@dataclasses.dataclass
class Entry:
    """A task of this project on the cluster, as announced.

    Attributes:
        key: its Dask key.
        label: what runs, e.g. "scan · oaks x100 · float32".
        owner: who asked ("dashboard", "command line").
        platform: the device platform it needs.
        host: the submitter's host, then the worker's once it started.
        queued_at, started_at: epoch seconds (started_at None while it waits).
        worker: the worker running it, once started.
        run: its token: for a stored run, the key of its in-flight note
            (`core.coordination.under_way`), which its device-queue ticket carries too.
    """

    key: str
    label: str = "a run"
    owner: str = "another client"
    platform: str = "cpu"
    host: str = ""
    queued_at: float = 0.0
    started_at: float | None = None
    worker: str = ""
    run: str = ""

    def ticket(self) -> Ticket:
        """As a device-queue ticket, so that pages show cluster and host queues alike."""
        return Ticket(self.key, self.platform, self.label, self.owner, self.host, 0, self.queued_at,
                      self.started_at, run=self.run)


class Board:
    """See the module docstring. `close()` unsubscribes."""

    def __init__(self, client) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        # Tasks heard to end, by key: the scheduler lists a finished task as processing until its
        # result has gone back, and a look at it in between read "busy: starting" after the run.
        self._ended: set[str] = set()
        self._inboxes: dict[str, queue.SimpleQueue] = {}
        self._tasks: tuple[float, list[tuple[str, str, tuple[str, ...]]]] | None = None
        client.subscribe_topic(TOPIC, self._receive)

    def close(self) -> None:
        try:
            self.client.unsubscribe_topic(TOPIC)
        except Exception:  # noqa: BLE001 - the client is closing anyway
            log.debug("unsubscribing failed", exc_info=True)

    # -- messages ---------------------------------------------------------------------------

    def _receive(self, event) -> None:
        """Runs on the client's event loop: file the message, hand it to its task's inbox."""
        _, message = event
        key = message.get("key") or ""
        kind = message.get("kind")
        with self._lock:
            if kind == "queued":
                self._entries[key] = Entry(key, message.get("label", "a run"), message.get("owner", "?"),
                                           message.get("platform", "cpu"), message.get("host", ""),
                                           message.get("at", time.time()), run=message.get("run", ""))
            elif kind == "started":
                entry = self._entries.setdefault(key, Entry(key, message.get("label", "a run"),
                                                            queued_at=message.get("at", time.time())))
                entry.started_at, entry.worker = message.get("at", time.time()), message.get("worker", "")
                entry.run = message.get("token", entry.run)
                entry.host = message.get("host", entry.host)
            elif kind in ("ended", "dropped"):
                self._entries.pop(key, None)
                self._ended.add(key)
            inbox = self._inboxes.get(message.get("token", ""))
        if inbox is not None:
            inbox.put(message)

    def listen(self, token: str) -> queue.SimpleQueue:
        """The inbox of task `token`'s messages, from now until `forget(token)`."""
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self._inboxes[token] = inbox
        return inbox

    def forget(self, token: str) -> None:
        with self._lock:
            self._inboxes.pop(token, None)

    def announce(self, key: str, **fields: Any) -> None:
        """Tells every submitter about task `key` ("queued", with its label, owner,
        platform, host and time; "dropped" when it will not run)."""
        self.client.log_event(TOPIC, {"key": key, **fields})

    # -- the cluster's state ----------------------------------------------------------------

    def tasks(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(key, state, resources asked) of every task of this project the scheduler holds,
        in the order they were submitted; [] when the scheduler will not say."""
        now = time.monotonic()
        with self._lock:
            if self._tasks is not None and now - self._tasks[0] < TASKS_TTL_S:
                return self._tasks[1]

        # Defined here, so that it is sent by value: the scheduler has none of this project's code.
        def plnlab_tasks(dask_scheduler, prefix=KEY_PREFIX):
            return [(str(ts.key), ts.state, tuple(sorted(ts.resource_restrictions or {})))
                    for ts in dask_scheduler.tasks.values() if str(ts.key).startswith(prefix)]

        try:
            found = self.client.run_on_scheduler(plnlab_tasks)
        except Exception:  # noqa: BLE001 - a scheduler that refuses code from clients: no queue to show
            log.debug("the scheduler did not list its tasks", exc_info=True)
            found = []
        with self._lock:
            self._tasks = (now, found)
            alive = {key for key, state, _ in found if state not in ("memory", "erred", "released", "forgotten")}
            self._ended &= alive  # forgotten once the scheduler has let the task go
            stale = time.time() - GRACE_S
            for key in [k for k, e in self._entries.items() if k not in alive and e.queued_at < stale]:
                del self._entries[key]
        return found

    def entries(self, platform: str | None = None) -> list[Entry]:
        """The live tasks (of `platform`, when given): running ones first, then waiting
        ones in the order they were queued."""
        found = self.tasks()
        order = {key: index for index, (key, _, _) in enumerate(found)}
        with self._lock:
            known = {key: dataclasses.replace(entry) for key, entry in self._entries.items()}
            ended = set(self._ended)
        wanted = {key for key, state, resources in found
                  if state in ("processing", "queued", "no-worker", "waiting") and key not in ended
                  and (platform is None or any(r.endswith(f"-{platform}") for r in resources))}
        listed = [known.get(key) or Entry(key, platform=platform or "?") for key in wanted]
        # Running first: those whose task said it started (a task handed to a worker that has
        # not started yet still waits).
        return sorted(listed, key=lambda e: (e.started_at is None, order.get(e.key, 0)))

    def ahead_of(self, key: str, platform: str) -> list[Ticket]:
        """The tasks of `platform` before `key`: those running, then those queued earlier."""
        found = self.entries(platform)
        keys = [entry.key for entry in found]
        if key not in keys:
            return [entry.ticket() for entry in found if entry.started_at is not None]
        mine = keys.index(key)
        return [entry.ticket() for entry in found[:mine]] + \
            [entry.ticket() for entry in found[mine + 1:] if entry.started_at is not None]
