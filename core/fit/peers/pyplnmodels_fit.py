"""pyplnmodels: pyPLNmodels' own `Pln.fit` (PyTorch, eager), on the same data, iterations and device.

The row reflects pyPLNmodels' algorithm, whatever the spec's optimizer and init say:
`torch.optim.Rprop(lr=0.01, step_sizes=(1e-10, 50))` on M and S only, from
M = log(Y + (Y == 0)), S = 0.5, with B and Sigma profiled (closed forms inside the
ELBO). `fit(maxiter=iterations, tol=0)` runs every iteration (but see Stopping); the
per-iteration ELBO is
the one pyPLNmodels records before each step (`_elbo_criterion_monitor.elbo_list`),
re-expressed with the exact log Y! (pyPLNmodels uses Stirling's formula):
elbo_exact = elbo_pyplnmodels - stirling_sum + exact_sum. The timed call is `fit`
itself, which includes pyPLNmodels' initialisation (a log and a fill).

Stopping: pyPLNmodels' own `tol` is not a relative ELBO change. Its criterion
(`utils/_criterion.py`, BETA = 0.03) is an exponential moving average of the change in
the slope of the normalised cumulative ELBO, elbo_k / sum_{j<=k} elbo_j; since it starts
at 1 and decays by at most 0.97 an iteration, it cannot fall under `tol` before
1 + ln(tol) / ln(0.97) iterations (455 for its default 1e-6, so with its default
maxiter of 400 it always runs 400). Here a spec's `tol` > 0 stops pyPLNmodels' loop by
the rule every strategy uses, the relative change of the (exact) ELBO, in the fit's
dtype, from the per-iteration hook; its own criterion is given tol = 0.

What is changed, and why: pyPLNmodels casts every input to float32 (`.float()`) and
places it on its import-time global DEVICE ("cuda" whenever CUDA is available); here
the data (re-made from the float64 host arrays) and the initial M, S are put on the
spec's device and dtype after construction, so that a float64 or a CPU row is what it
says; a float32 row is what pyPLNmodels computes natively. All-zero count columns
are kept (pyPLNmodels drops them by default) so that the fit has the same p as ours.
Its banner messages are silenced and its tqdm bar disabled; the iterations are its own.
"""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any, Callable

import numpy as np
import torch
import tqdm

from core.fit.model import exact_log_factorial_sum, stirling_log_factorial_sum
from core.fit.strategies.base import met_after, quiet_after, relative_change

with warnings.catch_warnings():
    # pyPLNmodels' data loaders import pkg_resources, whose deprecation notice is setuptools'
    # business: it stood in every benchmark's output.
    warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
    from pyPLNmodels import Pln
    from pyPLNmodels.models import base

# pyPLNmodels' fixed choices (models/base.py `_handle_optimizer`, `fit` defaults).
LEARNING_RATE = 0.01
OPTIMIZER = "rprop"
INIT = "log_counts"


class DivergedError(Exception):
    """pyPLNmodels raised on a non-finite ELBO; `elbo` holds the values recorded so far."""

    def __init__(self, elbo: list[float]) -> None:
        super().__init__("pyPLNmodels: the ELBO is not finite")
        self.elbo = elbo


class StoppedError(DivergedError):
    """The per-iteration callback asked to stop (a run past its time budget); `elbo` holds
    the values recorded so far, all finite."""


class Converged(Exception):
    """The relative ELBO change fell under the spec's `tol`: the fit ends there, as it
    would at its last iteration (the ELBO of this iteration is recorded)."""


