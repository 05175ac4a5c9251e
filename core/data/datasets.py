"""Count datasets for the PLN fit: oaks (shipped, `core.data.oaks_file`), replicated oaks, simulated PLN
draws, CSV files.

`load(spec)` gives the `CountData` a DatasetSpec names. CSV parsing and its error
messages are in `core.data.csv_counts`, the data type and its checks in
`core.data.counts`. Everything here is NumPy on the host: the engine moves arrays to a
device itself, so that the transfer is timed on its own. Nothing is read or drawn at import.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from core.data import covariates, oaks_file, separation
from core.data.counts import CountData, DataError, content_hash
from core.spec import DatasetSpec

# Rows per simulation chunk scale with p so that temporaries stay near 32 MB each.
_CHUNK_CELLS = 1 << 22
# exp(20) ~ 5e8: a clamp that no realistic draw reaches, but that keeps a tail draw
# from overflowing float64 or making rng.poisson raise on an infinite rate.
_MAX_LOG_RATE = 20.0


def load(spec: DatasetSpec) -> CountData:
    """Loads the data a spec names; a csv spec's files must still hash to its content_hash."""
    if spec.kind == "oaks":
        data = load_oaks(spec.replicate)
        if not spec.formula:
            return data
        return dataclasses.replace(with_design(data, covariates.oaks_design(spec.formula, spec.replicate)),
                                   name=spec.label)
    if spec.kind == "simulated":
        return simulate(spec.n, spec.p, spec.d, spec.seed)
    if spec.kind == "simulated_on_device":
        raise DataError("simulated_on_device data are drawn directly on the devices by the sharded strategy "
                        "and never exist on the host; use dataset simulated for host data")
    # Deferred: pandas reads CSV files and nothing else here; a fit of oaks starts faster without it.
    from core.data.csv_counts import read_bytes, read_csv

    paths = [spec.counts_path] + ([spec.offsets_path] if spec.offsets_path else [])
    paths += [spec.covariates_path] if spec.covariates_path else []
    if spec.content_hash and not content_hash(*paths).startswith(spec.content_hash):
        raise DataError(
            f"{', '.join(paths)} changed since the run was set up (content hash differs); "
            "set the dataset up again to fit the current files"
        )
    data = read_csv(spec.counts_path, spec.offsets_path or None, header=spec.header)
    if not spec.covariates_path:
        return data
    return with_covariates(data, read_bytes(spec.covariates_path), spec.covariates_path.rsplit("/", 1)[-1],
                           spec.formula, spec.intercept)


def with_covariates(data: CountData, table: bytes, name: str, formula: str = "", intercept: bool = True) -> CountData:
    """`data` with the covariates of a table's bytes (`core.data.covariates`), checked for
    what the fit needs (full rank, as many rows as the counts)."""
    return with_design(data, covariates.read(table, data.n, name, formula or None, intercept, data.row_names,
                                             data.name.removeprefix("csv "), data.column_labels()))


def with_design(data: CountData, design: covariates.Design) -> CountData:
    """`data` with `design`'s covariates (which `covariates.design` has held to the server's
    cap on them, before any fit), warned of the coefficients that have no finite value
    (`core.data.separation`): at the levels at which some columns count nothing, and where
    other covariates separate some columns' zeros from their counts."""
    unbounded = separation.levels_without_counts(design, data.counts)
    separated = separation.separated(design, data.counts, unbounded)
    names = data.column_labels()
    warnings = (design.warnings + separation.empty_levels(unbounded, names, covariates.CONSTANT in design.columns)
                + separation.separated_warning(separated, names))
    return dataclasses.replace(data, covariates=design.matrix, covariate_names=design.columns,
                               notes=data.notes + (f"covariates: {', '.join(design.columns)} (d = {design.d})",
                                                   *design.notes),
                               warnings=data.warnings + warnings, unbounded=unbounded, separated=separated)



@functools.lru_cache(maxsize=1)
def _oaks_base() -> tuple[np.ndarray, np.ndarray]:
    # The lab's own copy (`core.data.oaks_file`): pyPLNmodels, where the data come from,
    # imports torch (seconds), and only its peers need it.
    counts, offsets = oaks_file.read()
    counts.setflags(write=False), offsets.setflags(write=False)  # the cache is shared
    return counts, offsets


def load_oaks(replicate: int = 1) -> CountData:
    """Oaks amplicon counts (116 x 114) with each row repeated `replicate` times.

    Args:
        replicate: copies of each row, kept together as `np.repeat(Y, replicate, axis=0)`
            does in the seed tutorial.

    Returns:
        CountData with n = 116 * replicate, p = 114, d = 1 (intercept only).
    """
    if isinstance(replicate, bool) or not isinstance(replicate, int) or replicate < 1:
        raise DataError(f"replicate must be a whole number >= 1; got {replicate!r}")
    counts, offsets = _oaks_base()
    counts, offsets = (np.repeat(a, replicate, axis=0) for a in (counts, offsets))
    return CountData(counts, offsets, np.ones((counts.shape[0], 1)), f"oaks x{replicate}")


def draw_truth(rng: np.random.Generator, p: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """B (d, p) and Sigma (p, p) as `simulate` draws them, from `rng`'s next draws.

    `core.data.on_device` draws its truth here too, so that both simulations of one
    seed share B and Sigma.
    """
    coef = np.empty((d, p))
    coef[0] = rng.normal(np.log(5.0), 0.3, p)
    # Slopes shrink with d so that X B keeps a variance of about 0.25 however many covariates.
    coef[1:] = rng.normal(0.0, 0.5 / np.sqrt(max(d - 1, 1)), (d - 1, p))
    scales = rng.uniform(0.5, 1.0, p)
    lags = np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    return coef, np.outer(scales, scales) * 0.6**lags


def simulate(n: int, p: int, d: int = 1, seed: int = 0) -> CountData:
    """PLN draws with a known B and Sigma, so that a fit's recovery of them can be shown.

    X = [1, N(0, 1) columns]; B has intercepts near log 5 (moderate counts) and small
    slopes; Sigma = diag(s) C diag(s) with C the AR(1) correlation 0.6^|j - k| (SPD for
    any p) and scales s in [0.5, 1]. Z = X B + L eps with L L^T = Sigma, and
    Y ~ Poisson(exp(Z)) with zero offsets. Rows are drawn in chunks to bound memory, so
    n = 1,000,000, p = 50 takes a few seconds. Deterministic in `seed`.

    Returns:
        CountData of shape (n, p) with d covariates, true_coef (d, p), true_covariance (p, p).
    """
    spec = DatasetSpec(kind="simulated", n=n, p=p, d=d, seed=seed)  # same limits as a spec
    rng = np.random.default_rng(seed)
    coef, covariance = draw_truth(rng, p, d)
    chol = np.linalg.cholesky(covariance)

    counts = np.empty((n, p))
    covariates = np.ones((n, d))
    step = max(1, _CHUNK_CELLS // max(p, d))
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        size = rows.stop - rows.start
        covariates[rows, 1:] = rng.standard_normal((size, d - 1))
        latent = covariates[rows] @ coef + rng.standard_normal((size, p)) @ chol.T
        counts[rows] = rng.poisson(np.exp(np.minimum(latent, _MAX_LOG_RATE)))
    return CountData(counts, np.zeros((n, p)), covariates, spec.label, coef, covariance)
