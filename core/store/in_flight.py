"""Runs under way: a note in the store per run, alive exactly while its process is.

`RunStore.begin` writes a row in table `in_flight` and takes a lease (`core.coordination.lease`)
named by it, in a folder beside the store file; `finish` replaces the row by the result
in one transaction, `abandon` removes it. The lease's lock is released by the kernel when
the process dies, however it dies, so a note whose lease nobody holds is a run that was
interrupted: whoever reads the store next (every listing, count or frame does) stores it as
"interrupted" at once. Notes written under another kernel (a store shared between
machines) are judged by their lease's heartbeat. The lease also carries cancel requests:
`request_cancel` asks the run's own process to stop it.

Notes written before leases existed (no `lease`) are judged the old way, by host and pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import threading
import time
import uuid
from typing import Any

from core.coordination import lease, processes

LEASE_SUFFIX = ".json"


class Notes:
    """The in-flight notes of one store file and the leases this process holds for them.

    Args:
        db_path: the store file; leases live in `<db_path>-leases/`.
    """

    def __init__(self, db_path: pathlib.Path) -> None:
        self.folder = db_path.with_name(db_path.name + "-leases")
        self.watcher = lease.Watcher()
        self._held: dict[int, lease.Lease] = {}
        self._lock = threading.Lock()

    def lease_path(self, name: str) -> pathlib.Path:
        return self.folder / f"{name}{LEASE_SUFFIX}"

    def begin(self, conn, spec_dict: dict, cancelled: threading.Event | None, owner: str = "",
              name: str = "") -> int:
        """Takes a lease and notes the run, started by `owner`, in `conn` (inside the caller's
        transaction). `name` (default: a new one) is the note's key and its lease's name."""
        name = name or uuid.uuid4().hex
        held = lease.Lease(self.lease_path(name), {"spec": spec_dict}, cancelled)
        try:
            cursor = conn.execute(
                "INSERT INTO in_flight (spec_json, host, pid, started_at, lease, owner) VALUES (?, ?, ?, ?, ?, ?)",
                (json.dumps(spec_dict, sort_keys=True), socket.gethostname(), os.getpid(), time.time(), name, owner))
        except BaseException:
            held.release()
            raise
        flight_id = int(cursor.lastrowid)
        with self._lock:
            self._held[flight_id] = held
        return flight_id

    def release(self, flight_id: int) -> None:
        """Lets go of the note's lease (after its row is gone)."""
        with self._lock:
            held = self._held.pop(int(flight_id), None)
        if held is not None:
            held.release()

    def alive(self, note: dict[str, Any]) -> bool:
        """Whether the process that wrote `note` (a row of `RunStore.in_flight()`) lives."""
        if not note.get("lease"):
            return note["host"] != socket.gethostname() or processes.alive(note["pid"])
        return self.watcher.alive(self.lease_path(note["lease"]))

    def sweep(self, notes: list[dict[str, Any]]) -> None:
        """Removes dead leases no note names (a process killed between storing its result
        and letting its lease go)."""
        named = {note.get("lease") for note in notes}
        with contextlib.suppress(OSError):
            for path in self.folder.glob(f"*{LEASE_SUFFIX}"):
                if path.name.removesuffix(LEASE_SUFFIX) not in named:
                    self.watcher.reap(path)

    def request_cancel(self, note: dict[str, Any]) -> bool:
        """Asks the note's process to cancel its run; False for a note without a lease."""
        if not note.get("lease"):
            return False
        lease.request_cancel(self.lease_path(note["lease"]))
        return True
