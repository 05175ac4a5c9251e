"""Fits on a team's cluster: a real `dask scheduler` and `dask worker` as separate processes over
mutual TLS on 127.0.0.1, joined as the dashboard and the command line join one (PLNLAB_SCHEDULER,
--scheduler, PLNLAB_TLS_*). Tiny problems: what is tested is the path, not the fit. Who is
refused is in test_cluster_security.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from specs import tutorial_spec

from core.cluster import connection, stored, submit, tasks
from core.cluster.errors import RunInterrupted
from core.coordination import under_way
from core.run.progress import Cancelled
from core.spec import DatasetSpec, FitSpec, OptimizerSpec
from core.store.run_store import RunStore

from project import ROOT
from team_cluster import team_cluster

TINY = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="scan", iterations=10, repeats=1)
# Long enough to be killed or cancelled mid-run, well inside the time budget.
LONG = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="eager", iterations=20_000, repeats=1,
                     optimizer=OptimizerSpec("adam"))


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    with team_cluster(tmp_path_factory.mktemp("team")) as (address, _):
        cluster = connection.join(address)
        cluster.client.wait_for_workers(1, timeout=120)
        yield cluster
        cluster.close()


def _worker(cluster) -> dict:
    facts = list(cluster.workers().values())
    assert len(facts) == 1 and isinstance(facts[0], dict), facts
    return facts[0]


def test_a_fit_runs_on_a_worker_and_its_result_is_stored_by_the_submitter(team, tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    phases = []
    result = stored.run_and_store(team, store, TINY, on_progress=lambda p: phases.append(p.phase))
    worker = _worker(team)
    assert result.status == "ok" and result.iterations_run == 10
    assert result.worker == f"{worker['address']} on {worker['host']}"
    assert store.get(result.id).worker == result.worker  # the store names who ran it
    assert {"data", "compile", "first_call", "done"} <= set(phases)
    assert worker["served"] == ["cpu"] and worker["kinds"]["cpu"].endswith("cores")
    assert store.in_flight() == []


def test_the_live_elbo_crosses_processes(team, tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    spec = tutorial_spec(dataset=TINY.dataset, strategy="eager", iterations=60, repeats=1)
    elbos = []
    result = stored.run_and_store(team, store, spec, on_progress=lambda p: p.elbo is None or elbos.append(p.elbo))
    assert len(elbos) >= 10
    assert elbos[-1] == pytest.approx(result.elbo[-1], rel=1e-6)  # the last report is the last iteration


def test_cancel_stops_the_fit_on_the_worker_and_stores_nothing(team, tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    cancel = threading.Event()

    def on_progress(progress):
        if progress.elbo is not None:
            cancel.set()  # the fit is running on the worker: stop it

    started = time.monotonic()
    with pytest.raises(Cancelled):
        stored.run_and_store(team, store, LONG, on_progress=on_progress, cancel=cancel)
    assert time.monotonic() - started < 30  # the whole eager run would take minutes
    assert store.count() == 0 and store.in_flight() == []
    # The worker is free again at once: a fit that follows is not queued behind the cancelled one.
    follow = time.monotonic()
    assert stored.run_and_store(team, store, TINY).status == "ok"
    assert time.monotonic() - follow < 20


def test_finished_and_cancelled_tasks_leave_no_event_on_the_scheduler(team, tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    cancel = threading.Event()
    with pytest.raises(Cancelled):
        stored.run_and_store(team, store, LONG, cancel=cancel,
                             on_progress=lambda progress: progress.elbo is None or cancel.set())
    assert stored.run_and_store(team, store, TINY).status == "ok"

    def ours(dask_scheduler=None):
        extension = dask_scheduler.extensions["events"]
        return sorted(str(name) for name in extension._events if str(name).startswith("plnlab-"))

    # Each task's cancel watcher waits on its event; the task's end wakes it and deletes both events.
    for _ in range(50):
        if not (left := team.client.run_on_scheduler(ours)):
            break
        time.sleep(0.1)
    assert left == []


def test_a_task_refused_on_the_worker_raises_here(team):
    with pytest.raises(KeyError, match="unknown pitfall"):
        submit.call(team, tasks.pitfall, "nope", platform="cpu", label="a pitfall", owner="test")


def test_a_fit_refused_on_the_worker_raises_its_refusal_here_and_is_not_logged_as_a_failure(team):
    # Too big for the worker's memory: the user's answer, not a failed computation, so the
    # worker returns it as plain data instead of logging "Compute Failed" with a traceback.
    from core.spec import SpecError

    def failures() -> int:
        return sum("Compute Failed" in line for worker in team.client.get_worker_logs().values() for _, line in worker)

    huge = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=10_000_000, p=2_000), strategy="scan",
                         precision="float64")
    before = failures()  # other tests of this module's cluster fail tasks on purpose
    with pytest.raises(SpecError, match="not enough memory: this fit needs about"):
        submit.call(team, tasks.fit, huge, None, "test", False, 300.0, platform="cpu", label="too big", owner="test")
    assert failures() == before


def test_the_scheduler_and_workers_run_with_the_projects_settings(team):
    assert team.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures) == 0

    def environment(dask_worker=None):
        import os

        return {name: os.environ.get(name) for name in ("MALLOC_TRIM_THRESHOLD_", "OPENBLAS_NUM_THREADS")}

    assert list(team.client.run(environment).values())[0] == {"MALLOC_TRIM_THRESHOLD_": None,
                                                              "OPENBLAS_NUM_THREADS": "1"}


def test_the_worker_threads_match_the_command_line(team):
    def threads(dask_worker=None):
        import torch

        return os.environ.get("OMP_NUM_THREADS"), os.environ.get("MKL_NUM_THREADS"), torch.get_num_threads()

    on_worker = list(team.client.run(threads).values())[0]
    command_line = subprocess.run(
        [sys.executable, "-c", "from core.machine.host import native_settings; native_settings(); import os, torch; "
                               "print(torch.get_num_threads())"],
        cwd=ROOT, capture_output=True, text=True, check=True, env={k: v for k, v in os.environ.items()
                                                                   if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    assert on_worker[:2] == (None, None)  # the nanny's limits of 1 are undone
    assert on_worker[2] == int(command_line.stdout.strip())


def test_the_command_line_runs_on_the_scheduler_and_stores_here(team, tmp_path):
    db = tmp_path / "runs.sqlite3"
    done = subprocess.run(
        [sys.executable, "-m", "core", "run", "--scheduler", team.address, "--dataset", "simulated", "--n", "40",
         "--p", "5", "--iterations", "10", "--repeats", "1", "--json", "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["worker"].startswith("tls://127.0.0.1:") and run["status"] == "ok"
    assert RunStore(db).get(run["id"]).worker == run["worker"]


def test_a_dead_scheduler_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "core", "run", "--scheduler", "tcp://127.0.0.1:9", "--dataset", "simulated",
         "--db", str(tmp_path / "runs.sqlite3")], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3s"})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no Dask scheduler answered at tcp://127.0.0.1:9" in done.stderr


def test_a_killed_worker_costs_its_own_run_and_the_command_line_says_so(tmp_path):
    # A scheduler at Dask's defaults (it retries a task whose worker died): the task refuses
    # to run a second time, so the run is stored as interrupted all the same.
    db = tmp_path / "runs.sqlite3"
    with team_cluster(tmp_path, project_config=False) as (address, _):
        cluster = connection.join(address)
        try:
            cluster.client.wait_for_workers(1, timeout=120)
            victim = _worker(cluster)["pid"]
            command = subprocess.Popen(
                [sys.executable, "-m", "core", "run", "--scheduler", address, "--dataset", "simulated", "--n", "40",
                 "--p", "5", "--strategy", "eager", "--optimizer", "adam", "--iterations", "20000", "--repeats", "1",
                 "--tol", "0", "--db", str(db)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            _wait_for(lambda: RunStore(db).in_flight() and cluster.board.entries("cpu")
                      and cluster.board.entries("cpu")[0].started_at, 120)
            # One key for the run under way: its note in the command line's store, and its task on the board.
            (note,) = RunStore(db).in_flight()
            assert cluster.board.entries("cpu")[0].run == under_way.batch_of(note["lease"])
            time.sleep(1.0)  # into the first call
            os.kill(victim, signal.SIGKILL)
            _, err = command.communicate(timeout=120)
            assert command.returncode == 3, err
            last = err.strip().splitlines()[-1]
            assert last.startswith("python -m core: interrupted: the worker process running it died")
            runs = RunStore(db).list()
            assert [r.status for r in runs] == ["interrupted"] and f"pid {victim}" in runs[0].error
            # The nanny started a fresh worker, and the next run works.
            cluster.client.wait_for_workers(1, timeout=120)
            _wait_for(lambda: _worker(cluster)["pid"] != victim, 120)
            assert stored.run_and_store(cluster, RunStore(db), TINY).status == "ok"
        finally:
            cluster.close()


def test_a_killed_worker_costs_only_the_run_it_ran_not_those_queued_behind_it(team, tmp_path):
    """With no retries (allowed-failures 0), Dask fails every task the dead worker held, the
    ones only waiting in its queue too: those never ran, and are sent again."""
    store = RunStore(tmp_path / "runs.sqlite3")
    victim = _worker(team)["pid"]
    outcomes: dict[str, object] = {}

    def session(name: str, spec: FitSpec) -> None:
        try:
            outcomes[name] = stored.run_and_store(team, store, spec).status
        except RunInterrupted as lost:
            outcomes[name] = lost.result.status

    running = threading.Thread(target=session, args=("running", LONG))
    running.start()
    _wait_for(lambda: team.board.entries("cpu")[0].started_at, 120)
    queued = [threading.Thread(target=session, args=(f"queued {i}", TINY)) for i in range(2)]
    for thread in queued:
        thread.start()
    _wait_for(lambda: len(team.board.entries("cpu")) == 3, 60)
    time.sleep(1.0)  # into the first call; the two others wait behind it
    os.kill(victim, signal.SIGKILL)
    for thread in (running, *queued):
        thread.join(300)
    assert outcomes == {"running": "interrupted", "queued 0": "ok", "queued 1": "ok"}
    assert [r.status for r in store.list()].count("interrupted") == 1


def _wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (AssertionError, KeyError, IndexError):
            pass
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def test_a_worker_is_recycled_after_its_bound_without_losing_a_run(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    with team_cluster(tmp_path, worker_env={"PLNLAB_WORKER_MAX_RUNS": "2"}) as (address, _):
        cluster = connection.join(address)
        try:
            cluster.client.wait_for_workers(1, timeout=120)
            first = _worker(cluster)["pid"]
            results = [stored.run_and_store(cluster, store, TINY) for _ in range(3)]
            assert [r.status for r in results] == ["ok"] * 3
            assert results[0].worker == results[1].worker != results[2].worker
            assert _worker(cluster)["pid"] != first
            assert not [r for r in store.list() if r.status == "interrupted"]
        finally:
            cluster.close()


def test_a_run_interrupted_is_a_stored_run_with_its_reason(team, tmp_path):
    # What the page and the command line show: the error names the worker and says what happened.
    store = RunStore(tmp_path / "runs.sqlite3")
    victim = _worker(team)
    cancel = threading.Event()
    failure = []

    def run():
        try:
            stored.run_and_store(team, store, LONG, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    _wait_for(lambda: team.board.entries("cpu")[0].started_at, 60)
    time.sleep(1.0)
    os.kill(victim["pid"], signal.SIGKILL)
    thread.join(120)
    assert failure and isinstance(failure[0], RunInterrupted), failure
    record = failure[0].result
    assert record.status == "interrupted" and victim["address"] in record.error
    assert store.get(record.id).status == "interrupted"
    team.client.wait_for_workers(1, timeout=120)
