"""Runs files: what `RunStore.export` writes and `RunStore.import_file` reads.

JSON: a list of `RunResult.to_dict()`. CSV and Parquet: one row per run, every field a
column; `spec`, `versions`, `elbo`, `warnings` and `repeat_times` as JSON text. Reading gives the records as found;
`RunStore.import_file` checks each one and says which it refused.

A CSV is opened in spreadsheets, which run a cell that starts with =, +, - or @ as a
formula: its text cells are written as `core.results.spreadsheet_text` has them (behind a
single quote where they start so), which reading removes, so a file reads back exactly as
it was written.

A file to import is bounded before it is parsed, so that a small file cannot grow the
server: at most `MAX_IMPORT_BYTES` as read, `MAX_IMPORT_RECORDS` runs, and for Parquet (whose
columns are compressed: 8 KB can declare hundreds of MB) at most `MAX_PARQUET_UNPACKED_BYTES`
once unpacked, as its footer declares it, read one row group at a time.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pathlib
import tempfile
from typing import Any, NamedTuple

from core.results import spreadsheet_text
from core.results.result import RunResult
from core.store.records import StoreError, field_kinds

FORMATS = (".json", ".csv", ".parquet")
_JSON_COLUMNS = ("spec", "versions", "elbo", "warnings", "repeat_times")
MAX_IMPORT_BYTES = 48 * 2**20
MAX_IMPORT_RECORDS = 10_000
MAX_PARQUET_UNPACKED_BYTES = 128 * 2**20


class Imported(NamedTuple):
    """What an import did.

    Attributes:
        name: the file's name.
        added: runs added to the store.
        already: runs the store held already (skipped).
        refused: one line per record that failed its checks ("record 3: ..."), in file order.
    """

    name: str
    added: int
    already: int
    refused: tuple[str, ...]

    def summary(self) -> str:
        """"Imported 2 new runs from runs.json (1 already stored)"."""
        return (f"Imported {self.added} new run{'s' * (self.added != 1)} from {self.name}"
                + (f" ({self.already} already stored)" if self.already else ""))

    def refusals(self, most: int = 5) -> str:
        """"refused 1 of 4 records of runs.json: record 3: ..." ("" when none was refused)."""
        if not self.refused:
            return ""
        total = self.added + self.already + len(self.refused)
        shown = "; ".join(self.refused[:most])
        if len(self.refused) > most:
            shown += f"; and {len(self.refused) - most} more"
        return f"refused {len(self.refused)} of {total} record{'s' * (total != 1)} of {self.name}: {shown}"


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


def read_file(path: pathlib.Path) -> list:
    """The records of a runs file, unchecked (see `read_bytes`)."""
    check_format(path)
    try:
        size = path.stat().st_size
        if size > MAX_IMPORT_BYTES:
            raise StoreError(_too_big(path.name, size))
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read {path.name}: {exc.strerror}") from exc
    return read_bytes(data, path.name)


def _too_big(name: str, size: int) -> str:
    return f"{name} is {size / 2**20:,.1f} MiB; an import reads at most {MAX_IMPORT_BYTES // 2**20} MiB (split it)"


def _check_count(name: str, count: int) -> None:
    if count > MAX_IMPORT_RECORDS:
        raise StoreError(f"{name} holds {count:,} runs; an import takes at most {MAX_IMPORT_RECORDS:,} (split it)")


def read_bytes(data: bytes, name: str) -> list:
    """The records of a runs file's bytes, unchecked; `name` (its file name) says the format.

    Raises:
        StoreError: the format is unknown or the bytes are not a runs file; the message
            names the file by `name` only (never a folder of this machine).
    """
    suffix = check_format(pathlib.Path(name))
    if len(data) > MAX_IMPORT_BYTES:
        raise StoreError(_too_big(name, len(data)))
    try:
        records = _READERS[suffix](data, name)
        _check_count(name, len(records))
        return records
    except StoreError:
        raise
    except (ValueError, TypeError, csv.Error, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read {name}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - pyarrow's own errors: still a file we cannot read
        raise StoreError(f"cannot read {name}: not a {suffix[1:]} runs file ({type(exc).__name__})") from exc


def _write_json(path: pathlib.Path, records: list[dict]) -> None:
    # NaN/Infinity are written as JSON's common extension so that they round-trip.
    path.write_text(json.dumps(records), encoding="utf-8")


def _read_json(data: bytes, name: str) -> list:
    records = json.loads(data.decode("utf-8"))
    if not isinstance(records, list):
        raise StoreError(f"{name}: expected a JSON list of runs; got {type(records).__name__}")
    return records


def _flat(record: dict) -> dict:
    return {k: json.dumps(v) if k in _JSON_COLUMNS else v for k, v in record.items()}


def _csv_cells(record: dict) -> dict:
    return {k: spreadsheet_text.neutral(v) if isinstance(v, str) else v for k, v in _flat(record).items()}


def _write_csv(path: pathlib.Path, records: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        # extrasaction: timed_window repeats timed_start and timed_end for JSON readers.
        writer = csv.DictWriter(handle, fieldnames=list(field_kinds()), extrasaction="ignore")
        writer.writeheader()  # None -> empty cell; floats are written as repr (exact)
        writer.writerows(_csv_cells(record) for record in records)


def _parse_cell(name: str, cell: str) -> Any:
    """A CSV cell as its field's type; left as text when it does not parse (validation
    then reports it). An empty cell is None for optional fields."""
    base, optional = field_kinds().get(name, (str, False))
    if cell is None:  # a short row
        return None
    if cell == "" and (optional or base is not str):
        return None
    if name in _JSON_COLUMNS or base is str:
        cell = spreadsheet_text.read_back(cell)
    try:
        if name in _JSON_COLUMNS:
            return json.loads(cell)
        return base(cell) if base in (int, float) else cell
    except ValueError:
        return cell


def _read_csv(data: bytes, name: str) -> list:
    # ELBO curves are long: lift the csv module's 128 KiB cell limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.DictReader(io.StringIO(data.decode("utf-8"), newline=""))
    rows = []
    for row in reader:  # counted as read: rows past the bound are never built
        rows.append(row)
        _check_count(name, len(rows))
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


def _read_parquet(data: bytes, name: str) -> list:
    # Deferred: see _write_parquet.
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.ParquetFile(io.BytesIO(data))
    meta = source.metadata  # the footer alone: nothing is unpacked yet
    _check_count(name, meta.num_rows)
    unpacked = sum(meta.row_group(g).column(c).total_uncompressed_size
                   for g in range(meta.num_row_groups) for c in range(meta.num_columns))
    if unpacked > MAX_PARQUET_UNPACKED_BYTES:
        raise StoreError(_unpacks_to(name, unpacked))
    # Text columns are read as dictionaries (a value and, per row, its index): a dictionary
    # page declares one value's size, but each row that points at it would build a copy.
    texts = [field.name for field in source.schema_arrow
             if pa.types.is_string(field.type) or pa.types.is_large_string(field.type)]
    source = pq.ParquetFile(io.BytesIO(data), read_dictionary=texts)
    rows = []
    for group in range(meta.num_row_groups):  # one at a time, measured before it is built
        table = source.read_row_group(group)
        decoded = sum(_decoded_bytes(chunk) for column in table.columns for chunk in column.chunks)
        if decoded > MAX_PARQUET_UNPACKED_BYTES:
            raise StoreError(_unpacks_to(name, decoded))
        rows.extend(table.to_pylist())
        _check_count(name, len(rows))
    for row in rows:
        for name in _JSON_COLUMNS:
            if isinstance(row.get(name), str):
                try:
                    row[name] = json.loads(row[name])
                except ValueError:
                    pass  # validation reports it
    return rows


def _unpacks_to(name: str, size: int) -> str:
    return (f"{name} unpacks to {size / 2**20:,.0f} MiB; an import unpacks at most "
            f"{MAX_PARQUET_UNPACKED_BYTES // 2**20} MiB (split it)")


def _decoded_bytes(chunk) -> int:
    """What `chunk` (an Arrow array) takes once every row is a value of its own."""
    # Deferred: see _write_parquet.
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(chunk.type):
        return chunk.nbytes
    lengths = pc.binary_length(chunk.dictionary)
    return int(pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0) + chunk.indices.nbytes


_WRITERS = {".json": _write_json, ".csv": _write_csv, ".parquet": _write_parquet}
_READERS = {".json": _read_json, ".csv": _read_csv, ".parquet": _read_parquet}
