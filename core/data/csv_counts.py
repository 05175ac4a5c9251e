"""Count tables from CSV files (paths or uploaded bytes), and what is wrong with a bad one.

A rejected file gets a message naming the file, the 1-based line and column as an editor
shows them, the column's header name when there is one, and what is accepted: the people
uploading are not expected to read a pandas traceback.
"""

from __future__ import annotations

import functools
import io
import itertools
import os

import numpy as np
import pandas as pd

from core.data.counts import CountData, DataError, PathLike, validate
from core.spec import cap

MAX_CSV_BYTES = 50_000_000
MAX_CSV_MB_ENV = "PLNLAB_MAX_CSV_MB"
# A CSV cell reading like one of these is an absent value, not a malformed one.
_MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "-"})


def read_csv(
    counts_path: PathLike, offsets_path: PathLike | None = None, max_bytes: int | None = None
) -> CountData:
    """Reads counts (and optionally log-offsets) from comma-separated files.

    Args:
        counts_path: (n, p) whole-number counts, with a header row of column names (as
            pyPLNmodels' counts.csv) or without one when every cell of the first row is
            numeric. A header whose first cell is empty marks a row-name column (R's
            write.csv, pandas' to_csv), which is dropped.
        offsets_path: (n, p) log-offsets in the same layout; zeros when None.
        max_bytes: largest file accepted, to keep a shared server responsive
            (default: `max_csv_bytes()`).

    Raises:
        DataError: naming the file and the first offending cell.
    """
    max_bytes = max_csv_bytes() if max_bytes is None else max_bytes
    has_offsets = offsets_path is not None
    return read_csv_bytes(
        _read_bytes(counts_path, max_bytes),
        _read_bytes(offsets_path, max_bytes) if has_offsets else None,
        name=os.path.basename(os.fspath(counts_path)),
        offsets_name=os.path.basename(os.fspath(offsets_path)) if has_offsets else "offsets",
        max_bytes=max_bytes,
    )


def read_csv_bytes(
    counts_bytes: bytes,
    offsets_bytes: bytes | None,
    name: str,
    offsets_name: str = "offsets",
    max_bytes: int | None = None,
) -> CountData:
    """Same as `read_csv` for uploaded file contents; `name` labels the counts in messages."""
    max_bytes = max_csv_bytes() if max_bytes is None else max_bytes
    counts = _parse_table(counts_bytes, name, max_bytes, whole=True)
    offsets = np.zeros_like(counts)
    if offsets_bytes is not None:
        offsets = _parse_table(offsets_bytes, offsets_name, max_bytes, whole=False)
        if offsets.shape != counts.shape:
            raise DataError(
                f"{offsets_name}: offsets have shape {offsets.shape[0]} x {offsets.shape[1]} "
                f"but the counts in {name} are {counts.shape[0]} x {counts.shape[1]}; "
                "offsets must have one log-offset per count"
            )
    covariates = np.ones((counts.shape[0], 1))
    validate(counts, offsets, covariates)
    return CountData(counts, offsets, covariates, name=f"csv {name}")

def max_csv_bytes() -> int:
    """The size cap on one CSV file: $PLNLAB_MAX_CSV_MB megabytes when set, else 50 MB.
    (Uploads are also capped by Streamlit's server.maxUploadSize, in .streamlit/config.toml.)"""
    text = os.environ.get(MAX_CSV_MB_ENV, "").strip()
    if not text:
        return MAX_CSV_BYTES
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = 0.0
    if not megabytes > 0:
        raise DataError(f"{MAX_CSV_MB_ENV} must be a number of megabytes > 0; got {text!r}")
    return int(megabytes * 1e6)


def _read_bytes(path: PathLike, max_bytes: int) -> bytes:
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


