"""The run store's SQLite layout: its tables, their migrations, and `RunResult` <-> row.

Table `runs` holds every scalar field of `RunResult` as its own column (so SQL can
filter), `spec_json`, `versions_json`, `warnings_json` and `repeat_times_json`; table
`elbo_traces` holds each ELBO curve as little-endian float64 bytes. Only JSON and raw float
bytes are stored, never pickles. SQLite turns NaN into NULL, so a NaN in a REAL column is
stored as the text 'nan' to keep it apart from None (NULL).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from typing import Any

import numpy as np

from core.results.result import NOT_STORED, RunResult
from core.store.records import StoreError, field_kinds, scalar_fields

_SQL_TYPES = {int: "INTEGER", float: "REAL", str: "TEXT"}
# Little-endian whatever the host, so that a store file moves between machines.
ELBO_DTYPE = "<f8"


def _column_type(name: str) -> str:
    return _SQL_TYPES[field_kinds()[name][0]]


def _migration_1() -> list[str]:
    columns = ", ".join(f"{n} {_column_type(n)}" for n in scalar_fields() if n != "id")
    return [
        f"CREATE TABLE runs (id INTEGER PRIMARY KEY, {columns}, host TEXT,"
        " spec_json TEXT NOT NULL, versions_json TEXT NOT NULL)",
        "CREATE INDEX runs_spec_key ON runs (spec_key)",
        "CREATE INDEX runs_created_at ON runs (created_at)",
        "CREATE TABLE elbo_traces (run_id INTEGER PRIMARY KEY"
        " REFERENCES runs(id) ON DELETE CASCADE, elbo BLOB NOT NULL)",
    ]


def _migration_2() -> list[str]:
    # Runs being fitted: a row is written when a run starts and removed in the same
    # transaction that stores its result, so a row left behind by a dead process is a
    # run that was interrupted (see RunStore.recover_interrupted).
    return [
        "CREATE TABLE in_flight (id INTEGER PRIMARY KEY, spec_json TEXT NOT NULL,"
        " host TEXT NOT NULL, pid INTEGER NOT NULL, started_at REAL NOT NULL)",
    ]


def _migration_3() -> list[str]:
    # An in-flight run's liveness is its lease file (core.coordination.lease), named here: the
    # kernel releases the lease's lock when its process dies, whatever its pid says.
    return ["ALTER TABLE in_flight ADD COLUMN lease TEXT"]


def _migration_4() -> list[str]:
    # RunResult.warnings, a list of sentences, as JSON text like spec and versions; NULL
    # (no warnings) for runs stored before it existed.
    return ["ALTER TABLE runs ADD COLUMN warnings_json TEXT"]


def _migration_5(conn: sqlite3.Connection) -> list[str]:
    # Run ids are never handed out again (AUTOINCREMENT): without it SQLite reuses the id of
    # the newest run once it is deleted, and a session that deleted its run #2 held an id that
    # now named someone else's run. SQLite cannot add AUTOINCREMENT to a table: the table is
    # rebuilt with its rows (foreign keys are off during migrations, see `migrate`).
    columns = [(row["name"], row["type"]) for row in conn.execute("PRAGMA table_info(runs)") if row["name"] != "id"]
    names = ", ".join(name for name, _ in columns)
    return [
        "CREATE TABLE runs_new (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        + ", ".join(f"{name} {kind}" + (" NOT NULL" if name in ("spec_json", "versions_json") else "")
                    for name, kind in columns) + ")",
        f"INSERT INTO runs_new (id, {names}) SELECT id, {names} FROM runs",
        "DROP TABLE runs",
        "ALTER TABLE runs_new RENAME TO runs",
        "CREATE INDEX runs_spec_key ON runs (spec_key)",
        "CREATE INDEX runs_created_at ON runs (created_at)",
    ]


def _migration_6() -> list[str]:
    # Who started a run under way, so that a run whose process died (a server restart) is
    # still its owner's when it is stored as interrupted.
    return ["ALTER TABLE in_flight ADD COLUMN owner TEXT NOT NULL DEFAULT ''"]


def _migration_7() -> list[str]:
    # A delete is soft: the run is hidden, restorable until `RunStore.RESTORE_DAYS` have
    # passed, then purged at the next delete.
    return ["ALTER TABLE runs ADD COLUMN deleted_at REAL",
            "CREATE INDEX runs_deleted_at ON runs (deleted_at)"]


# Applied in order, in one transaction; PRAGMA user_version counts those applied. Append,
# never edit. A migration that reads the file's current layout takes the connection.
def _migration_8() -> list[str]:
    # RunResult.repeat_times, the seconds of each timed call, as JSON like the warnings; NULL
    # for runs stored before they were kept.
    return ["ALTER TABLE runs ADD COLUMN repeat_times_json TEXT"]


# Scalar fields added to RunResult later get their column added on open.
MIGRATIONS = (_migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6,
              _migration_7, _migration_8)
SCHEMA_VERSION = len(MIGRATIONS)


def _up_to_date(conn: sqlite3.Connection) -> bool:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"schema version {version} is newer than this program's "
                         f"({SCHEMA_VERSION}); upgrade PLN JIT Lab")
    have = {r["name"] for r in conn.execute("PRAGMA table_info(runs)")}
    return version == SCHEMA_VERSION and have.issuperset(scalar_fields())


def migrate(conn: sqlite3.Connection) -> None:
    """Brings the file behind `conn` (autocommit, `sqlite3.Row` rows) to `SCHEMA_VERSION`.

    Raises:
        StoreError: the file was written by a newer program.
    """
    if _up_to_date(conn):  # the usual case, checked without taking the write lock
        return
    # Off while tables are rebuilt: dropping the old runs table must not cascade to its
    # curves (the pragma cannot change inside a transaction).
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN IMMEDIATE")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for migration in MIGRATIONS[version:]:
        wants_connection = migration.__code__.co_argcount == 1
        for statement in (migration(conn) if wants_connection else migration()):
            conn.execute(statement)
    have = {r["name"] for r in conn.execute("PRAGMA table_info(runs)")}
    for name in scalar_fields():
        if name not in have:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {_column_type(name)}")
    if conn.execute("PRAGMA foreign_key_check").fetchall():
        raise StoreError("a migration left curves without their run; the file was left as it was")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("COMMIT")
    conn.execute("PRAGMA foreign_keys = ON")


def host_of(result: RunResult) -> str | None:
    """The `host` column: with spec_key and created_at, what tells two runs apart on import."""
    host = result.versions.get("host")
    return None if host is None else str(host)


def run_row(result: RunResult) -> dict[str, Any]:
    """The `runs` columns of a result (without id)."""
    row: dict[str, Any] = {}
    for name in scalar_fields():
        value = getattr(result, name)
        row[name] = "nan" if isinstance(value, float) and math.isnan(value) else value
    row.pop("id")
    row.update(host=host_of(result), spec_json=json.dumps(result.spec, sort_keys=True),
               versions_json=json.dumps(result.versions, sort_keys=True),
               warnings_json=json.dumps(result.warnings) if result.warnings else None,
               repeat_times_json=json.dumps(result.repeat_times) if result.repeat_times else None)
    return row


def run_from_row(row: sqlite3.Row) -> RunResult:
    """The result a `runs` row (joined with its `elbo` blob, when selected) stands for."""
    values: dict[str, Any] = {}
    columns = row.keys()
    for field in dataclasses.fields(RunResult):
        if field.name in NOT_STORED:
            continue
        base, optional = field_kinds()[field.name]
        if base not in _SQL_TYPES or field.name not in columns:
            continue
        value = row[field.name]
        if value is None and not optional and field.default is not dataclasses.MISSING:
            continue  # a column added after this row was written
        values[field.name] = float(value) if base is float and isinstance(value, str) else value
    values["spec"] = json.loads(row["spec_json"])
    values["versions"] = json.loads(row["versions_json"])
    warnings = row["warnings_json"] if "warnings_json" in columns else None
    values["warnings"] = json.loads(warnings) if warnings else []
    repeat_times = row["repeat_times_json"] if "repeat_times_json" in columns else None
    values["repeat_times"] = json.loads(repeat_times) if repeat_times else []
    blob = row["elbo"] if "elbo" in columns else None
    values["elbo"] = np.frombuffer(blob, ELBO_DTYPE).tolist() if blob else []
    return RunResult.from_dict(values)
