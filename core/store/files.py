"""Runs files: what `RunStore.export` writes and `RunStore.import_file` reads.

JSON: a list of `RunResult.to_dict()`. CSV and Parquet: one row per run, every field a
column; `spec`, `versions` and `elbo` as JSON text. Reading validates every record, so
that an import can be refused whole before anything is written.
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import tempfile
from typing import Any

from core.run.result import RunResult
from core.store.records import StoreError, field_kinds, validate_record

FORMATS = (".json", ".csv", ".parquet")
_JSON_COLUMNS = ("spec", "versions", "elbo")


def check_format(path: pathlib.Path) -> str:
    """`path`'s suffix, lower case, if it is one of `FORMATS`; else StoreError."""
    if path.suffix.lower() not in FORMATS:
        raise StoreError(f"{path.name}: unknown format; use one of {', '.join(FORMATS)}")
    return path.suffix.lower()


def write_runs(path: pathlib.Path, runs: list[RunResult]) -> None:
    """Writes `runs` to `path` in the format its suffix names, replacing it atomically."""
    suffix = check_format(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        _WRITERS[suffix](pathlib.Path(temp), [run.to_dict() for run in runs])
        os.replace(temp, path)  # readers never see a half-written file
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def read_runs(path: pathlib.Path) -> list[RunResult]:
    """Every run in a runs file, each validated.

    Raises:
        StoreError: the format is unknown, the file cannot be read, or a record is invalid
            (the message names the file and the record, counted from 1).
    """
    suffix = check_format(path)
    try:
        raw = _READERS[suffix](path)
    except StoreError:
        raise
    except (OSError, ValueError, TypeError, csv.Error) as exc:
        raise StoreError(f"cannot read {path.name}: {exc}") from exc
    return [validate_record(r, f"{path.name}: record {i}") for i, r in enumerate(raw, 1)]


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
        # extrasaction: timed_window repeats timed_start and timed_end for JSON readers.
        writer = csv.DictWriter(handle, fieldnames=list(field_kinds()), extrasaction="ignore")
        writer.writeheader()  # None -> empty cell; floats are written as repr (exact)
        writer.writerows(_flat(record) for record in records)


def _parse_cell(name: str, cell: str) -> Any:
    """A CSV cell as its field's type; left as text when it does not parse (validation
    then reports it). An empty cell is None for optional fields."""
    base, optional = field_kinds().get(name, (str, False))
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
    # Deferred, here and in _read_parquet: pyarrow is large and only Parquet files need it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {int: pa.int64(), float: pa.float64()}
    flat = [_flat(record) for record in records]
    table = pa.table({
        name: pa.array([r[name] for r in flat], types.get(base, pa.string()))
        for name, (base, _) in field_kinds().items()
    })
    pq.write_table(table, path)


def _read_parquet(path: pathlib.Path) -> list:
    # Deferred: see _write_parquet.
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
