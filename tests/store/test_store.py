"""The run store: round trips, ordering, export/import, atomic imports, concurrency."""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import sqlite3
import time

import pandas as pd
import pytest
from specs import tutorial_spec

from core.results.result import RunResult
from core.store import run_store as store_module
from core.store import schema as store_schema
from core.store.run_store import DEFAULT_DB_ENV, IMPORTED, RunStore, StoreError, default_db_path
from core.store.schema import MIGRATIONS, SCHEMA_VERSION


def make_run(strategy: str = "scan", created_at: float = 0.0, iterations: int = 5,
             host: str = "test-host", **changes) -> RunResult:
    """A plausible stored run of the default spec (with `strategy`, `iterations` and any
    `precision` in `changes`); its ELBO curve is `iterations_run` long."""
    spec = tutorial_spec(strategy=strategy, iterations=iterations, precision=changes.get("precision", "float32"))
    elbo = [-1000.0 + 10.0 * i + 0.1 / (i + 3) for i in range(changes.get("iterations_run", iterations))]
    values = dict(
        spec=spec.to_dict(), spec_key=spec.key, strategy=strategy, dataset="oaks x1",
        n=116, p=114, d=1, precision="float32", device="cpu", iterations=iterations,
        optimizer="seed", lr=0.01, init="seed", repeats=3, tol=0.0, status="ok", error=None,
        diverged_at=None, iterations_run=iterations, transfer_s=0.001, trace_lower_s=0.02,
        compile_s=0.3, first_call_s=0.05, run_s=0.04, run_s_min=0.039, run_s_max=0.041,
        per_iter_ms=8.0, compile_count=1, disk_cache_hits=0, recompile_count=0,
        cache="compiled", final_elbo=elbo[-1] if elbo else None, elbo=elbo, devices=1, device_kind="cpu",
        versions={"jax": "0.4.35", "jaxlib": "0.4.35", "optax": "0.2.4", "numpy": "2.1",
                  "python": "3.11.7", "platform": "cpu", "cpu_count": 16, "host": host},
        created_at=created_at,
    )
    values.update(changes)
    if "per_iter_ms" not in changes and values["iterations_run"]:  # as a run measures it
        values["per_iter_ms"] = 1e3 * values["run_s"] / values["iterations_run"]
    return RunResult(**values)


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs.sqlite3")


def test_add_get_round_trip_keeps_every_field(store):
    run = make_run(final_elbo=float("nan"), run_s_max=float("inf"), status="diverged", error="ELBO not finite at 2",
                   diverged_at=2)
    run.elbo = [-1234.5678901234567, 1e-300, -float("inf")]
    run.iterations_run = 3
    run_id = store.add(run)
    assert run.id == run_id > 0 and run.created_at > 0
    back = store.get(run_id)
    assert math.isnan(back.final_elbo) and back.run_s_max == float("inf")
    assert back.error == run.error and back.diverged_at == 2
    assert back.elbo == run.elbo  # exact float64 round trip
    assert back.to_dict() | {"final_elbo": 0} == run.to_dict() | {"final_elbo": 0}


def test_a_runs_estimates_go_to_its_caller_never_into_the_store_or_an_export(store, tmp_path):
    import numpy as np

    from core.results.estimates import Estimates

    made = Estimates(np.ones((1, 114)), np.eye(114), ("(intercept)",), tuple(f"y{j}" for j in range(114)))
    run = make_run(estimates=made)
    store.add(run)
    assert run.estimates is made  # the caller keeps them
    assert store.get(run.id).estimates is None and "estimates" not in run.to_dict()
    exported = tmp_path / "runs.json"
    store.export(exported)
    (record,) = json.loads(exported.read_text())
    assert "estimates" not in record
    # A file that has them (written elsewhere) imports, without them.
    other = RunStore(tmp_path / "other.sqlite3")
    other.import_bytes(json.dumps([record | {"estimates": {"coef": [[1.0]]}}]).encode(), "runs.json")
    (imported,) = other.list()
    assert imported.estimates is None and imported.spec_key == run.spec_key


