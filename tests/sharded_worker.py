"""Runs the sharded checks in a fresh process with several simulated CPU devices.

The pytest process has already started JAX with one CPU device, and the device count is
fixed when JAX starts, so tests/test_sharded.py runs this script as a subprocess with
XLA_FLAGS=--xla_force_host_platform_device_count=K set before jax is imported. It prints
one JSON object (the last stdout line) for the test to assert on.

    python tests/sharded_worker.py 4
"""

from __future__ import annotations

import json
import os
import re
import sys

import xla_settings  # beside this script; imports nothing

DEVICES = int(sys.argv[1]) if len(sys.argv) > 1 else 4
os.environ["XLA_FLAGS"] = xla_settings.with_device_count(DEVICES)  # the suite's quick compile too
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402  (the device count must be set first)
import numpy as np  # noqa: E402
from specs import tutorial_spec  # noqa: E402

from core.data.on_device import simulate_on_devices  # noqa: E402
from core.fit import (  # noqa: E402
    model,
    sharding,  # noqa: E402
    strategies,
)
from core.inspect.layout import (
    array_layouts,  # noqa: E402
    bytes_per_device,  # noqa: E402
)
from core.machine import runtime
from core.run import engine, prepared
from core.spec import DatasetSpec, OptimizerSpec, SpecError  # noqa: E402

ITERATIONS = 150


def _spec(dataset, strategy, init="seed", iterations=ITERATIONS, devices=0):
    return tutorial_spec(dataset=dataset, strategy=strategy, iterations=iterations, precision="float64",
                         init=init, repeats=1, devices=devices)


def _relative(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b) / np.abs(a)))


def agreement(cache) -> dict:
    """sharded against scan on oaks x1, x4 and a simulated n that leaves padding."""
    cases = {
        "oaks x1": (DatasetSpec(kind="oaks", replicate=1), "seed"),
        "oaks x4": (DatasetSpec(kind="oaks", replicate=4), "seed"),
        "simulated 41 (padded)": (DatasetSpec(kind="simulated", n=41, p=6, d=2, seed=3), "seed"),
        "simulated 41 (padded), log_counts": (DatasetSpec(kind="simulated", n=41, p=6, d=2, seed=3), "log_counts"),
    }
    out = {}
    for label, (dataset, init) in cases.items():
        scan = engine.run(_spec(dataset, "scan", init), cache=cache)
        split = engine.run(_spec(dataset, "sharded", init), cache=cache)
        out[label] = {"final_relative": _relative([scan.final_elbo], [split.final_elbo]),
                      "trace_relative": _relative(scan.elbo, split.elbo), "devices": split.devices,
                      "status": split.status, "iterations_run": split.iterations_run, "n": split.n,
                      "scan_devices": scan.devices}
    return out


def second_run(cache) -> dict:
    again = engine.run(_spec(DatasetSpec(kind="oaks", replicate=1), "sharded"), cache=cache)
    return {"cache": again.cache, "compile_count": again.compile_count, "recompile_count": again.recompile_count}


def layout() -> dict:
    """Where the arrays live, and which collectives the compiled loop holds."""
    prep = prepared.prepare(_spec(DatasetSpec(kind="simulated", n=41, p=6, d=2, seed=3), "sharded", iterations=3),
                          cache=prepared.ExecutableCache())
    text = prep.executables["fit"].as_text()
    collectives = re.findall(r"= (.*?) (all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter)\(", text)
    state = prep.state
    return {
        "collectives": sorted({kind for _, kind in collectives}),
        # Every array shape that crosses devices: (p, p), (d, p), (p,) and scalars, never (n, p).
        "collective_shapes": sorted({dims for shape, _ in collectives for dims in re.findall(r"\[([\d,]*)\]", shape)}),
        "counts_shards": [list(s.data.shape) for s in prep.data.counts.addressable_shards],
        "mask_total": float(np.asarray(prep.data.row_mask).sum()),
        "latent_mean_spec": str(state.params.latent_mean.sharding.spec),
        "precision_replicated": bool(state.precision.sharding.is_fully_replicated),
        "coef_replicated": bool(state.params.coef.sharding.is_fully_replicated),
        "row_leaves_sharded": all(
            not leaf.sharding.is_fully_replicated
            for leaf in jax.tree.leaves(state.opt_state) if np.ndim(leaf) == 2 and leaf.shape[0] == 44),
        # What Under the hood shows for this fit.
        "table": {row.name: {"sharding": row.sharding, "devices": row.devices, "per_device": list(row.per_device_shape),
                             "bytes": row.bytes_per_device, "shape": list(row.global_shape)}
                  for row in array_layouts(prep.data, "data") + array_layouts(state, "state")},
    }


