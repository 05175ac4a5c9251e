"""The dashboard's embedded cluster: a LocalCluster with one worker per local platform over TLS
with certificates made at start-up (no other account here can connect), no password in its
workers' environment, warm before the first run, no retries, a dead worker's run stored as
interrupted, a worker the cluster gave up on replaced, closed with its server."""

from __future__ import annotations

import functools
import os
import signal
import socket
import ssl
import threading
import time
import types
from urllib.parse import urlsplit

import dask
import psutil
import pytest
from specs import tutorial_spec

from core import access
from core.cluster import connection, stored
from core.cluster.errors import RunInterrupted
from core.spec import DatasetSpec, OptimizerSpec
from core.store.run_store import RunStore

TINY = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="scan", iterations=10, repeats=1)
LONG = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="eager", iterations=20_000, repeats=1,
                     optimizer=OptimizerSpec("adam"))


def _served_by_current_nannies(cluster) -> bool:
    """Whether the scheduler's workers are exactly those of the nannies the cluster now holds."""
    ours = {nanny.worker_address for nanny in list(cluster.local.workers.values())}
    listed = set(cluster.client.scheduler_info()["workers"])
    return bool(ours) and None not in ours and listed == ours


def test_the_embedded_cluster_is_warm_and_a_dead_worker_costs_one_run(tmp_path, monkeypatch):
    monkeypatch.setenv(access.PASSWORD_ENV, "the-team-password")
    monkeypatch.setattr(access, "_held", {})  # what start_local holds is this test's alone
    cluster = connection.start_local()
    try:
        assert access.configured() == "the-team-password"  # held by the server, out of its environment
        assert cluster.address.startswith("tls://127.0.0.1:")
        # Another local account reaches 127.0.0.1 too: without the certificates made at start-up
        # its TLS connection is refused (a plain one speaks no TLS at all).
        parts = urlsplit(cluster.address)
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw:
                with context.wrap_socket(raw) as tls:
                    tls.sendall(b"\0" * 64)
                    tls.recv(1)

        def secret(dask_worker=None):
            import os

            return os.environ.get("PLNLAB_PASSWORD")

        assert list(cluster.client.run(secret).values()) == [None]
        assert connection.local_platforms() == ["cpu"]  # no accelerator here
        facts = list(cluster.workers().values())
        assert len(facts) == 1 and facts[0]["served"] == ["cpu"]
        worker_pid = facts[0]["pid"]

        def loaded(dask_worker=None):
            import sys

            return [name for name in ("jax", "core.run.engine", "core.fit.strategies") if name in sys.modules]

        # Imports done before the first run is asked for.
        assert list(cluster.client.run(loaded).values())[0] == ["jax", "core.run.engine", "core.fit.strategies"]
        assert cluster.client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.allowed_failures) == 0

        store = RunStore(tmp_path / "runs.sqlite3")
        failure = []

        def run():
            try:
                stored.run_and_store(cluster, store, LONG)
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
                failure.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 60
        while not (cluster.board.entries("cpu") and cluster.board.entries("cpu")[0].started_at):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)
        os.kill(worker_pid, signal.SIGKILL)
        thread.join(120)
        assert failure and isinstance(failure[0], RunInterrupted), failure
        assert store.list()[0].status == "interrupted"
        # The nanny restarted the worker; the next run works.
        cluster.client.wait_for_workers(1, timeout=120)
        assert stored.run_and_store(cluster, store, TINY).status == "ok"
        workers = [facts["pid"] for facts in cluster.workers().values()]
        assert worker_pid not in workers
        # A worker that does not come back within the cluster's lost-worker-timeout (a slow
        # restart on a busy machine) makes the LocalCluster close its nanny for good; the
        # embedded cluster starts another, with this project's environment.
        with dask.config.set({"distributed.deploy.lost-worker-timeout": "0.1s"}):
            os.kill(workers[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while cluster.local.workers:  # the cluster gave up on it
                assert time.monotonic() < deadline, "the cluster never gave up on the restarting worker"
                time.sleep(0.05)
        # Served by the replacement's worker: the given-up nanny may still have restarted one,
        # which the scheduler lists until that nanny is closed (a run sent there was lost).
        deadline = time.monotonic() + 120
        while not _served_by_current_nannies(cluster):
            assert time.monotonic() < deadline, "no replacement worker served the cluster"
            time.sleep(0.1)
        assert stored.run_and_store(cluster, store, TINY).status == "ok"

        def trim(dask_worker=None):
            import os

            return os.environ.get("MALLOC_TRIM_THRESHOLD_")

        assert list(cluster.client.run(trim).values()) == [None]
        workers = [facts["pid"] for facts in cluster.workers().values()]
    finally:
        cluster.close()
    for pid in workers:  # closed with its server: no worker left behind
        with pytest.raises(psutil.NoSuchProcess):
            psutil.Process(pid).status()


def test_an_embedded_cluster_without_its_worker_asks_no_one_to_start_one():
    from types import SimpleNamespace

    from core.cluster import submit

    embedded = SimpleNamespace(embedded=True, address="tls://127.0.0.1:1")
    message = str(submit._no_worker(embedded, "cpu", 30.0))
    assert "this server's worker for cpu is not up after 30 s" in message and "dask worker" not in message


def test_the_clusters_watch_survives_the_removal_of_a_worker_it_never_saw_added():
    # A replaced worker can join and leave between two of the watch's updates: distributed alone
    # raises KeyError there, which ends the watch and later fails the cluster's close().
    from distributed.deploy.spec import SpecCluster

    local = types.SimpleNamespace(scheduler_info={"workers": {}}, workers={})
    local._update_worker_status = functools.partial(SpecCluster._update_worker_status, local)
    with pytest.raises(KeyError):
        local._update_worker_status("remove", "tls://127.0.0.1:1")
    connection._ignore_unknown_removals(local)
    local._update_worker_status("remove", "tls://127.0.0.1:1")
    assert local.scheduler_info == {"workers": {}}
