"""Fault injection: processes killed with SIGKILL mid-run and mid-write lose no stored run.

Each test kills a real process at a real moment and then reopens the store as the next
server or command would: SQLite's integrity check passes, every run stored before is
there whole, and a run that was killed shows as "interrupted".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
from specs import tutorial_spec

from core.run import engine
from core.spec import DatasetSpec
from core.store.run_store import RunStore

from project import ROOT


def _env(tmp_path) -> dict:
    return dict(os.environ, PLNLAB_DB=str(tmp_path / "runs.sqlite3"), PLNLAB_JAX_CACHE=str(tmp_path / "jax"),
                PLNLAB_QUEUE_DIR=str(tmp_path / "queue"))


def _wait_until(condition, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _tiny_runs(store: RunStore, count: int) -> list[int]:
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="jit_step", iterations=5, repeats=1)
    return [store.add(engine.run(spec)) for _ in range(count)]


def test_kill_during_a_run_leaves_earlier_runs_and_an_interrupted_one(tmp_path):
    env = _env(tmp_path)
    store = RunStore(env["PLNLAB_DB"])
    earlier = _tiny_runs(store, 2)
    # eager at oaks x1 takes ~15 ms an iteration: 100,000 iterations would run for minutes.
    victim = subprocess.Popen([sys.executable, "-m", "core", "run", "--strategy", "eager", "--iterations",
                               "100000", "--repeats", "1", "--tol", "0"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_until(lambda: store.in_flight())
        # Kill it inside the fit, not while it still loads: its stderr reports the phase.
        line = ""
        while "first_call" not in line:
            line = victim.stderr.readline()
            assert line, "the run ended before it could be killed"
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        victim.kill()
    after = RunStore(env["PLNLAB_DB"])  # as the next start does
    assert after.integrity_ok()
    assert after.in_flight() == []
    runs = {run.id: run for run in after.list(with_elbo=True)}
    assert all(runs[i].status == "ok" and len(runs[i].elbo) == 5 for i in earlier)
    (interrupted,) = [run for run in runs.values() if run.status == "interrupted"]
    assert interrupted.strategy == "eager" and interrupted.iterations == 100000 and interrupted.n == 116
    assert f"pid {victim.pid}" in interrupted.error and interrupted.elbo == []
    listed = subprocess.run([sys.executable, "-m", "core", "list"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and "interrupted" in listed.stdout


WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from core.store.run_store import RunStore
    store = RunStore({db!r})
    template = store.get({template_id})
    template.elbo = [-1.0 - i for i in range(200_000)]  # 1.6 MB a run: writes take a while
    template.iterations = template.iterations_run = template.spec["iterations"] = 200_000
    template.final_elbo = template.elbo[-1]
    template.per_iter_ms = 1e3 * template.run_s / template.iterations_run
    while True:
        template.id = 0
        template.created_at = 0.0
        store.add(template)
        print(template.id, flush=True)
""")


def test_kill_during_store_writes_keeps_every_committed_run_whole(tmp_path):
    env = _env(tmp_path)
    store = RunStore(env["PLNLAB_DB"])
    (template_id,) = _tiny_runs(store, 1)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=ROOT, db=env["PLNLAB_DB"], template_id=template_id)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        acknowledged = [int(writer.stdout.readline()) for _ in range(5)]
        time.sleep(0.013)  # land somewhere inside the next write
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
    finally:
        writer.kill()
    after = RunStore(env["PLNLAB_DB"])
    assert after.integrity_ok()
    runs = after.list(with_elbo=True)
    ids = {run.id for run in runs}
    assert {template_id, *acknowledged} <= ids
    for run in runs:
        if run.id != template_id:
            assert len(run.elbo) == 200_000 and run.elbo[-1] == -200_000.0  # whole, never half-written
    frame = after.elbo_frame(sorted(ids))
    assert np.all(frame.groupby("run_id").size().drop(template_id) == 200_000)


KILLED_INSIDE = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from core.store.run_store import RunStore
    store = RunStore({db!r})
    insert, seen = RunStore._insert, []

    def insert_then_die(self, conn, record):
        run_id = insert(self, conn, record)
        seen.append(run_id)
        if len(seen) == {kill_after}:  # inside the open transaction, after a row was written
            os.kill(os.getpid(), signal.SIGKILL)
        return run_id

    RunStore._insert = insert_then_die
    {action}
""")


def _killed_inside(tmp_path, action: str, kill_after: int) -> RunStore:
    env = _env(tmp_path)
    code = KILLED_INSIDE.format(root=ROOT, db=env["PLNLAB_DB"], action=action, kill_after=kill_after)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=120)
    assert done.returncode == -signal.SIGKILL
    return RunStore(env["PLNLAB_DB"])


def test_kill_inside_an_import_transaction_stores_none_of_it(tmp_path):
    source = RunStore(tmp_path / "source.sqlite3")
    run = engine.run(tutorial_spec(dataset=DatasetSpec(kind="simulated", n=40, p=5), strategy="jit_step",
                                   iterations=5, repeats=1))
    for i in range(400):
        run.id, run.created_at = 0, run.timed_end + 1e-3 * (i + 1)  # distinct runs, each stored after its window
        source.add(run)
    exported = tmp_path / "runs.json"
    source.export(exported)
    target = RunStore(_env(tmp_path)["PLNLAB_DB"])
    earlier = _tiny_runs(target, 1)
    after = _killed_inside(tmp_path, f"store.import_file({str(exported)!r})", kill_after=200)
    assert after.integrity_ok()
    assert [r.id for r in after.list()] == earlier  # 200 rows were written, none committed


def test_kill_inside_a_run_write_transaction_stores_nothing_of_it(tmp_path):
    store = RunStore(_env(tmp_path)["PLNLAB_DB"])
    earlier = _tiny_runs(store, 2)
    after = _killed_inside(tmp_path, f"r = store.get({earlier[0]}); r.id = 0; store.add(r)", kill_after=1)
    assert after.integrity_ok()
    assert sorted(r.id for r in after.list()) == sorted(earlier)
    assert all(len(r.elbo) == 5 for r in after.list(with_elbo=True))


def test_a_run_whose_process_died_stays_its_owners(tmp_path):
    """A server restart must not take a run from the user who started it: the note carries
    its owner, and the interrupted run stored from it is theirs."""
    db = tmp_path / "runs.sqlite3"
    RunStore(db)
    noted = textwrap.dedent(f"""
        import sys, time
        from core.spec import FitSpec
        from core.store.run_store import RunStore
        RunStore({str(db)!r}).begin(FitSpec().to_dict(), owner="user:alice@example.com")
        print("noted", flush=True)
        time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", noted], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "noted"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        process.kill()
    (run,) = RunStore(db).list()
    assert run.status == "interrupted" and run.owner == "user:alice@example.com"
    assert RunStore(db).owned([run.id], "user:alice@example.com") == {run.id}