def test_each_repeat_is_kept_in_order_and_must_be_what_the_summary_says(store):
    run_id = store.add(make_run(repeat_times=[0.041, 0.039, 0.04], program="0123456789abcdef"))
    back = store.get(run_id)
    assert back.repeat_times == [0.041, 0.039, 0.04] and back.program == "0123456789abcdef"
    frame = store.frame()
    assert json.loads(frame.loc[frame["id"] == run_id, "repeat_times_json"].iloc[0]) == [0.041, 0.039, 0.04]
    # A run stored without its repeats (before they were kept) reads back with none.
    assert store.get(store.add(make_run())).repeat_times == []
    for bad, why in (([0.05, 0.039, 0.04], "run_s_max"), ([0.041, -0.039, 0.04], "seconds > 0"),
                     ([0.04] * 1001, "at most 1,000")):
        with pytest.raises(StoreError, match=why):
            store.add(make_run(repeat_times=bad))


def test_get_absent_raises_key_error(store):
    with pytest.raises(KeyError):
        store.get(42)


def test_add_rejects_a_bad_record_and_keeps_explicit_created_at(store):
    with pytest.raises(StoreError, match="status"):
        store.add(make_run(status="great"))
    run = make_run(created_at=1234.5)
    store.add(run)
    assert run.created_at == 1234.5 and store.list() and store.list()[0].created_at == 1234.5


def test_list_is_newest_first_without_elbo_and_limited(store):
    ids = [store.add(make_run(created_at=t)) for t in (10.0, 30.0, 20.0)]
    runs = store.list()
    assert [r.id for r in runs] == [ids[1], ids[2], ids[0]]
    assert all(r.elbo == [] for r in runs)
    assert [r.id for r in store.list(limit=2)] == [ids[1], ids[2]]
    assert store.list(with_elbo=True)[0].elbo == make_run().elbo


def test_find_by_spec_key(store):
    scan = [store.add(make_run("scan", created_at=t)) for t in (1.0, 2.0)]
    store.add(make_run("eager", created_at=3.0))
    found = store.find_by_spec_key(tutorial_spec(strategy="scan", iterations=5).key)
    assert [r.id for r in found] == scan[::-1]
    assert all(r.elbo for r in found)
    assert store.find_by_spec_key("no-such-key") == []


def test_find_by_spec_key_limited_and_without_interrupted(store):
    key = tutorial_spec(strategy="scan", iterations=5).key
    shown = store.add(make_run("scan", created_at=1.0))
    newer = store.add(make_run("scan", created_at=2.0))
    interrupted = store.add(make_run("scan", created_at=3.0, status="interrupted", elbo=[], iterations_run=0))
    assert [r.id for r in store.find_by_spec_key(key, limit=1)] == [interrupted]
    assert [r.id for r in store.find_by_spec_key(key, limit=1, interrupted=False)] == [newer]
    assert [r.id for r in store.find_by_spec_key(key, interrupted=False)] == [newer, shown]
    assert store.find_by_spec_key(key, limit=1, interrupted=False)[0].elbo


def test_count_matches_the_runs_stored(store):
    assert store.count() == 0
    ids = [store.add(make_run(created_at=t)) for t in (1.0, 2.0, 3.0)]
    assert store.count() == 3 == len(store.list())
    store.delete(ids[:1])
    assert store.count() == 2


def test_find_filters_on_columns_in_sqlite(store):
    scan_here = store.add(make_run("scan", created_at=1.0))
    store.add(make_run("scan", created_at=2.0, host="elsewhere"))
    store.add(make_run("scan", created_at=3.0, precision="float64"))
    store.add(make_run("eager", created_at=4.0))
    store.add(make_run("scan", created_at=5.0, status="diverged", error="ELBO not finite at 3", diverged_at=3))
    found = store.find(strategy="scan", precision="float32", status="ok", host="test-host", iterations=5)
    assert [r.id for r in found] == [scan_here] and found[0].elbo == []
    assert len(store.find()) == 5
    assert store.find(strategy="no-such-strategy") == []
    with pytest.raises(ValueError, match="not a run column: nope"):
        store.find(strategy="scan", nope=1)


def test_frame_has_one_flat_row_per_run(store):
    assert len(store.frame()) == 0
    for t in (1.0, 2.0, 3.0):
        store.add(make_run(created_at=t))
    frame = store.frame()
    assert len(frame) == 3
    for column in ("id", "created", "created_at", "spec_key", "strategy", "compile_s", "run_s",
                   "final_elbo", "jax_version", "jaxlib_version", "device_kind", "cpu_count", "host"):
        assert column in frame.columns
    assert not {"elbo", "spec", "versions"} & set(frame.columns)
    assert frame["jax_version"].tolist() == ["0.4.35"] * 3
    assert frame["created_at"].tolist() == [3.0, 2.0, 1.0]


