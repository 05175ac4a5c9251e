"""Sending one task to the cluster and waiting for it, with progress, cancel and a worker's death.

`call(cluster, function, *args, ...)` submits `function` (one of `core.cluster.tasks`) with
a token (the key of the run under way it fits, `core.coordination.under_way`, so that the
board lists it under its in-flight note's key; else a fresh one) and a key made from it,
pure=False (every call runs), no retries, asking for the resource of
its device platform so that it lands on a worker that serves it. While the task waits for a
worker it reports "queued" progress with the tasks ahead; once it runs, its own reports
arrive through the board. A cancel (the `cancel` event, or leaving the wait by any
exception, e.g. a page that stops) is sent to the task, which stops at its next check.

A task that no worker of this project can take (none joined, or those there were started
without `--preload core.cluster.worker_setup` and offer none of our resources) raises
`core.cluster.errors.NoWorker` after `NO_WORKER_S`, saying how to start one.

A worker that dies while running the task (killed, out of memory, crashed) raises
`core.cluster.errors.WorkerDied` with what is known of it: the run is lost, nothing else is.
A task that was only waiting in that worker's queue (Dask hands a worker more than it runs
at once, and fails them all with it) never ran: it is sent again, and waits for a worker as
before, so the death costs only the run that was running.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
import uuid
from typing import Any, Callable

from distributed import Event
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from core.cluster import channel, plain, worker_setup
from core.cluster.connection import Cluster
from core.cluster.errors import NoWorker, WorkerDied
from core.coordination import under_way
from core.run.progress import Cancelled, Progress, ProgressCallback

# How often the wait wakes to deliver progress and look at the cancel event, and how often,
# at least, progress is reported (each report is a point where a page can stop).
POLL_S = 0.05
QUEUED_EVERY_S = 0.5
# How long a task waits while no worker offers its platform's resource before it is refused:
# longer than a nanny takes to restart a worker that died (a second or two, then its warm
# imports), far shorter than anyone waits for a page.
NO_WORKER_S = 30.0
SERVED_EVERY_S = 1.0


def call(cluster: Cluster, function: Callable, *args: Any, platform: str, label: str, owner: str,
         on_progress: ProgressCallback | None = None, cancel: threading.Event | None = None) -> Any:
    """Runs `function(*args, token=..., label=label)` on a worker serving `platform` and
    returns what it returns, rebuilt from the plain data it was sent as
    (`core.cluster.plain`); the task's exceptions are raised here.

    Raises:
        WorkerDied: the worker running it died.
        Cancelled: `cancel` was set before the task finished.
        NoWorker: for `NO_WORKER_S`, no worker offered `platform`'s resource.
        NotPlain: what came back is not plain data of the schema.
    """
    token = under_way.current() or uuid.uuid4().hex  # a run's one task: its note's key
    inbox = cluster.board.listen(token)
    report = on_progress or (lambda progress: None)

    def submit(attempt: int):
        key = f"{channel.KEY_PREFIX}{function.__name__}-{token}" + (f"-{attempt}" if attempt else "")
        cluster.board.announce(key, kind="queued", label=label, owner=owner, platform=platform,
                               host=socket.gethostname(), at=time.time(), run=token)
        return cluster.client.submit(function, *args, token=token, label=label, key=key, pure=False, retries=0,
                                     resources={worker_setup.resource(platform): 1})

    future = submit(0)
    started: dict[str, Any] = {}
    asked_to_cancel = False
    waited_from = last_report = last_served = served_checked = time.monotonic()
    latest: Progress | None = None
    try:
        for attempt in itertools.count(1):
            finished = threading.Event()
            future.add_done_callback(lambda _, finished=finished: finished.set())
            while True:
                while not inbox.empty():
                    message = inbox.get()
                    if message["kind"] == "started":
                        started = message
                    elif message["kind"] == "progress":
                        latest, last_report = channel.decode_progress(message), time.monotonic()
                        report(latest)
                if future.done():
                    break
                if cancel is not None and cancel.is_set() and not asked_to_cancel:
                    asked_to_cancel = True
                    Event(channel.cancel_name(token), client=cluster.client).set()
                    if not started:
                        raise Cancelled("cancelled while waiting for a worker; nothing was stored")
                now = time.monotonic()
                if not started and now - served_checked >= SERVED_EVERY_S:
                    served_checked = now
                    if _served(cluster, platform):
                        last_served = now
                    elif now - last_served >= NO_WORKER_S:
                        raise _no_worker(cluster, platform, now - waited_from)
                if now - last_report >= QUEUED_EVERY_S:
                    # While it waits, where it stands in the queue; while it runs quietly (a long
                    # compiled call), its latest report again: each is a point where a page can stop.
                    last_report = now
                    if not started:
                        report(Progress("queued", ahead=tuple(cluster.board.ahead_of(future.key, platform)),
                                        waited_s=now - waited_from))
                    elif latest is not None:
                        report(latest._replace(elbo=None))  # not a new point of its curve
                finished.wait(POLL_S)
            try:
                result = future.result()
            except KilledWorker:
                if not started and not _ever_started(cluster, token):
                    # Lost from the dead worker's queue before it ran: the same task, sent again.
                    cluster.board.announce(future.key, kind="dropped")
                    future.release()
                    future = submit(attempt)
                    continue
                _forget_events(cluster, token)  # the task will not run again: nobody else clears them
                raise _died(started, "the worker process running it died (killed, out of memory or "
                                     "crashed)") from None
            except (channel.RanBefore, FutureCancelledError) as lost:
                _forget_events(cluster, token)
                if isinstance(lost, FutureCancelledError):
                    if asked_to_cancel:
                        raise Cancelled("cancelled; nothing was stored") from None
                    raise _died(started, "the cluster dropped it (its scheduler restarted or the connection was "
                                         "lost)") from None
                raise _died(started, "the worker process running it died (killed, out of memory or "
                                     "crashed)") from None
            value = plain.decode(result)
            if isinstance(value, plain.Stopped):
                raise Cancelled(value.reason)
            if isinstance(value, plain.Refused):
                raise value.error()
            return value
    finally:
        cluster.board.forget(token)
        if not future.done():  # cancelled, or the caller stopped (a page left): the task stops too
            _stop(cluster, future, token, started)
        future.release()


def _served(cluster: Cluster, platform: str) -> bool:
    """Whether a worker on the scheduler offers `platform`'s resource (a recycled worker
    offers none for the seconds its replacement takes to start, well within `NO_WORKER_S`)."""
    try:
        workers = cluster.client.scheduler_info(n_workers=-1).get("workers", {})
    except Exception:  # noqa: BLE001 - the scheduler cannot say now: take it as served, ask again
        return True
    wanted = worker_setup.resource(platform)
    return any(info.get("resources", {}).get(wanted) for info in workers.values())


def _no_worker(cluster: Cluster, platform: str, waited_s: float) -> NoWorker:
    if cluster.embedded:  # its workers are this server's to start: nothing for the user to run
        return NoWorker(f"this server's worker for {platform} is not up after {waited_s:.0f} s (it is started "
                        "again by itself after a crash; a machine this busy may need a minute): try again shortly")
    workers = cluster.client.scheduler_info(n_workers=-1).get("workers", {})
    theirs = (f"its {len(workers)} worker{'s' * (len(workers) != 1)} offer no {platform} of this project (started "
              "without --preload core.cluster.worker_setup, or serving other devices)" if workers
              else "no worker has joined it")
    return NoWorker(f"no worker of this project serves {platform} on the scheduler at {cluster.address}: {theirs}; "
                    f"waited {waited_s:.0f} s. Start one there with: dask worker {cluster.address} --nthreads 1 "
                    "--preload core.cluster.worker_setup (and the team's --tls-ca-file, --tls-cert, --tls-key; "
                    "docs/team-cluster.md)")


def _ever_started(cluster: Cluster, token: str) -> bool:
    """Whether the task marked itself started on the scheduler (`channel.TaskChannel`): the
    mark is set before a fit begins, so a task without it never ran; its own report may not
    have arrived yet."""
    try:
        return Event(channel.started_name(token), client=cluster.client).is_set()
    except Exception:  # noqa: BLE001 - the scheduler cannot say: take it as run (never timed twice)
        return True


def _stop(cluster: Cluster, future, token: str, started: dict) -> None:
    try:
        Event(channel.cancel_name(token), client=cluster.client).set()
        future.cancel()
        if not started:  # it never ran, so no task will clear its events
            _forget_events(cluster, token)
        cluster.board.announce(future.key, kind="dropped")
    except Exception:  # noqa: BLE001 - the cluster is gone: nothing left to stop
        pass


def _forget_events(cluster: Cluster, token: str) -> None:
    """Deletes the task's cancel and started events from the scheduler."""
    for name in (channel.cancel_name(token), channel.started_name(token)):
        try:
            Event(name, client=cluster.client).clear()
        except Exception:  # noqa: BLE001 - the cluster is gone; so are its events
            pass


def _died(started: dict, what: str) -> WorkerDied:
    worker, host = started.get("worker", ""), started.get("host", "")
    where = f" ({worker} on {host}, pid {started.get('pid', '?')})" if worker else ""
    return WorkerDied(f"{what}{where}; a fresh worker takes the next run", worker, host,
                      int(started.get("pid") or 0), float(started.get("at") or 0.0))
