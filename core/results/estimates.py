"""What a fit estimates, for the person who brought the counts: B and Sigma at their closed
forms for the fit's final M and S, with the names of the columns and covariates they are of.

The fit's own answer, not its timing: `core.run.certified` takes it from the check of the
final point in float64 (`core.fit.certificate`: B = (X^T X)^-1 X^T M, Sigma = (R^T R +
diag(sum_i S^2)) / n with R = M - X B, as the fit and pyPLNmodels take them), and it
travels with the run's result to the command line (`solve --estimates DIR`) and the Run page
(a download), never into the run store: a store of thousands of runs is no place for p x p
matrices.

Plain NumPy, as every result: the dashboard's server reads it without JAX.
"""

from __future__ import annotations

import dataclasses
import io
import re
import zipfile

import numpy as np

from core.data import separation
from core.data.covariates import CONSTANT
from core.results import outcome, spreadsheet_text

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
        notes: how the data were read and the covariates coded (a factor's reference level),
            one sentence each, as `CountData.notes` says them.
        warnings: what the reader of B and Sigma must know of the data (columns dropped for
            being all zeros, coefficients with no finite value), as `CountData.warnings`.
        unbounded: (factor, level, count column names) where those columns count nothing
            at that level, so that their coefficients for the factor and the constant have no
            finite value (`CountData.unbounded`), every column named.
        separated: (coefficient names, count column names) where other covariates separate
            those columns' zeros from their counts, so that the coefficients named have no
            finite value for them (`CountData.separated`), every column named.
    """

    coef: np.ndarray
    covariance: np.ndarray | None
    covariate_names: tuple[str, ...]
    column_names: tuple[str, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    unbounded: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    separated: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()

    @property
    def against_reference(self) -> bool:
        """Whether a factor's levels are read against a reference level: where X has a
        constant (without one, ~ 0 + tree, each level has its own coefficient)."""
        return CONSTANT in self.covariate_names

    def without_value(self) -> dict[str, list[str]]:
        """For each count column with coefficients that have no finite value, those
        coefficients, in B's order (`unbounded_at`, and `separated`'s)."""
        found: dict[str, set[str]] = {}
        for factor, level, columns in self.unbounded:
            for column in columns:
                found.setdefault(column, set()).update(self.unbounded_at(factor, level))
        for moved, columns in self.separated:
            for column in columns:
                found.setdefault(column, set()).update(moved)
        return {column: [name for name in self.covariate_names if name in names] for column, names in found.items()}

    def unbounded_at(self, factor: str, level: str) -> list[str]:
        """The coefficients that have no finite value for a column that counts nothing where
        `factor` is `level` (`core.data.separation.level_coefficients`)."""
        return separation.level_coefficients(self.covariate_names, factor, level)

    def files(self, about: str = "") -> dict[str, str]:
        """Text by file name: coefficients.csv (a row per covariate, a column per count
        column), covariance.csv (p x p, both ways named by column) where there is Sigma, and
        README.txt, what they are, with `about` (which fit, how it ended) first."""
        out = {"README.txt": self._readme(about),
               "coefficients.csv": _table(self.coef, self.covariate_names, self.column_names, "covariate")}
        if self.covariance is not None:
            out["covariance.csv"] = _table(self.covariance, self.column_names, self.column_names, "column")
        return out

    def archive(self, about: str = "") -> bytes:
        """`files(about)` in one zip archive, for a browser's single download."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in self.files(about).items():
                entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
                entry.external_attr = 0o644 << 16  # readable by all once unpacked (the default is 0600)
                archive.writestr(entry, text, zipfile.ZIP_DEFLATED)
        return out.getvalue()

    def _readme(self, about: str) -> str:
        lines = [about, ""] if about else []
        lines += [
            "What a Poisson log-normal fit estimates (PLN: Y_ij ~ Poisson(exp(O_ij + Z_ij)), Z_i ~ N(X_i B, Sigma)).",
            "",
            "coefficients.csv: B, a row per covariate (the columns of X, as coded), a column per count column:",
            "  each covariate's effect on that column's log rate.",
        ]
        lines[-1] += (" A level of a text column is read against its reference level (below);"
                      if self.against_reference else " Each level of a text column has its own")
        lines += ["  (intercept) is the log rate at the references, offsets aside." if self.against_reference
                  else "  coefficient: the log rate at that level, offsets and other covariates aside."]
        if self.covariance is not None:
            lines += ["covariance.csv: Sigma, the covariance of the latent log rates Z between count columns."]
        else:
            lines += [f"Sigma is not written: it is kept for at most {MAX_COVARIANCE_COLUMNS:,} columns."]
        lines += [
            "",
            "Both are the closed forms at the fit's final variational means M and deviations S:",
            "  B = (X'X)^-1 X'M and Sigma = (R'R + diag(sum_i S_i^2)) / n, R = M - X B, in float64.",
        ]
        names = (*self.covariate_names, *self.column_names)
        if any(spreadsheet_text.neutral(name) != name for name in names):
            lines += ["Names that start with =, +, - or @ are written behind a single quote, which spreadsheets",
                      "show as text rather than run as a formula."]
        if self.warnings:
            lines += ["", "Before reading them:", *(f"  {warning}" for warning in self.warnings)]
        if self.unbounded or self.separated:
            lines += ["", "Coefficients with no finite value: these columns count nothing at a level of a factor, or",
                      "on one side of a combination of covariates, so the coefficients named drift without bound and",
                      "are where the fit stopped, not estimates, even where the fit converges (every column named):"]
            lines += [f"  {factor} {level!r} ({', '.join(self.unbounded_at(factor, level))}): {', '.join(columns)}"
                      for factor, level, columns in self.unbounded]
            lines += [f"  {', '.join(moved)}: {', '.join(columns)}" for moved, columns in self.separated]
        if self.notes:
            lines += ["", "How the data were read:", *(f"  {note}" for note in self.notes)]
        return "\n".join(lines) + "\n"


