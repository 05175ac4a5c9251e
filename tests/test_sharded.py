"""The sharded strategy: padding that changes nothing, and the same fit over several devices.

Padding and masking are checked here, in the pytest process (one CPU device), on the
model functions themselves. Several devices need a fresh process, because JAX fixes the
CPU device count when it starts: `sharded_worker.py` runs under
XLA_FLAGS=--xla_force_host_platform_device_count=4 and reports JSON.
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from core import model, strategies
from core.data import simulate
from core.runtime import configure
from core.spec import OptimizerSpec
from core.strategies import sharded

HERE = os.path.dirname(os.path.abspath(__file__))
PAD = 3  # rows of padding: 41 real rows become 44, as over 4 devices


def _data(dtype="float64", n=41):
    configure()
    counts = simulate(n, 6, d=2, seed=3)
    return model.make_data(counts.counts, counts.offsets, counts.covariates, dtype)


def _padded(data):
    """`data` with PAD padding rows, as `sharded.place_padded` lays them out (on one device)."""
    grow = lambda a: np.concatenate([a, np.zeros((PAD,) + a.shape[1:], a.dtype)])  # noqa: E731
    mask = np.r_[np.ones(len(data.counts)), np.zeros(PAD)].astype(data.counts.dtype)
    return model.PaddedPLNData(grow(data.counts), grow(data.offsets), grow(data.covariates),
                               data.log_factorial_sum, mask)


def _grow_params(params, fill_mean=0.0, fill_sd=1.0):
    B, M, S = params
    pad = lambda a, v: jnp.concatenate([a, jnp.full((PAD, a.shape[1]), v, a.dtype)])  # noqa: E731
    return model.PLNParams(B, pad(M, fill_mean), pad(S, fill_sd))


def test_padding_rows_change_nothing_in_the_model():
    data = _data()
    padded = _padded(data)
    params, _ = model.init_params(data, "log_counts")
    params = params._replace(latent_mean=params.latent_mean + 0.3, latent_sd=params.latent_sd * 1.2)
    # Padding rows far from anything real, to show the mask, not their values, hides them.
    big = _grow_params(params, fill_mean=3.0, fill_sd=2.5)
    precision = model.closed_form_precision(params, data)
    np.testing.assert_allclose(model.closed_form_precision(big, padded), precision, rtol=1e-12)
    np.testing.assert_allclose(model.elbo(big, precision, padded), model.elbo(params, precision, data), rtol=1e-13)
    np.testing.assert_allclose(model.profiled_elbo(big.latent_mean, big.latent_sd, padded),
                               model.profiled_elbo(params.latent_mean, params.latent_sd, data), rtol=1e-13)
    grads = jax.grad(model.elbo)(params, precision, data)
    padded_grads = jax.grad(model.elbo)(big, precision, padded)
    np.testing.assert_allclose(padded_grads.coef, grads.coef, rtol=1e-11)
    for name in ("latent_mean", "latent_sd"):
        full = np.asarray(getattr(padded_grads, name))
        np.testing.assert_allclose(full[:-PAD], getattr(grads, name), rtol=1e-12, err_msg=name)
        assert np.all(full[-PAD:] == 0.0), f"{name}: padded rows get a gradient"


@pytest.mark.parametrize("init", ["seed", "log_counts"])
def test_initial_state_on_padded_data_is_that_of_the_real_rows(init):
    data = _data()
    params, precision = model.init_params(data, init)
    padded_params, padded_precision = model.init_params(_padded(data), init)
    np.testing.assert_allclose(padded_precision, precision, rtol=1e-12)
    np.testing.assert_allclose(padded_params.coef, params.coef, rtol=1e-12)
    np.testing.assert_array_equal(padded_params.latent_mean[:-PAD], params.latent_mean)


@pytest.mark.parametrize("optimizer", [OptimizerSpec("seed"), OptimizerSpec("adam", 0.05), OptimizerSpec("rprop", 0.05)])
def test_optimizers_leave_padded_rows_alone_and_finite(optimizer):
    data, iterations = _data(), 25
    padded = _padded(data)
    problem = strategies.Problem(41, 6, 2, "float64", iterations, optimizer)
    scan = strategies.get("scan")
    outputs = []
    for fitted in (data, padded):
        fitted = jax.device_put(fitted)
        state = strategies.init_state(fitted, "seed", problem.transformation)
        outputs.append(scan.run(scan.compile(scan.lower(problem, state, fitted, None)), problem, state, fitted, None))
    plain, masked = outputs
    np.testing.assert_allclose(masked.elbo, plain.elbo, rtol=1e-9)
    for leaf in jax.tree.leaves(masked.state):
        assert np.all(np.isfinite(leaf))
    # Zero gradients give zero updates under RAdam, Adam and Rprop: padded M, S stay at
    # the seed initialisation (0 and 1) and never enter the ELBO.
    assert np.all(np.asarray(masked.state.params.latent_mean)[-PAD:] == 0.0)
    assert np.all(np.asarray(masked.state.params.latent_sd)[-PAD:] == 1.0)


def test_float32_padded_fit_stays_float32():
    data = jax.device_put(_padded(_data("float32")))
    problem = strategies.Problem(41, 6, 2, "float32", 3, OptimizerSpec())
    state = strategies.init_state(data, "log_counts", problem.transformation)
    _, value = strategies.fit_step(state, data, problem.transformation)
    assert value.dtype == jnp.float32 and state.precision.dtype == jnp.float32


def test_sharded_on_one_device_places_rows_and_runs():
    data = _data()
    device = jax.devices("cpu")[0]
    strategy = strategies.get("sharded")
    placed = strategy.place_data(data, device)
    assert isinstance(placed, model.PaddedPLNData) and placed.counts.shape == (41, 6)
    assert strategy.device_count(device) == 1
    assert sharded.padded_rows(41, 4) == 44 and sharded.padded_rows(44, 4) == 44 and sharded.padded_rows(1, 3) == 3


def test_registry_keeps_the_tutorial_levels():
    assert "sharded" in strategies.names()
    assert strategies.TUTORIAL_LEVELS == ("eager", "jit_per_function", "scan", "scan_namedtuple", "scan_pytree_class")


@pytest.fixture(scope="module")
def four_devices():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # see benchmarks/scaling.py
    done = subprocess.run([sys.executable, os.path.join(HERE, "sharded_worker.py"), "4"], capture_output=True,
                          text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sharded_agrees_with_scan_on_four_devices(four_devices):
    assert four_devices["devices"] == 4
    for label, found in four_devices["agreement"].items():
        assert found["status"] == "ok" and found["iterations_run"] == 150, label
        assert found["devices"] == 4 and found["scan_devices"] == 1, label
        # The acceptance bar is 1e-6 (float64); in practice it is ~1e-11.
        assert found["final_relative"] <= 1e-6, label
        assert found["trace_relative"] <= 1e-6, label
    assert four_devices["agreement"]["oaks x4"]["n"] == 464
    assert four_devices["agreement"]["simulated 41 (padded)"]["n"] == 41


def test_sharded_keeps_rows_apart_and_only_reduces_small_blocks(four_devices):
    layout = four_devices["layout"]
    assert layout["counts_shards"] == [[11, 6]] * 4 and layout["mask_total"] == 41
    assert layout["latent_mean_spec"] == "P('rows', None)" and layout["row_leaves_sharded"]
    assert layout["precision_replicated"] and layout["coef_replicated"]
    # Sums over rows become all-reduces; nothing gathers the rows onto one device.
    assert layout["collectives"] == ["all-reduce"]
    for dims in layout["collective_shapes"]:
        assert not {41, 44, 11} & {int(v) for v in dims.split(",") if v}, dims


def test_second_sharded_run_reuses_the_executable(four_devices):
    assert four_devices["second_run"] == {"cache": "memory", "compile_count": 0, "recompile_count": 0}


def test_data_simulated_on_the_devices(four_devices):
    found = four_devices["on_device"]
    assert found["same_rows_any_device_count"] and found["padding_zero"]
    assert found["log_factorial_relative"] < 1e-12
    assert found["fit_relative"] < 1e-9
    assert len(found["bytes_per_device"]) == 4 and len(set(found["bytes_per_device"].values())) == 1
