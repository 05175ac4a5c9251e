"""The fit is right on the data users bring, not only on oaks: every small set of the corpus
(`core.data.corpus`) in both precisions.

- The default fit (the front doors' optimizer, start and tolerance) ends within 1e-5
  (float32) or 1e-7 (float64) of each set's reference optimum, never diverges, says
  "converged", and is never above the optimum beyond rounding.
- Every optimizer, on the sets where the default once failed or that are hardest and on
  each simulated regime's extreme, in both precisions: from its default start it does not
  diverge, and whatever it reaches, it says "converged" only within 1e-5 of the optimum.

The references are written down with the corpus (`core/data/corpus_optima.json`, made by
`benchmarks/corpus_reference.py`): the best float64 ELBO of two different optimizers, each
run to float64's resolution. The large sets (scRNA 2000 x 1000 and 2000 x 3000, microcosm
921 x 1209) take minutes per fit here: `benchmarks/corpus.py` runs them.
"""

import concurrent.futures

import numpy as np
import pytest

from core.data import corpus
from core.fit import certificate
from core.results import outcome, reach
from core.run import direct
from core.spec import DEFAULTS, OPTIMIZERS

from xla_settings import QUICK

BOUND = {"float32": 1e-5, "float64": 1e-7}
# XLA's quicker CPU settings (the session's, `xla_settings`), named again: the fits' arithmetic
# as the lab compiles it, built in a third of the time (some 80 programs here); the lab's own
# compile of the default is tested on the hard sets in test_production_compile.
# A float64 evaluation may sit above the optimum by its own rounding only.
ABOVE = 1e-9
SMALL = corpus.names(large=False)
# The sets that broke the default before (microcosm's zeros, scRNA's 256 to 511 rows, a
# near-singular Sigma) and p > n.
HARD = ["microcosm 400x100", "scrna 400x100", "crossover per chromosome 43x104", "poisson 300x20"]
# The regimes a step size or a line search meets at its extremes, each small enough to fit in
# about a second: one column, counts to 1e5, offsets over 10 units of log, 10 covariates,
# counts the model does not describe. The larger sets (oaks x10, microcosm 150 x 250, scRNA
# 100 x 300: half the time of all 18 sets) run every optimizer in the corpus benchmark
# (`benchmarks/corpus.py --optimizer NAME`).
REGIMES = ["simulated p=1", "crossover 500x4", "simulated counts to 1e5", "simulated wide offsets", "simulated d=10",
           "negative binomial"]
# How long each optimizer may run here (from its default start, as every front door and the
# time-to-solution benchmark run it): long enough for the second-order ones to stop on some
# sets, not to converge on all.
CAPS = {"seed": 100, "adam": 100, "rprop": 100, "pyplnmodels_rprop": 200, "lbfgs": 100, "diagonal_newton": 150}


@pytest.fixture(scope="module")
def references():
    found = corpus.references()
    missing = [name for name in SMALL if name not in found]
    assert not missing, f"no reference optimum for {missing}: run benchmarks/corpus_reference.py --merge"
    return found


def _fit(name, optimizer, init, precision, iterations, tol):
    counts = corpus.load(name)
    fit = direct.fit(counts, optimizer, init, precision, iterations, tol, compiler_options=QUICK)
    checked = certificate.certify(counts.counts, counts.offsets, counts.covariates, fit.latent_mean, fit.latent_sd)
    ended = outcome.judge(fit.elbo, tol, iterations, precision, fit.tested_change, checked.gap)
    return ended, checked


def test_every_reference_is_the_best_of_two_optimizers_and_a_stationary_point(references):
    # Where the two disagree (optax's L-BFGS stops short on plain Poisson counts), the best
    # is the reference, and its float64 gradient says it is at the optimum.
    for name in SMALL:
        found = references[name]
        assert len(found.found_by) >= 2
        best = max(found.found_by, key=found.found_by.get)
        assert found.elbo == found.found_by[best]
        assert found.estimated_gap[best] <= 1e-10, (name, found.estimated_gap)


