"""Covariates as users have them: a table of sample columns, or a formula over one.

A covariates table has a column per covariate and a header line naming them. Numbers are
taken as they are; a column of text (a factor such as oaks' `tree`) is one-hot coded with
its first level (in sorted order) as the reference when there is a constant column, as R,
patsy and pyPLNmodels' `Pln.from_formula` code factors; all its levels otherwise. A
constant column is added first unless asked not to.

A formula picks columns of such a table as pyPLNmodels' formulas do:
"endog ~ 1 + tree + dist2ground" (the left side, when given, is ignored: the counts are the
counts). Terms are column names joined by "+"; "1" keeps the constant (the default) and "0"
or "-1" drops it; `C(site)` codes a column as a factor whatever its values look like (sites
numbered 1, 2, 3), as patsy does. Interactions and other transformations are not supported, and a formula that
uses them is refused with a message that says so.

Bad covariates get one line naming the column: a missing or non-numeric value with its
row, a row count that is not the counts', a column that is constant (with a constant) or
a linear combination of the columns before it. Everything here is NumPy (pandas to read a
file) on the host; nothing is read at import.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Mapping, Sequence

import numpy as np

from core.data import oaks_file, samples
from core.data.counts import DataError
from core.spec import cap, cap_variable

CONSTANT = "(intercept)"
# Relative size under which a column's part outside the span of the columns before it counts
# as zero: well above float64 rounding, well below any real covariate's.
_COLLINEAR = 1e-9
# Variance inflation (VIF) over which a covariate is said to be nearly a combination of the
# others: its coefficients' variance is that many times what it would be alone, and the fit
# reads B through (X^T X)^-1. (Regression's rule of thumb warns from 10; this says only what
# moves estimates by orders of magnitude.)
NEARLY_COLLINEAR_VIF = 1e3
# A text column with a different value in each of at least this many rows is the samples'
# names (a factor of a level per sample): fewer rows are a table too small to tell.
_NAMES_FROM_ROWS = 10
_TERM = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*$")
# C(site): the column's values as levels, whatever they look like (site 1, 2, 3 read as numbers).
_FACTOR_TERM = re.compile(r"C\(\s*([A-Za-z_.][A-Za-z0-9_.]*)\s*\)")
# A number written with a decimal comma, or a whole number: "6,5", "-0,25", "7", "1,5e-3".
_DECIMAL_COMMA_NUMBER = r"[+-]?(\d+(,\d*)?|,\d+)([eE][+-]?\d+)?"


@dataclasses.dataclass(frozen=True)
class Design:
    """A design matrix and what its columns are.

    Attributes:
        matrix: X, (n, d) float64.
        columns: the d column names: CONSTANT, a numeric column's name, or "name[level]".
        notes: how it was made, one sentence each (a factor's reference level).
        warnings: what the reader of a fit on it must know (nearly collinear columns).
        factors: each text column coded, as (its name, its level in each row), for the
            checks that need the counts too (`levels_without_counts`).
    """

    matrix: np.ndarray
    columns: tuple[str, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    factors: tuple[tuple[str, np.ndarray], ...] = ()

    @property
    def d(self) -> int:
        return int(self.matrix.shape[1])


def parse_formula(formula: str) -> tuple[list[str], bool]:
    """(column names, whether to keep the constant) from "[lhs] ~ a + b [+ 1 | + 0 | - 1]";
    a term `C(a)` (patsy's, as pyPLNmodels' formulas write it) names column a as a factor,
    written "C(a)" in the list.

    Raises:
        DataError: a formula this reader does not take, saying what it takes.
    """
    text = formula.strip()
    if "~" in text:
        text = text.split("~", 1)[1]
    text = text.strip()
    if not text:
        raise DataError(f"formula {formula!r} has no terms after '~'; e.g. '~ 1 + tree'")
    # A sign with no term after it ("~ 1 + tree +", "~ 1 + + tree") is a typo, not a formula:
    # the terms' pattern below would pass over it.
    if re.search(r"[+-]\s*([+-]|$)", text):
        raise DataError(f"formula {formula!r} has a '+' or '-' with no term after it; e.g. '~ 1 + tree'")
    intercept = True
    names: list[str] = []
    for sign, term in re.findall(r"([+-]?)\s*([^+-]+)", text):
        term = term.strip()
        if term in ("0", "1"):
            intercept = term == "1" and sign != "-"
            continue
        factor = _FACTOR_TERM.fullmatch(term)
        if factor:
            term = f"C({factor.group(1)})"
        elif sign == "-" or not _TERM.match(term):
            raise DataError(f"formula {formula!r}: term {term!r} is not taken here (only column names joined by "
                            "'+', C(name) for a column of numbers that code levels, and 1, 0 or -1 for the "
                            "constant; no interactions or other functions)")
        if term not in names:
            names.append(term)
    return names, intercept


def design(table: Mapping[str, Sequence], n: int, formula: str | None = None, intercept: bool = True,
           label: str = "covariates", places: Sequence[str] = ()) -> Design:
    """The design of `table` (a column name -> n values mapping, e.g. a DataFrame).

    Args:
        table: the sample table.
        n: the counts' row count, which every column must have.
        formula: which columns, and the constant (see `parse_formula`); None: every column.
        intercept: add a constant column (without a formula; a formula says it itself).
        label: how messages name the table (a file name).
        places: where each row is, as a message says it ("line 12", as an editor shows
            the file); () for "row 1", "row 2"...

    Raises:
        DataError: one line naming the column at fault.
    """
    available = [str(name) for name in table]

    def at(row: int) -> str:
        return f"on {places[row]}" if places else f"at row {row + 1}"

    as_factors: set[str] = set()
    if formula is not None and formula.strip():
        names, intercept = parse_formula(formula)
        as_factors = {name[2:-1] for name in names if name.startswith("C(")}
        names = list(dict.fromkeys(name[2:-1] if name.startswith("C(") else name for name in names))
        unknown = [name for name in names if name not in available]
        if unknown:
            raise DataError(f"formula names {', '.join(repr(u) for u in unknown)}, not a column of {label}; "
                            f"its columns: {', '.join(available) or 'none'}")
    else:
        names = available
    columns: list[np.ndarray] = [np.ones(n)] if intercept else []
    column_names: list[str] = [CONSTANT] if intercept else []
    notes: list[str] = []
    factors: list[tuple[str, np.ndarray]] = []
    for name in names:
        values = np.asarray(table[name], dtype=object)
        if values.shape != (n,):
            raise DataError(f"{label}: column {name!r} has {values.size:,} rows; the counts have {n:,}")
        numbers = None if name in as_factors else _as_numbers(values)
        if numbers is not None:
            bad = np.flatnonzero(~np.isfinite(numbers))
            if bad.size:
                raise DataError(f"{label}: column {name!r} has a missing or infinite value {at(bad[0])}")
            columns.append(numbers)
            column_names.append(name)
            continue
        text = np.array([_text(value) for value in values], dtype=object)
        missing = np.flatnonzero(text == "")
        if missing.size:
            raise DataError(f"{label}: column {name!r} has a missing value {at(missing[0])}")
        levels = sorted(set(text))
        if len(levels) == n >= _NAMES_FROM_ROWS:
            raise DataError(f"{label}: column {name!r} has a different value in every row ({text[0]!r}, "
                            f"{text[1]!r}, ...): the samples' names, not a covariate (a level per sample leaves "
                            "nothing to estimate); remove it, or pick the covariates with a formula")
        if len(levels) == 1 and intercept:
            raise DataError(f"{label}: column {name!r} has one level, {levels[0]!r}: beside the constant it adds "
                            "nothing, so B is not identifiable; remove it")
        coded = levels[1:] if intercept else levels
        factors.append((name, text))
        if intercept:
            notes.append(f"{name}: {len(levels)} levels, {levels[0]!r} the reference")
        for level in coded:
            columns.append((text == level).astype(np.float64))
            column_names.append(f"{name}[{level}]")
    if not columns:
        raise DataError(f"{label}: no covariate column and no constant: the model needs at least one")
    if len(columns) > cap("covariates"):
        # Before the rank, which a factor of many levels fails first ("a linear combination").
        raise DataError(f"{label}: the covariates make {len(columns)} columns of X ({', '.join(column_names[:4])}, "
                        f"...), more than this server fits ({cap('covariates')}, {cap_variable('covariates')}); a "
                        "text column has a column per level: choose fewer covariates")
    matrix = np.column_stack(columns)
    _check_rank(matrix, column_names, label)
    return Design(matrix, tuple(column_names), tuple(notes), _nearly_collinear(matrix, column_names, label),
                  tuple(factors))


def _as_numbers(values: np.ndarray) -> np.ndarray | None:
    """The column as float64 when every present value reads as a number, else None (text)."""
    out = np.empty(values.size)
    for i, value in enumerate(values):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            out[i] = np.nan
            continue
        if isinstance(value, (bool, np.bool_)):
            return None
        try:
            out[i] = float(value)
        except (TypeError, ValueError):
            return None
    return out


def _text(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value).strip()


def _check_rank(matrix: np.ndarray, names: list[str], label: str) -> None:
    """DataError naming the first column that adds nothing to the span of those before it."""
    n, d = matrix.shape
    if d > n:
        raise DataError(f"{label}: {d} covariate columns for {n} rows; B is not identifiable with more columns "
                        "than rows")
    basis = np.empty((n, 0))
    for j in range(d):
        column = matrix[:, j]
        size = np.linalg.norm(column)
        rest = column - basis @ (basis.T @ column) if basis.shape[1] else column
        if size == 0 or np.linalg.norm(rest) <= _COLLINEAR * size:
            why = ("is constant, and the constant column is already there"
                   if np.ptp(column) == 0 and names[0] == CONSTANT else
                   "is all zeros" if size == 0 else
                   "is a linear combination of the columns before it")
            raise DataError(f"{label}: covariate column {names[j]!r} {why}: the design is rank-deficient, so B is not "
                            "identifiable; remove it")
        basis = np.column_stack([basis, rest / np.linalg.norm(rest)])


def _nearly_collinear(matrix: np.ndarray, names: list[str], label: str) -> tuple[str, ...]:
    """One warning naming the columns whose variance inflation passes `NEARLY_COLLINEAR_VIF`,
    worst first, or none. VIF_j = 1 / (1 - R_j^2), R_j^2 that of column j on the others: the
    diagonal of the inverse of the columns' correlation matrix (centred where the design has
    its constant, whose own VIF is not told)."""
    varying = [j for j in range(matrix.shape[1]) if np.ptp(matrix[:, j]) > 0]
    if len(varying) < 2:
        return ()
    part = matrix[:, varying]
    part = part - part.mean(axis=0) if CONSTANT in names else part
    part = part / np.linalg.norm(part, axis=0)
    try:
        inflation = np.diag(np.linalg.inv(part.T @ part))
    except np.linalg.LinAlgError:  # past what _check_rank measures: as good as rank-deficient
        inflation = np.full(len(varying), np.inf)
    worst = sorted(((float(v), names[j]) for v, j in zip(inflation, varying) if not v < NEARLY_COLLINEAR_VIF),
                   reverse=True)
    if not worst:
        return ()
    listed = ", ".join(f"{name!r} ({value:.1e})" for value, name in worst)
    return (f"{label}: covariate columns {listed} are nearly combinations of the others (variance inflation "
            f"over {NEARLY_COLLINEAR_VIF:,.0f}): their coefficients in B are unstable and the fit may stop short; "
            "remove one of them",)


def read_table(data: bytes, label: str):
    """A covariates file's bytes -> a DataFrame (header line required; commas, semicolons
    or tabs). DataError for a file pandas cannot read."""
    # Deferred: pandas reads files and nothing else here (a fit of oaks starts faster without it).
    import pandas as pd

    # Deferred too: the counts' reader (which says pandas' parser errors in our words) imports pandas.
    from core.data import csv_counts

    text = data.decode("utf-8-sig", errors="replace")
    if not text.strip():  # pandas said "No columns to parse from file"
        raise DataError(f"{label} is empty; a table with a header line naming its columns and a row per sample "
                        "is needed")
    first = text.splitlines()[0]
    separator = max((",", ";", "\t"), key=first.count)
    try:
        frame = pd.read_csv(io.StringIO(text), sep=separator, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as err:
        raise DataError(f"{label} cannot be read as a table with a header line: "
                        f"{csv_counts.parser_reason(err, data, sep=separator)}") from None
    if frame.shape[1] == 0:
        raise DataError(f"{label} has no columns")
    frame.columns = [str(name).strip() for name in frame.columns]
    frame = frame.apply(lambda column: column.str.strip()).replace({"": None, "NA": None, "NaN": None, "nan": None})
    if separator != ",":
        # Cells separated by semicolons or tabs may have decimal commas, as spreadsheets in
        # many locales write them (the counts' reader takes them too): "6,5" was a level of a
        # factor, and pH a factor of three levels.
        for name in frame.columns:
            present = frame[name].dropna()
            if len(present) and present.str.fullmatch(_DECIMAL_COMMA_NUMBER).all() and present.str.contains(",").any():
                frame[name] = frame[name].str.replace(",", ".", regex=False)
    return frame


def read(data: bytes, n: int, label: str, formula: str | None = None, intercept: bool = True,
         count_rows: Sequence[str] = (), counts_label: str = "the counts",
         count_columns: Sequence[str] = ()) -> Design:
    """The design of a covariates file's bytes (see `design`), a first column of row names
    left out (`row_names`) and its rows matched to the counts' by them where the counts
    name theirs too (`count_rows`, `core.data.samples`). A table with a row per column of
    the counts (`count_columns`, their names) where they have another number of rows is
    refused as counts written a row per variable (an OTU table as QIIME and phyloseq write
    it), or, its rows named as the counts' columns, as no covariates table at all. Sample
    names the counts cannot be matched by (they name no rows) are warned of: the rows are
    then taken in the counts' order, unchecked."""
    table, names = row_names(read_table(data, label))
    lines = _data_lines(data, len(table))
    if len(table) != n and len(table) == len(count_columns):
        if names and 2 * len(set(names) & set(count_columns)) >= len(count_columns):
            raise DataError(f"{label}: its rows are named as the columns of {counts_label} (a row per variable, "
                            f"{len(table):,} of them): it is no table of the samples' covariates (counts written a "
                            "row per variable?); give a table with a row per sample and a column per covariate")
        raise DataError(f"{label} has {len(table):,} rows, one per column of {counts_label}, which has {n:,} rows: "
                        f"{counts_label} looks written a row per variable (taxon, gene) and a column per sample; "
                        "PLN needs a row per sample: transpose the counts (and offsets), as R's t() does")
    said: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()
    if names:
        said = (f"{label}: its first column, with no name in the header, read as the samples' names (as R's "
                "write.csv writes them), not as a covariate",)
    elif (column := names_column(table, count_rows)) is not None:
        # A named column of them ("sample"): matched as the unnamed one is, where the rows were
        # paired by position, shuffled ones with other samples' covariates.
        names = tuple(str(value).strip() for value in table[column])
        table = table.drop(columns=column)
        said = (f"{label}: column {column!r} read as the samples' names"
                + (f", as {counts_label} names its rows," if count_rows else ",") + " not as a covariate",)
    if names and not count_rows:
        # A shuffled table was then fitted each sample with another's covariates, with no word.
        counts = "the counts" + ("" if counts_label == "the counts" else f" ({counts_label})")
        unmatched = (f"{label} names its samples ({', '.join(repr(name) for name in names[:2])}, ...), but {counts} "
                     "have no row names: the rows are taken in the counts' order, unchecked; give the counts their "
                     "samples' names (a first column of them) to match the rows by name",)
    elif names:
        rows, matched = samples.order(names, count_rows, label, counts_label)
        said += matched
        if rows is not None:
            table = table.iloc[rows].reset_index(drop=True)
            lines = lines and tuple(lines[row] for row in rows)
            names = tuple(names[row] for row in rows)
    places = [f"line {line}" for line in lines]
    if names and places:
        places = [f"{place} (sample {name!r})" for place, name in zip(places, names)]
    made = design(table, n, formula, intercept, label, places)
    return dataclasses.replace(made, notes=said + made.notes, warnings=unmatched + made.warnings)


