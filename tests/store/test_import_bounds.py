"""An import is bounded before it is parsed (`core.store.files`): a small file cannot grow the
server, and a store cannot grow past its cap; what was stored stays."""

from __future__ import annotations

import io
import json
import os

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.store import files as store_files
from core.store import run_store as store_module
from core.store.run_store import RunStore, StoreError

from fake_runs import make_run


def _rss_mb() -> float:
    return psutil.Process(os.getpid()).memory_info().rss / 2**20


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def test_a_parquet_that_declares_millions_of_rows_is_refused_from_its_footer(tmp_path):
    bomb = _parquet(pa.table({"dataset": pa.array(["oaks x1"] * 2_000_000)}))
    assert len(bomb) < 20_000
    before = _rss_mb()
    with pytest.raises(StoreError, match="holds 2,000,000 runs; an import takes at most 10,000"):
        RunStore(tmp_path / "runs.sqlite3").import_bytes(bomb, "bomb.parquet")
    assert _rss_mb() - before < 50


def test_a_parquet_whose_few_rows_share_one_huge_value_is_refused_before_they_are_built(tmp_path):
    """One 2 MB text in a dictionary page, pointed at by 5,000 rows: 8 KB of file, 10 GB once
    every row holds its copy (the probe's 185 MiB came from such a file)."""
    big = pa.DictionaryArray.from_arrays(pa.array([0] * 5_000, pa.int32()), pa.array(["x" * 2_000_000]))
    bomb = _parquet(pa.table({"error": big}))
    assert len(bomb) < 20_000
    before = _rss_mb()
    with pytest.raises(StoreError, match=r"bomb.parquet unpacks to [\d,]+ MiB; an import unpacks at most 128 MiB"):
        RunStore(tmp_path / "runs.sqlite3").import_bytes(bomb, "bomb.parquet")
    assert _rss_mb() - before < 50


def test_a_file_too_large_or_with_too_many_records_is_refused_and_nothing_stored_is_lost(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs.sqlite3")
    kept = store.add(make_run("scan"))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (store_files.MAX_IMPORT_BYTES + 1))
    with pytest.raises(StoreError, match="big.json is 48.0 MiB; an import reads at most 48 MiB"):
        store.import_file(big)
    many = json.dumps([{}] * (store_files.MAX_IMPORT_RECORDS + 1)).encode()
    with pytest.raises(StoreError, match="holds 10,001 runs"):
        store.import_bytes(many, "many.json")
    header = "id\n" + "1\n" * (store_files.MAX_IMPORT_RECORDS + 1)
    with pytest.raises(StoreError, match="holds 10,001 runs"):
        store.import_bytes(header.encode(), "many.csv")
    assert [r.id for r in store.list()] == [kept]


def test_imports_stop_at_the_stores_cap(tmp_path, monkeypatch):
    source = RunStore(tmp_path / "source.sqlite3")
    for created_at in (1.0, 2.0, 3.0):
        source.add(make_run("scan", created_at=created_at))
    source.export(tmp_path / "runs.json")
    store = RunStore(tmp_path / "runs.sqlite3")
    store.add(make_run("eager"))
    monkeypatch.setenv(store_module.MAX_STORED_RUNS_ENV, "3")
    with pytest.raises(StoreError, match=r"3 runs would take the store past its 3 \(PLNLAB_MAX_STORED_RUNS; it holds"):
        store.import_file(tmp_path / "runs.json")
    assert store.count() == 1
    monkeypatch.setenv(store_module.MAX_STORED_RUNS_ENV, "4")
    assert store.import_file(tmp_path / "runs.json").added == 3


def test_an_import_dated_ahead_of_its_import_is_dated_at_it_and_never_headlines(tmp_path):
    """The probe: an imported run with scaled timings, dated 290 s ahead, became Run's and
    Story's number. Now it is dated when it was imported, and those pages read the store's own."""
    import time

    store = RunStore(tmp_path / "runs.sqlite3")
    own = make_run("scan")
    store.add(own)
    ahead = time.time() + 290
    forged = make_run("scan", created_at=ahead, timed_start=ahead - 2, timed_end=ahead - 1, host="elsewhere",
                      run_s=own.run_s / 10, run_s_min=own.run_s_min / 10, run_s_max=own.run_s_max / 10)
    other = RunStore(tmp_path / "other.sqlite3")
    other.add(forged)
    other.export(tmp_path / "forged.json")
    imported_at = time.time()
    store.import_file(tmp_path / "forged.json")
    found = store.find_by_spec_key(own.spec_key)
    assert found[0].owner == store_module.IMPORTED and found[0].created_at <= time.time()
    assert found[0].created_at >= imported_at and found[0].timed_end <= found[0].created_at
    assert [r.id for r in store.find_by_spec_key(own.spec_key, imported=False)] == [own.id]
