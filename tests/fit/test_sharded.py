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
from specs import tutorial_spec

from core.data.counts import DataError
from core.data.datasets import simulate
from core.fit import model, sharding, strategies
from core.machine.runtime import configure
from core.spec import OptimizerSpec

from project import TESTS

HERE = TESTS
PAD = 3  # rows of padding: 41 real rows become 44, as over 4 devices


def _data(dtype="float64", n=41):
    configure()
    counts = simulate(n, 6, d=2, seed=3)
    return model.make_data(counts.counts, counts.offsets, counts.covariates, dtype)


def _padded(data):
    """`data` with PAD padding rows, as `sharding.place_padded` lays them out (on one device)."""
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
    new_state, value = strategies.fit_step(state, data, problem.transformation)
    # The parameters stay float32; the ELBO a step hands the stopping test is summed wide.
    assert new_state.precision.dtype == jnp.float32 and new_state.params.latent_mean.dtype == jnp.float32
    assert value.dtype == model.wide_dtype(jnp.float32)


def test_sharded_on_one_device_places_rows_and_runs():
    data = _data()
    device = jax.devices("cpu")[0]
    strategy = strategies.get("sharded")
    placed = strategy.place_data(data, device)
    assert isinstance(placed, model.PaddedPLNData) and placed.counts.shape == (41, 6)
    assert strategy.device_count(device) == 1
    assert sharding.padded_rows(41, 4) == 44 and sharding.padded_rows(44, 4) == 44 and sharding.padded_rows(1, 3) == 3


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


# What the pytest process can check with its one CPU device: the device count as part of
# a spec, its refusals, and the layout table of a 1-device sharded fit.

def test_device_count_leaves_existing_spec_keys_alone():
    from core.spec import FitSpec

    # Keys of runs stored before the field existed (stored runs are found by key).
    assert tutorial_spec().key == "daa9120ccfc26fd7" and tutorial_spec(strategy="sharded").key == "757c19439692476f"
    assert "devices" not in tutorial_spec(strategy="sharded").to_dict()
    two = tutorial_spec(strategy="sharded", devices=2)
    assert two.to_dict()["devices"] == 2 and two.key != tutorial_spec(strategy="sharded").key
    assert FitSpec.from_dict(two.to_dict()) == two and FitSpec.from_dict(tutorial_spec().to_dict()) == tutorial_spec()
    # One device is what every other strategy uses: the same run, the same key.
    assert tutorial_spec(strategy="scan", devices=1) == tutorial_spec(strategy="scan")


BAD_DEVICE_COUNTS = [
    (dict(strategy="sharded", devices=-1), "devices must be between 0 and 4,096"),
    (dict(strategy="sharded", devices=5000), "devices must be between 0 and 4,096"),
    (dict(strategy="sharded", devices=2.0), "devices must be a whole number"),
    (dict(strategy="sharded", devices=True), "devices must be a whole number"),
    (dict(strategy="scan", devices=2), "devices > 1 needs the sharded strategy"),
]


@pytest.mark.parametrize("values,message", BAD_DEVICE_COUNTS, ids=[m for _, m in BAD_DEVICE_COUNTS])
def test_bad_device_counts_are_refused(values, message):
    from core.spec import SpecError

    with pytest.raises(SpecError, match=message):
        tutorial_spec(**values)


def test_more_devices_than_the_process_has_says_how_to_get_them():
    from core.run import engine, prepared
    from core.spec import SpecError

    configure()
    spec = tutorial_spec(strategy="sharded", devices=3, iterations=2, repeats=1)
    with pytest.raises(SpecError) as raised:
        engine.run(spec, cache=prepared.ExecutableCache())
    assert "devices = 3, but this process has 1 cpu device" in str(raised.value)
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=3" in str(raised.value)