def _data_lines(data: bytes, rows: int) -> tuple[int, ...]:
    """The file's line of each of a table's `rows` (1 for the first line, as an editor numbers
    them): the lines after the header that hold anything, as pandas reads them; () where
    those are not `rows` lines (a quoted cell over several lines), and messages say "row"."""
    lines = data.decode("utf-8-sig", errors="replace").splitlines()
    filled = [number for number, line in enumerate(lines, start=1) if line.strip()]
    return tuple(filled[1:]) if len(filled) - 1 == rows else ()


def names_column(frame, count_rows: Sequence[str] = ()) -> str | None:
    """The column of `frame` that names its samples ("sample"): text, a different value in
    every row, and where the counts name their rows (`count_rows`) half of them or more
    among those (all of them, or `core.data.samples` refuses the stray), else at least
    `_NAMES_FROM_ROWS` rows; None where none does. A column of numbers is a covariate,
    whatever it shares with the counts' row names: a depth of 1 to 116 beside rows numbered
    1 to 116 is still a depth."""
    wanted = set(count_rows)
    for name in frame.columns:
        if _as_numbers(np.asarray(frame[name], dtype=object)) is not None:
            continue
        values = [str(value).strip() for value in frame[name]]
        if len(set(values)) == len(values) and (2 * len(wanted.intersection(values)) >= len(wanted) if wanted
                                                else len(values) >= _NAMES_FROM_ROWS):
            return str(name)
    return None


