"""What float32 cannot hold is told before a fit, and each verdict is checked against float64.

Data are oaks with one count raised (flagged) and a small CSV with a count of 1e9
(refused); the float64 ELBO of the same parameters says whether the verdict was right.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from specs import tutorial_spec

from core.data import csv_counts
from core.data.counts import CountData
from core.data.datasets import load_oaks
from core.fit import model, precision_guard, strategies
from core.machine.runtime import configure
from core.run import engine, prepared
from core.spec import DatasetSpec, OptimizerSpec, SpecError

RPROP = OptimizerSpec("rprop", 0.01)


def _fit(counts, offsets, dtype, iterations):
    configure()
    covariates = np.ones((counts.shape[0], 1))
    data = jax.device_put(model.make_data(counts, offsets, covariates, dtype))
    problem = strategies.Problem(*counts.shape, 1, dtype, iterations, RPROP)
    scan = strategies.get("scan")
    tol = jnp.asarray(0.0, dtype)
    start = prepared.initial_state(data, "log_counts", problem)  # as the engine starts
    return scan.run(scan.compile(scan.lower(problem, start, data, tol)), problem, start, data, tol)


def _float32_error(counts, offsets, state) -> float:
    """How far float32 arithmetic puts the ELBO of `state`'s parameters from its float64 value."""
    covariates = np.ones((counts.shape[0], 1))
    values = []
    for dtype in ("float32", "float64"):
        data = jax.device_put(model.make_data(counts, offsets, covariates, dtype))
        held = jax.tree.map(lambda a: jnp.asarray(a, dtype), (state.params, state.precision))
        values.append(float(jax.jit(model.elbo)(*held, data)))
    return abs(values[0] - values[1]) / abs(values[1])


@functools.cache
def _oaks_with(largest: float | None):
    oaks = load_oaks()
    counts = oaks.counts.copy()
    if largest:
        counts[0, 0] = largest
    return counts, oaks.offsets


def test_oaks_passes_and_its_float32_elbo_is_accurate():
    counts, offsets = _oaks_with(None)
    check = precision_guard.check_float32(counts)
    assert check.refusal is None and check.warning is None and check.estimate < precision_guard.WARN_ABOVE
    assert _float32_error(counts, offsets, _fit(counts, offsets, "float32", 300).state) <= precision_guard.WARN_ABOVE


def test_a_count_of_1e5_is_flagged_and_float64_confirms_the_flag():
    counts, offsets = _oaks_with(1e5)
    check = precision_guard.check_float32(counts)
    assert check.refusal is None and "compare ELBOs in float64" in check.warning
    error = _float32_error(counts, offsets, _fit(counts, offsets, "float32", 300).state)
    # Beyond what float32 ELBOs are held to (so the flag was due), within what it announced.
    assert precision_guard.WARN_ABOVE < error <= check.estimate, error
    result = engine.run(tutorial_spec(strategy="scan", iterations=5, repeats=1, precision="float32"),
                        counts=CountData(counts, offsets, np.ones((116, 1)), "oaks, one count 1e5"))
    assert result.status == "ok" and result.warnings == [check.warning]


@functools.cache
def _csv_with_1e9():
    # Thirty rows and eight columns of oaks counts, no offsets, one count of a billion.
    counts = load_oaks().counts[:30, :8].copy()
    counts[0, 0] = 1e9
    text = "\n".join([",".join(f"taxon{j}" for j in range(8))]
                     + [",".join(f"{int(v)}" for v in row) for row in counts]) + "\n"
    return csv_counts.read_csv_bytes(text.encode(), None, "one_billion.csv")


def test_a_count_of_1e9_is_refused_in_float32_and_fitted_in_float64():
    data = _csv_with_1e9()
    spec = tutorial_spec(dataset=DatasetSpec(kind="csv", counts_path="one_billion.csv"), strategy="scan",
                         iterations=3000, repeats=1, optimizer=RPROP, init="log_counts", precision="float32")
    with pytest.raises(SpecError, match="largest, 1,000,000,000, is above 2\\^24.*choose float64"):
        engine.run(spec, counts=data)
    result = engine.run(dataclasses.replace(spec, precision="float64"), counts=data)
    assert result.status == "ok" and result.final_elbo == pytest.approx(-415.08, abs=0.01)
    # The refusal is right: at the float64 fit's own parameters, float32 arithmetic misses the
    # ELBO by half of it (the billion's terms round by hundreds before any sum).
    fitted = _fit(data.counts, data.offsets, "float64", 3000)
    assert float(fitted.elbo[-1]) == pytest.approx(result.final_elbo, rel=1e-12)
    assert _float32_error(data.counts, data.offsets, fitted.state) > 0.1