@functools.lru_cache(maxsize=None)
def model_class() -> type:
    """A `pyPLNmodels.Pln` subclass that computes on a chosen device and dtype, quietly."""
    # fit() draws a tqdm bar on stderr on every call, whatever `verbose` says.
    base.tqdm = functools.partial(tqdm.tqdm, disable=True)

    class PlacedPln(Pln):
        remove_zero_columns = False

        def __init__(self, counts, offsets, covariates, device, dtype, on_iteration=None, tol=0.0):
            super().__init__(counts, offsets=offsets, exog=covariates, add_const=False)
            self._placement = dict(device=device, dtype=dtype)
            # The relative change of the exact ELBO, in the fit's dtype (see the module docstring).
            self._numpy_dtype = np.dtype(str(dtype).removeprefix("torch."))
            self._tol = np.asarray(tol, self._numpy_dtype)
            self._to_exact = exact_log_factorial_sum(counts) - stirling_log_factorial_sum(counts)
            self._previous = np.asarray(np.inf, self._numpy_dtype)
            self._ran = 0
            self._quiet = 0
            # Re-made from the host arrays, not cast from pyPLNmodels' float32 copies:
            # float32 offsets are off by ~4e-7, which moves the ELBO by ~16 on oaks.
            placed = [torch.as_tensor(np.asarray(a, dtype=np.float64)).to(**self._placement)
                      for a in (counts, covariates, offsets)]
            for mine, theirs in zip(placed, (self._endog, self._exog, self._offsets)):
                assert mine.shape == theirs.shape, "pyPLNmodels changed the data's shape"
            self._endog, self._exog, self._offsets = placed
            self._on_iteration = on_iteration

        def _init_latent_parameters(self):
            super()._init_latent_parameters()
            self._latent_mean = self._latent_mean.to(**self._placement)
            self._latent_sqrt_variance = self._latent_sqrt_variance.to(**self._placement)

        def _trainstep(self):
            try:
                elbo = super()._trainstep()
            except ValueError as err:  # raised on a non-finite ELBO, before the step
                if "non-finite" not in str(err):
                    raise
                recorded = [float(e) for e in self._elbo_criterion_monitor.elbo_list]
                raise DivergedError(recorded + [float("nan")]) from None
            if self._on_iteration is not None and self._on_iteration(elbo):
                # pyPLNmodels' loop has no exit of its own: leave it like a divergence does.
                recorded = [float(e) for e in self._elbo_criterion_monitor.elbo_list]
                raise StoppedError(recorded + [float(elbo)])  # this iteration's is recorded after the step
            if self._tol > 0:
                exact = np.asarray(float(elbo) - self._to_exact, self._numpy_dtype)
                self._ran += 1
                change = relative_change(exact, self._previous)
                self._quiet = int(quiet_after(self._quiet, change, self._tol))
                if met_after(self._quiet, change, self._ran):
                    self._elbo_criterion_monitor.update_criterion(elbo)  # as its loop would have
                    raise Converged()
                self._previous = exact
            return elbo

        # pyPLNmodels prints these on every fit, whatever `verbose` says.
        def _print_beginning_message(self):
            pass

        def _print_start_init(self):
            pass

        def _print_end_init(self):
            pass

        def _print_end_of_fitting_message(self, stop_condition, tol):
            pass

    return PlacedPln


def build(counts, device, precision: str, on_iteration: Callable[[Any], None] | None = None, tol: float = 0.0):
    """A fresh, unfitted model of `counts` (a `CountData`) on `device`, in `precision`,
    that stops once the relative ELBO change is under `tol` (0: never)."""
    dtype = {"float32": torch.float32, "float64": torch.float64}[precision]
    return model_class()(counts.counts, counts.offsets, counts.covariates, device, dtype, on_iteration, tol)


def fit(model, iterations: int):
    """pyPLNmodels' fit, up to `iterations`; its own criterion is off (tol = 0), the
    model's relative-change `tol` (see `build`) ends it early."""
    try:
        model.fit(maxiter=iterations, lr=LEARNING_RATE, tol=0.0, verbose=False)
    except Converged:
        model._fitted = True  # what its fit sets on the way out
    return model


def recorded_elbo(model) -> np.ndarray:
    """pyPLNmodels' per-iteration ELBO as it computed it (Stirling's log Y!), float64."""
    return np.asarray([float(e) for e in model._elbo_criterion_monitor.elbo_list], dtype=np.float64)


def exact_elbo(stirling_elbo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Re-express pyPLNmodels' ELBO with the exact log Y! (gammaln)."""
    correction = stirling_log_factorial_sum(counts) - exact_log_factorial_sum(counts)
    return np.asarray(stirling_elbo, dtype=np.float64) + correction


def timed_fit(counts, device, precision: str, iterations: int, sync: Callable[[], None], on_iteration=None,
              tol: float = 0.0):
    """(model, seconds, diverged or stopped ELBO or None): a fresh model's `fit`, timed alone;
    `on_iteration(elbo)` returning true stops it (`StoppedError`); a fit that meets `tol`
    ends normally."""
    model = build(counts, device, precision, on_iteration, tol)
    start = time.perf_counter()
    try:
        fit(model, iterations)
    except DivergedError as err:
        sync()
        return model, time.perf_counter() - start, np.asarray(err.elbo, dtype=np.float64)
    sync()
    return model, time.perf_counter() - start, None
