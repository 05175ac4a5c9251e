"""Counts ready to fit: the `CountData` every source produces, and the checks they must pass.

Everything here is NumPy on the host: the engine moves arrays to a device itself, so that
the transfer is timed on its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np

from core.spec import SpecError

PathLike = str | os.PathLike[str]


class DataError(SpecError):
    """Data that cannot be fitted; the message says what is wrong and what is accepted."""


@dataclasses.dataclass(frozen=True)
class CountData:
    """Counts with their log-offsets and covariates, all float64 on the host.

    Attributes:
        counts: (n, p) non-negative whole numbers Y.
        offsets: (n, p) log-offsets O (zeros when none are given).
        covariates: (n, d) design X; a column of ones (intercept only) by default.
        name: a short human name, e.g. "oaks x100".
        true_coef: (d, p) B that generated simulated data; None otherwise.
        true_covariance: (p, p) Sigma that generated simulated data; None otherwise.
        notes: how a file was read, one sentence each (its separator, whether line 1 was
            taken as column names and why), for the person who gave it.
        warnings: how the data fitted differ from the file (columns dropped, and why); a
            run of these data carries them.
        column_names: each count column's name (a file's header, else its column number in
            the file, all-zero columns dropped), or () where the source names none.
        covariate_names: each column of X's name ("(intercept)", "tree[1]", ...), or ().
        row_names: each sample's name where the counts' file names its rows (R's
            `write.csv`), for matching the rows of its offsets and covariates by them
            (`core.data.samples`); () where it does not.
        unbounded: (factor, level, count column indices) where those columns hold only
            zeros at that level: their coefficients for the factor and the constant have no
            finite value (`core.data.separation.levels_without_counts`).
        separated: (coefficient names, count column indices) where a combination of the
            other covariates separates those columns' zeros from their counts, so that the
            coefficients named have no finite value for them (`core.data.separation.separated`).
    """

    counts: np.ndarray
    offsets: np.ndarray
    covariates: np.ndarray
    name: str
    true_coef: np.ndarray | None = None
    true_covariance: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()
    covariate_names: tuple[str, ...] = ()
    row_names: tuple[str, ...] = ()
    unbounded: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    separated: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = ()

    n = property(lambda self: int(self.counts.shape[0]), doc="rows (samples)")
    p = property(lambda self: int(self.counts.shape[1]), doc="count columns (variables)")
    d = property(lambda self: int(self.covariates.shape[1]), doc="covariate columns")

    def column_labels(self) -> tuple[str, ...]:
        """`column_names`, or "y1", "y2", ... where the source names none."""
        return self.column_names if len(self.column_names) == self.p else tuple(f"y{j + 1}" for j in range(self.p))

    def covariate_labels(self) -> tuple[str, ...]:
        """`covariate_names`, or "(intercept)" for a column of ones and "x2", "x3", ... (by
        position) for the others."""
        if len(self.covariate_names) == self.d:
            return self.covariate_names
        return tuple("(intercept)" if np.all(self.covariates[:, k] == 1.0) else f"x{k + 1}" for k in range(self.d))


def content_hash(*sources: PathLike | bytes) -> str:
    """sha256 (hex) of the files' bytes in order, each prefixed by its length, for
    DatasetSpec.content_hash. Uploaded bytes may stand for a file: they hash the same."""
    digest = hashlib.sha256()
    for path in sources:
        if isinstance(path, bytes):
            digest.update(len(path).to_bytes(8, "little") + path)
            continue
        try:
            with open(path, "rb") as handle:
                digest.update(os.fstat(handle.fileno()).st_size.to_bytes(8, "little"))
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except OSError as err:
            raise DataError(f"cannot read {os.fspath(path)}: {err.strerror}") from err
    return digest.hexdigest()


def validate(counts: np.ndarray, offsets: np.ndarray, covariates: np.ndarray) -> None:
    """Checks that (Y, O, X) can be fitted.

    Args:
        counts: (n, p) finite, non-negative whole numbers, n >= 2.
        offsets: (n, p) finite log-offsets.
        covariates: (n, d) finite design of full column rank d <= n.

    Raises:
        DataError: saying which array fails which check and where first.
    """
    arrays = {"counts": counts, "offsets": offsets, "covariates": covariates}
    shapes = {label: np.shape(array) for label, array in arrays.items()}
    for label, shape in shapes.items():
        if len(shape) != 2:
            raise DataError(f"{label} must be a 2-D (n x columns) array; got shape {shape}")
    (n, p), d = shapes["counts"], shapes["covariates"][1]
    if n < 2 or p < 1 or shapes["offsets"] != (n, p) or shapes["covariates"][0] != n:
        raise DataError(
            f"need n >= 2 rows and counts (n, p), offsets (n, p), covariates (n, d) with the same "
            f"n and p; got counts {shapes['counts']}, offsets {shapes['offsets']}, "
            f"covariates {shapes['covariates']}"
        )
    for label, array in arrays.items():
        _first_bad(~np.isfinite(array), array, f"{label} must be finite")
    _first_bad(counts < 0, counts, "counts must be non-negative")
    _first_bad(counts != np.round(counts), counts, "counts must be whole numbers")
    if d > n or np.linalg.matrix_rank(covariates) < d:
        raise DataError(
            f"covariates ({n} x {d}) must have full column rank so that B is identifiable; "
            "remove constant or collinear columns"
        )


def _first_bad(mask: np.ndarray, values: np.ndarray, rule: str) -> None:
    if mask.any():
        row, col = np.argwhere(mask)[0]
        raise DataError(f"{rule}; element [{row}, {col}] is {float(values[row, col])!r}")