def about(run) -> str:
    """Which fit a `RunResult` with estimates is, and how it ended, as README.txt's first line."""
    ended = outcome.finished_as(run.status, run.converged, run.stalled, run.short)
    gap = (f", its float64 gradient putting it about {run.estimated_gap:.0e} (relative) below the optimum"
           if run.estimated_gap is not None and run.status == "ok" else "")
    return (f"Run {run.id}: {run.dataset} ({run.n:,} x {run.p:,}, {run.d} covariate column"
            f"{'s' if run.d != 1 else ''}), {run.precision}, {run.strategy} with {run.optimizer}: {ended}{gap}.")


def archive_name(dataset_label: str, run_id: int | None = None) -> str:
    """The download's file name for a run's data (`DatasetSpec.label`): the files' stems and
    the formula's terms, "csv counts.csv ~ 1 + group" as plnlab_estimates_counts_group.zip
    (as the label's characters, it read "csv_counts.csv_1_+_group"), and the run's number
    when given (..._run50.zip): a second download of other data from files of the same
    names would otherwise replace the first in a Downloads folder, or be taken for it."""
    label = re.sub(r"^csv ", "", dataset_label)
    label = re.sub(r" #[0-9a-f]+\b", "", label)  # the content's tag tells files of one name apart, not a name
    label = re.sub(r"(~.*?) over .+$", r"\1", label)  # the formula's table: its terms name the covariates
    label = re.sub(r", offsets .+?(?=$| ~ | \+ )", "", label)  # the counts name the data
    label = re.sub(r"\.(csv|tsv|txt)\b", "", label, flags=re.IGNORECASE)
    label = re.sub(r"~\s*[01]\s*(\+|$)", " ", label)  # the constant's term, said by every formula
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9_-]*", label)
    run = f"_run{run_id}" if run_id is not None else ""
    return "plnlab_estimates_" + ("_".join(words) or "data") + run + ".zip"


def of(coef: np.ndarray, covariance: np.ndarray, covariate_names: tuple[str, ...], column_names: tuple[str, ...],
       notes: tuple[str, ...] = (), warnings: tuple[str, ...] = (),
       unbounded: tuple[tuple[str, str, tuple[int, ...]], ...] = (),
       separated: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = ()) -> Estimates:
    """The estimates of B and Sigma as the float64 check made them (`core.fit.certificate`),
    Sigma dropped past `MAX_COVARIANCE_COLUMNS` columns, with how the data were read (`notes`),
    what to know of them (`warnings`) and which coefficients have no finite value
    (`unbounded` and `separated`, by column index, as `CountData` has them)."""
    kept = covariance if covariance.shape[0] <= MAX_COVARIANCE_COLUMNS else None
    named = tuple((factor, level, tuple(column_names[j] for j in columns)) for factor, level, columns in unbounded)
    apart = tuple((tuple(moved), tuple(column_names[j] for j in columns)) for moved, columns in separated)
    return Estimates(np.asarray(coef, np.float64), kept, tuple(covariate_names), tuple(column_names), tuple(notes),
                     tuple(warnings), named, apart)


def _table(values: np.ndarray, rows: tuple[str, ...], columns: tuple[str, ...], corner: str) -> str:
    """A CSV table with a header line of `columns` and a first column of `rows`, numbers to
    float64's 17 significant digits (read back, they are the same numbers)."""
    out = io.StringIO()
    out.write(",".join(_cell(name) for name in (corner, *columns)) + "\n")
    for name, row in zip(rows, values):
        out.write(",".join([_cell(name), *(repr(float(value)) for value in row)]) + "\n")
    return out.getvalue()


def _cell(text: str) -> str:
    """A CSV cell: a name as a spreadsheet shows it (not run as a formula: a column named
    "=HYPERLINK(...)" in the user's file), quoted where it holds a comma, a quote or a line
    break."""
    text = spreadsheet_text.neutral(text)
    if any(mark in text for mark in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text
