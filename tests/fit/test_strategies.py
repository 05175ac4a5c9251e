"""Every strategy computes the same fit: the invariant the whole product rests on."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from core.data.datasets import load_oaks
from core.fit import model, strategies
from core.run.runtime import configure
from core.spec import OptimizerSpec

ITERATIONS = 150
# Final-ELBO agreement with eager (relative), per precision, on oaks x1.
TOLERANCE = {"float64": 1e-6, "float32": 1e-4}


def _run(name, dtype, iterations=ITERATIONS, tol=0.0, optimizer=OptimizerSpec()):
    configure()
    counts = load_oaks()
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, dtype))
    problem = strategies.Problem(counts.n, counts.p, counts.d, dtype, iterations, optimizer)
    state = strategies.init_state(data, "seed", problem.transformation)
    strategy = strategies.get(name)
    tol = jnp.asarray(tol, dtype)
    executables = strategy.compile(strategy.lower(problem, state, data, tol))
    output = jax.block_until_ready(strategy.run(executables, problem, state, data, tol))
    return output


@pytest.fixture(scope="module", params=["float64", "float32"])
def trajectories(request):
    dtype = request.param
    return dtype, {name: _run(name, dtype) for name in strategies.names()}


def test_every_strategy_agrees_with_eager(trajectories):
    dtype, outputs = trajectories
    eager = np.asarray(outputs["eager"].elbo)
    assert eager.shape == (ITERATIONS,) and np.all(np.isfinite(eager))
    for name, output in outputs.items():
        elbo = np.asarray(output.elbo)
        assert elbo.dtype == np.dtype(dtype), name
        assert int(output.iterations_run) == ITERATIONS, name
        relative = abs(elbo[-1] - eager[-1]) / abs(eager[-1])
        assert relative <= TOLERANCE[dtype], f"{name}: final ELBO differs from eager by {relative:.2e}"
        # The fit makes progress: the ELBO rises by orders of magnitude from the start.
        assert elbo[-1] > 0.01 * elbo[0], name


def test_state_stays_in_its_dtype(trajectories):
    dtype, outputs = trajectories
    for name, output in outputs.items():
        for leaf in jax.tree_util.tree_leaves(output.state):
            if jnp.issubdtype(leaf.dtype, jnp.floating):
                assert leaf.dtype == np.dtype(dtype), f"{name}: {leaf.dtype}"


def test_pytree_class_updates_precision():
    # The seed's level 4 never updated Omega; ours must move it away from the identity.
    output = _run("scan_pytree_class", "float64", iterations=3)
    precision = np.asarray(output.state.precision)
    assert not np.allclose(precision, np.eye(precision.shape[0]))
    np.testing.assert_allclose(precision, np.asarray(_run("scan", "float64", iterations=3).state.precision), rtol=1e-10)


def test_while_loop_stops_at_tolerance_on_the_same_trajectory():
    # With the seed optimizer the relative ELBO change on oaks falls under 1e-2 after
    # about 165 iterations.
    full = np.asarray(_run("scan", "float64", iterations=400).elbo)
    early = _run("while_loop", "float64", iterations=400, tol=1e-2)
    stopped = int(early.iterations_run)
    assert 1 < stopped < 400
    elbo = np.asarray(early.elbo)
    np.testing.assert_allclose(elbo[:stopped], full[:stopped], rtol=1e-9)
    assert np.all(np.isnan(elbo[stopped:]))
    last, previous = elbo[stopped - 1], elbo[stopped - 2]
    assert abs(last - previous) / abs(last) < 1e-2
    changes = np.abs(np.diff(full)) / np.abs(full[1:])
    assert stopped == int(np.argmax(changes < 1e-2)) + 2


def test_registry_describes_every_strategy():
    described = strategies.describe()
    assert [item["name"] for item in described] == strategies.names()
    assert set(strategies.TUTORIAL_LEVELS) <= set(strategies.names())
    for item in described:
        assert item["description"].startswith(item["name"] + ":")
        assert len(item["description"]) > 150
    with pytest.raises(KeyError, match="known: eager"):
        strategies.get("nope")