def test_frame_holds_what_the_stored_runs_hold(store):
    """Every cell of frame() against the same run read back as a RunResult: NaN and
    infinities, absent optional values, diverged and interrupted runs, and a row written
    before a column existed (NULL there: the field's default)."""
    store.add(make_run(created_at=1.0))
    store.add(make_run("eager", created_at=2.0, final_elbo=float("nan"), run_s_max=float("inf"),
                       status="diverged", error="ELBO not finite at 3", diverged_at=3, iterations_run=3))
    store.add(make_run("jit_step", created_at=3.0, status="interrupted", elbo=[], iterations_run=0))
    old = store.add(make_run("scan", created_at=4.0, iterations=7, chunk_iterations=7))
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE runs SET chunk_iterations = NULL WHERE id = ?", (old,))
    frame = store.frame()
    runs = store.list()
    assert frame["id"].tolist() == [r.id for r in runs]
    for row, run in zip(frame.to_dict("records"), runs):
        for name, value in row.items():
            expected = {"created": pd.Timestamp(run.created_at, unit="s", tz="UTC"),
                        **{f"{key}_version": run.versions[key] for key in ("jax", "jaxlib", "optax", "numpy", "python")},
                        **{key: run.versions[key] for key in ("platform", "cpu_count", "host")},
                        "warning_count": len(run.warnings),
                        }.get(name, getattr(run, name, None))
            if expected is None:
                assert value is None or pd.isna(value), (run.strategy, name, value)
            elif isinstance(expected, float) and math.isnan(expected):
                assert math.isnan(value), (run.strategy, name, value)
            else:
                assert value == expected and isinstance(value, str) == isinstance(expected, str), \
                    (run.strategy, name, value, expected)
    assert frame.loc[frame["id"] == old, "chunk_iterations"].item() == 0
    assert frame["final_elbo"].dtype == float and frame["diverged_at"].isna().tolist() == [True, True, False, True]


def test_elbo_frame_is_long_format(store):
    a = store.add(make_run(iterations=4))
    b = store.add(make_run(iterations=6))
    frame = store.elbo_frame([b, a, 999])
    assert list(frame.columns) == ["run_id", "iteration", "elbo"]
    assert len(frame) == 10
    assert frame[frame.run_id == a]["iteration"].tolist() == [0, 1, 2, 3]
    assert frame[frame.run_id == a]["elbo"].tolist() == make_run(iterations=4).elbo
    assert frame["run_id"].iloc[0] == b
    assert len(store.elbo_frame([])) == 0


def test_a_delete_hides_runs_until_restored_and_purges_them_after_the_restore_window(store):
    ids = [store.add(make_run(created_at=t)) for t in (1.0, 2.0, 3.0)]
    deleted_at = time.time()
    assert store.delete([ids[0], ids[2], 12345], now=deleted_at) == 2
    assert [r.id for r in store.list()] == [ids[1]] and store.count() == 1
    assert store.elbo_frame(ids)["run_id"].unique().tolist() == [ids[1]]
    assert store.frame()["id"].tolist() == [ids[1]] and store.find(strategy="scan") == store.list()
    with pytest.raises(KeyError):
        store.get(ids[0])
    assert [(run.id, when) for run, when in store.deleted()] == [(ids[2], deleted_at), (ids[0], deleted_at)]
    assert store.delete([ids[0]]) == 0  # already deleted
    assert store.restore([ids[0], ids[1]]) == 1  # the live one is left as it is
    assert [r.id for r in store.list()] == [ids[1], ids[0]] and store.get(ids[0]).elbo
    # A later delete, past the restore window, purges what was deleted before it for good.
    store.delete([ids[1]], now=deleted_at + store_module.RESTORE_DAYS * 86400 + 1)
    assert [run.id for run, _ in store.deleted()] == [ids[1]]
    assert store.restore([ids[2]]) == 0
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM elbo_traces").fetchone()[0] == 2


