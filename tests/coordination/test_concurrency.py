"""Concurrency: 4 command-line processes and 4 dashboard sessions start runs at once on one
device; every run is stored, no exception, and the timed windows never overlap, though the
sessions' runs go to the cluster's worker and the commands run in processes of their own:
they share the host's device queue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import streamlit as st
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

from core.store.run_store import RunStore

from project import ROOT

APP = os.path.join(ROOT, "app.py")


# CPython 3.11's ast.parse is not safe in several threads at once ("AST constructor recursion
# depth mismatch"). A server's sessions share one script cache, which compiles a page under its
# lock; AppTest gives each run a cache of its own, so four sessions here parsed the pages at
# once whenever their runs lined up. One compile at a time, as on a server.
_COMPILE = threading.Lock()
_get_bytecode = ScriptCache.get_bytecode


def _one_compile_at_a_time(cache: ScriptCache, script_path: str):
    with _COMPILE:
        return _get_bytecode(cache, script_path)


# The sessions set up one at a time (AppTest's widgets are found through its process-wide
# runtime: set up together, a session once came back without its Run button) and click Run a
# quarter second apart, well before the first fit has released the device, so that the runs
# themselves still contend for it.
_SETUP = threading.Lock()
STAGGER_S = 0.25


def _session(errors: list, index: int, ready: threading.Barrier) -> None:
    try:
        with _SETUP:
            at = _set_up(index)
        ready.wait(120)
        time.sleep(STAGGER_S * index)
        at.button(key="run_go").click().run()
        errors.extend(f"session {index}: {e.value}" for e in [*at.exception, *at.error])
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(f"session {index}: {type(exc).__name__}: {exc}")


def _set_up(index: int) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
    at.sidebar.number_input(key="sb_sim_n").set_value(40 + index)  # a spec of its own, not yet stored
    at.sidebar.number_input(key="sb_sim_p").set_value(5)
    at.sidebar.number_input(key="sb_iterations").set_value(10)
    at.sidebar.number_input(key="sb_repeats").set_value(2)
    at.pills(key="run_strategies").set_value(["jit_step"])
    return at.run()


# AppTest keeps one process-wide Runtime that each session's run sets up and tears down:
# with four sessions in threads, a session's cleanup may find it already gone and log it
# from its script thread after the script has finished. The assertions below check what
# every session stored and showed.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_four_cli_processes_and_four_sessions_take_turns(tmp_path, monkeypatch, cluster):
    def queue_folder(dask_worker=None):
        from core.coordination.device_queue import default_queue_dir

        return str(default_queue_dir())

    # The host's queue, as the worker found it (every process of one user shares it).
    queue = list(cluster.client.run(queue_folder).values())[0]
    env = {"PLNLAB_DB": str(tmp_path / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(tmp_path / "jax"),
           "PLNLAB_QUEUE_DIR": queue}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(ScriptCache, "get_bytecode", _one_compile_at_a_time)
    st.cache_resource.clear()
    processes = [subprocess.Popen(
        [sys.executable, "-m", "core", "run", "--dataset", "simulated", "--n", str(60 + i), "--p", "5",
         "--strategy", "scan", "--iterations", "10", "--repeats", "2", "--json"],
        cwd=ROOT, env=dict(os.environ, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(4)]
    errors: list[str] = []
    ready = threading.Barrier(4)
    sessions = [threading.Thread(target=_session, args=(errors, i, ready)) for i in range(4)]
    for thread in sessions:
        thread.start()
    outputs = [process.communicate(timeout=600) for process in processes]
    for thread in sessions:
        thread.join(600)
    st.cache_resource.clear()
    assert not errors, errors
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["queue_wait_s"] >= 0
    runs = RunStore(env["PLNLAB_DB"]).list()
    assert len(runs) == 8 and all(run.status == "ok" for run in runs)
    assert sorted(run.strategy for run in runs) == ["jit_step"] * 4 + ["scan"] * 4
    windows = sorted((run.timed_start, run.timed_end) for run in runs)
    assert all(start < end for start, end in windows)
    for (_, end), (next_start, _) in zip(windows, windows[1:]):
        assert end <= next_start, windows  # one timed section at a time on the device
    assert sum(run.queue_wait_s > 0.05 for run in runs) >= 4  # most of them had to wait their turn
