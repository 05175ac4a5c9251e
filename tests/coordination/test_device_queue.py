"""The host-wide device queue: first come first served, visible, cancellable, crash-proof."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from core.coordination.device_queue import DeviceQueue
from core.run.progress import Cancelled

from project import ROOT


@pytest.fixture
def queue(tmp_path):
    return DeviceQueue(tmp_path / "queue")


def _wait_until(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_waiters_are_served_in_arrival_order_one_at_a_time(queue):
    order, inside = [], []
    release = threading.Event()

    def worker(name):
        with queue.hold("cpu", name, "test"):
            inside.append(name)
            assert len(inside) == 1, inside  # nobody else holds the device
            order.append(name)
            if name == "first":
                release.wait(10)
            inside.remove(name)

    first = threading.Thread(target=worker, args=("first",))
    first.start()
    _wait_until(lambda: order == ["first"])
    others = []
    for name in ("second", "third", "fourth"):
        thread = threading.Thread(target=worker, args=(name,))
        thread.start()
        others.append(thread)
        _wait_until(lambda n=len(others): len(queue.entries("cpu")) == 1 + n)
    entries = queue.entries("cpu")
    assert [t.label for t in entries] == ["first", "second", "third", "fourth"]
    assert entries[0].running and not any(t.running for t in entries[1:])
    assert "running for" in entries[0].describe() and "waiting for" in entries[1].describe()
    release.set()
    for thread in (first, *others):
        thread.join(20)
    assert order == ["first", "second", "third", "fourth"]
    assert queue.entries("cpu") == []


def test_the_wait_reports_who_is_ahead_and_can_be_cancelled(queue):
    cancel = threading.Event()
    seen = []

    def on_wait(ahead, waited):
        seen.append(([t.label for t in ahead], waited))
        if len(seen) >= 3:
            cancel.set()

    with queue.hold("cpu", "holder", "test"):
        with pytest.raises(Cancelled):
            with queue.hold("cpu", "waiter", "test", on_wait=on_wait, cancel=cancel):
                pytest.fail("a cancelled waiter must not get the device")
        assert [t.label for t in queue.entries("cpu")] == ["holder"]  # the waiter's ticket is gone
    assert seen[0][0] == ["holder"] and seen[-1][1] >= seen[0][1]
    with queue.hold("cpu", "next", "test") as waited:  # the device is free again at once
        assert waited < 1.0


def test_platforms_queue_apart(queue):
    with queue.hold("cpu", "on cpu", "test"), queue.hold("gpu", "on gpu", "test") as waited:
        assert waited < 1.0


HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from core.coordination.device_queue import DeviceQueue
    with DeviceQueue({folder!r}).hold("cpu", "doomed", "test"):
        print("holding", flush=True)
        time.sleep(600)
""")


def test_a_holder_killed_with_sigkill_frees_the_device(queue):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=ROOT, folder=str(queue.directory))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert [t.label for t in queue.entries("cpu")] == ["doomed"]
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        with queue.hold("cpu", "survivor", "test") as waited:
            assert waited < 5.0
            assert [t.label for t in queue.entries("cpu")] == ["survivor"]  # the dead ticket was removed
    finally:
        holder.kill()


def test_a_ticket_file_written_halfway_is_ignored(queue):
    folder = queue.directory / "cpu"
    folder.mkdir(parents=True)
    (folder / "0-broken.json").write_text('{"ticket": "0-broken", "plat')
    (folder / "1-foreign.json").write_text(json.dumps({"unexpected": 1}))
    with queue.hold("cpu", "mine", "test") as waited:
        assert waited < 1.0