def row_names(frame):
    """(`frame` without its row names, their names as text) where it has R's row names: a
    first column with no name in the header, as `write.csv` writes a data frame's sample names
    (numbered 1, 2, ... they were fitted as a covariate, the row's number, with no word; named,
    a factor of a level per sample), or a header a cell short, as `write.table` writes it,
    which pandas reads as the index. (`frame`, ()) otherwise."""
    # Deferred, as in `read_table`: a fit of oaks starts faster without pandas.
    import pandas as pd

    if frame.shape[1] and re.fullmatch(r"Unnamed: 0", str(frame.columns[0])):
        return frame.drop(columns=frame.columns[0]), tuple(str(name).strip() for name in frame.iloc[:, 0])
    if not isinstance(frame.index, pd.RangeIndex):
        return frame.reset_index(drop=True), tuple(str(name).strip() for name in frame.index)
    return frame, ()


def oaks_table(replicate: int = 1) -> dict[str, np.ndarray]:
    """oaks' sample table (tree, dist2ground, orientation), each row `replicate` times."""
    return {name: np.repeat(values, replicate) for name, values in oaks_file.samples().items()}


def oaks_design(formula: str, replicate: int = 1) -> Design:
    """The design of `formula` over oaks' sample table (e.g. "~ 1 + tree")."""
    return design(oaks_table(replicate), 116 * replicate, formula, label="oaks' sample table")
