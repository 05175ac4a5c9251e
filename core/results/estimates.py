"""What a fit estimates, for the person who brought the counts: B and Sigma at their closed
forms for the fit's final M and S, with the names of the columns and covariates they are of.

The fit's own answer, not its timing: `core.run.certified` makes it from the final point it
checks in float64 (B = (X^T X)^-1 X^T M, Sigma = (R^T R + diag(sum_i S^2)) / n with R = M - X B,
as the fit and pyPLNmodels take them), and it travels with the run's result to the command
line (`solve --estimates DIR`) and the Run page (a download), never into the run store: a
store of thousands of runs is no place for p x p matrices.

Plain NumPy, as every result: the dashboard's server reads it without JAX.
"""

from __future__ import annotations

import dataclasses
import io
import zipfile

import numpy as np

# Sigma travels for data up to this many columns (a p x p float64 matrix: 32 MB at 2,000,
# the dashboard's cap on an upload's columns); past it B alone does, and the result says why.
MAX_COVARIANCE_COLUMNS = 2_000


@dataclasses.dataclass(frozen=True)
class Estimates:
    """A fit's estimates.

    Attributes:
        coef: B, (d, p), float64: row k is covariate k's effect on each column's log rate.
        covariance: Sigma, (p, p), float64, the latent log rates' covariance; None past
            `MAX_COVARIANCE_COLUMNS` columns.
        covariate_names: X's columns ("(intercept)", "site[b]", ...), d of them.
        column_names: the counts' columns, p of them (a file's header where it has one).
    """

    coef: np.ndarray
    covariance: np.ndarray | None
    covariate_names: tuple[str, ...]
    column_names: tuple[str, ...]

    def files(self) -> dict[str, str]:
        """CSV text by file name: coefficients.csv (a row per covariate, a column per count
        column) and covariance.csv (p x p, both ways named by column), where there is Sigma."""
        out = {"coefficients.csv": _table(self.coef, self.covariate_names, self.column_names, "covariate")}
        if self.covariance is not None:
            out["covariance.csv"] = _table(self.covariance, self.column_names, self.column_names, "column")
        return out

    def archive(self) -> bytes:
        """`files()` in one zip archive, for a browser's single download."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in self.files().items():
                archive.writestr(name, text)
        return out.getvalue()


def at(latent_mean: np.ndarray, latent_sd: np.ndarray, covariates: np.ndarray, covariate_names: tuple[str, ...],
       column_names: tuple[str, ...]) -> Estimates:
    """B and Sigma at their closed forms for the final M and S (all float64, (n, p) but X (n, d))."""
    M, S, X = (np.asarray(a, dtype=np.float64) for a in (latent_mean, latent_sd, covariates))
    n, p = M.shape
    B = np.linalg.solve(X.T @ X, X.T @ M)
    covariance = None
    if p <= MAX_COVARIANCE_COLUMNS:
        R = M - X @ B
        covariance = (R.T @ R + np.diag(np.sum(S * S, axis=0))) / n
    return Estimates(B, covariance, tuple(covariate_names), tuple(column_names))


def _table(values: np.ndarray, rows: tuple[str, ...], columns: tuple[str, ...], corner: str) -> str:
    """A CSV table with a header line of `columns` and a first column of `rows`, numbers to
    float64's 17 significant digits (read back, they are the same numbers)."""
    out = io.StringIO()
    out.write(",".join(_cell(name) for name in (corner, *columns)) + "\n")
    for name, row in zip(rows, values):
        out.write(",".join([_cell(name), *(repr(float(value)) for value in row)]) + "\n")
    return out.getvalue()


def _cell(text: str) -> str:
    """A CSV cell: quoted where it holds a comma, a quote or a line break."""
    if any(mark in text for mark in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text