def _parse_table(data: bytes, label: str, max_bytes: int, whole: bool) -> np.ndarray:
    """Parses CSV bytes into an (n, p) float64 array, or raises naming the first bad cell."""
    _check_size(len(data), label, max_bytes)
    first = _cells(_read(data, label, header=None, dtype=str, na_filter=False, nrows=1))[0]
    # Only a word marks a header: a first row of numbers and gaps is data with gaps.
    header = int(not (~np.isnan(_numbers(first)) | _missing(first)).all())
    # An empty first header cell marks row names (R's write.csv, pandas' to_csv); they go
    # to the index rather than being skipped, so that a ragged row still fails to parse.
    row_names = int(header and first[0] == "")
    if first.size - row_names < 2:
        raise DataError(
            f"{label} has {first.size - row_names} column; at least 2 variables (columns), "
            "separated by commas, are needed"
        )
    _check_cap(label, "columns", first.size - row_names)
    # Lines bound the rows from above: refused before parsing a file far past the cap.
    if data.count(b"\n") - header > cap("rows") + 1:
        _check_cap(label, "rows", data.count(b"\n") - header)
    floats = {j: np.float64 for j in range(1, first.size)} if row_names else np.float64
    options = dict(header=None, skiprows=header, index_col=0 if row_names else None, dtype=floats)
    names = [str(name) for name in first[row_names:]] if header else None
    fail = functools.partial(_fail, label, 1 + header, 1 + row_names, names)
    try:
        numbers = _read(data, label, **options).to_numpy()
    except pd.errors.EmptyDataError:
        raise DataError(f"{label} has a header but no data rows") from None
    except DataError:
        raise
    except ValueError:  # a word among the numbers
        numbers = None
    width = first.size - row_names
    if numbers is not None and numbers.shape[1] != width:
        raise DataError(
            f"{label}: line 2 has {numbers.shape[1]} cells but line 1 has {width}; every row needs "
            "the same number of comma-separated cells"
        )
    if numbers is None or not np.isfinite(numbers).all():
        _diagnose(data, label, options, fail)
    if numbers.shape[0] < 2:
        raise DataError(f"{label} has 1 row; at least 2 samples (rows) are needed")
    _check_cap(label, "rows", numbers.shape[0])
    if whole:
        fail(numbers < 0, numbers, "negative count; counts must be whole numbers >= 0")
        fail(numbers != np.round(numbers), numbers, "non-integer count; counts must be whole numbers")
    return numbers


def _check_cap(label: str, name: str, count: int) -> None:
    """The same caps as every other dataset (`core.spec.cap`): a small file can still hold
    a fit too large for a shared server (4 x 10,000 is 139 KB and p x p matrices of 1e8)."""
    most = cap(name)
    if count > most:
        raise DataError(
            f"{label} has {count:,} {name}; this server fits at most {most:,} "
            f"(PLNLAB_MAX_{name.upper()}); use fewer {name}"
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
        missing, values = _missing(cells), _numbers(cells)
        fail(missing, cells, "missing value (empty cell or NA); every cell needs a number", index * block)
        fail(np.isnan(values), cells, "non-numeric cell; only numbers are accepted", index * block)
        fail(np.isinf(values), cells, "non-finite value; values must be finite numbers", index * block)
        break
    raise DataError(f"{label}: some cells could not be read as numbers; only numbers are accepted")


def _fail(label, first_line, first_column, names, mask, cells, rule, line_offset=0) -> None:
    """Raises naming the first masked cell as the file shows it: 1-based line and column."""
    if mask.any():
        row, col = np.argwhere(mask)[0]
        cell = cells[row, col]
        cell = f"{cell:g}" if isinstance(cell, float) else str(cell)
        name = f" ({names[col]!r})" if names and col < len(names) else ""
        raise DataError(
            f"{label}: {rule}; line {row + line_offset + first_line}, "
            f"column {col + first_column}{name} holds {cell!r}"
        )


_OPTIONS = dict(encoding="utf-8-sig", skip_blank_lines=True)


def _read(data: bytes, label: str, **options) -> pd.DataFrame:
    try:
        return pd.read_csv(io.BytesIO(data), **_OPTIONS, **options)
    except pd.errors.EmptyDataError:
        if options.get("skiprows"):
            raise
        raise DataError(f"{label} is empty; a comma-separated table of counts is needed") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise DataError(f"{label} is not a readable comma-separated table: {str(err).strip()}") from None


def _cells(frame: pd.DataFrame) -> np.ndarray:
    return np.char.strip(frame.to_numpy().astype(str))


def _missing(cells: np.ndarray) -> np.ndarray:
    return np.isin(np.char.lower(cells), list(_MISSING_TOKENS))


def _numbers(cells: np.ndarray) -> np.ndarray:
    """Cells as float64, NaN where a cell is not a number (missing cells included)."""
    values = pd.to_numeric(pd.Series(cells.ravel()), errors="coerce")
    return values.to_numpy(np.float64).reshape(cells.shape)
