"""The shared run store: every `RunResult`, in one SQLite file that all users share.

SQLite in WAL mode lets many readers work while one writer appends, across threads and
processes (Streamlit sessions, `python -m core` sweeps). Each operation opens its own
short-lived connection, so no connection crosses a thread, and each write is one
`BEGIN IMMEDIATE` transaction, so a process killed mid-write leaves no partial run.

A delete is soft: deleted runs are hidden from every listing, restorable (`restore`) for
`RESTORE_DAYS`, then purged. `backup` writes a consistent copy of the whole store. The file
and its WAL companions (-wal, -shm) must be on a local disk: SQLite's locking over a
network file system (NFS, SMB) is not to be trusted, and a store there can be corrupted.

The tables and migrations are in `core.store.schema`, record checks in
`core.store.records`, and the export/import file formats in `core.store.files`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import random
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from core import config
from core.results.result import RunResult
from core.spec import cap
from core.store import files as store_files
from core.store import frames
from core.store import schema as store_schema
from core.store.in_flight import Notes
from core.store.records import StoreError, failed_record, interrupted_result, scalar_fields, validate_record

if TYPE_CHECKING:
    import pandas

DEFAULT_DB_ENV = "PLNLAB_DB"
# The owner of every imported run: no session's or user's (those are "session:..." and
# "user:..."), and not measured by this store's machine whatever host it names.
IMPORTED = "imported"
BUSY_TIMEOUT_S = 30.0
_CHUNK = frames.CHUNK
# How long a deleted run can be restored before a later delete purges it.
RESTORE_DAYS = 14
# The most runs a store holds before imports are refused ($PLNLAB_MAX_STORED_RUNS): a file
# of a colleague's can add thousands at once, a fit adds one.
MAX_STORED_RUNS_ENV = "PLNLAB_MAX_STORED_RUNS"
DEFAULT_MAX_STORED_RUNS = config.variable(MAX_STORED_RUNS_ENV).default
_LIVE = "runs.deleted_at IS NULL"


def max_stored_runs() -> int:
    """$PLNLAB_MAX_STORED_RUNS, else `DEFAULT_MAX_STORED_RUNS`.

    Raises:
        StoreError: the variable is not a whole number >= 1.
    """
    if not config.raw(MAX_STORED_RUNS_ENV):
        return DEFAULT_MAX_STORED_RUNS
    try:
        return config.whole(MAX_STORED_RUNS_ENV)
    except config.ConfigError as exc:
        raise StoreError(str(exc)) from None


def default_db_path() -> pathlib.Path:
    """`$PLNLAB_DB` if set, else `$XDG_DATA_HOME/plnlab/runs.sqlite3` (~/.local/share)."""
    if (chosen := config.path(DEFAULT_DB_ENV)) is not None:
        return chosen
    data_home = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):  # the XDG spec says to ignore relative paths
        data_home = "~/.local/share"
    return pathlib.Path(data_home).expanduser() / "plnlab" / "runs.sqlite3"


def _use_wal(conn: sqlite3.Connection) -> None:
    """Puts the file in WAL mode (persistent: once per file), waiting out other processes.

    Switching a new file to WAL needs its exclusive lock, and when several processes open a
    new store at once (a server and its workers) SQLite refuses some of them at once rather
    than call the busy handler, since waiting could deadlock: they retry here instead.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))  # jittered, so the racers do not meet again


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
        self._notes = Notes(self.path)
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
            _use_wal(conn)
            store_schema.migrate(conn)
        self.recover_interrupted()

    def begin(self, spec_dict: dict, cancelled: threading.Event | None = None, owner: str = "") -> int:
        """Notes that a run of `spec_dict` (`FitSpec.to_dict()`), started by `owner`
        (`RunResult.owner`), is under way in this process; returns the note's id for `finish`
        or `abandon`. The note lives while this process does (`core.store.in_flight`): should
        the process die first, the run is stored as interrupted, still `owner`'s. `cancelled`
        is set when someone asks to cancel it (`request_cancel`).

        Raises:
            StoreError: see `begin_all`.
        """
        return self.begin_all([spec_dict], cancelled, owner)[0]

    def begin_all(self, spec_dicts: list[dict], cancelled: threading.Event | None = None,
                  owner: str = "", keys: list[str] | None = None) -> list[int]:
        """`begin` for runs that go together (timed side by side), in one transaction;
        `keys` name the notes (`in_flight()`'s "lease"; default: new ones), by which the
        board and the device queue find them (`core.coordination.under_way`).

        Raises:
            StoreError: they would take `owner` past $PLNLAB_MAX_QUEUED_PER_OWNER runs under
                way, or the store past $PLNLAB_MAX_QUEUED (counted and noted in one
                transaction, so simultaneous clicks cannot slip past); or `owner`'s runs held
                a device for $PLNLAB_MAX_DEVICE_SECONDS_PER_HOUR of the last hour.
        """
        with self._connect(write=True) as conn:
            everyone = int(conn.execute("SELECT COUNT(*) FROM in_flight").fetchone()[0])
            if everyone + len(spec_dicts) > cap("queued"):
                raise StoreError(f"{everyone} runs are already queued or running on this server (at most "
                                 f"{cap('queued')}, PLNLAB_MAX_QUEUED); try again when some have finished")
            if owner:
                mine = int(conn.execute("SELECT COUNT(*) FROM in_flight WHERE owner = ?", (owner,)).fetchone()[0])
                if mine + len(spec_dicts) > cap("queued_per_owner"):
                    raise StoreError(f"you already have {mine} runs queued or running (at most "
                                     f"{cap('queued_per_owner')}, PLNLAB_MAX_QUEUED_PER_OWNER); wait for them to "
                                     "finish")
                held = float(conn.execute(
                    "SELECT COALESCE(SUM(timed_end - timed_start), 0) FROM runs WHERE owner = ? AND timed_end > ?"
                    " AND timed_start > 0", (owner, time.time() - 3600)).fetchone()[0])
                if held >= cap("device_seconds_per_hour"):
                    raise StoreError(f"your runs held the device for {held:,.0f} s of the last hour (at most "
                                     f"{cap('device_seconds_per_hour'):,} s, PLNLAB_MAX_DEVICE_SECONDS_PER_HOUR); "
                                     "others get their turn first")
            flights: list[int] = []
            try:
                for spec_dict, name in zip(spec_dicts, keys or [""] * len(spec_dicts)):
                    flights.append(self._notes.begin(conn, spec_dict, cancelled, owner, name))
            except BaseException:
                for flight in flights:
                    self._notes.release(flight)
                raise
            return flights

    def finish(self, flight_id: int, result: RunResult) -> int:
        """Stores `result` and removes its in-flight note, in one transaction. A result that
        fails its checks is not lost: it is stored as a failed run saying why (and its note
        goes all the same); its id is returned and set on `result` either way."""
        values = {**result.to_dict(), "created_at": result.created_at or time.time()}
        try:
            record = validate_record(values, "run")
        except StoreError as refused:
            record = validate_record(failed_record(values, str(refused)), "run")
            result.status, result.error = record.status, record.error
        try:
            with self._connect(write=True) as conn:
                conn.execute("DELETE FROM in_flight WHERE id = ?", (int(flight_id),))
                run_id = self._insert(conn, record)
        finally:
            self._notes.release(flight_id)
        result.id, result.created_at = run_id, record.created_at
        return run_id

    def abandon(self, flight_id: int) -> None:
        """Removes an in-flight note whose run ended without a result (cancelled, failed)."""
        try:
            with self._connect(write=True) as conn:
                conn.execute("DELETE FROM in_flight WHERE id = ?", (int(flight_id),))
        finally:
            self._notes.release(flight_id)

    def in_flight(self) -> list[dict]:
        """Runs started and not yet finished: id, spec (dict), host, pid, started_at, lease, owner."""
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM in_flight ORDER BY started_at").fetchall()
        return [{"id": r["id"], "spec": json.loads(r["spec_json"]), "host": r["host"], "pid": r["pid"],
                 "started_at": r["started_at"], "lease": r["lease"], "owner": r["owner"]} for r in rows]

    def request_cancel(self, flight_id: int) -> bool:
        """Asks the process running in-flight run `flight_id` to cancel it (it stops at its
        next cancel check, within seconds, and stores nothing); False if no such run."""
        note = next((n for n in self.in_flight() if n["id"] == int(flight_id)), None)
        return note is not None and self._notes.request_cancel(note)

    def recover_interrupted(self) -> int:
        """Stores every in-flight run whose process died as "interrupted"; returns how many.
        Called by every listing, count and frame, so a run killed anywhere shows as
        interrupted at the next look (see `core.store.in_flight`)."""
        notes = self.in_flight()
        dead = [note for note in notes if not self._notes.alive(note)]
        if dead:
            with self._connect(write=True) as conn:
                for note in dead:
                    # Deleting first makes the recovery safe against two processes doing it at once.
                    if conn.execute("DELETE FROM in_flight WHERE id = ?", (note["id"],)).rowcount:
                        self._insert(conn, interrupted_result(note["spec"], note["started_at"], note["host"],
                                                              note["pid"], owner=note["owner"]))
        self._notes.sweep(notes)
        return len(dead)

    @property
    def schema_version(self) -> int:
        with self._connect() as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]

    def _insert(self, conn: sqlite3.Connection, result: RunResult) -> int:
        row = store_schema.run_row(result)
        cursor = conn.execute(
            f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join(['?'] * len(row))})",
            list(row.values()))
        run_id = int(cursor.lastrowid)
        conn.execute("INSERT INTO elbo_traces (run_id, elbo) VALUES (?, ?)",
                     (run_id, np.asarray(result.elbo, store_schema.ELBO_DTYPE).tobytes()))
        return run_id

    def add(self, result: RunResult) -> int:
        """Stores `result` in one transaction; sets its `id` (and `created_at` if 0)."""
        record = validate_record({**result.to_dict(), "created_at": result.created_at or time.time()}, "run")
        with self._connect(write=True) as conn:
            run_id = self._insert(conn, record)
        result.id, result.created_at = run_id, record.created_at
        return run_id

    def _select(self, where: str = "", params: tuple = (), with_elbo: bool = True,
                limit: int | None = None, deleted: bool = False) -> list[RunResult]:
        """Runs matching `where` (SQL conditions on `runs`, without WHERE), newest first: the
        live ones, or with `deleted` the deleted ones."""
        self.recover_interrupted()
        elbo = ", elbo_traces.elbo FROM runs LEFT JOIN elbo_traces ON run_id = runs.id"
        conditions = " AND ".join(filter(None, [where, "runs.deleted_at IS NOT NULL" if deleted else _LIVE]))
        sql = f"SELECT runs.*{elbo if with_elbo else ' FROM runs'} WHERE {conditions}"
        sql += " ORDER BY created_at DESC, runs.id DESC LIMIT ?"
        with self._connect() as conn:
            rows = conn.execute(sql, (*params, -1 if limit is None else limit)).fetchall()
        return [store_schema.run_from_row(row) for row in rows]

    def get(self, run_id: int) -> RunResult:
        """The run with this id, ELBO curve included. Raises KeyError if absent."""
        found = self._select("runs.id = ?", (int(run_id),))
        if not found:
            raise KeyError(f"no run with id {run_id} in {self.path}")
        return found[0]

    def list(self, with_elbo: bool = False, limit: int | None = None) -> list[RunResult]:
        """Runs, newest first; `elbo` is [] unless `with_elbo`."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be a whole number >= 0 or None; got {limit!r}")
        return self._select(with_elbo=with_elbo, limit=limit)

    def count(self) -> int:
        """How many runs are stored, counted by SQLite without reading them."""
        self.recover_interrupted()
        with self._connect() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM runs WHERE {_LIVE}").fetchone()[0])

    def find_by_spec_key(self, spec_key: str, limit: int | None = None, interrupted: bool = True,
                         with_elbo: bool = True, imported: bool = True) -> list[RunResult]:
        """Runs of one spec (`FitSpec.key`), newest first, ELBO curves included unless
        `with_elbo` is False; at most `limit`, without the runs that stopped before finishing
        ("interrupted", "timed_out": no whole result to show) if `interrupted` is False, and
        without imported runs (measured elsewhere, dated by whoever wrote the file) if
        `imported` is False: what a page headlines is measured here."""
        where = "spec_key = ?" + ("" if interrupted else " AND status NOT IN ('interrupted', 'timed_out')")
        where += "" if imported else " AND owner IS NOT ?"
        params = (spec_key,) if imported else (spec_key, IMPORTED)
        return self._select(where, params, with_elbo=with_elbo, limit=limit)

    def find(self, **equal: Any) -> list[RunResult]:
        """Runs whose columns equal these values (e.g. `strategy="scan", status="ok"`, or
        `host`), newest first, without ELBO curves. SQLite filters the rows, so a page that
        needs a few runs builds only those, however many the store holds.

        Raises:
            ValueError: a name that is not a column of `runs`.
        """
        columns = {*scalar_fields(), "host"}
        unknown = sorted(set(equal) - columns)
        if unknown:
            raise ValueError(f"not a run column: {', '.join(unknown)}; columns: {', '.join(sorted(columns))}")
        # Column names come from the checked set above; only the values are parameters.
        where = " AND ".join(f"runs.{name} = ?" for name in equal)
        return self._select(where, tuple(equal.values()), with_elbo=False)

    def frame(self) -> pandas.DataFrame:
        """One row per run, newest first: `id`, `created` (UTC), the scalar fields,
        `versions` flattened to columns, and `warning_count` (`core.store.frames.runs_frame`).
        No ELBO curves."""
        self.recover_interrupted()
        with self._connect() as conn:
            return frames.runs_frame(conn)

    def elbo_frame(self, run_ids: list[int]) -> pandas.DataFrame:
        """ELBO curves in long format: `run_id`, `iteration` (from 0), `elbo`, in the order
        of `run_ids`; ids not in the store are left out."""
        with self._connect() as conn:
            return frames.elbo_frame(self.curves(run_ids, conn))

    def curves(self, run_ids: list[int], conn: sqlite3.Connection | None = None) -> dict[int, np.ndarray]:
        """ELBO curves as float64 arrays by run id, in the order of `run_ids` (absent ids
        left out): read-only views of the stored bytes, no Python float per point."""
        if conn is None:
            with self._connect() as conn:
                return frames.curves(conn, run_ids)
        return frames.curves(conn, run_ids)

    def owned(self, run_ids: list[int], owner: str) -> set[int]:
        """Which of `run_ids` `owner` started (`RunResult.owner`), read from the store now, so
        that who may delete a run is decided when it is deleted; nobody owns a run whose owner
        is empty."""
        if not owner:
            return set()
        ids = list(dict.fromkeys(int(i) for i in run_ids))
        found: set[int] = set()
        with self._connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                marks = ", ".join(["?"] * len(chunk))
                found.update(row[0] for row in conn.execute(
                    f"SELECT id FROM runs WHERE owner = ? AND id IN ({marks})", [owner, *chunk]))
        return found

    def which(self, run_ids: list[int]) -> tuple[set[int], set[int]]:
        """Of `run_ids`, those stored and live, and those deleted but not yet purged (the
        others are not in the store)."""
        ids = list(dict.fromkeys(int(i) for i in run_ids))
        live: set[int] = set()
        deleted: set[int] = set()
        with self._connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                marks = ", ".join(["?"] * len(chunk))
                for run_id, deleted_at in conn.execute(f"SELECT id, deleted_at FROM runs WHERE id IN ({marks})", chunk):
                    (live if deleted_at is None else deleted).add(run_id)
        return live, deleted

    def _by_ids(self, conn: sqlite3.Connection, statement: str, run_ids, *params) -> int:
        """Runs `statement` (with `{marks}` for the ids, `params` before them) on `run_ids` in
        chunks; returns the rows it changed."""
        ids = list(dict.fromkeys(int(i) for i in run_ids))
        changed = 0
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            changed += conn.execute(statement.format(marks=", ".join(["?"] * len(chunk))), [*params, *chunk]).rowcount
        return changed

    def delete(self, run_ids: list[int], now: float | None = None) -> int:
        """Deletes these runs, softly (one transaction): hidden everywhere, restorable with
        `restore` for `RESTORE_DAYS`; returns how many were live. Runs deleted longer ago
        than that are purged for good."""
        now = time.time() if now is None else now
        with self._connect(write=True) as conn:
            deleted = self._by_ids(conn, f"UPDATE runs SET deleted_at = ? WHERE {_LIVE} AND id IN ({{marks}})",
                                   run_ids, now)
            expired = [row[0] for row in conn.execute("SELECT id FROM runs WHERE deleted_at < ?",
                                                      (now - RESTORE_DAYS * 86400,))]
            self._by_ids(conn, "DELETE FROM elbo_traces WHERE run_id IN ({marks})", expired)
            self._by_ids(conn, "DELETE FROM runs WHERE id IN ({marks})", expired)
        return deleted

    def restore(self, run_ids: list[int]) -> int:
        """Brings deleted runs back (those not yet purged); returns how many."""
        with self._connect(write=True) as conn:
            return self._by_ids(conn, "UPDATE runs SET deleted_at = NULL WHERE deleted_at IS NOT NULL "
                                      "AND id IN ({marks})", run_ids)

    def deleted(self, limit: int | None = None) -> list[tuple[RunResult, float]]:
        """Deleted runs that can still be restored, most recently deleted first, without
        curves: (run, when it was deleted)."""
        with self._connect() as conn:
            when = conn.execute("SELECT id, deleted_at FROM runs WHERE deleted_at IS NOT NULL"
                                " ORDER BY deleted_at DESC, id DESC LIMIT ?",
                                (-1 if limit is None else limit,)).fetchall()
        runs: dict[int, RunResult] = {}
        for start in range(0, len(when), _CHUNK):  # only those asked for are built
            chunk = [row[0] for row in when[start:start + _CHUNK]]
            runs.update((run.id, run) for run in self._select(f"runs.id IN ({', '.join(['?'] * len(chunk))})",
                                                              tuple(chunk), with_elbo=False, deleted=True))
        return [(runs[run_id], float(at)) for run_id, at in when if run_id in runs]

    def backup(self, path: str | os.PathLike) -> int:
        """Writes a consistent copy of the whole store to `path` (SQLite's VACUUM INTO: a
        snapshot of one moment, while others go on writing), deleted runs included; returns
        how many live runs it holds.

        Raises:
            StoreError: `path` exists (never overwritten), or cannot be written.
        """
        target = pathlib.Path(path).expanduser()
        if target.exists():
            raise StoreError(f"{target} exists; a backup never replaces a file")
        if not target.parent.is_dir():
            raise StoreError(f"no such folder: {target.parent}")
        with self._connect() as conn:
            conn.execute("VACUUM INTO ?", (str(target),))
        return RunStore(target).count()

    def export(self, path: str | os.PathLike, run_ids: list[int] | None = None) -> int:
        """Writes runs (all, or these ids) to .json, .csv or .parquet; returns the count.

        JSON: a list of `RunResult.to_dict()`. CSV and Parquet: one row per run, every
        field a column; `spec`, `versions` and `elbo` as JSON text. Raises KeyError for an
        id not in the store.
        """
        path = pathlib.Path(path).expanduser()
        store_files.check_format(path)  # before reading any run: a bad name fails first
        # Said as backup says it, before any run is read: a missing folder was an internal
        # error naming the temporary file written beside the target.
        if not path.parent.is_dir():
            blocked = next((folder for folder in path.parents if folder.exists()), path.parent)
            raise StoreError(f"{blocked} is a file, not a folder" if blocked.is_file()
                             else f"no such folder: {path.parent}")
        runs = self.list(with_elbo=True) if run_ids is None else [self.get(i) for i in run_ids]
        try:
            store_files.write_runs(path, runs)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return len(runs)

    def import_file(self, path: str | os.PathLike) -> store_files.Imported:
        """Adds the runs of an exported file (see `import_bytes`)."""
        path = pathlib.Path(path)
        return self._import(store_files.read_file(path), path.name)

    def import_bytes(self, data: bytes, name: str) -> store_files.Imported:
        """Adds the runs of an exported file's bytes; `name` is its file name (its suffix says
        the format, and messages name the file by it alone).

        Every record meets the checks a fresh run meets (`core.store.records`) before
        anything is written; those that fail are refused and listed, the others are added
        in one transaction. A run already stored (same spec_key, created_at and host) is
        skipped, so importing twice adds nothing.

        Raises:
            StoreError: the file is not a runs file at all; nothing is imported.
        """
        return self._import(store_files.read_bytes(data, name), name)

    def _import(self, raw: list, name: str) -> store_files.Imported:
        records, refused = [], []
        now = time.time()
        for number, values in enumerate(raw, 1):
            try:
                records.append(validate_record(values, f"record {number}"))
            except StoreError as exc:
                refused.append(str(exc))
        added = 0
        with self._connect(write=True) as conn:
            held = int(conn.execute(f"SELECT COUNT(*) FROM runs WHERE {_LIVE}").fetchone()[0])
            if held + len(records) > max_stored_runs():
                raise StoreError(f"{name}: {len(records):,} runs would take the store past its {max_stored_runs():,} "
                                 f"({MAX_STORED_RUNS_ENV}; it holds {held:,}); delete or back up and thin it first")
            # Oldest first, as they were made: an export lists the newest first, and its runs
            # took new numbers in reverse (the export's #27 became #1 here).
            for record in sorted(records, key=lambda record: record.created_at):
                exists = conn.execute(
                    "SELECT 1 FROM runs WHERE spec_key = ? AND created_at = ? AND host IS ? LIMIT 1",
                    (record.spec_key, record.created_at, store_schema.host_of(record))).fetchone()
                if not exists:
                    # Nobody's run here, whoever it named: an import cannot make a run someone's to
                    # delete, nor pass for one measured here (`core.bench.solve` skips it).
                    record.owner = IMPORTED
                    _dated_no_later_than(record, now)
                    self._insert(conn, record)
                    added += 1
        return store_files.Imported(name, added, len(records) - added, tuple(refused))

    def integrity_ok(self) -> bool:
        """True when SQLite's integrity_check finds the file sound."""
        try:
            with self._connect() as conn:
                return [tuple(r) for r in conn.execute("PRAGMA integrity_check")] == [("ok",)]
        except StoreError:
            return False


def _dated_no_later_than(record: RunResult, now: float) -> None:
    """An imported run dated after `now` (its machine's clock ran ahead, or the file says so)
    is dated `now`, its timed window moved with it: no import sorts as newer than its import."""
    ahead = record.created_at - now
    if ahead > 0:
        record.created_at = now
        if record.timed_end:
            record.timed_start, record.timed_end = record.timed_start - ahead, record.timed_end - ahead