def on_device_data() -> dict:
    """The on-device simulation: same rows on 1 and all devices, fits like host data."""
    devices = jax.devices("cpu")
    whole = sharding.mesh_for("cpu")
    single = jax.sharding.Mesh(np.asarray(devices[:1]), (sharding.ROWS,))
    data, _ = simulate_on_devices(41, 6, 2, seed=5, mesh=whole, dtype="float64")
    alone, _ = simulate_on_devices(41, 6, 2, seed=5, mesh=single, dtype="float64")
    counts = np.asarray(data.counts)[:41]
    covariates = np.asarray(data.covariates)[:41]
    same_rows = bool(np.array_equal(counts, np.asarray(alone.counts)[:41])
                     and np.array_equal(covariates, np.asarray(alone.covariates)[:41]))
    # Fit the device-born data with the sharded strategy, and the same rows copied to the
    # host with scan: the ELBO traces must agree.
    problem = strategies.Problem(41, 6, 2, "float64", 40, OptimizerSpec())
    strategy = strategies.get("sharded")
    state = strategy.place_state(strategies.init_state(data, "seed", problem.transformation), devices[0])
    split = strategy.run(strategy.compile(strategy.lower(problem, state, data, None)), problem, state, data, None)
    host = model.make_data(counts, np.zeros_like(counts), covariates, "float64")
    reference = strategies.get("scan")
    host_data = jax.device_put(host, devices[0])
    start = strategies.init_state(host_data, "seed", problem.transformation)
    scan = reference.run(reference.compile(reference.lower(problem, start, host_data, None)), problem, start,
                         host_data, None)
    # The same draw as a dataset kind, through the engine: drawn on the devices, fitted there.
    on_device = DatasetSpec(kind="simulated_on_device", n=41, p=6, d=2, seed=5)
    run = engine.run(_spec(on_device, "sharded", iterations=40), cache=prepared.ExecutableCache())
    return {
        "engine": {"elbo_relative": _relative(split.elbo, run.elbo), "devices": run.devices, "n": run.n,
                   "dataset": run.dataset, "status": run.status, "processes": run.processes,
                   "spec_kind": run.spec["dataset"]["kind"]},
        "same_rows_any_device_count": same_rows,
        "padding_zero": bool(np.all(np.asarray(data.counts)[41:] == 0) and np.all(np.asarray(data.covariates)[41:] == 0)),
        "log_factorial_relative": abs(float(data.log_factorial_sum) - model.exact_log_factorial_sum(counts))
        / model.exact_log_factorial_sum(counts),
        "fit_relative": _relative(scan.elbo, split.elbo),
        "bytes_per_device": bytes_per_device(data),
    }


def device_counts(cache) -> dict:
    """A run over the first 2 of the 4 devices, against one over all 4; a count too many."""
    oaks = DatasetSpec(kind="oaks", replicate=1)
    every = engine.run(_spec(oaks, "sharded"), cache=cache)  # in the cache already (agreement)
    two = engine.run(_spec(oaks, "sharded", devices=2), cache=cache)
    prep = prepared.prepare(_spec(oaks, "sharded", iterations=3, devices=2), cache=prepared.ExecutableCache())
    try:
        engine.run(_spec(oaks, "sharded", devices=8), cache=cache)
        refused = None
    except SpecError as error:
        refused = str(error)
    return {"every": {"devices": every.devices, "cache": every.cache},
            "two": {"devices": two.devices, "cache": two.cache, "compile_count": two.compile_count,
                    "disk_cache_hits": two.disk_cache_hits, "key_devices": two.spec.get("devices"),
                    "final_relative": _relative([every.final_elbo], [two.final_elbo]), "processes": two.processes},
            "two_mesh": [int(d.id) for d in prep.data.counts.sharding.device_set],
            "two_shards": [list(s.data.shape) for s in prep.data.counts.addressable_shards],
            "refused": refused}


def main() -> None:
    runtime.configure()
    cache = prepared.ExecutableCache()
    report = {"devices": len(jax.devices("cpu")), "agreement": agreement(cache), "second_run": second_run(cache),
              "layout": layout(), "on_device": on_device_data(), "device_counts": device_counts(cache)}
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
