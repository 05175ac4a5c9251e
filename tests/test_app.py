"""The dashboard's Run, Compare and Scaling pages under Streamlit's AppTest.

Each test gets its own run store and JAX cache (set before the AppTest is created) and a
cleared `st.cache_resource`, so sessions and stores never leak between tests. Real fits
use tiny problems (simulated 40 x 5, 10 iterations, 1 repeat).
"""

from __future__ import annotations

import pathlib
import time

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.data import DataError
from core.result import RunResult
from core.spec import DatasetSpec, FitSpec
from core.store import RunStore

APP = str(pathlib.Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120
CHART = "vega_lite_chart"  # the element type of st.altair_chart in Streamlit 1.67


@pytest.fixture
def store(tmp_path, monkeypatch, routed_like_the_server) -> RunStore:
    """An empty store at $PLNLAB_DB, and an AppTest that routes like the server."""
    monkeypatch.setenv("PLNLAB_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.setenv("PLNLAB_JAX_CACHE", str(tmp_path / "jax"))
    st.cache_resource.clear()
    yield RunStore(tmp_path / "runs.sqlite3")
    st.cache_resource.clear()


def open_app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    if page is not None:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def tiny_problem(at: AppTest, strategies=("scan", "jit_step")) -> AppTest:
    """Sidebar: simulated 40 x 5, 10 iterations, 1 repeat; the Run page: `strategies`."""
    at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
    at.sidebar.number_input(key="sb_sim_n").set_value(40)
    at.sidebar.number_input(key="sb_sim_p").set_value(5)
    at.sidebar.number_input(key="sb_iterations").set_value(10)
    at.sidebar.number_input(key="sb_repeats").set_value(1)
    at.pills(key="run_strategies").set_value(list(strategies))
    return at.run()


def fake_run(strategy: str = "scan", replicate: int = 1, run_s: float = 0.05, compile_s: float = 0.3,
             created_at: float | None = None) -> RunResult:
    """A stored-looking run of the sidebar's default settings on oaks x`replicate`."""
    spec = FitSpec(dataset=DatasetSpec(kind="oaks", replicate=replicate), strategy=strategy)
    elbo = [-2.0e5 + 300.0 * i for i in range(spec.iterations)]
    return RunResult(
        spec=spec.to_dict(), spec_key=spec.key, strategy=strategy, dataset=spec.dataset.label,
        n=116 * replicate, p=114, d=1, precision="float32", device="cpu", iterations=spec.iterations,
        optimizer="seed", lr=0.01, init="seed", repeats=3, tol=0.0, status="ok", error=None,
        diverged_at=None, iterations_run=spec.iterations, transfer_s=0.001, trace_lower_s=0.05,
        compile_s=compile_s, first_call_s=run_s * 1.5, run_s=run_s, run_s_min=run_s, run_s_max=run_s,
        per_iter_ms=1e3 * run_s / spec.iterations, compile_count=1, disk_cache_hits=0, recompile_count=0,
        cache="compiled", final_elbo=elbo[-1], elbo=elbo, devices=1, device_kind="cpu",
        versions={"jax": "0.10.1", "platform": "cpu", "host": "test-host"},
        created_at=created_at or time.time())


@pytest.mark.parametrize("page", ["pages/run.py", "pages/compare.py", "pages/scaling.py"])
def test_pages_render_with_an_empty_store(store, page):
    at = open_app(page)
    assert at.title and at.sidebar.radio(key="sb_dataset").value == "oaks"
    assert not at.error
    if page == "pages/compare.py":
        assert at.get("page_link"), "an empty store points to the Run page"


def test_pages_render_with_stored_runs(store):
    for strategy in ("eager", "scan"):
        store.add(fake_run(strategy, run_s=2.0 if strategy == "eager" else 0.05))
    for page in ("pages/run.py", "pages/compare.py", "pages/scaling.py"):
        at = open_app(page)
        assert not at.error, [e.value for e in at.error]


def test_run_page_runs_stores_and_shows_results(store):
    at = tiny_problem(open_app())
    assert [b.label for b in at.button] == ["Run 2 strategies"]
    at.button(key="run_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    runs = store.list()
    assert sorted(r.strategy for r in runs) == ["jit_step", "scan"]
    assert all(r.dataset == "simulated 40x5 d=1 (seed 0)" and r.iterations == 10 for r in runs)
    assert len(at.get(CHART)) >= 4  # timing bars, speed-up, two ELBO curves
    assert "Fastest steady state" in [m.label for m in at.metric]
    assert any("-badge[" in m.value and "agree" in m.value for m in at.markdown)
    table = at.dataframe[0].value
    assert sorted(table["strategy"]) == ["jit_step", "scan"]
    assert {"compile_s", "per_iter_ms", "recompile_count", "final_elbo", "status"} <= set(table.columns)
    # The same spec again: the stored runs are shown at once, nothing runs.
    assert [b.label for b in at.button] == ["Run again"]
    at.run()
    again = tiny_problem(open_app())
    assert [b.label for b in again.button] == ["Run again"]
    assert len(again.get(CHART)) >= 4 and len(store.list()) == 2


def test_stored_run_appears_on_compare_and_can_be_deleted(store):
    kept, dropped = fake_run("scan"), fake_run("jit_step")
    store.add(kept), store.add(dropped)
    at = open_app("pages/compare.py")
    assert sorted(at.dataframe[0].value["id"]) == sorted([kept.id, dropped.id])
    assert len(at.get(CHART)) >= 3
    row = list(at.dataframe[0].value["id"]).index(dropped.id)
    at.session_state["cmp_table_0"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    at.button(key="cmp_delete_ask").click().run()
    assert at.warning, "deleting asks for confirmation first"
    assert len(store.list()) == 2
    at.button(key="cmp_delete_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [r.id for r in store.list()] == [kept.id]


def test_compare_imports_a_runs_file_or_says_why_not(store, tmp_path):
    other = RunStore(tmp_path / "other.sqlite3")
    other.add(fake_run("scan")), other.add(fake_run("eager", run_s=2.0))
    other.export(tmp_path / "runs.json")
    at = open_app("pages/compare.py")
    at.file_uploader(key="cmp_import").set_value(("broken.json", b'[{"strategy": "scan"}]', "application/json"))
    at.run()
    at.button(key="cmp_import_go").click().run()
    assert any("Nothing imported" in e.value and "broken.json" in e.value for e in at.error)
    assert store.list() == []
    at.file_uploader(key="cmp_import").set_value(
        ("runs.json", (tmp_path / "runs.json").read_bytes(), "application/json"))
    at.run()
    at.button(key="cmp_import_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Imported 2 new runs" in s.value for s in at.success)
    assert sorted(at.dataframe[0].value["strategy"]) == ["eager", "scan"]


def test_scaling_page_uses_stored_runs_without_running(store):
    for replicate, run_s in ((1, 0.02), (10, 0.2), (100, 2.0)):
        store.add(fake_run("scan", replicate, run_s=run_s, compile_s=0.4))
    at = open_app("pages/scaling.py")
    assert len(at.get(CHART)) == 3
    text = " ".join(m.value for m in at.markdown)
    # compile 0.45 s; run 0.2 s at n = 1,160 and 2 s at 11,600: log-log crossing near 2,600.
    assert "compilation stops mattering beyond n ≈ 2,6" in text and "between 1,160 and 11,600" in text
    assert len(store.list()) == 3


def test_bad_csv_upload_shows_the_error_and_stores_nothing(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(
        ("bad.csv", b"a,b\n1,-2\n3,4\n", "text/csv"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any("negative count" in e and "bad.csv" in e for e in errors), errors
    assert not at.get("button") or "run_go" not in [b.key for b in at.button]
    assert store.list() == []


def test_good_csv_upload_is_fitted_from_memory(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    rows = "\n".join(f"{i % 3},{i % 5},{(i * 7) % 4}" for i in range(12))
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(
        ("good.csv", f"a,b,c\n{rows}\n".encode(), "text/csv"))
    at.sidebar.number_input(key="sb_iterations").set_value(5)
    at.sidebar.number_input(key="sb_repeats").set_value(1)
    at.run()
    at.pills(key="run_strategies").set_value(["jit_step"]).run()
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (run,) = store.list()
    assert run.dataset == "csv good.csv" and (run.n, run.p) == (12, 3)
    assert run.spec["dataset"]["content_hash"]


def test_upload_validation_names_the_bad_cell():
    from pages.ui import upload

    with pytest.raises(DataError, match="line 3, column 2"):
        upload.load_upload(b"a,b\n1,2\n3,-4\n", "counts.csv")
    ok = upload.load_upload(b"1,2\n3,4\n", "counts.csv", b"0,0\n0,0\n", "offsets.csv")
    assert (ok["data"].n, ok["data"].p, ok["offsets_name"]) == (2, 2, "offsets.csv")
    assert ok["hash"] != upload.load_upload(b"1,2\n3,4\n", "counts.csv")["hash"]
