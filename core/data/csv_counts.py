"""Count tables from CSV files (paths or uploaded bytes), and what is wrong with a bad one.

The layout (separator, decimal mark, header line, row names) is found by
`core.data.csv_layout`. A rejected file gets a message naming the file, the 1-based line
and column as an editor shows them, the column's header name when there is one, and what
is accepted: the people uploading are not expected to read a pandas traceback.

All-zero count columns are dropped, as pyPLNmodels does, and the data say so
(`CountData.warnings`): such a column has no finite optimum (its mean's log goes to
-infinity), so a fit that keeps it never converges and its ELBO creeps towards that of
the fit without it.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import os
import re

import numpy as np
import pandas as pd

from core import config
from core.data import csv_layout, samples
from core.data.counts import CountData, DataError, PathLike, validate
from core.spec import cap, cap_variable

MAX_CSV_MB_ENV = "PLNLAB_MAX_CSV_MB"
MAX_CSV_BYTES = int(config.variable(MAX_CSV_MB_ENV).default * 1e6)
# The largest log-offset taken: e^50 = 5e21 times a rate, past any count (the log of a library
# size of a billion is 20.7).
MAX_LOG_OFFSET = 50.0
# A CSV cell reading like one of these is an absent value, not a malformed one.
_MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "-"})


def read_csv(
    counts_path: PathLike, offsets_path: PathLike | None = None, max_bytes: int | None = None,
    header: str = "auto",
) -> CountData:
    """Reads counts (and optionally log-offsets) from CSV files.

    Args:
        counts_path: (n, p) whole-number counts, cells separated by commas, semicolons or
            tabs, with or without a header line of column names and a column of row names
            (see `core.data.csv_layout`). All-zero columns are dropped (`CountData.warnings`
            names them).
        offsets_path: (n, p) log-offsets in the same layout; zeros when None.
        max_bytes: largest file accepted, to keep a shared server responsive
            (default: `max_csv_bytes()`).
        header: whether line 1 of each file names the columns: "yes", "no" or "auto"
            (decide, and say why in `CountData.notes`).

    Raises:
        DataError: naming the file and the first offending cell.
    """
    max_bytes = max_csv_bytes() if max_bytes is None else max_bytes
    has_offsets = offsets_path is not None
    return read_csv_bytes(
        read_bytes(counts_path, max_bytes),
        read_bytes(offsets_path, max_bytes) if has_offsets else None,
        name=os.path.basename(os.fspath(counts_path)),
        offsets_name=os.path.basename(os.fspath(offsets_path)) if has_offsets else "offsets",
        max_bytes=max_bytes,
        header=header,
    )


def read_csv_bytes(
    counts_bytes: bytes,
    offsets_bytes: bytes | None,
    name: str,
    offsets_name: str = "offsets",
    max_bytes: int | None = None,
    header: str = "auto",
) -> CountData:
    """Same as `read_csv` for uploaded file contents; `name` labels the counts in messages."""
    max_bytes = max_csv_bytes() if max_bytes is None else max_bytes
    counts, layout, row_names = _parse_table(counts_bytes, name, max_bytes, whole=True, header=header)
    notes = list(layout.notes)
    offsets = np.zeros_like(counts)
    if offsets_bytes is not None:
        offsets, offsets_layout, offset_rows = _parse_table(offsets_bytes, offsets_name, max_bytes, whole=False,
                                                            header=header)
        notes += offsets_layout.notes
        if offsets.shape != counts.shape:
            raise DataError(
                f"{offsets_name}: offsets have shape {offsets.shape[0]} x {offsets.shape[1]} "
                f"but the counts in {name} are {counts.shape[0]} x {counts.shape[1]}; "
                "offsets must have one log-offset per count"
            )
        offsets, said = _matched(offsets, offsets_layout.names, layout.names, offsets_name, name)
        notes += said
        rows, said = samples.order(offset_rows, row_names, offsets_name, name)
        offsets = offsets if rows is None else offsets[rows]
        notes += said
    kept, warnings = _drop_zero_columns(counts, layout, name)
    if offsets_bytes is not None:
        warnings += _sizes_warning(offsets, offsets_name)
    counts, offsets = counts[:, kept], offsets[:, kept]
    covariates = np.ones((counts.shape[0], 1))
    validate(counts, offsets, covariates)
    return CountData(counts, offsets, covariates, name=f"csv {name}", notes=tuple(notes), warnings=warnings,
                     column_names=_column_names(layout, kept), row_names=row_names)


def _matched(offsets: np.ndarray, offset_names, count_names, offsets_name: str, name: str) -> tuple[np.ndarray, list]:
    """The offsets' columns in the counts' order, by name where both files name the same
    columns (a file written from a table in another order was read by position: each count
    beside another column's offset); else by position, said. DataError where both files
    name columns and some names differ: which offset goes with which count is not known."""
    if not offset_names or not count_names or tuple(offset_names) == tuple(count_names):
        return offsets, []
    if len(set(offset_names)) == len(offset_names) and set(offset_names) == set(count_names):
        where = {column: j for j, column in enumerate(offset_names)}
        return offsets[:, [where[column] for column in count_names]], [
            f"{offsets_name}: columns matched to {name}'s by their names (the file has them in another order)"]
    if set(offset_names) & set(count_names):
        stray = next(column for column in offset_names if column not in set(count_names))
        raise DataError(f"{offsets_name}: the column {stray!r:.40} is not a column of {name}, where other names "
                        "agree: which offset goes with which count is not known; give the offsets the counts' "
                        "column names, or no header")
    return offsets, [f"{offsets_name}: columns matched to {name}'s by position (their names differ)"]


def _sizes_warning(offsets: np.ndarray, offsets_name: str) -> tuple[str, ...]:
    """A warning where every offset is a whole number above 1: sizes, more likely than logs."""
    if offsets.max() >= 2 and (offsets == np.round(offsets)).all():
        return (f"{offsets_name}: every offset is a whole number, from {offsets.min():g} to {offsets.max():g}: "
                "offsets are logs (of each sample's size or exposure); if these are sizes, write their log",)
    return ()


def _column_names(layout: csv_layout.Layout, kept: np.ndarray) -> tuple[str, ...]:
    """The kept count columns' names: the header's, else "column K", K the column's number in
    the file as an editor shows it (a column of row names is column 1)."""
    first_column = 1 + int(layout.row_names)
    return tuple(str(layout.names[j]) if layout.names else f"column {j + first_column}" for j in kept)


# Dropped columns named in a warning; the rest are counted.
_NAMED_COLUMNS = 5


def _drop_zero_columns(counts: np.ndarray, layout: csv_layout.Layout, label: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """(the columns to keep, a warning naming those dropped); DataError when every column is zero."""
    zero = ~counts.any(axis=0)
    if not zero.any():
        return np.arange(counts.shape[1]), ()
    first_column = 1 + int(layout.row_names)
    described = [f"column {j + first_column}" + (f" ({layout.names[j]!r})" if layout.names else "")
                 for j in np.flatnonzero(zero)]
    if zero.all():
        raise DataError(f"{label}: every count is 0; at least one column with a count above 0 is needed")
    shown = ", ".join(described[:_NAMED_COLUMNS])
    if len(described) > _NAMED_COLUMNS:
        shown += f" and {len(described) - _NAMED_COLUMNS} more"
    plural = "s" if len(described) > 1 else ""
    warning = (f"{label}: dropped {len(described)} all-zero column{plural} ({shown}), as pyPLNmodels does: a "
               "column of zeros has no finite optimum, so a fit that keeps it never converges")
    return np.flatnonzero(~zero), (warning,)

def max_csv_bytes() -> int:
    """The size cap on one CSV file: $PLNLAB_MAX_CSV_MB megabytes when set, else 50 MB.
    (Uploads are also capped by Streamlit's server.maxUploadSize, in .streamlit/config.toml.)"""
    if not config.raw(MAX_CSV_MB_ENV):
        return MAX_CSV_BYTES
    try:
        return int(config.megabytes(MAX_CSV_MB_ENV) * 1e6)
    except config.ConfigError as exc:
        raise DataError(str(exc)) from None


def read_bytes(path: PathLike, max_bytes: int | None = None) -> bytes:
    """A file's bytes, within `max_bytes` (default `max_csv_bytes()`); DataError naming it otherwise."""
    max_bytes = max_csv_bytes() if max_bytes is None else max_bytes
    label = os.fspath(path)
    try:
        _check_size(os.path.getsize(path), label, max_bytes)
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as err:
        raise DataError(f"cannot read {label}: {err.strerror}") from err


def _check_size(size: int, label: str, max_bytes: int) -> None:
    if size > max_bytes:
        raise DataError(
            f"{label} is {size / 1e6:.1f} MB, larger than the {max_bytes / 1e6:.1f} MB "
            "accepted; use a smaller file, or simulated data for large n"
        )


def _parse_table(data: bytes, label: str, max_bytes: int, whole: bool,
                 header: str = "auto") -> tuple[np.ndarray, csv_layout.Layout, tuple[str, ...]]:
    """Parses CSV bytes into an (n, p) float64 array, its layout and its row names (() where
    it has none), or raises naming the first bad cell."""
    _check_size(len(data), label, max_bytes)
    layout = csv_layout.detect(data, label, header)
    skip = int(layout.header)
    _check_cap(label, "columns", layout.width)
    # Lines bound the rows from above: refused before parsing a file far past the cap.
    if data.count(b"\n") - skip > cap("rows") + 1:
        _check_cap(label, "rows", data.count(b"\n") - skip)
    floats = {j: np.float64 for j in range(1, layout.width + 1)} if layout.row_names else np.float64
    options = dict(sep=layout.separator, decimal=layout.decimal, header=None, skiprows=skip,
                   index_col=0 if layout.row_names else None, dtype=floats)
    fail = functools.partial(_fail, label, 1 + skip, 1 + int(layout.row_names), layout.names)
    try:
        table = _read(data, label, **options)
        numbers = table.to_numpy()
    except pd.errors.EmptyDataError:
        raise DataError(f"{label} has a header but no data rows") from None
    except DataError:
        raise
    except ValueError:  # a word among the numbers
        numbers = None
    if numbers is not None and numbers.shape[1] != layout.width:
        raise DataError(
            f"{label}: line 2 has {numbers.shape[1]} cells but line 1 has {layout.width}; every row "
            f"needs the same number of cells, separated by {csv_layout.SEPARATORS[layout.separator]}"
        )
    if numbers is None or not np.isfinite(numbers).all():
        _diagnose(data, label, options, fail)
    if numbers.shape[0] < 2:
        raise DataError(f"{label} has 1 row; at least 2 samples (rows) are needed")
    _check_cap(label, "rows", numbers.shape[0])
    if whole:
        fail(numbers < 0, numbers, "negative count; counts must be whole numbers >= 0")
        fail(numbers != np.round(numbers), numbers, "non-integer count; counts must be whole numbers")
    else:
        # Sizes where their logs belong (a library size of 11,706 for 9.37): accepted, the
        # float32 fit overflowed at its first iteration and the float64 one "converged" to a B
        # in the thousands.
        fail(np.abs(numbers) > MAX_LOG_OFFSET, numbers,
             f"an offset beyond ±{MAX_LOG_OFFSET:g}; offsets are logs (of each sample's size or exposure: 9.37 for "
             f"a size of 11,706), and e^{MAX_LOG_OFFSET:g} is no rate a count follows: write the log of these")
    return numbers, layout, tuple(str(name).strip() for name in table.index) if layout.row_names else ()


def _check_cap(label: str, name: str, count: int) -> None:
    """The same caps as every other dataset (`core.spec.cap`): a small file can still hold
    a fit too large for a shared server (4 x 10,000 is 139 KB and p x p matrices of 1e8)."""
    most = cap(name)
    if count > most:
        raise DataError(
            f"{label} has {count:,} {name}; this server fits at most {most:,} "
            f"({cap_variable(name)}); use fewer {name}"
        )


def _diagnose(data: bytes, label: str, options: dict, fail) -> None:
    # Reading cells as text is ~50x slower than parsing floats, so only the first block
    # that fails to parse is read as text, to find and quote the offending cell.
    block = 4096
    reader = pd.read_csv(io.BytesIO(data), chunksize=block, **_OPTIONS, **options)
    for index in itertools.count():
        try:
            if np.isfinite(next(reader).to_numpy()).all():
                continue
        except StopIteration:
            break
        except ValueError:
            pass
        skip = options["skiprows"] + index * block
        text = _read(data, label, **{**options, "skiprows": skip, "nrows": block, "dtype": str,
                                     "na_filter": False})
        cells = _cells(text)
        missing, values = _missing(cells), _numbers(cells, options["decimal"])
        if missing.any():  # pandas fills a short line's missing fields with empty cells: say it is short
            _refuse_short_line(data, label, options, cells.shape[1] + int(options["index_col"] is not None))
        fail(missing, cells, "missing value (empty cell or NA); every cell needs a number", index * block)
        fail(np.isnan(values), cells, "non-numeric cell; only numbers are accepted", index * block)
        fail(np.isinf(values), cells, "non-finite value; values must be finite numbers", index * block)
        break
    raise DataError(f"{label}: some cells could not be read as numbers; only numbers are accepted")


def _refuse_short_line(data: bytes, label: str, options: dict, fields: int) -> None:
    """Raises naming the first line with fewer than `fields` fields, as a long line is named
    (`parser_reason`); does nothing where every line has them all. Read only on the way to an
    error, so a whole pass over the text costs nothing a good file pays."""
    first = _first_line(data, options["skiprows"])
    # pandas read the table: no line is longer, so the first without `fields` fields is short.
    short = _first_ragged(data, first, None, fields, options["sep"])
    if short is not None:
        raise DataError(f"{label}: {_ragged(*short, fields, first)}; every row needs the same number of cells")


def _fail(label, first_line, first_column, names, mask, cells, rule, line_offset=0) -> None:
    """Raises naming the first masked cell as the file shows it: 1-based line and column."""
    if mask.any():
        row, col = np.argwhere(mask)[0]
        cell = cells[row, col]
        cell = f"{cell:g}" if isinstance(cell, float) else str(cell)
        if len(cell) > _SHOWN_CELL:  # one line on a terminal and in the upload's message
            cell = f"{cell[:_SHOWN_CELL]}… ({len(cell):,} characters)"
        name = f" ({names[col]!r:.{_SHOWN_CELL}})" if names and col < len(names) else ""
        raise DataError(
            f"{label}: {rule}; line {row + line_offset + first_line}, "
            f"column {col + first_column}{name} holds {cell!r}"
        )


_OPTIONS = dict(encoding="utf-8-sig", skip_blank_lines=True)
# Characters of a bad cell (or a column's name) a message shows.
_SHOWN_CELL = 40


def _read(data: bytes, label: str, **options) -> pd.DataFrame:
    try:
        return pd.read_csv(io.BytesIO(data), **_OPTIONS, **options)
    except pd.errors.EmptyDataError:
        if options.get("skiprows"):
            raise
        raise DataError(f"{label} is empty; {csv_layout.ACCEPTED} is needed") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        reason = parser_reason(err, data, options.get("skiprows", 0), options.get("sep"))
        raise DataError(f"{label} is not a readable table: {reason}; {csv_layout.ACCEPTED} is needed") from None


# pandas' C parser on a ragged row: "Error tokenizing data. C error: Expected 2 fields in line 3, saw 4".
_RAGGED = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def parser_reason(err: Exception, data: bytes, skip: int = 0, sep: str | None = None) -> str:
    """pandas' reason the table in `data`, read from after its first `skip` lines with the
    separator `sep`, cannot be read, said without its parser's jargon where known."""
    ragged = _RAGGED.search(str(err))
    if ragged:
        expected, line, seen = (int(number) for number in ragged.groups())
        first = _first_line(data, skip)
        if sep is not None:
            line, seen = _first_ragged(data, first, line, expected, sep) or (line, seen)
        return _ragged(line, seen, expected, first)
    return str(err).strip()


def _first_ragged(data: bytes, first: int, before: int | None, expected: int, sep: str) -> tuple[int, int] | None:
    """(line number, fields) of the first line from line `first` on (up to line `before`, or
    to the end) without `expected` fields, or None. pandas names the first long line, having
    filled the short ones before it with empty cells: the file's first ragged line is the one
    to fix first."""
    text = data.decode("utf-8-sig", errors="replace").splitlines()[first - 1:None if before is None else before - 1]
    rows = csv.reader(text, delimiter=sep)
    for row in rows:
        if row and any(cell.strip() for cell in row) and len(row) != expected:
            return first - 1 + rows.line_num, len(row)
    return None


def _first_line(data: bytes, skip: int) -> int:
    """The 1-based number of the first line after `skip` with anything on it: the line whose
    fields pandas expects of every other (a header it was told to skip is not that line)."""
    lines = data.decode("utf-8-sig", errors="replace").splitlines()
    return next((number for number, line in enumerate(lines[skip:], start=skip + 1) if line.strip()), skip + 1)


def _ragged(line: int, seen: int, expected: int, first: int) -> str:
    """A line with another number of fields than line `first`, said once for long and short
    lines. Line `first` is named: "the lines before it" read wrong where a header (line 1)
    had a third number of fields."""
    return f"line {line} has {seen} field{'s' * (seen != 1)} where line {first} has {expected}"


def _cells(frame: pd.DataFrame) -> np.ndarray:
    # Python strings (an object array), not NumPy's fixed-width ones: those are as wide as
    # the longest cell, so one cell of 200,000 characters made a block of 4,096 rows take
    # gigabytes per copy (14 GB in all: the command line was killed by the kernel).
    return frame.apply(lambda column: column.astype(str).str.strip()).to_numpy(dtype=object)


def _missing(cells: np.ndarray) -> np.ndarray:
    return pd.Series(cells.ravel()).str.lower().isin(_MISSING_TOKENS).to_numpy().reshape(cells.shape)


def _numbers(cells: np.ndarray, decimal: str = ".") -> np.ndarray:
    """Cells as float64, NaN where a cell is not a number (missing cells included)."""
    text = pd.Series(cells.ravel())
    if decimal == ",":
        text = text.str.replace(",", ".", regex=False)
    values = pd.to_numeric(text, errors="coerce")
    return values.to_numpy(np.float64).reshape(cells.shape)
