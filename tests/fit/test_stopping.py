"""Stopping at a tolerance: every strategy stops at the same iteration of the same
trajectory, inside its loop; and the pairs a strategy cannot run are refused up front."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from specs import tutorial_spec

from core.data.datasets import simulate
from core.fit import model, strategies
from core.fit.strategies.base import FIRST_STOP
from core.machine.runtime import configure
from core.spec import GRADIENT_OPTIMIZERS, OPTIMIZERS, OptimizerSpec, SpecError, refusal

ITERATIONS = 200


def _run(name, optimizer, tol, iterations=ITERATIONS, chunk=0, dtype="float64"):
    configure()
    counts = simulate(40, 6, 2, 3)
    host = model.make_data(counts.counts, counts.offsets, counts.covariates, dtype)
    strategy = strategies.get(name)
    device = jax.devices("cpu")[0]
    data = strategy.place_data(host, device)
    problem = strategies.Problem(counts.n, counts.p, counts.d, dtype, iterations, OptimizerSpec(optimizer),
                                 chunk=chunk, stops=tol > 0)
    state = strategy.place_state(strategies.init_state(data, "log_counts", problem.algorithm), device)
    tolerance = jnp.asarray(tol, dtype)
    executables = strategy.compile(strategy.lower(problem, state, data, tolerance))
    output = strategy.run(executables, problem, strategy.fresh_state(state), data, tolerance)
    run = int(output.iterations_run)
    assert output.elbo.dtype == np.dtype(dtype), "a trace is of the fit's dtype"
    if tol > 0:  # the change the test read, which the run reports as its final change
        changes = np.abs(np.diff(np.asarray(output.elbo[:run], np.float64))) / np.abs(np.asarray(output.elbo[1:run]))
        tested = float(output.stop.change)
        assert output.stop.change.dtype == np.float64
        if dtype == "float64":
            assert tested == pytest.approx(changes[-1], rel=1e-9), name
        else:  # read on the float64-accumulated ELBO that the trace rounds
            assert abs(tested - changes[-1]) <= 2 * np.finfo(np.float32).eps, name
    return run, np.asarray(jax.block_until_ready(output.elbo), dtype=np.float64)


def _accepting(optimizer):
    return [name for name in strategies.names() if refusal(name, optimizer) is None]


@pytest.mark.parametrize("optimizer, tol", [("preconditioned_lbfgs", 1e-10), ("rprop", 1e-6)])
def test_every_strategy_stops_where_scan_does(optimizer, tol):
    stopped, reference = _run("scan", optimizer, tol)
    assert FIRST_STOP <= stopped < ITERATIONS
    assert np.all(np.isfinite(reference[:stopped])) and np.all(np.isnan(reference[stopped:]))
    changes = np.abs(np.diff(reference[:stopped])) / np.abs(reference[1:stopped])
    # The first two changes in a row under tol (changes[k] is iteration k + 2's).
    quiet = (changes[1:] < tol) & (changes[:-1] < tol)
    assert quiet[-1] and not quiet[max(0, FIRST_STOP - 3):-1].any()
    names = _accepting(optimizer) if optimizer != "rprop" else ["eager", "jit_per_function", "scan_analytic"]
    for name in names:
        run, elbo = _run(name, optimizer, tol)
        assert run == stopped, f"{name} stopped after {run} iterations, scan after {stopped}"
        np.testing.assert_allclose(elbo[:run], reference[:run], rtol=1e-9, err_msg=name)


def test_a_loop_split_into_calls_stops_in_the_call_that_meets_tol():
    whole_run, whole = _run("scan", "preconditioned_lbfgs", 1e-10)
    for name in ("scan", "while_loop"):
        run, split = _run(name, "preconditioned_lbfgs", 1e-10, chunk=7)  # 7 does not divide 200
        assert run == whole_run, name
        np.testing.assert_allclose(split[:run], whole[:run], rtol=1e-12, err_msg=name)
        # The calls made, and no more: 4 calls of 7 for a stop within the fourth.
        assert split.shape == (-(-run // 7) * 7,) and np.all(np.isnan(split[run:])), name


def test_without_a_tolerance_every_iteration_runs():
    run, elbo = _run("scan", "preconditioned_lbfgs", 0.0, iterations=30)
    assert run == 30 and np.all(np.isfinite(elbo))


def test_a_fit_stops_after_its_last_iteration_when_tol_is_not_met():
    run, elbo = _run("scan", "preconditioned_lbfgs", 1e-15, iterations=12, chunk=5)
    assert run == 12 and elbo.shape == (12,) and np.all(np.isfinite(elbo))


def test_traces_stay_in_the_fit_dtype_while_the_test_compares_float64():
    for optimizer in ("seed", "preconditioned_lbfgs"):
        _run("scan", optimizer, 1e-7, iterations=20, dtype="float32")  # checks the trace's dtype
        configure()
        counts = simulate(40, 6, 2, 3)
        data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, "float32"))
        problem = strategies.Problem(counts.n, counts.p, counts.d, "float32", 20, OptimizerSpec(optimizer))
        state, value = strategies.fit_step(strategies.init_state(data, "log_counts", problem.algorithm), data,
                                           problem.algorithm)
        assert value.dtype == np.float64, optimizer
        # Every array of the fit stays float32 (a few scalars and L-BFGS's (m,) products are float64).
        for leaf in jax.tree_util.tree_leaves(state):
            if jnp.issubdtype(leaf.dtype, jnp.floating) and leaf.ndim >= 2:
                assert leaf.dtype == np.float32, optimizer


def test_strategies_refuse_the_optimizers_they_cannot_run():
    refused = {(s, o) for s in strategies.names() + ["torch_eager", "torch_compile", "pyplnmodels"] for o in OPTIMIZERS
               if refusal(s, o) is not None}
    profiled = set(OPTIMIZERS) - set(GRADIENT_OPTIMIZERS)
    assert refused == {(s, o) for s in ("scan_analytic", "jit_per_function", "torch_eager", "torch_compile")
                       for o in profiled}
    spec = tutorial_spec(strategy="scan", optimizer=OptimizerSpec("lbfgs"))
    for strategy, optimizer in (("scan_analytic", "lbfgs"), ("jit_per_function", "preconditioned_lbfgs"),
                                ("torch_eager", "pyplnmodels_rprop")):
        with pytest.raises(SpecError, match=f"strategy {strategy} .* runs only the optimizers seed, adam, rprop"):
            dataclasses.replace(spec, strategy=strategy, optimizer=OptimizerSpec(optimizer))
