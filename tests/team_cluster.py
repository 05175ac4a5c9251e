"""A team's cluster on one machine: `dask scheduler` and `dask worker` as separate processes
over mutual TLS on 127.0.0.1 with certificates from `python -m core tls`'s maker, started as
the README says, and every process they start stopped afterwards (each runs in a session of
its own, whose whole group is killed). While it runs, this process's environment holds the
client's certificate ($PLNLAB_TLS_*), as the README tells a dashboard's operator to set it, so
that commands started from here join too."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from unittest import mock

from core.cluster import security

from project import ROOT

DASK = os.path.join(os.path.dirname(sys.executable), "dask")


def _group_kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # a nanny's worker left behind


@contextlib.contextmanager
def team_cluster(tmp_path, workers: int = 1, worker_env: dict[str, str] | None = None,
                 scheduler_env: dict[str, str] | None = None, timeout_s: float = 90.0, project_config: bool = True,
                 preload: bool = True):
    """Yield (scheduler address, [worker processes]) of a scheduler and `workers` workers,
    started with the project's Dask settings (DASK_CONFIG=core/cluster/dask.yaml), or with
    Dask's own defaults (`project_config=False`); workers without the project's preload with
    `preload=False` (a colleague's slip)."""
    certificates = tmp_path / "tls"
    if not (certificates / "ca.pem").exists():
        security.make_certificates(certificates, ["127.0.0.1", "localhost"])

    def tls(party: str) -> list[str]:
        return ["--tls-ca-file", str(certificates / "ca.pem"), "--tls-cert", str(certificates / f"{party}.pem"),
                "--tls-key", str(certificates / f"{party}.key")]

    client_env = {security.CA_ENV: str(certificates / "ca.pem"), security.CERT_ENV: str(certificates / "client.pem"),
                  security.KEY_ENV: str(certificates / "client.key")}
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": ROOT}
    if project_config:
        env["DASK_CONFIG"] = os.path.join(ROOT, "core", "cluster", "dask.yaml")
    logs = tmp_path / "cluster-logs"
    logs.mkdir(exist_ok=True)
    started: list[subprocess.Popen] = []
    try:
        started.append(subprocess.Popen(
            [DASK, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file), *tls("scheduler")],
            cwd=ROOT, env={**env, **(scheduler_env or {})}, stdout=open(logs / "scheduler.log", "w"),
            stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + timeout_s
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            if time.monotonic() > deadline or started[0].poll() is not None:
                raise RuntimeError(f"the scheduler did not start: {(logs / 'scheduler.log').read_text()[-2000:]}")
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for index in range(workers):
            started.append(subprocess.Popen(
                [DASK, "worker", address, "--nthreads", "1", "--no-dashboard", "--name", f"w{index}",
                 "--memory-limit", "6GiB", *(["--preload", "core.cluster.worker_setup"] if preload else []),
                 *tls("worker")],
                cwd=ROOT, env={**env, **(worker_env or {})}, stdout=open(logs / f"worker{index}.log", "w"),
                stderr=subprocess.STDOUT, start_new_session=True))
        with mock.patch.dict(os.environ, client_env):
            yield address, started[1:]
    finally:
        for process in reversed(started):
            _group_kill(process)