def test_data_drawn_on_the_devices_are_for_the_sharded_strategy_only():
    from core.data import datasets as data
    from core.spec import DatasetSpec, SpecError

    on_device = DatasetSpec(kind="simulated_on_device", n=100, p=5, d=2, seed=1)
    assert on_device.label == "simulated on device 100x5 d=2 (seed 1)"
    assert tutorial_spec(dataset=on_device, strategy="sharded").dataset == on_device
    for strategy in ("scan", "pyplnmodels"):
        with pytest.raises(SpecError, match="only the sharded strategy fits it"):
            tutorial_spec(dataset=on_device, strategy=strategy)
    with pytest.raises(DataError, match="never exist on the host"):
        data.load(on_device)
    with pytest.raises(SpecError, match="d must be smaller than n"):
        DatasetSpec(kind="simulated_on_device", n=3, p=5, d=3)
    # The existing kinds keep their keys: no new DatasetSpec field.
    assert tutorial_spec(dataset=DatasetSpec(kind="simulated", n=50, p=5)).key == "4a4902457e4e4d3d"


def test_layout_of_a_one_device_sharded_fit():
    from core.inspect import layout

    data = _data("float32")
    device = jax.devices("cpu")[0]
    strategy = strategies.get("sharded", devices=1)
    placed = strategy.place_data(data, device)
    problem = strategies.Problem(41, 6, 2, "float32", 3, OptimizerSpec())
    state = strategy.place_state(strategies.init_state(placed, "seed", problem.transformation), device)
    rows = {row.name: row for row in layout.array_layouts(placed, "data") + layout.array_layouts(state, "state")}
    counts = rows["data.counts"]
    assert counts.global_shape == counts.per_device_shape == (41, 6) and counts.bytes_per_device == 41 * 6 * 4
    assert counts.sharding == f"{sharding.P(sharding.ROWS, None)} over mesh rows=1" and counts.devices == 1
    assert rows["state.params.latent_mean"].sharding == counts.sharding
    assert rows["state.precision"].global_shape == (6, 6) and rows["data.log_factorial_sum"].global_shape == ()
    table = layout.table_rows(list(rows.values()))
    assert {"array": "data.counts", "global shape": "41 × 6", "dtype": "float32", "sharding": counts.sharding,
            "devices": 1, "per-device shape": "41 × 6", "bytes per device": 984} in table


def test_data_drawn_on_the_devices_through_the_engine(four_devices):
    found = four_devices["on_device"]["engine"]
    assert found["devices"] == 4 and found["n"] == 41 and found["status"] == "ok" and found["processes"] == 1
    assert found["spec_kind"] == "simulated_on_device" and found["dataset"].startswith("simulated on device 41x6")
    # The engine fits the very rows simulate_on_devices draws, as the strategy alone does.
    assert found["elbo_relative"] < 1e-9


def test_a_run_over_the_first_two_of_four_devices(four_devices):
    found = four_devices["device_counts"]
    assert found["every"] == {"devices": 4, "cache": "memory"}
    two = found["two"]
    assert two["devices"] == 2 and two["key_devices"] == 2 and two["processes"] == 1
    # Its own executable: the cache key holds the device count, so the 4-device one is not reused.
    assert two["cache"] in ("compiled", "disk") and two["compile_count"] + two["disk_cache_hits"] > 0
    assert two["final_relative"] < 1e-9
    assert sorted(found["two_mesh"]) == [0, 1] and found["two_shards"] == [[58, 114]] * 2
    assert "devices = 8, but this process has 4 cpu devices" in found["refused"]
    assert "--xla_force_host_platform_device_count=8" in found["refused"]


def test_layout_table_of_four_devices(four_devices):
    table = four_devices["layout"]["table"]
    rows = "P('rows', None) over mesh rows=4"
    assert table["data.counts"] == {"sharding": rows, "devices": 4, "per_device": [11, 6], "bytes": 11 * 6 * 8,
                                    "shape": [44, 6]}
    assert table["state.params.latent_sd"]["per_device"] == [11, 6]
    assert table["data.row_mask"]["per_device"] == [11]
    assert table["state.params.coef"] == {"sharding": "replicated over mesh rows=4", "devices": 4,
                                          "per_device": [2, 6], "bytes": 2 * 6 * 8, "shape": [2, 6]}
