"""The shared run store: every `RunResult`, in one SQLite file that all users share.

SQLite in WAL mode lets many readers work while one writer appends, across threads and
processes (Streamlit sessions, `python -m core` sweeps). Each operation opens its own
short-lived connection, so no connection crosses a thread, and each write is one
`BEGIN IMMEDIATE` transaction, so a process killed mid-write leaves no partial run.

Layout: table `runs` holds every scalar field of `RunResult` as its own column (so SQL can
filter), `spec_json` and `versions_json`; table `elbo_traces` holds each ELBO curve as
little-endian float64 bytes. Only JSON and raw float bytes are stored, never pickles.
SQLite turns NaN into NULL, so a NaN in a REAL column is stored as the text 'nan' to keep
it apart from None (NULL).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import json
import math
import numbers
import os
import pathlib
import sqlite3
import tempfile
import time
import typing
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from core.result import CACHE_STATES, STATUSES, RunResult

if TYPE_CHECKING:
    import pandas

DEFAULT_DB_ENV = "PLNLAB_DB"
BUSY_TIMEOUT_S = 30.0
FORMATS = (".json", ".csv", ".parquet")
_SQL_TYPES = {int: "INTEGER", float: "REAL", str: "TEXT"}
_CHUNK = 500  # below SQLite's bound-parameter limit on old builds (999)
# frame() column -> keys tried in `versions`, first present wins.
_VERSION_COLUMNS = {
    "jax_version": ("jax",), "jaxlib_version": ("jaxlib",), "optax_version": ("optax",),
    "numpy_version": ("numpy",), "python_version": ("python",),
    "platform": ("platform",), "cpu_count": ("cpu_count",), "host": ("host",),
}


class StoreError(Exception):
    """The store file or an import file cannot be used; the message says which and why."""


def default_db_path() -> pathlib.Path:
    """`$PLNLAB_DB` if set, else `$XDG_DATA_HOME/plnlab/runs.sqlite3` (~/.local/share)."""
    if os.environ.get(DEFAULT_DB_ENV):
        return pathlib.Path(os.environ[DEFAULT_DB_ENV]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):  # the XDG spec says to ignore relative paths
        data_home = "~/.local/share"
    return pathlib.Path(data_home).expanduser() / "plnlab" / "runs.sqlite3"


@functools.cache
def _kinds() -> dict[str, tuple[type, bool]]:
    """Every RunResult field -> (base type, optional), read from its annotation."""
    hints = typing.get_type_hints(RunResult)
    kinds = {}
    for field in dataclasses.fields(RunResult):
        args = typing.get_args(hints[field.name])
        optional = type(None) in args
        hint = next(a for a in args if a is not type(None)) if optional else hints[field.name]
        kinds[field.name] = (typing.get_origin(hint) or hint, optional)
    return kinds


def _scalars() -> list[str]:
    return [name for name, (base, _) in _kinds().items() if base in _SQL_TYPES]


def _migration_1() -> list[str]:
    columns = ", ".join(f"{n} {_SQL_TYPES[_kinds()[n][0]]}" for n in _scalars() if n != "id")
    return [
        f"CREATE TABLE runs (id INTEGER PRIMARY KEY, {columns}, host TEXT,"
        " spec_json TEXT NOT NULL, versions_json TEXT NOT NULL)",
        "CREATE INDEX runs_spec_key ON runs (spec_key)",
        "CREATE INDEX runs_created_at ON runs (created_at)",
        "CREATE TABLE elbo_traces (run_id INTEGER PRIMARY KEY"
        " REFERENCES runs(id) ON DELETE CASCADE, elbo BLOB NOT NULL)",
    ]


# Applied in order, in one transaction; PRAGMA user_version counts those applied. Append,
# never edit. Scalar fields added to RunResult later get their column added on open.
MIGRATIONS = (_migration_1,)
SCHEMA_VERSION = len(MIGRATIONS)


def _describe(base: type) -> str:
    return {int: "a whole number", float: "a number", str: "a string", dict: "an object",
            list: "a list of numbers"}[base]


def _check_value(name: str, base: type, value: Any, where: str) -> Any:
    bad = StoreError(f"{where}: field {name!r} must be {_describe(base)}; got {value!r:.80}")
    if isinstance(value, bool) and base is not str:
        raise bad
    if base is int and isinstance(value, numbers.Integral):
        return int(value)
    if base is float and isinstance(value, numbers.Real):
        return float(value)
    if base is str and isinstance(value, str):
        return value
    if base is dict and isinstance(value, dict):
        try:
            return json.loads(json.dumps(value))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{where}: field {name!r} is not plain JSON: {exc}") from exc
    if base is list and isinstance(value, (list, tuple, np.ndarray)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            raise bad from None
        if array.ndim == 1 and (array.size == 0 or array.dtype.kind in "fiu"):
            return array.astype(float).tolist()
    raise bad


def _validate(values: Any, where: str) -> RunResult:
    """A checked copy of a record (a dict of RunResult fields), or StoreError saying why not."""
    if not isinstance(values, dict):
        raise StoreError(f"{where}: expected a run record (an object); got {type(values).__name__}")
    out: dict[str, Any] = {}
    for field in dataclasses.fields(RunResult):
        base, optional = _kinds()[field.name]
        if field.name not in values:
            if field.default is dataclasses.MISSING:
                raise StoreError(f"{where}: missing field {field.name!r}")
            continue
        value = values[field.name]
        out[field.name] = None if value is None and optional else _check_value(
            field.name, base, value, where)
    for name, choices in (("status", STATUSES), ("cache", CACHE_STATES)):
        if out[name] not in choices:
            raise StoreError(f"{where}: {name} must be one of {', '.join(choices)}; got {out[name]!r}")
    if not out["spec_key"]:
        raise StoreError(f"{where}: spec_key is empty")
    if not (math.isfinite(out.get("created_at", 0.0)) and out.get("created_at", 0.0) >= 0):
        raise StoreError(f"{where}: created_at must be epoch seconds; got {out['created_at']}")
    return RunResult(**out)


def _host(result: RunResult) -> str | None:
    host = result.versions.get("host")
    return None if host is None else str(host)


def _row(result: RunResult) -> dict[str, Any]:
    """The `runs` columns of a result (without id)."""
    row: dict[str, Any] = {}
    for name in _scalars():
        value = getattr(result, name)
        row[name] = "nan" if isinstance(value, float) and math.isnan(value) else value
    row.pop("id")
    row.update(host=_host(result), spec_json=json.dumps(result.spec, sort_keys=True),
               versions_json=json.dumps(result.versions, sort_keys=True))
    return row


def _result(row: sqlite3.Row) -> RunResult:
    values: dict[str, Any] = {}
    columns = row.keys()
    for field in dataclasses.fields(RunResult):
        base, optional = _kinds()[field.name]
        if base not in _SQL_TYPES or field.name not in columns:
            continue
        value = row[field.name]
        if value is None and not optional and field.default is not dataclasses.MISSING:
            continue  # a column added after this row was written
        values[field.name] = float(value) if base is float and isinstance(value, str) else value
    values["spec"] = json.loads(row["spec_json"])
    values["versions"] = json.loads(row["versions_json"])
    blob = row["elbo"] if "elbo" in columns else None
    values["elbo"] = np.frombuffer(blob, "<f8").tolist() if blob else []
    return RunResult.from_dict(values)


class RunStore:
    """All runs, in one SQLite file shared by every user, thread and process.

    Args:
        path: the database file; None means `default_db_path()`. Its folder and the schema
            are created when missing.

    Raises:
        StoreError: the file is not a readable run store (damaged, not SQLite, too new).
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = pathlib.Path(path).expanduser() if path is not None else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._migrate()
        except (OSError, StoreError) as exc:
            cause = exc.__cause__ or exc
            raise StoreError(
                f"cannot open the run store {self.path}: {cause}. If the file is damaged, move "
                f"it aside (a new store is then created) or set {DEFAULT_DB_ENV} to another file"
            ) from cause

    @contextlib.contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """A fresh connection; with `write`, inside BEGIN IMMEDIATE ... COMMIT."""
        conn = None
        try:
            # timeout is SQLite's busy_timeout: wait for other writers instead of failing.
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            if write:
                conn.execute("BEGIN IMMEDIATE")
            yield conn
            if write:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"run store {self.path}: {exc}") from exc
        finally:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.rollback()
                conn.close()

    def _migrate(self) -> None:
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode = WAL")  # persistent: set once per file
            if self._up_to_date(conn):
                return
            conn.execute("BEGIN IMMEDIATE")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for migration in MIGRATIONS[version:]:
                for statement in migration():
                    conn.execute(statement)
            have = {r["name"] for r in conn.execute("PRAGMA table_info(runs)")}
            for name in _scalars():
                if name not in have:
                    conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {_SQL_TYPES[_kinds()[name][0]]}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")

    def _up_to_date(self, conn: sqlite3.Connection) -> bool:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"schema version {version} is newer than this program's "
                             f"({SCHEMA_VERSION}); upgrade PLN JIT Lab")
        have = {r["name"] for r in conn.execute("PRAGMA table_info(runs)")}
        return version == SCHEMA_VERSION and have.issuperset(_scalars())

    @property
    def schema_version(self) -> int:
        with self._connect() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    def _insert(self, conn: sqlite3.Connection, result: RunResult) -> int:
        row = _row(result)
        cursor = conn.execute(
            f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join(['?'] * len(row))})",
            list(row.values()))
        run_id = int(cursor.lastrowid)
        conn.execute("INSERT INTO elbo_traces (run_id, elbo) VALUES (?, ?)",
                     (run_id, np.asarray(result.elbo, "<f8").tobytes()))
        return run_id

    def add(self, result: RunResult) -> int:
        """Stores `result` in one transaction; sets its `id` (and `created_at` if 0)."""
        record = _validate(result.to_dict(), "run")
        record.created_at = result.created_at or time.time()
        with self._connect(write=True) as conn:
            run_id = self._insert(conn, record)
        result.id, result.created_at = run_id, record.created_at
        return run_id

    def _select(self, where: str = "", params: tuple = (), with_elbo: bool = True,
                limit: int | None = None) -> list[RunResult]:
        elbo = ", elbo_traces.elbo FROM runs LEFT JOIN elbo_traces ON run_id = runs.id"
        sql = f"SELECT runs.*{elbo if with_elbo else ' FROM runs'} {where}"
        sql += " ORDER BY created_at DESC, runs.id DESC LIMIT ?"
        with self._connect() as conn:
            rows = conn.execute(sql, (*params, -1 if limit is None else limit)).fetchall()
        return [_result(row) for row in rows]

    def get(self, run_id: int) -> RunResult:
        """The run with this id, ELBO curve included. Raises KeyError if absent."""
        found = self._select("WHERE runs.id = ?", (int(run_id),))
        if not found:
            raise KeyError(f"no run with id {run_id} in {self.path}")
        return found[0]

    def list(self, with_elbo: bool = False, limit: int | None = None) -> list[RunResult]:
        """Runs, newest first; `elbo` is [] unless `with_elbo`."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be a whole number >= 0 or None; got {limit!r}")
        return self._select(with_elbo=with_elbo, limit=limit)

    def find_by_spec_key(self, spec_key: str) -> list[RunResult]:
        """Runs of one spec (`FitSpec.key`), newest first, ELBO curves included."""
        return self._select("WHERE spec_key = ?", (spec_key,))

    def frame(self) -> pandas.DataFrame:
        """One row per run, newest first: `id`, `created` (UTC), the scalar fields, and
        `versions` flattened to the columns of `_VERSION_COLUMNS`. No ELBO curves."""
        import pandas as pd

        records = []
        for run in self.list():
            record = {name: getattr(run, name) for name in _scalars()}
            for column, keys in _VERSION_COLUMNS.items():
                record[column] = next((run.versions[k] for k in keys if k in run.versions), None)
            records.append(record)
        frame = pd.DataFrame(records, columns=[*_scalars(), *_VERSION_COLUMNS])
        frame.insert(1, "created", pd.to_datetime(frame["created_at"].astype(float), unit="s", utc=True))
        return frame

    def elbo_frame(self, run_ids: list[int]) -> pandas.DataFrame:
        """ELBO curves in long format: `run_id`, `iteration` (from 0), `elbo`, in the order
        of `run_ids`; ids not in the store are left out."""
        import pandas as pd

        ids = list(dict.fromkeys(int(i) for i in run_ids))
        blobs: dict[int, bytes] = {}
        with self._connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                sql = f"SELECT run_id, elbo FROM elbo_traces WHERE run_id IN ({', '.join(['?'] * len(chunk))})"
                blobs.update((r["run_id"], r["elbo"]) for r in conn.execute(sql, chunk))
        curves = [(i, np.frombuffer(blobs[i], "<f8")) for i in ids if i in blobs]
        return pd.DataFrame({
            "run_id": np.concatenate([np.full(len(c), i, np.int64) for i, c in curves] or [np.zeros(0, np.int64)]),
            "iteration": np.concatenate([np.arange(len(c), dtype=np.int64) for _, c in curves] or [np.zeros(0, np.int64)]),
            "elbo": np.concatenate([c for _, c in curves] or [np.zeros(0)]),
        })

    def delete(self, run_ids: list[int]) -> int:
        """Deletes these runs (one transaction); returns how many existed."""
        ids = list(dict.fromkeys(int(i) for i in run_ids))
        deleted = 0
        with self._connect(write=True) as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                marks = ", ".join(["?"] * len(chunk))
                conn.execute(f"DELETE FROM elbo_traces WHERE run_id IN ({marks})", chunk)
                deleted += conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk).rowcount
        return deleted

    def export(self, path: str | os.PathLike, run_ids: list[int] | None = None) -> int:
        """Writes runs (all, or these ids) to .json, .csv or .parquet; returns the count.

        JSON: a list of `RunResult.to_dict()`. CSV and Parquet: one row per run, every
        field a column; `spec`, `versions` and `elbo` as JSON text. Raises KeyError for an
        id not in the store.
        """
        path = pathlib.Path(path)
        suffix = _suffix(path)
        runs = self.list(with_elbo=True) if run_ids is None else [self.get(i) for i in run_ids]
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        try:
            _WRITERS[suffix](pathlib.Path(temp), [run.to_dict() for run in runs])
            os.replace(temp, path)  # readers never see a half-written file
        finally:
            if os.path.exists(temp):
                os.unlink(temp)
        return len(runs)

    def import_file(self, path: str | os.PathLike) -> int:
        """Adds the runs of an exported file, all or none; returns how many were new.

        Every record is validated before anything is written. A run already stored (same
        spec_key, created_at and host) is skipped, so importing twice adds nothing.
        """
        path = pathlib.Path(path)
        suffix = _suffix(path)
        try:
            raw = _READERS[suffix](path)
        except StoreError:
            raise
        except (OSError, ValueError, TypeError, csv.Error) as exc:
            raise StoreError(f"cannot read {path}: {exc}") from exc
        records = [_validate(r, f"{path.name}: record {i}") for i, r in enumerate(raw, 1)]
        imported = 0
        with self._connect(write=True) as conn:
            for record in records:
                record.created_at = record.created_at or time.time()
                exists = conn.execute(
                    "SELECT 1 FROM runs WHERE spec_key = ? AND created_at = ? AND host IS ? LIMIT 1",
                    (record.spec_key, record.created_at, _host(record))).fetchone()
                if not exists:
                    self._insert(conn, record)
                    imported += 1
        return imported

    def integrity_ok(self) -> bool:
        """True when SQLite's integrity_check finds the file sound."""
        try:
            with self._connect() as conn:
                return [tuple(r) for r in conn.execute("PRAGMA integrity_check")] == [("ok",)]
        except StoreError:
            return False


