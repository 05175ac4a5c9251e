"""The store's runs as tables for pages and charts, read by SQLite and NumPy without a
Python object per run or per ELBO point: what a page reads on every click must not grow
with the store, nor with the length of the curves in it."""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import TYPE_CHECKING

import numpy as np

from core.results.result import RunResult
from core.store import schema as store_schema
from core.store.records import field_kinds, scalar_fields

if TYPE_CHECKING:
    import pandas

CHUNK = 500  # below SQLite's bound-parameter limit on old builds (999)
# runs_frame() column -> its key in `versions`.
VERSION_COLUMNS = {
    "jax_version": "jax", "jaxlib_version": "jaxlib", "optax_version": "optax", "numpy_version": "numpy",
    "python_version": "python", "platform": "platform", "cpu_count": "cpu_count", "host": "host",
    "git_commit": "commit", "cpu_model": "cpu_model", "others_cpu_share": "others_cpu_share",
}


def runs_frame(conn: sqlite3.Connection) -> pandas.DataFrame:
    """One row per run, newest first: `id`, `created` (UTC), the scalar fields,
    `versions` flattened to the columns of `VERSION_COLUMNS`, `warning_count`, how many
    warnings the run carries, and `repeat_times_json`, each repeat's seconds as JSON text
    (read by `core.results.significance.samples` for the runs a page compares). No ELBO curves."""
    # Deferred, here and in elbo_frame: only frames need pandas, and the command line's
    # store commands (list, export, import) start faster without it.
    import pandas as pd

    names = scalar_fields()
    # SQLite flattens the rows (json_extract), so no RunResult is built per run: the
    # Compare page reads this on every click, however many runs the store holds.
    versions = [f"json_extract(versions_json, '$.{key}') AS {column}" for column, key in VERSION_COLUMNS.items()]
    sql = (f"SELECT {', '.join(f'runs.{name}' for name in names)}, {', '.join(versions)},"
           " COALESCE(json_array_length(runs.warnings_json), 0) AS warning_count, runs.repeat_times_json FROM runs"
           " WHERE runs.deleted_at IS NULL ORDER BY created_at DESC, runs.id DESC")
    frame = pd.read_sql_query(sql, conn)
    for field in dataclasses.fields(RunResult):
        if field.name not in names:
            continue
        base, optional = field_kinds()[field.name]
        if not optional and field.default is not dataclasses.MISSING:
            # A column added after these rows were written holds NULL: the field's default.
            frame[field.name] = frame[field.name].fillna(field.default)
        if base is float:  # NaN is stored as the text 'nan' (SQLite turns NaN into NULL)
            frame[field.name] = frame[field.name].astype(float)
    frame.insert(1, "created", pd.to_datetime(frame["created_at"].astype(float), unit="s", utc=True))
    return frame


def curves(conn: sqlite3.Connection, run_ids: list[int]) -> dict[int, np.ndarray]:
    """ELBO curves by run id, in the order of `run_ids`, absent (and deleted) ids left out:
    float64 arrays over the stored bytes (read-only)."""
    ids = list(dict.fromkeys(int(i) for i in run_ids))
    blobs: dict[int, bytes] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        sql = ("SELECT run_id, elbo FROM elbo_traces JOIN runs ON runs.id = run_id WHERE runs.deleted_at IS NULL"
               f" AND run_id IN ({', '.join(['?'] * len(chunk))})")
        blobs.update((r["run_id"], r["elbo"]) for r in conn.execute(sql, chunk))
    return {i: np.frombuffer(blobs[i], store_schema.ELBO_DTYPE) for i in ids if i in blobs}


def elbo_frame(by_run: dict[int, np.ndarray]) -> pandas.DataFrame:
    """Curves (as `curves` gives them) in long format: `run_id`, `iteration` (from 0), `elbo`."""
    # Deferred: see runs_frame().
    import pandas as pd

    found = list(by_run.items())
    no_ids = [np.zeros(0, np.int64)]  # np.concatenate refuses an empty list
    return pd.DataFrame({
        "run_id": np.concatenate([np.full(len(c), i, np.int64) for i, c in found] or no_ids),
        "iteration": np.concatenate([np.arange(len(c), dtype=np.int64) for _, c in found] or no_ids),
        "elbo": np.concatenate([c for _, c in found] or [np.zeros(0)]),
    })
