"""Two processes, one fit: `python -m core run --distributed` over loopback with CPU collectives.

Each process gets 2 simulated CPU devices, so the mesh spans 4 devices in 2 processes
and every all-reduce crosses a process boundary (gloo over TCP on 127.0.0.1). The result
must be the 1-process, 4-device sharded fit, and only process 0 may store it.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from core.machine import distributed
from core.spec import SpecError

from project import ROOT
from xla_settings import with_device_count

# 50 rows over 4 devices leaves 2 padding rows, held by process 1.
FIT = ["run", "--dataset", "simulated", "--n", "50", "--p", "8", "--d", "2", "--seed", "4",
       "--iterations", "40", "--tol", "0", "--precision", "float64", "--repeats", "1", "--json"]
TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(args, devices, env):
    env = dict(os.environ, **env, XLA_FLAGS=with_device_count(devices),
               OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "core", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(processes):
    """(returncode, last stdout line as JSON or None, stderr) per process; kills all on timeout."""
    try:
        outputs = [process.communicate(timeout=TIMEOUT_S) for process in processes]
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        raise
    found = []
    for process, (stdout, stderr) in zip(processes, outputs):
        lines = stdout.strip().splitlines()
        found.append((process.returncode, json.loads(lines[-1]) if lines else None, stderr))
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("distributed")
    shared = {"PLNLAB_DB": str(folder / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(folder / "jax")}
    alone = {"PLNLAB_DB": str(folder / "alone.sqlite3"), "PLNLAB_JAX_CACHE": str(folder / "jax-alone")}
    coordinator = f"127.0.0.1:{_free_port()}"
    group = [_start(FIT + ["--distributed", "--coordinator", coordinator, "--num-processes", "2",
                           "--process-id", str(rank)], 2, shared) for rank in (0, 1)]
    reference = [_start(FIT + ["--strategy", "sharded"], 4, alone), _start(FIT + ["--strategy", "scan"], 1, alone)]
    results = _finish(group + reference)
    listed = subprocess.run([sys.executable, "-m", "core", "list", "--json"], cwd=ROOT, capture_output=True,
                            text=True, env=dict(os.environ, **shared), timeout=60)
    return results, json.loads(listed.stdout.strip().splitlines()[-1])


def test_two_processes_fit_like_one(runs):
    (first, second, alone, scan), _ = runs
    for returncode, result, stderr in (first, second, alone, scan):
        assert returncode == 0, stderr[-3000:]
        assert result["status"] == "ok" and len(result["elbo"]) == 40
    assert first[1]["devices"] == second[1]["devices"] == alone[1]["devices"] == 4
    assert first[1]["strategy"] == "sharded" and first[1]["n"] == 50
    # Same computation, same collectives, same order: the same numbers.
    assert first[1]["elbo"] == second[1]["elbo"]
    assert first[1]["final_elbo"] == pytest.approx(alone[1]["final_elbo"], rel=1e-12)
    assert first[1]["final_elbo"] == pytest.approx(scan[1]["final_elbo"], rel=1e-9)


def test_only_process_zero_stores_the_run(runs):
    (first, second, _, _), stored = runs
    assert [run["id"] for run in stored] == [first[1]["id"]] and first[1]["id"] >= 1
    assert second[1]["id"] == 0  # computed and printed, not stored
    assert "not stored (process 0 stores the run)" in second[2]


@pytest.mark.parametrize("options, message", [
    (("127.0.0.1:1234", 2, None), "together"),
    (("localhost", 2, 0), "HOST:PORT"),
    (("127.0.0.1:70000", 2, 0), "HOST:PORT"),
    (("127.0.0.1:1234", 0, 0), "num-processes"),
    (("127.0.0.1:1234", 2, 2), "process-id must be between 0 and 1"),
])
def test_bad_distributed_options_are_clear_errors(options, message):
    with pytest.raises(SpecError, match=message):
        distributed.check_options(*options)


@pytest.mark.parametrize("args, message", [
    (["--distributed", "--strategy", "scan"], "--distributed runs the sharded strategy"),
    (["--coordinator", "127.0.0.1:1234"], "need --distributed"),
    (["--distributed", "--coordinator", "127.0.0.1", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
])
def test_cli_rejects_bad_distributed_runs_in_one_line(args, message, tmp_path):
    done = subprocess.run([sys.executable, "-m", "core", "run", "--iterations", "2", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PLNLAB_DB=str(tmp_path / "runs.sqlite3")))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr
