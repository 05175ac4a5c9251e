"""Leases: a file that says its owner is alive, judged without trusting process ids.

A lease is a small JSON file whose owner holds an exclusive `flock` on it for as long as
the lease lasts. The kernel releases that lock when the owner dies, however it dies
(kill -9, the PID 1 of a container going down), so under the owner's kernel a lease is
alive exactly while its lock is held: a probe that gets the lock has found a dead owner.
Process ids are not used: they are reused, and in a PID namespace every server is pid 1.

A lease folder shared between machines (NFS) cannot rely on that alone: whether a lock
reaches across machines depends on the mount, and a crashed machine's locks may outlive
it. So every owner also touches its lease files every `HEARTBEAT_S` seconds (the file's
mtime is its heartbeat), and a lease written under another kernel is alive while its
heartbeat moves: a `Watcher` that sees the same mtime for `expiry_s` seconds of its own
clock judges it dead. Comparing a heartbeat with the watcher's own earlier reading, never
with the watcher's clock, keeps clock skew between machines out of the judgement.

The same heartbeat thread looks for cancel requests: anyone who may cancel a run writes
`<lease>.cancel` (`request_cancel`), and the owner's `cancelled` event is set.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import socket
import threading
import time
import uuid
from typing import Any

HEARTBEAT_S = 2.0
# Fifteen missed heartbeats: a busy machine (a long XLA compile holding a core) is slow,
# not dead.
EXPIRY_S = 30.0
CANCEL_SUFFIX = ".cancel"


def kernel_id() -> str:
    """Names this running kernel: every process and container under it shares its locks.
    The boot id changes at each boot; the host name stands in where there is none."""
    try:
        return pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


class Lease:
    """A lease held by this process until `release()` (or its death).

    Args:
        path: the lease file (its folder is created if missing).
        info: what the file says (JSON); `host`, `pid` and `kernel` are added.
        cancelled: set by the heartbeat thread when someone asks to cancel (see
            `request_cancel`); None when nobody may.
    """

    def __init__(self, path: str | os.PathLike, info: dict[str, Any],
                 cancelled: threading.Event | None = None) -> None:
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cancelled = cancelled
        self.info: dict[str, Any] = {}
        self._handle = None
        self._write(info)
        _heartbeat.add(self)

    def _write(self, info: dict[str, Any]) -> None:
        # Written under a new name, locked, then renamed over the lease: readers see the
        # whole file or none, and the lease is locked at every moment it exists.
        self.info = {**info, "host": socket.gethostname(), "pid": os.getpid(), "kernel": kernel_id()}
        partial = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex[:8]}.part")
        handle = open(partial, "w+")  # noqa: SIM115 - held for the lease's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write(json.dumps(self.info))
            handle.flush()
            partial.replace(self.path)
        except BaseException:
            handle.close()
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        old, self._handle = self._handle, handle
        if old is not None:
            old.close()

    def update(self, info: dict[str, Any]) -> None:
        """Replace what the lease says, keeping it held."""
        self._write(info)

    def beat(self) -> None:
        """The heartbeat: the file's mtime moves; a pending cancel request is noticed."""
        with contextlib.suppress(OSError):
            os.utime(self.path)
        if self.cancelled is not None and not self.cancelled.is_set() and cancel_requested(self.path):
            self.cancelled.set()

    def release(self) -> None:
        """Removes the lease (and any cancel request for it); idempotent."""
        _heartbeat.discard(self)
        if self._handle is None:
            return
        for path in (self.path, _cancel_path(self.path)):
            with contextlib.suppress(OSError):
                path.unlink()
        self._handle.close()  # releases the lock
        self._handle = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def read(path: str | os.PathLike) -> dict[str, Any] | None:
    """What a lease file says, or None when it is absent, being written or not a lease."""
    try:
        info = json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _cancel_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + CANCEL_SUFFIX)


def request_cancel(path: str | os.PathLike) -> None:
    """Ask the owner of the lease at `path` to cancel: it notices within a heartbeat."""
    _cancel_path(pathlib.Path(path)).touch()


def cancel_requested(path: str | os.PathLike) -> bool:
    return _cancel_path(pathlib.Path(path)).exists()


class Watcher:
    """Judges leases: by their lock under this kernel, by their heartbeat under another.

    A watcher remembers the heartbeats it has seen, so keep one per queue or store.

    Args:
        expiry_s: seconds a foreign lease's heartbeat may stand still before it is dead.
    """

    def __init__(self, expiry_s: float = EXPIRY_S) -> None:
        self.expiry_s = expiry_s
        self._seen: dict[str, tuple[float, float]] = {}  # path -> (mtime, when first seen)
        self._lock = threading.Lock()

    def alive(self, path: str | os.PathLike, info: dict[str, Any] | None = None) -> bool:
        """Whether the lease at `path` (saying `info`, read if not given) has a live owner."""
        path = pathlib.Path(path)
        if _heartbeat.holds(path):
            return True
        info = read(path) if info is None else info
        if info is None:  # not a lease: removed once it has stood still as long as a dead one
            return self._beating(path)
        if info.get("kernel") == kernel_id():
            return _locked(path)
        return self._beating(path)

    def _beating(self, path: pathlib.Path) -> bool:
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return False
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(str(path))
            if seen is None or seen[0] != mtime:
                self._seen[str(path)] = (mtime, now)
                return True
            return now - seen[1] < self.expiry_s

    def reap(self, path: str | os.PathLike) -> bool:
        """Removes the lease at `path` if its owner is dead; True if it was removed."""
        path = pathlib.Path(path)
        info = read(path)
        if self.alive(path, info):
            return False
        if info is not None and info.get("kernel") == kernel_id():
            return _remove_unlocked(path)
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            _cancel_path(path).unlink()
        with self._lock:
            self._seen.pop(str(path), None)
        return True


def _locked(path: pathlib.Path) -> bool:
    """Whether some process holds the lock on `path` (a probe that takes it lets it go)."""
    try:
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:  # removed meanwhile: released by its owner
        return False


def _remove_unlocked(path: pathlib.Path) -> bool:
    """Unlinks `path` while holding its lock, if nobody holds it and it is still the same
    file (its owner may have just replaced it with a new, locked one)."""
    try:
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            if os.fstat(handle.fileno()).st_ino != os.stat(path).st_ino:
                return False
            path.unlink()
            with contextlib.suppress(OSError):
                _cancel_path(path).unlink()
            return True
    except OSError:
        return False


class _Heartbeat:
    """One daemon thread per process that touches every lease the process holds."""

    def __init__(self) -> None:
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases[_key(lease.path)] = lease
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="plnlab-lease-heartbeat", daemon=True)
                self._thread.start()

    def discard(self, lease: Lease) -> None:
        with self._lock:
            if self._leases.get(_key(lease.path)) is lease:
                del self._leases[_key(lease.path)]

    def holds(self, path: pathlib.Path) -> bool:
        with self._lock:
            return _key(path) in self._leases

    def _run(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                leases = list(self._leases.values())
            for lease in leases:
                lease.beat()


def _key(path: pathlib.Path) -> str:
    return os.path.abspath(path)


_heartbeat = _Heartbeat()
