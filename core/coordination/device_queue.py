"""One timed section per device at a time on this host, first come first served, across
every thread and process (dashboard sessions, command-line runs, benchmarks).

Each waiter writes a ticket into the platform's folder under the queue directory;
tickets are served in the order they were written. A ticket is a lease
(`core.coordination.lease`): its owner holds a lock on the ticket file that the kernel releases
when the owner dies, however it dies, so a ticket is alive exactly while its owner is,
whatever its process id says (in a container every server is pid 1). Tickets written
under another kernel (a queue folder shared between machines) are alive while their
heartbeat moves. Dead tickets are removed by whoever lists the queue. The one at the
head then takes an exclusive `flock` on the platform's lock file for the timed section.

The queue directory is $PLNLAB_QUEUE_DIR, else `queue/` beside JAX's compilation cache
(`core.machine.host.default_cache_dir()`): every process of one user shares it; point
PLNLAB_QUEUE_DIR at one folder to share it between users of a host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pathlib
import socket
import threading
import time
import uuid
from typing import Callable, Iterator

from core import config
from core.coordination import lease, under_way
from core.machine.host import default_cache_dir

QUEUE_DIR_ENV = "PLNLAB_QUEUE_DIR"
POLL_S = 0.05


class Cancelled(Exception):
    """The run was cancelled (while queued or running); nothing was stored."""


@dataclasses.dataclass(frozen=True)
class Ticket:
    """One waiter or the holder.

    Attributes:
        ticket: unique id; sorts in arrival order (nanosecond time first).
        platform: the device platform queued for ("cpu", "gpu", "tpu").
        label: what will run, e.g. "scan · oaks x100 · float32".
        owner: who asked: "dashboard", "command line", "benchmark" ...
        host, pid: the process that holds the ticket (shown, never used to judge it).
        enqueued_at: epoch seconds of arrival.
        started_at: epoch seconds the lock was taken, or None while waiting.
        kernel: `core.coordination.lease.kernel_id()` of the holder's machine.
        run: the key of the run under way it serves (`core.coordination.under_way`: its
            in-flight note's, or a cluster task's), "" for work of no run.
    """

    ticket: str
    platform: str
    label: str
    owner: str
    host: str
    pid: int
    enqueued_at: float
    started_at: float | None = None
    kernel: str = ""
    run: str = ""

    @property
    def running(self) -> bool:
        return self.started_at is not None

    def describe(self, now: float | None = None) -> str:
        """"scan · oaks x100 (command line, pid 123), running for 4 s" or "... waiting for 2 s"
        (no pid for a task on the cluster, whose process is a worker's)."""
        who = f"{self.owner}, pid {self.pid}" if self.pid else self.owner
        return f"{self.label} ({who}), {self.state(now)}"

    def state(self, now: float | None = None) -> str:
        """"running for 4 s" or "waiting for 2 s"."""
        now = time.time() if now is None else now
        since = self.started_at if self.running else self.enqueued_at
        return f"{'running' if self.running else 'waiting'} for {max(0.0, now - since):.0f} s"


def default_queue_dir() -> pathlib.Path:
    """$PLNLAB_QUEUE_DIR, else `queue/` beside JAX's compilation cache."""
    if (chosen := config.path(QUEUE_DIR_ENV)) is not None:
        return chosen
    return default_cache_dir().parent / "queue"


class DeviceQueue:
    """The host's queue for each device platform (see the module docstring).

    Args:
        directory: where tickets and lock files live (default: `default_queue_dir()`).
        expiry_s: seconds the heartbeat of a ticket from another machine may stand
            still before the ticket is taken for dead (`core.coordination.lease.Watcher`).
    """

    def __init__(self, directory: str | os.PathLike | None = None, expiry_s: float = lease.EXPIRY_S) -> None:
        self.directory = pathlib.Path(directory) if directory is not None else default_queue_dir()
        self.watcher = lease.Watcher(expiry_s)

    def _folder(self, platform: str) -> pathlib.Path:
        folder = self.directory / platform
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def entries(self, platform: str) -> list[Ticket]:
        """The live tickets for `platform` in service order (the holder, if any, first)."""
        found = []
        for path in sorted(self._folder(platform).glob("*.json")):
            info = lease.read(path)
            if not self.watcher.alive(path, info):
                self.watcher.reap(path)  # its owner died: it will never run
                continue
            try:
                found.append(Ticket(**{k: v for k, v in (info or {}).items() if k in _FIELDS}))
            except TypeError:
                continue  # being written, or not a ticket
        return found

    @contextlib.contextmanager
    def hold(
        self,
        platform: str,
        label: str,
        owner: str,
        on_wait: Callable[[list[Ticket], float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[float]:
        """Wait for `platform`, then hold it for the `with` block; yields seconds waited. The
        ticket names the run under way this thread serves (`core.coordination.under_way`).

        Args:
            platform: the device platform.
            label, owner: how this entry appears to the others waiting.
            on_wait: called about every `POLL_S` while waiting with the tickets ahead
                (the holder first) and the seconds waited so far.
            cancel: set it (from any thread) to give up waiting: raises `Cancelled`.
        """
        now = time.time()
        ticket = Ticket(f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}", platform, label, owner,
                        socket.gethostname(), os.getpid(), now, kernel=lease.kernel_id(), run=under_way.current())
        held = lease.Lease(self._folder(platform) / f"{ticket.ticket}.json", dataclasses.asdict(ticket))
        try:
            lock_file = open(self.directory / f"{platform}.lock", "a+")  # noqa: SIM115 - closed in finally
        except BaseException:
            held.release()
            raise
        try:
            start = time.monotonic()
            while True:
                ahead = [t for t in self.entries(platform) if t.ticket < ticket.ticket]
                if not ahead:
                    try:
                        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        pass  # the holder's ticket is gone but its lock not yet released
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled while waiting for the device")
                if on_wait is not None:
                    on_wait(ahead, time.monotonic() - start)
                time.sleep(POLL_S)
            waited = time.monotonic() - start
            held.update(dataclasses.asdict(dataclasses.replace(ticket, started_at=time.time())))
            yield waited
        finally:
            held.release()
            lock_file.close()  # releases the flock


_FIELDS = {field.name for field in dataclasses.fields(Ticket)}


def one_per_run(board: list[Ticket], host: list[Ticket]) -> list[Ticket]:
    """The cluster's tasks (`board`, as tickets) and the host queue's tickets (`host`), a run
    served by both once: a worker's ticket carries its task's run key
    (`core.coordination.under_way`), and the board's entry, which says which worker runs it,
    is the one kept. Tickets of no run (measuring the machine) are each their own."""
    on_board = {ticket.run for ticket in board if ticket.run}
    return [*board, *(ticket for ticket in host if not ticket.run or ticket.run not in on_board)]


_default: DeviceQueue | None = None


def default_queue() -> DeviceQueue:
    """The queue in the default directory (looked up on each call: tests change it)."""
    global _default
    directory = default_queue_dir()
    if _default is None or _default.directory != directory:
        _default = DeviceQueue(directory)
    return _default


@contextlib.contextmanager
def device_lock(platform: str, label: str = "measuring the machine", owner: str = "dashboard"):
    """Hold `platform` on this host for other work that would distort timings (inspecting,
    measuring peaks): it queues with the timed runs."""
    with default_queue().hold(platform, label, owner):
        yield
