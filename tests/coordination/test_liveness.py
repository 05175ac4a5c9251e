"""Liveness that cannot lie: queue tickets and in-flight runs live exactly as long as their
owners, judged by a lock the kernel releases on death (or, from another machine, by a
heartbeat that stops), never by a process id that a container or a reboot reuses."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from specs import tutorial_spec

from core.coordination import lease
from core.coordination.device_queue import DeviceQueue
from core.run.progress import Cancelled
from core.store.run_store import RunStore

from project import ROOT

# A guard against a hang, not a timing claim: a dead owner's ticket frees the queue within a
# heartbeat or two; a live-looking ghost would block it forever.
GUARD_S = 60.0


def _hold_or_fail(queue: DeviceQueue, label: str) -> float:
    """Takes and releases the cpu queue; fails if it is still blocked after GUARD_S."""
    give_up = threading.Event()
    timer = threading.Timer(GUARD_S, give_up.set)
    timer.start()
    try:
        with queue.hold("cpu", label, "test", cancel=give_up) as waited:
            return waited
    except Cancelled:
        pytest.fail(f"the queue was still blocked after {GUARD_S:.0f} s: {queue.entries('cpu')}")
    finally:
        timer.cancel()


def _env(tmp_path) -> dict:
    return dict(os.environ, PLNLAB_DB=str(tmp_path / "runs.sqlite3"), PLNLAB_JAX_CACHE=str(tmp_path / "jax"),
                PLNLAB_QUEUE_DIR=str(tmp_path / "queue"))


def _children(pid: int) -> list[int]:
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux's unshare is not installed")
def test_a_run_killed_as_pid_1_of_its_own_namespace_frees_the_queue_and_is_interrupted(tmp_path):
    env = _env(tmp_path)
    store = RunStore(env["PLNLAB_DB"])  # open before the kill, as a server's store is
    queue = DeviceQueue(env["PLNLAB_QUEUE_DIR"])
    # As in a container: the run is PID 1 of its own PID namespace, so its ticket and note say pid 1.
    command = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-m", "core", "run",
               "--strategy", "eager", "--iterations", "100000", "--repeats", "1", "--tol", "0"]
    victim = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        line = ""
        while "first_call" not in line:
            line = victim.stderr.readline()
            if not line:
                pytest.skip(f"cannot run in a new PID namespace here: {victim.stderr.read()[-300:]}")
        (ticket,) = queue.entries("cpu")
        (note,) = store.in_flight()
        assert ticket.pid == note["pid"] == 1 and ticket.running
        (inner,) = _children(victim.pid)
        os.kill(inner, signal.SIGKILL)  # the namespace's PID 1, and so everything in it
        victim.wait(30)
    finally:
        victim.kill()
    _hold_or_fail(queue, "next run")
    (interrupted,) = store.list()  # the same store object: no reopening needed
    assert interrupted.status == "interrupted" and interrupted.strategy == "eager"
    assert "pid 1 on" in interrupted.error
    assert store.in_flight() == []


def _foreign_ticket(folder: pathlib.Path, name: str) -> pathlib.Path:
    """A ticket as a process on another machine wrote it, holding the device."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({
        "ticket": name, "platform": "cpu", "label": "scan · oaks x1000 · float32", "owner": "command line",
        "host": "elsewhere", "pid": os.getpid(), "enqueued_at": 1.0, "started_at": 2.0,
        "kernel": "another-machine"}))
    os.utime(path, (1.0, 1.0))  # last heartbeat long ago
    return path


def test_a_ticket_from_a_crashed_machine_stops_blocking_once_its_heartbeat_stands_still(tmp_path):
    queue = DeviceQueue(tmp_path / "queue", expiry_s=0.5)
    ghost = _foreign_ticket(tmp_path / "queue" / "cpu", "00000000000000000001-ghost")
    # Seen for the first time, it may be a live run elsewhere (clocks differ between machines).
    assert [t.host for t in queue.entries("cpu")] == ["elsewhere"]
    _hold_or_fail(queue, "after the ghost")
    assert not ghost.exists() and queue.entries("cpu") == []


def test_a_ticket_from_another_machine_whose_heartbeat_moves_keeps_its_place(tmp_path):
    queue = DeviceQueue(tmp_path / "queue", expiry_s=0.5)
    alive = _foreign_ticket(tmp_path / "queue" / "cpu", "00000000000000000001-alive")
    stop = threading.Event()

    def beat():
        while not stop.wait(0.1):
            os.utime(alive)

    beating = threading.Thread(target=beat)
    beating.start()
    try:
        deadline = time.monotonic() + 2.0  # four expiries
        while time.monotonic() < deadline:
            assert [t.host for t in queue.entries("cpu")] == ["elsewhere"]
            time.sleep(0.05)
    finally:
        stop.set()
        beating.join()
    _hold_or_fail(queue, "after it stopped beating")


def test_a_lease_is_judged_by_its_lock_not_by_its_pid(tmp_path):
    path = tmp_path / "leases" / "one.json"
    watcher = lease.Watcher()
    with lease.Lease(path, {"what": "a run"}):
        assert watcher.alive(path) and not watcher.reap(path)
        info = lease.read(path)
        assert info["what"] == "a run" and info["pid"] == os.getpid() and info["kernel"] == lease.kernel_id()
    assert not path.exists()
    # A lease left by a process that died: its file stays, its lock is gone.
    code = (f"import sys, os; sys.path.insert(0, {str(ROOT)!r}); from core.coordination import lease; "
            f"lease.Lease({str(path)!r}, {{}}); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert path.exists() and not watcher.alive(path)
    assert watcher.reap(path) and not path.exists()


def test_an_in_flight_note_from_another_machine_is_interrupted_once_its_heartbeat_stands_still(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    store._notes.watcher.expiry_s = 0.3
    flight = store.begin(tutorial_spec().to_dict())
    (note,) = store.in_flight()
    path = store._notes.lease_path(note["lease"])
    store._notes.release(flight)  # as if written elsewhere: the row stays, the lease is rewritten
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "kernel": "another-machine"}))
    assert store.list() == []  # first sight: it may be running there
    time.sleep(0.6)
    (interrupted,) = store.list()
    assert interrupted.status == "interrupted" and store.in_flight() == []