def test_a_backup_is_a_consistent_copy_and_never_replaces_a_file(store, tmp_path):
    ids = [store.add(make_run(created_at=t)) for t in (1.0, 2.0)]
    store.delete([ids[0]])
    assert store.backup(tmp_path / "copy.sqlite3") == 1
    copy = RunStore(tmp_path / "copy.sqlite3")
    assert [r.id for r in copy.list()] == [ids[1]] and [r.id for r, _ in copy.deleted()] == [ids[0]]
    assert copy.integrity_ok()
    with pytest.raises(StoreError, match="exists; a backup never replaces"):
        store.backup(tmp_path / "copy.sqlite3")
    with pytest.raises(StoreError, match="no such folder"):
        store.backup(tmp_path / "nope" / "copy.sqlite3")


def test_a_result_the_store_refuses_is_kept_as_a_failed_run_and_its_note_goes(store):
    spec = make_run().spec
    flight = store.begin(spec, owner="session:a")
    run = make_run(created_at=time.time())
    run.dataset, run.owner = "x" * 600, "session:a"  # past what a stored text keeps
    run_id = store.finish(flight, run)
    kept = store.get(run_id)
    assert store.in_flight() == [] and kept.status == "interrupted" and run.status == "interrupted"
    assert "the store refused its result: " in kept.error and "600 characters" in kept.error
    assert kept.owner == "session:a"


def test_a_deleted_run_id_is_never_handed_out_again(store):
    first, newest = store.add(make_run(created_at=1.0)), store.add(make_run(created_at=2.0))
    assert store.delete([newest]) == 1
    again = store.add(make_run(created_at=3.0))
    assert again == newest + 1 and again != newest  # SQLite's plain rowid would reuse the newest's
    assert [r.id for r in store.list()] == [again, first]


def test_a_store_of_the_previous_schema_is_upgraded_in_place(tmp_path):
    """A file written before ids were never reused: its runs and curves survive the upgrade,
    and from then on no id is handed out twice."""
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        for migration in MIGRATIONS[:4]:
            for statement in migration():
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 4")
    with sqlite3.connect(path) as conn:  # rows and curves as the previous version wrote them
        for created in (1.0, 2.0, 3.0):
            run = make_run(created_at=created)
            row = store_schema.run_row(run)
            have = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
            row = {k: v for k, v in row.items() if k in have}
            cursor = conn.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                                  list(row.values()))
            conn.execute("INSERT INTO elbo_traces (run_id, elbo) VALUES (?, ?)",
                         (cursor.lastrowid, b"\x00" * 8 * 5))
        conn.execute("DELETE FROM elbo_traces WHERE run_id = 3")
        conn.execute("DELETE FROM runs WHERE id = 3")
    store = RunStore(path)
    assert store.schema_version == SCHEMA_VERSION
    assert sorted(r.id for r in store.list()) == [1, 2]
    assert all(len(store.get(i).elbo) == 5 for i in (1, 2))  # the curves were not lost with the old table
    added = store.add(make_run(created_at=4.0))
    assert added == 3  # the newest before the upgrade was deleted before it: its id could not be known
    store.delete([added])
    assert store.add(make_run(created_at=5.0)) == 4  # from the upgrade on, never again


@pytest.mark.parametrize("suffix", [".json", ".csv", ".parquet"])
def test_export_import_round_trip(tmp_path, store, suffix):
    runs = [make_run("scan", created_at=1.5, final_elbo=float("nan"), status="diverged",
                     error="ELBO is nan at iteration 3", diverged_at=3),
            make_run("eager", created_at=2.5, run_s_max=float("inf")),
            make_run("jit_step", created_at=3.25, iterations=1, repeat_times=[0.041, 0.039, 0.04],
                     program="0123456789abcdef")]
    for run in runs:
        store.add(run)
    path = tmp_path / f"runs{suffix}"
    assert store.export(path) == 3
    fresh = RunStore(tmp_path / "fresh.sqlite3")
    assert fresh.import_file(path) == ("runs" + suffix, 3, 0, ())

    def comparable(run, owner):
        out = run.to_dict() | {"owner": owner}
        out.pop("id")
        return json.dumps(out, sort_keys=True)  # NaN == NaN as text

    # Every field comes back, but the owner: an import is nobody's run, and not measured here.
    assert {r.owner for r in fresh.list()} == {IMPORTED}
    assert [comparable(r, "") for r in fresh.list(with_elbo=True)] == [
        comparable(r, "") for r in store.list(with_elbo=True)]
    assert fresh.import_file(path).added == 0  # re-import adds nothing
    assert len(fresh.list()) == 3
    # Numbered in the order they were made, as in the store they came from (an export lists
    # the newest first, and the imported runs were once numbered in reverse).
    assert [(r.id, r.strategy) for r in fresh.list()] == [(r.id, r.strategy) for r in store.list()]


