"""pyplnmodels_rprop is pyPLNmodels' own algorithm: its ELBO trajectory is pyPLNmodels'
recorded one, within float64 rounding, over the first 100 iterations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from core.data.datasets import load_oaks
from core.fit import model, strategies
from core.machine.runtime import configure
from core.spec import OptimizerSpec

ITERATIONS = 100

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # pyPLNmodels' pkg_resources import


def _ours(counts, strategy="scan", iterations=ITERATIONS):
    configure()
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float64"))
    problem = strategies.Problem(counts.n, counts.p, counts.d, "float64", iterations, OptimizerSpec("pyplnmodels_rprop"))
    state = strategies.init_state(data, "log_counts", problem.algorithm)
    runner = strategies.get(strategy)
    tol = jnp.asarray(0.0, "float64")
    output = runner.run(runner.compile(runner.lower(problem, state, data, tol)), problem, state, data, tol)
    return np.asarray(jax.block_until_ready(output.elbo), dtype=np.float64)


def test_trajectory_is_pyplnmodels_own_within_rounding():
    torch = pytest.importorskip("torch")
    from core.fit.peers import pyplnmodels_fit

    counts = load_oaks()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # results, not speed: a busy machine slows torch's threads down
    try:
        fitted = pyplnmodels_fit.fit(pyplnmodels_fit.build(counts, torch.device("cpu"), "float64"), ITERATIONS)
    finally:
        torch.set_num_threads(threads)
    theirs = pyplnmodels_fit.exact_elbo(pyplnmodels_fit.recorded_elbo(fitted), counts.counts)
    ours = _ours(counts)
    assert theirs.shape == ours.shape == (ITERATIONS,)
    relative = np.abs(ours - theirs) / np.abs(theirs)
    assert relative.max() < 1e-11, f"largest relative difference {relative.max():.1e} at {relative.argmax()}"
    # It moves: the ELBO rises by orders of magnitude from pyPLNmodels' start.
    assert ours[-1] > 0.01 * ours[0]


def test_every_compiled_strategy_runs_it_the_same():
    counts = load_oaks()
    reference = _ours(counts, iterations=30)
    for name in ("jit_step", "scan_namedtuple", "while_loop"):
        np.testing.assert_allclose(_ours(counts, name, iterations=30), reference, rtol=1e-12, err_msg=name)