@pytest.mark.parametrize("name", SMALL)
def test_the_default_fit_reaches_each_sets_optimum_and_says_so(references, name):
    def judged(precision):
        return precision, *_fit(name, DEFAULTS.optimizer, DEFAULTS.init, precision, DEFAULTS.iterations,
                                DEFAULTS.tol_for(precision))

    optimum = references[name].elbo
    # Both precisions at once: XLA compiles a small program on one core.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for precision, ended, checked in pool.map(judged, ("float32", "float64")):
            assert ended.status == "ok", (precision, ended.error)
            # Converged, or, in float32, stalled at its resolution where the certificate's
            # quadratic model reads above its bar (3e-6) though the point is within the bound
            # below: on an AVX-512 CPU simulated 95% zeros ends 1.1e-6 below its optimum and the
            # certificate reads 6.2e-6 (a Newton step there overshoots: the model is no
            # distance), where an AVX2 CPU's rounding ended it at 1.5e-6, read 2.7e-6. Saying
            # "stalled" of a point that is closer is the certificate's caution, not a wrong
            # answer; a fit that stops short of the bound fails below either way.
            assert ended.converged or (precision == "float32" and ended.stalled), (
                precision, ended.final_change, checked.gap, len(ended.elbo))
            assert corpus.gap(checked.elbo, optimum) <= BOUND[precision], (precision, checked.elbo, optimum)
            assert corpus.gap(checked.elbo, optimum) >= -ABOVE, precision
            # What the fit itself reports is as near: its float64-accumulated ELBO, in its dtype.
            assert abs(corpus.gap(float(ended.elbo[-1]), checked.elbo)) <= {"float32": 1e-6, "float64": 1e-8}[precision]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("optimizer", [name for name in OPTIMIZERS if name != DEFAULTS.optimizer])
def test_every_optimizer_says_converged_only_at_the_optimum(references, optimizer, precision):
    def judged(name):
        return name, *_fit(name, optimizer, DEFAULTS.init_for(optimizer), precision, CAPS[optimizer],
                           DEFAULTS.tol_for(precision))

    # Two at a time: XLA compiles a small program on one core.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for name, ended, checked in pool.map(judged, HARD + REGIMES):
            # From its default start no optimizer diverges (seed did from log_rates on a crossover chromosome).
            assert ended.status == "ok", (name, ended.error)
            gap = corpus.gap(checked.elbo, references[name].elbo)
            if ended.converged:
                assert gap <= 1e-5, f"{optimizer} says converged on {name} ({precision}) {gap:.1e} below the optimum"
            assert gap >= -ABOVE, (name, checked.elbo)


def test_the_log_rates_sd_start_takes_microcosm_to_its_optimum_in_half_the_iterations(references):
    # Each cell's S from its count (log_rates_sd) against S = 0.5 (log_rates): on microcosm's
    # zeros the second took 96 iterations to within 1e-5 of the optimum in float64, the first 44
    # (docs/accuracy.md).
    optimum = references["microcosm 400x100"].elbo
    reached = {}
    for init in ("log_rates_sd", "log_rates"):
        ended, _ = _fit("microcosm 400x100", DEFAULTS.optimizer, init, "float64", DEFAULTS.iterations,
                        DEFAULTS.tol_for("float64"))
        reached[init] = reach.iterations_to(list(ended.elbo), optimum)
    # 44 and 93 with the suite's XLA settings.
    assert reached["log_rates_sd"] <= 60 < 80 <= reached["log_rates"], reached


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_the_tutorials_optimizer_runs_from_its_default_start(precision):
    # The tutorial's optimizer moves S by up to 0.1 a step: from log_rates_sd (S = 0.03 at a
    # count of 1,000) its second ELBO was -inf, and from log_rates it ended further from the
    # optimum than it had been and diverged on a crossover chromosome. It starts from its own.
    assert DEFAULTS.init_for("seed") == "seed" != DEFAULTS.init_for(DEFAULTS.optimizer)
    for name in ("oaks", "crossover per chromosome 43x104"):
        fit = direct.fit(corpus.load(name), "seed", DEFAULTS.init_for("seed"), precision, 100, compiler_options=QUICK)
        assert np.all(np.isfinite(fit.elbo)) and fit.elbo[-1] > fit.elbo[0], name