def test_export_selected_ids(tmp_path, store):
    ids = [store.add(make_run(created_at=t)) for t in (1.0, 2.0)]
    path = tmp_path / "one.json"
    assert store.export(path, [ids[1]]) == 1
    assert [r["created_at"] for r in json.loads(path.read_text())] == [2.0]
    with pytest.raises(KeyError):
        store.export(path, [999])


def test_an_import_adds_the_good_records_and_says_which_it_refused(tmp_path, store):
    kept = store.add(make_run(created_at=1.0))
    records = [make_run("eager", created_at=5.0).to_dict(), make_run(created_at=6.0).to_dict(),
               make_run("jit_step", created_at=7.0).to_dict()]
    records[1]["n"] = "many"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(records))
    done = store.import_file(path)
    assert (done.added, done.already) == (2, 0) and len(done.refused) == 1
    assert done.refused[0].startswith("record 2: field 'n' must be a whole number")
    assert done.refusals().startswith("refused 1 of 3 records of bad.json: record 2: field 'n'")
    assert sorted(r.strategy for r in store.list()) == ["eager", "jit_step", "scan"] and kept


def test_import_rejects_missing_fields_and_bad_files(tmp_path, store):
    record = make_run().to_dict()
    del record["compile_s"]
    (tmp_path / "missing.json").write_text(json.dumps([record]))
    assert store.import_file(tmp_path / "missing.json").refused == ("record 1: missing field 'compile_s'",)
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(StoreError, match="cannot read broken.json"):
        store.import_file(tmp_path / "broken.json")
    with pytest.raises(StoreError, match="unknown format"):
        store.import_file(tmp_path / "runs.xlsx")
    assert store.list() == []


def test_an_export_written_before_newer_fields_existed_still_imports(tmp_path, store):
    record = make_run().to_dict()
    for newer in ("warnings", "final_change", "time_to_solution_s", "from_scratch"):
        del record[newer]
    (tmp_path / "older.json").write_text(json.dumps([record]))
    assert store.import_file(tmp_path / "older.json").added == 1
    (imported,) = store.list()
    assert imported.warnings == [] and imported.time_to_solution_s is None and imported.from_scratch == 0


# A hostile or careless file: each record breaks one rule a fresh run never breaks.
POISONED = [
    ({"iterations": 2_000_000, "spec": {"strategy": "scan", "iterations": 2_000_000}},
     "spec is not one this server runs: iterations must be between 1 and 1,000,000"),
    ({"timed_start": time.time() - 10, "timed_end": time.time() + 3600, "created_at": time.time()},
     "does not end before the run was stored"),
    ({"created_at": 3_999_999_999.0}, "created_at 2096-"),
    ({"run_s_min": 0.5, "run_s": 0.04}, "timings are inconsistent"),
    ({"compile_s": -1.0}, "compile_s must be a number of seconds >= 0"),
    ({"strategy": "[sign in again here](https://example.com/login)"}, "strategy must be one of"),
    ({"iterations": 7}, "iterations 7 disagrees with its spec's 5"),
    ({"n": 10, "p": 10}, "shape 10 x 10 (d = 1) disagrees with its spec's 116 x 114"),
    ({"iterations_run": 4, "per_iter_ms": 10.0}, "iterations_run must equal the ELBO curve's length (5)"),
    ({"final_elbo": float("nan")}, "a run with status ok has a finite ELBO at every iteration"),
    ({"elbo": [-1000.0, float("inf"), -980.0, -970.0, -960.0]}, "a run with status ok has a finite ELBO"),
    ({"lr": -1e308}, "lr -1e+308 disagrees with its spec's 0.01"),
    ({"tol": float("nan")}, "tol nan disagrees with its spec's 0.0"),
    ({"optimizer": "adam"}, "optimizer 'adam' disagrees with its spec's 'seed'"),
    ({"per_iter_ms": 1e-300}, "per_iter_ms 1e-300 is not the steady state over the iterations run"),
    ({"status": "timed_out", "error": "x", "run_s": 0.0, "run_s_min": 0.0, "run_s_max": 0.0, "per_iter_ms": 1e-300},
     "per_iter_ms 1e-300 is not the steady state over the iterations run"),
    ({"run_s": 1e-300, "run_s_min": 1e-300, "run_s_max": 1e-300, "first_call_s": 1e-300, "per_iter_ms": 2e-298},
     "run_s_min 1e-300 s is faster than any timed call of a fit can return"),
    ({"status": "diverged", "diverged_at": -5, "error": "x"}, "diverged_at -5 is not an iteration of the run"),
    ({"final_change": -1.0}, "final_change must be a relative change >= 0"),
    ({"error": "x" * 5_000}, "error is 5,000 characters long"),
    ({"status": "finished"}, "status must be one of"),
]


