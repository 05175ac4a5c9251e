"""How a table of counts is laid out in its file: separator, decimal mark, header line, row names.

Tables come as people's tools write them: comma-separated (pandas, R's write.csv),
semicolon-separated with a decimal comma (spreadsheets in many locales, R's write.csv2),
tab-separated (R's write.table(sep = "\\t"), spreadsheet text exports). The separator is
the one of these three that splits the first lines into the same number of cells (more
than one); a header line over row names may have one cell fewer, as write.table writes it.

Whether line 1 names the columns is the caller's choice (`HEADER_CHOICES`): "yes", "no",
or "auto", which decides from line 1 and says why (`Layout.notes`): words in it make it a
header; so do numbers quoted while the numbers below are not (R quotes column names), an
empty first cell over a column of row names (R's write.csv), or one cell fewer than the
line below (R's write.table). A line of plain numbers is read as data: numeric column ids
(taxon ids are common) look like counts, and only the person who wrote the file knows.
"""

from __future__ import annotations

import csv
import dataclasses

import pandas as pd

from core.data.counts import DataError
from core.spec import HEADER_CHOICES

SEPARATORS = {",": "commas", ";": "semicolons", "\t": "tabs"}
ACCEPTED = "a table of counts with cells separated by commas, semicolons or tabs"
# Enough lines to see the separator agree (a line of 2,000 columns fits many times), not so
# many that a large file is decoded whole.
_SAMPLE_LINES = 20
_SAMPLE_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Layout:
    """How to read one file.

    Attributes:
        separator: ",", ";" or "\\t".
        decimal: "." or "," (with semicolons only).
        header: whether line 1 names the columns (and is skipped).
        row_names: whether the first cell of each data line names the row (and is skipped).
        names: the column names (without the row-name column's), when there is a header.
        width: how many columns of numbers each data line holds.
        notes: what was decided and why, one sentence each.
    """

    separator: str
    decimal: str
    header: bool
    row_names: bool
    names: tuple[str, ...] | None
    width: int
    notes: tuple[str, ...]


def _sample(data: bytes, label: str) -> list[str]:
    """The first non-blank lines of the file, decoded (UTF-8, with or without a BOM)."""
    head = data[:_SAMPLE_BYTES]
    if len(data) > _SAMPLE_BYTES:
        head = head[: head.rfind(b"\n") + 1] or head  # no line cut in two
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{label} is not readable as UTF-8 text ({err.reason} at byte {err.start}); "
                        f"{ACCEPTED}, saved as UTF-8, is needed") from None
    numbered = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()][:_SAMPLE_LINES]
    if not numbered:
        raise DataError(f"{label} is empty; {ACCEPTED} is needed")
    # Python's csv reader refuses a cell past this; no row of counts comes near it.
    longest = csv.field_size_limit()
    for number, line in numbered:
        if len(line) > longest:
            raise DataError(f"{label}: line {number} is {len(line):,} characters long, more than a table of counts "
                            f"holds (at most {longest:,} a line); {ACCEPTED} is needed")
    return [line for _, line in numbered]


def _split(lines: list[str], separator: str) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in csv.reader(lines, delimiter=separator)]


def _separator(lines: list[str]) -> str:
    """The separator that splits every sampled data line alike (line 1 may be one short)."""
    best, best_width = ",", 1
    for separator in SEPARATORS:
        widths = [len(row) for row in _split(lines, separator)]
        body = set(widths[1:]) or {widths[0]}
        if len(body) != 1:
            continue
        width = body.pop()
        if width > best_width and widths[0] in (width, width - 1):
            best, best_width = separator, width
    if best_width == 1:  # ragged everywhere: the separator that splits line 1 most, for the message
        best = max(SEPARATORS, key=lambda separator: len(_split(lines[:1], separator)[0]))
    return best


def _is_number(cell: str, decimal: str) -> bool:
    text = cell.replace(decimal, ".") if decimal == "," else cell
    return not pd.isna(pd.to_numeric(text, errors="coerce"))


def _quoted(line: str, separator: str) -> bool:
    cells = [cell.strip() for cell in line.split(separator)]
    return all(cell.startswith('"') for cell in cells if cell)