def _suffix(path: pathlib.Path) -> str:
    if path.suffix.lower() not in FORMATS:
        raise StoreError(f"{path.name}: unknown format; use one of {', '.join(FORMATS)}")
    return path.suffix.lower()


_JSON_COLUMNS = ("spec", "versions", "elbo")


def _write_json(path: pathlib.Path, records: list[dict]) -> None:
    # NaN/Infinity are written as JSON's common extension so that they round-trip.
    path.write_text(json.dumps(records), encoding="utf-8")


def _read_json(path: pathlib.Path) -> list:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise StoreError(f"{path.name}: expected a JSON list of runs; got {type(data).__name__}")
    return data


def _flat(record: dict) -> dict:
    return {k: json.dumps(v) if k in _JSON_COLUMNS else v for k, v in record.items()}


def _write_csv(path: pathlib.Path, records: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(_kinds()))
        writer.writeheader()  # None -> empty cell; floats are written as repr (exact)
        writer.writerows(_flat(record) for record in records)


def _parse_cell(name: str, cell: str) -> Any:
    """A CSV cell as its field's type; left as text when it does not parse (validation
    then reports it). An empty cell is None for optional fields."""
    base, optional = _kinds().get(name, (str, False))
    if cell is None:  # a short row
        return None
    if cell == "" and (optional or base is not str):
        return None
    try:
        if name in _JSON_COLUMNS:
            return json.loads(cell)
        return base(cell) if base in (int, float) else cell
    except ValueError:
        return cell


def _read_csv(path: pathlib.Path) -> list:
    # ELBO curves are long: lift the csv module's 128 KiB cell limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [{k: _parse_cell(k, v) for k, v in row.items() if k is not None} for row in rows]


def _write_parquet(path: pathlib.Path, records: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {int: pa.int64(), float: pa.float64()}
    flat = [_flat(record) for record in records]
    table = pa.table({
        name: pa.array([r[name] for r in flat], types.get(base, pa.string()))
        for name, (base, _) in _kinds().items()
    })
    pq.write_table(table, path)


def _read_parquet(path: pathlib.Path) -> list:
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    for row in rows:
        for name in _JSON_COLUMNS:
            if isinstance(row.get(name), str):
                try:
                    row[name] = json.loads(row[name])
                except ValueError:
                    pass  # validation reports it
    return rows


_WRITERS = {".json": _write_json, ".csv": _write_csv, ".parquet": _write_parquet}
_READERS = {".json": _read_json, ".csv": _read_csv, ".parquet": _read_parquet}