def test_an_import_meets_the_checks_of_a_fresh_run_and_names_each_refused_record(tmp_path, store):
    good = make_run(created_at=time.time() - 60).to_dict()
    records = [good]
    for changes, _ in POISONED:
        record = make_run(created_at=time.time() - 120).to_dict()
        record.update({k: v for k, v in changes.items() if k != "spec"})
        record["spec"].update(changes.get("spec", {}))
        records.append(record)
    path = tmp_path / "poisoned.json"
    path.write_text(json.dumps(records))
    done = store.import_file(path)
    assert done.added == 1 and len(done.refused) == len(POISONED)
    for number, ((_, message), refused) in enumerate(zip(POISONED, done.refused), start=2):
        assert refused.startswith(f"record {number}: ") and message in refused, (message, refused)
    assert [r.created_at for r in store.list()] == [good["created_at"]]


def test_csv_export_neutralises_formulas_and_reads_back_exactly(tmp_path, store):
    run = make_run(status="diverged", diverged_at=4, error="=cmd|' /C calc'!A0", final_elbo=-991.5,
                   host="-rm -rf", versions={"host": "@SUM(A1)", "jax": "+1", "quote": "'=already"})
    run.elbo = [-1000.0, -2.5e-3, -1e300, 0.0, -0.0]
    store.add(run)
    path = tmp_path / "runs.csv"
    store.export(path)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    cells = [cell for row in rows for cell in row.values()]
    for cell in cells:
        risky = cell.startswith(("=", "+", "@", "\t", "\r")) or (cell.startswith("-") and not _number(cell))
        assert not risky, cell
    assert rows[0]["error"] == "'=cmd|' /C calc'!A0" and rows[0]["final_elbo"] == "-991.5"  # a number stays one
    fresh = RunStore(tmp_path / "fresh.sqlite3")
    assert fresh.import_file(path).added == 1
    (back,) = fresh.list(with_elbo=True)
    assert back.error == run.error and back.versions == run.versions and back.elbo == run.elbo
    assert back.final_elbo == -991.5


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_import_messages_name_the_file_never_a_folder(tmp_path, store):
    for name, data in (("runs.json", b"[{"), ("runs.parquet", b"not parquet"), ("runs.csv", b"\xff\xfe\x00")):
        with pytest.raises(StoreError) as refused:
            store.import_bytes(data, name)
        assert f"cannot read {name}" in str(refused.value) and "/" not in str(refused.value)
    assert str(tmp_path) not in store.import_bytes(b"[1]", "runs.json").refused[0]