def _auto_header(lines: list[str], rows: list[list[str]], separator: str, decimal: str) -> tuple[bool, str]:
    """(line 1 names the columns, why), from line 1 and the sampled lines below it."""
    first, second = rows[0], rows[1] if len(rows) > 1 else []
    words = [cell for cell in first if cell and not _is_number(cell, decimal)]
    if words:
        return True, f"it holds words (e.g. {words[0]!r})"
    named_rows = second and (not _is_number(second[0], decimal) or lines[1].lstrip().startswith('"'))
    if named_rows and {len(row) for row in rows[1:]} == {len(first) + 1}:
        return True, "it has one cell fewer than the lines below, as R's write.table writes a header over row names"
    if second and first and first[0] == "" and second[0] and not _is_number(second[0], decimal):
        return True, "it starts with an empty cell over a column of row names, as R's write.csv writes them"
    if len(lines) > 1 and _quoted(lines[0], separator) and not _quoted(lines[1], separator):
        return True, "its numbers are quoted like names (as R quotes column names) and the numbers below are not"
    if _numbered_columns(first, decimal):
        return True, (f"its cells are whole numbers in increasing order ({first[0]}, {first[1]}, ...), as numeric "
                      "column ids are and a row of counts is not; if it is data, choose header: no")
    return False, ("every cell is a number, as in the lines below; if they are column names (e.g. numeric "
                   "taxon ids), choose header: yes")


# Cells of line 1 in strictly increasing order from which it is taken for column ids: a row of
# counts that rises at each of five columns or more is not what a count table holds (oaks'
# taxa numbered 1000 to 1113 were read as a first sample with counts 1000 to 1113).
_NUMBERED_COLUMNS = 5


def _numbered_columns(first: list[str], decimal: str) -> bool:
    if len(first) < _NUMBERED_COLUMNS or not all(cell and _is_number(cell, decimal) for cell in first):
        return False
    values = [float(cell.replace(decimal, ".")) for cell in first]
    return all(value == round(value) for value in values) and all(b > a for a, b in zip(values, values[1:]))


def detect(data: bytes, label: str, header: str = "auto") -> Layout:
    """The layout of a table in `data` (the file's bytes).

    Args:
        data: the file's contents.
        label: names the file in messages.
        header: "yes" (line 1 names the columns), "no" (it is data) or "auto" (decide).

    Raises:
        DataError: the file is empty or not UTF-8 text, `header` is not a choice, or fewer
            than 2 columns of numbers are found.
    """
    if header not in HEADER_CHOICES:
        raise DataError(f"header must be one of {', '.join(HEADER_CHOICES)}; got {header!r}")
    lines = _sample(data, label)
    separator = _separator(lines)
    rows = _split(lines, separator)
    decimal = "," if separator == ";" and any("," in cell for row in rows for cell in row) else "."
    notes = []
    if separator != ",":
        notes.append(f"{label}: cells separated by {SEPARATORS[separator]}"
                     + (", with decimal commas" if decimal == "," else ""))
    if header == "auto":
        has_header, why = _auto_header(lines, rows, separator, decimal)
        notes.append(f"{label}: line 1 read as {'column names' if has_header else 'data'}: {why}")
    else:
        has_header = header == "yes"
        notes.append(f"{label}: line 1 read as {'column names' if has_header else 'data'} (header: {header})")
    first = rows[0]
    # Row names: an empty corner cell (write.csv, pandas' to_csv) or a header one cell short
    # of every line below (write.table); they go to the index rather than being skipped, so
    # that a ragged row still fails to parse.
    short = has_header and len(rows) > 1 and {len(row) for row in rows[1:]} == {len(first) + 1}
    # Or a first column of text under a name ("sample", as pandas' reset_index() writes it)
    # beside numbers: the samples' names, where it stopped the file at its first cell.
    # (Three in four cells beside it numbers: a stray word among them is then refused where it is.)
    beside = [_is_number(cell, decimal) for row in rows[1:] for cell in row[1:] if cell]
    named = (has_header and len(rows) > 1 and len(first) > 2
             and all(row and row[0] and not _is_number(row[0], decimal) for row in rows[1:])
             and len(beside) > 0 and 4 * sum(beside) >= 3 * len(beside))
    row_names = has_header and (short or first[0] == "" or named)
    names = tuple(first if short else first[int(row_names):]) if has_header else None
    width = len(first) if short else len(first) - int(row_names)
    if row_names:
        notes.append(f"{label}: column 1" + (f" ({first[0]!r})" if named and first[0] else "")
                     + " read as the rows' names, not counts")
    if width < 2:
        raise DataError(f"{label} has {max(width, 1)} column; at least 2 variables (columns) are needed, in "
                        f"{ACCEPTED}")
    return Layout(separator, decimal, has_header, row_names, names, width, tuple(notes))
