"""The corpus: data sets in the shapes users bring, each with its reference optimum.

The fit is judged on these, in both precisions, not on oaks alone: a change that moves one
of them off its optimum is a regression (`tests/fit/test_corpus.py` fits the small ones,
`benchmarks/corpus.py` all of them beside pyPLNmodels). Two kinds:

- **Real counts** from pyPLNmodels' loaders, at more than one size each, offsets where the
  loader gives them: oaks (with and without its `tree` covariate), microcosm (96% zeros,
  rows of zeros only, columns with one count; up to 921 x 1209, p > n), crossover (4
  columns, offsets), crossover per chromosome (the first 43 rows, the ones without a
  missing value: 43 x 104, p > n) and scRNA (up to 2000 x 3000).
- **Simulated regimes** no real set here covers: p = 1, p > n, 95% zeros, counts up to
  1e5, offsets spread over 10 units of log, 10 covariates, and counts the model does not
  describe: negative binomial (overdispersed with another law) and plain Poisson (not
  overdispersed at all: the optimum's Sigma is nearly singular).

All-zero count columns are dropped, as the CSV reader and pyPLNmodels do (such a column
has no finite optimum). `large` sets take minutes per fit on a 2-core CPU: the benchmark
runs them, the test suite does not.

Each set's reference optimum is in `corpus_optima.json` beside this module, with how it
was found: the best float64 ELBO of at least two different optimizers run to float64's
resolution (`benchmarks/corpus_reference.py` writes it). Nothing is loaded at import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import pathlib
from collections.abc import Callable

import numpy as np

from core.data import covariates as design
from core.data.counts import CountData, validate
from core.data.datasets import load_oaks

OPTIMA_PATH = pathlib.Path(__file__).with_name("corpus_optima.json")


@dataclasses.dataclass(frozen=True)
class CorpusSet:
    """One data set of the corpus.

    Attributes:
        name: its key, e.g. "scrna 400x100".
        about: where it comes from and what is hard about it, one line.
        large: run by the benchmark only (minutes per fit on a 2-core CPU).
        make: () -> CountData, deterministic.
    """

    name: str
    about: str
    large: bool
    make: Callable[[], CountData]


@dataclasses.dataclass(frozen=True)
class Reference:
    """A set's reference optimum.

    Attributes:
        elbo: the best float64 ELBO found (exact log Y!).
        found_by: {optimizer: its float64 ELBO}, the contenders it is the best of.
        how: how they were run, one line.
        iterations: {optimizer: iterations it ran}.
        estimated_gap: {optimizer: how far below the optimum its float64 gradient put it
            (`core.fit.certificate`)}.
    """

    elbo: float
    found_by: dict[str, float]
    how: str
    iterations: dict[str, int] = dataclasses.field(default_factory=dict)
    estimated_gap: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def spread(self) -> float:
        """How far apart the contenders ended, relative to the optimum."""
        values = list(self.found_by.values())
        return (max(values) - min(values)) / abs(self.elbo)


def _load(loader: str, *args, **kwargs) -> dict:
    """What pyPLNmodels' loader `loader` returns, without the line it prints, nor numpy's
    warning at the log of a region without coverage (crossover's, -inf: `_crossover`)."""
    # Here only: pyPLNmodels imports torch (seconds), and only the sets it ships need it.
    import pyPLNmodels

    with contextlib.redirect_stdout(io.StringIO()), np.errstate(divide="ignore"):
        return getattr(pyPLNmodels, loader)(*args, **kwargs)


def _counts(name: str, counts, offsets=None, covariates=None) -> CountData:
    """CountData from a loader's frames, all-zero columns dropped, checked."""
    counts = np.asarray(counts, dtype=np.float64)
    offsets = np.zeros_like(counts) if offsets is None else np.asarray(offsets, dtype=np.float64)
    covariates = np.ones((counts.shape[0], 1)) if covariates is None else np.asarray(covariates, dtype=np.float64)
    kept = counts.sum(axis=0) > 0
    counts, offsets = counts[:, kept], offsets[:, kept]
    validate(counts, offsets, covariates)
    return CountData(counts, offsets, covariates, name)


def _oaks(name: str, replicate: int = 1, tree: bool = False) -> CountData:
    data = load_oaks(replicate)
    covariates = design.oaks_design("~ 1 + tree", replicate).matrix if tree else None
    return _counts(name, data.counts, data.offsets, covariates)


def _microcosm(name: str, n: int, p: int) -> CountData:
    return _counts(name, _load("load_microcosm", n, p)["endog"])


def _scrna(name: str, n: int, p: int) -> CountData:
    return _counts(name, _load("load_scrna", n, p)["endog"])


def _crossover(name: str, n: int) -> CountData:
    found = _load("load_crossover", n)
    counts, offsets = found["endog"].to_numpy(np.float64), found["offsets"].to_numpy(np.float64)
    # A region without coverage has log-offset -inf (past row 2,300): no rate is defined there.
    covered = np.isfinite(offsets).all(axis=1)
    return _counts(name, counts[covered], offsets[covered])


def _crossover_per_chromosome(name: str) -> CountData:
    found = _load("load_crossover_per_chromosom")
    counts, offsets = found["endog"].to_numpy(np.float64), found["offsets"].to_numpy(np.float64)
    # Shorter chromosomes end early, leaving NaN: the first rows are the complete ones.
    complete = np.isfinite(counts).all(axis=1) & np.isfinite(offsets).all(axis=1)
    rows = int(np.argmin(complete)) if not complete.all() else complete.size
    return _counts(name, counts[:rows], offsets[:rows])


def _pln_draws(rng: np.random.Generator, n: int, p: int, d: int, intercept: float, scale: float,
               offsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y, O, X): PLN draws with AR(1) correlations 0.5^|j - k|, latent sd `scale`, intercepts
    near `intercept` and slopes N(0, 0.3) on standard normal covariates."""
    covariates = np.ones((n, d))
    covariates[:, 1:] = rng.standard_normal((n, d - 1))
    coef = np.vstack([rng.normal(intercept, 0.3, (1, p)), rng.normal(0.0, 0.3, (d - 1, p))])
    lags = np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    chol = np.linalg.cholesky(scale * scale * 0.5**lags)
    offsets = np.zeros((n, p)) if offsets is None else offsets
    latent = covariates @ coef + rng.standard_normal((n, p)) @ chol.T
    counts = rng.poisson(np.exp(np.minimum(offsets + latent, 20.0))).astype(np.float64)
    return counts, offsets, covariates


def _simulated(name: str, seed: int, n: int, p: int, d: int = 1, intercept: float = 1.5, scale: float = 1.0,
               offset_span: float = 0.0) -> CountData:
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(-offset_span / 2, offset_span / 2, (n, p)) if offset_span else None
    return _counts(name, *_pln_draws(rng, n, p, d, intercept, scale, offsets))


def _negative_binomial(name: str, seed: int, n: int, p: int) -> CountData:
    """Gamma-Poisson counts (dispersion 0.5, independent columns): overdispersed, but with a
    gamma, not a log-normal, mixing law and no correlation."""
    rng = np.random.default_rng(seed)
    means = np.exp(rng.normal(1.5, 0.8, p))
    shape = 0.5
    rates = rng.gamma(shape, means / shape, (n, p))
    return _counts(name, rng.poisson(rates).astype(np.float64))


def _poisson(name: str, seed: int, n: int, p: int) -> CountData:
    """Independent Poisson counts with column means from 1 to 20: no overdispersion at all,
    so the optimum's Sigma is nearly singular (eigenvalues near 1e-7): a float32 fit's
    Omega is then accurate to a few percent only."""
    rng = np.random.default_rng(seed)
    return _counts(name, rng.poisson(rng.uniform(1.0, 20.0, p), (n, p)).astype(np.float64))


def _sets() -> list[CorpusSet]:
    return [
        CorpusSet("oaks", "pyPLNmodels' oaks, 116 x 114, read-total offsets", False,
                  lambda: _oaks("oaks")),
        CorpusSet("oaks ~ 1 + tree", "oaks with its tree covariate (3 levels, one-hot, d = 3)", False,
                  lambda: _oaks("oaks ~ 1 + tree", tree=True)),
        CorpusSet("oaks x10", "oaks, every row 10 times (1160 x 114)", False,
                  lambda: _oaks("oaks x10", replicate=10)),
        CorpusSet("microcosm 400x100", "pyPLNmodels' microcosm: 96% zeros, rows of zeros only, counts to 5911",
                  False, lambda: _microcosm("microcosm 400x100", 400, 100)),
        CorpusSet("microcosm 150x250", "microcosm, p > n", False,
                  lambda: _microcosm("microcosm 150x250", 150, 250)),
        CorpusSet("microcosm 921x1209", "microcosm whole: p > n, counts to 71,311", True,
                  lambda: _microcosm("microcosm 921x1209", 921, 1209)),
        CorpusSet("crossover 500x4", "pyPLNmodels' crossover: 4 columns, coverage offsets", False,
                  lambda: _crossover("crossover 500x4", 500)),
        CorpusSet("crossover whole", "crossover, every region with coverage (2,459 less those without)", False,
                  lambda: _crossover("crossover whole", 2459)),
        CorpusSet("crossover per chromosome 43x104", "the rows with no missing value: p > n, offsets", False,
                  _crossover_per_chromosome_set),
        CorpusSet("scrna 400x100", "pyPLNmodels' scRNA: 29% zeros, counts to 3489", False,
                  lambda: _scrna("scrna 400x100", 400, 100)),
        CorpusSet("scrna 100x300", "scRNA, p > n", False,
                  lambda: _scrna("scrna 100x300", 100, 300)),
        CorpusSet("scrna 2000x1000", "scRNA at a size users have: 59% zeros, counts to 4129", True,
                  lambda: _scrna("scrna 2000x1000", 2000, 1000)),
        CorpusSet("scrna 2000x3000", "scRNA whole: 9 million p x p entries", True,
                  lambda: _scrna("scrna 2000x3000", 2000, 3000)),
        CorpusSet("simulated p=1", "one column, 300 rows", False,
                  lambda: _simulated("simulated p=1", 11, 300, 1)),
        CorpusSet("simulated p>n", "60 rows, 150 columns", False,
                  lambda: _simulated("simulated p>n", 12, 60, 150)),
        CorpusSet("simulated 95% zeros", "low rates: 95% of the counts are 0", False,
                  lambda: _simulated("simulated 95% zeros", 13, 400, 50, intercept=-3.6)),
        CorpusSet("simulated counts to 1e5", "high rates: counts up to about 1e5", False,
                  lambda: _simulated("simulated counts to 1e5", 14, 300, 30, intercept=8.0, scale=0.8)),
        CorpusSet("simulated wide offsets", "log-offsets spread over 10 units", False,
                  lambda: _simulated("simulated wide offsets", 15, 300, 30, offset_span=10.0)),
        CorpusSet("simulated d=10", "10 covariates (intercept and 9 normal columns)", False,
                  lambda: _simulated("simulated d=10", 16, 500, 30, d=10)),
        CorpusSet("negative binomial", "gamma-Poisson counts, not PLN: overdispersed, independent", False,
                  lambda: _negative_binomial("negative binomial", 17, 400, 40)),
        CorpusSet("poisson 300x20", "plain Poisson counts, not PLN: no overdispersion, Sigma near singular", False,
                  lambda: _poisson("poisson 300x20", 18, 300, 20)),
    ]


def _crossover_per_chromosome_set() -> CountData:
    return _crossover_per_chromosome("crossover per chromosome 43x104")


@functools.cache
def sets() -> dict[str, CorpusSet]:
    """Every set, by name, small ones first within each source."""
    return {found.name: found for found in _sets()}


def names(large: bool | None = None) -> list[str]:
    """The sets' names; `large` True or False keeps only those."""
    return [name for name, found in sets().items() if large is None or found.large == large]


# Kept for the process: the small sets are small, and a large one is loaded by one benchmark.
@functools.cache
def load(name: str) -> CountData:
    """The data of set `name` (KeyError naming the known sets otherwise)."""
    if name not in sets():
        raise KeyError(f"no corpus set {name!r}; known: {', '.join(sets())}")
    return sets()[name].make()


def references(path: pathlib.Path = OPTIMA_PATH) -> dict[str, Reference]:
    """The reference optima written down with the corpus, by set name."""
    if not path.exists():
        return {}
    stored = json.loads(path.read_text())
    return {name: Reference(entry["elbo"], entry["found_by"], entry["how"], entry.get("iterations", {}),
                            entry.get("estimated_gap", {})) for name, entry in stored.items()}


def gap(elbo: float, reference: float) -> float:
    """(reference - elbo) / |reference|: how far below the optimum, relative (negative above it)."""
    return (reference - elbo) / abs(reference)