def test_default_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv(DEFAULT_DB_ENV, str(tmp_path / "env" / "db.sqlite3"))
    assert default_db_path() == tmp_path / "env" / "db.sqlite3"
    assert RunStore().path == tmp_path / "env" / "db.sqlite3"
    assert (tmp_path / "env" / "db.sqlite3").exists()
    monkeypatch.delenv(DEFAULT_DB_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "plnlab" / "runs.sqlite3"


def test_schema_version_and_wal_recorded(store):
    assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert RunStore(store.path).schema_version == SCHEMA_VERSION  # reopening is a no-op


def test_newer_schema_is_refused(store):
    with sqlite3.connect(store.path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer"):
        RunStore(store.path)


def _add_runs(path: str, worker: int, count: int) -> None:
    store = RunStore(path)
    for i in range(count):
        store.add(make_run(created_at=worker * 1000.0 + i, iterations=3))


def _open_together(path: str, start) -> None:
    start.wait(timeout=60)  # every opener has imported the store: they open it at once
    RunStore(path)


def test_processes_opening_a_new_store_at_once_all_get_it(tmp_path):
    # A server and its workers open a fresh store together. Switching the new file to WAL
    # takes its exclusive lock, and SQLite turns some racers away at once without waiting:
    # before the store retried, about one round in two lost a process to "database is locked".
    context = multiprocessing.get_context("spawn")
    for round_ in range(3):
        path = str(tmp_path / f"new{round_}.sqlite3")
        start = context.Barrier(8)
        openers = [context.Process(target=_open_together, args=(path, start)) for _ in range(8)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(timeout=60)
        assert [o.exitcode for o in openers] == [0] * 8
        assert RunStore(path).schema_version == SCHEMA_VERSION


def test_concurrent_writers(tmp_path):
    path = str(tmp_path / "shared.sqlite3")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_runs, args=(path, w, 25)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    store = RunStore(path)
    runs = store.list()
    assert len(runs) == 100 and len({r.id for r in runs}) == 100
    assert store.integrity_ok()
    assert len(store.elbo_frame([r.id for r in runs])) == 300


def test_corrupt_file_gives_clear_error(tmp_path):
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"this is not a database, just garbage bytes\x00\xff" * 200)
    with pytest.raises(StoreError, match="cannot open the run store .*not a database"):
        RunStore(path)


def test_frame_is_pandas(store):
    store.add(make_run())
    assert isinstance(store.frame(), pd.DataFrame)


def test_a_store_from_before_the_process_count_gains_its_column(tmp_path):
    path = tmp_path / "old.sqlite3"
    RunStore(path).add(make_run(processes=3))
    with sqlite3.connect(path) as conn:  # as a store written before RunResult.processes existed
        conn.execute("ALTER TABLE runs DROP COLUMN processes")
    reopened = RunStore(path)
    (old,) = reopened.list()
    assert old.processes == 1  # the field's default: those runs ran in one process
    new_id = reopened.add(make_run(processes=2))
    assert sorted((run.id, run.processes) for run in reopened.list()) == [(old.id, 1), (new_id, 2)]
    assert sorted(reopened.frame()["processes"]) == [1, 2]


def test_runs_under_way_are_bounded_per_owner_and_for_the_store(store, monkeypatch):
    monkeypatch.setenv("PLNLAB_MAX_QUEUED_PER_OWNER", "3")
    monkeypatch.setenv("PLNLAB_MAX_QUEUED", "8")
    spec = make_run().spec
    mine = store.begin_all([spec, spec], owner="session:a")
    store.begin(spec, owner="session:a")
    with pytest.raises(StoreError, match=r"you already have 3 runs queued or running \(at most 3"):
        store.begin(spec, owner="session:a")
    with pytest.raises(StoreError, match="you already have 0 runs"):
        store.begin_all([spec] * 4, owner="session:b")  # a batch counts whole
    store.begin_all([spec, spec], owner="session:b")
    monkeypatch.setenv("PLNLAB_MAX_QUEUED", "5")
    with pytest.raises(StoreError, match=r"5 runs are already queued or running on this server \(at most 5"):
        store.begin(spec)  # the command line's count toward the store's bound too
    assert len(store.in_flight()) == 5
    store.abandon(mine[0])
    store.begin(spec, owner="session:c")  # room again


def test_an_owner_whose_runs_held_the_device_for_most_of_the_hour_waits(store, monkeypatch):
    monkeypatch.setenv("PLNLAB_MAX_DEVICE_SECONDS_PER_HOUR", "60")
    now = time.time()
    store.add(make_run(owner="session:a", created_at=now, timed_start=now - 50, timed_end=now - 10))
    store.begin(make_run().spec, owner="session:a")  # 40 s of the last hour: under the bound
    store.add(make_run(owner="session:a", created_at=now, timed_start=now - 30, timed_end=now - 5))
    with pytest.raises(StoreError, match=r"your runs held the device for 65 s of the last hour \(at most 60 s"):
        store.begin(make_run().spec, owner="session:a")
    store.begin(make_run().spec, owner="session:b")  # another owner is not held back
    store.begin(make_run().spec)  # nor the command line
