"""Inspections: every strategy yields its texts, XLA's costs are read and normalised right."""

import dataclasses
import pickle
from types import SimpleNamespace

import pytest
from specs import tutorial_spec

from core.fit import strategies
from core.inspect import introspect, xla_analysis
from core.spec import DatasetSpec, FitSpec

TINY = DatasetSpec(kind="simulated", n=30, p=4, d=1, seed=0)
ITERATIONS = 3


def _spec(strategy: str, iterations: int = ITERATIONS) -> FitSpec:
    return tutorial_spec(dataset=TINY, strategy=strategy, iterations=iterations, repeats=1)


@pytest.fixture(scope="module")
def inspections():
    return {name: introspect.inspect_fit(_spec(name)) for name in strategies.names()}


def test_every_strategy_shows_its_source_and_a_jaxpr(inspections):
    for name, inspection in inspections.items():
        assert inspection.strategy == name
        titles = [title for title, _ in inspection.sources]
        assert f"core.fit.strategies.{name}" in titles[0]
        assert any("fit_step" in t for t in titles) and any("elbo" in t for t in titles)
        assert all(code.strip() for _, code in inspection.sources)
        assert "lambda" in inspection.jaxpr and inspection.jaxpr_of
        assert (inspection.n, inspection.p, inspection.iterations) == (30, 4, ITERATIONS)


def test_compiled_strategies_show_hlo_costs_and_memory(inspections):
    for name, inspection in inspections.items():
        if name == "eager":
            continue
        assert inspection.compiled and inspection.executables, name
        for executable in inspection.executables:
            assert "func.func" in executable.stablehlo, (name, executable.name)
            assert "HloModule" in executable.optimized_hlo, (name, executable.name)
            assert executable.cost.flops is not None and executable.cost.flops >= 0
            assert executable.memory is not None and executable.memory.argument_bytes > 0
        assert inspection.cost_per_iteration.flops > 0 and inspection.cost_per_iteration.bytes_accessed > 0
        assert inspection.cost_per_run.flops == pytest.approx(inspection.cost_per_iteration.flops * ITERATIONS)
        # Earlier tests in this process may have compiled the same HLO already: JAX then
        # serves it from its own in-memory cache and nothing compiles.
        assert inspection.cache in ("compiled", "disk", "memory")
        if inspection.cache == "compiled":
            assert inspection.compile_count >= 1
        elif inspection.cache == "disk":
            assert inspection.disk_cache_hits >= 1
        assert len(introspect.executable_rows(inspection)) == len(inspection.executables)


def test_jit_per_function_has_five_executables(inspections):
    names = [e.name for e in inspections["jit_per_function"].executables]
    assert names == ["value_and_grad", "update", "apply_updates", "covariance", "inverse"]


def test_loop_strategies_show_the_whole_loop(inspections):
    assert "scan" in inspections["scan"].jaxpr
    assert "while" in inspections["while_loop"].jaxpr
    assert "upper bound" in inspections["while_loop"].cost_note
    assert "one iteration" in inspections["jit_step"].jaxpr_of


@pytest.mark.parametrize("name", ["jit_step", "scan"])
def test_a_fit_that_stops_at_its_tolerance_says_its_per_run_cost_is_an_upper_bound(inspections, name):
    # jit_step's Python loop stops at tol as a compiled loop does: its FLOP per run, at the
    # cap of 500, read ten times what a fit converged in 49 iterations did.
    executables = inspections[name].executables
    stopping = introspect._costs(strategies.get(name), SimpleNamespace(iterations=500, stops=True), executables, 1)
    assert "cap of 500 iterations" in stopping[2] and "upper bound" in stopping[2]
    capped = introspect._costs(strategies.get(name), SimpleNamespace(iterations=500, stops=False), executables, 1)
    assert "cap of 500 iterations" in capped[2] and "upper bound" not in capped[2]


def test_eager_reports_nothing_compiled(inspections):
    eager = inspections["eager"]
    assert not eager.compiled and eager.executables == ()
    assert eager.cost_per_iteration == xla_analysis.Cost() and eager.compile_count == 0
    assert eager.cache == "none" and "Nothing is compiled" in eager.cost_note


def test_inspection_is_plain_picklable_data(inspections):
    # Plain data: copied, kept or sent, it comes back equal.
    inspection = inspections["jit_step"]
    assert pickle.loads(pickle.dumps(inspection)) == inspection


def test_xla_counts_a_loop_body_once():
    # The per-iteration figures of the loop strategies rest on this; if a jaxlib starts
    # multiplying by the trip count, the cost note must change.
    short, long = (introspect.inspect_fit(dataclasses.replace(_spec("scan"), iterations=k)) for k in (2, 6))
    assert long.cost_per_iteration.flops == pytest.approx(short.cost_per_iteration.flops, rel=1e-3)


def test_normalise_cost_accepts_every_shape_jax_returns():
    entry = {"flops": 10.0, "bytes accessed": 40.0, "transcendentals": 2.0, "utilization0{}": 1.0}
    assert xla_analysis.normalise_cost(entry) == xla_analysis.Cost(10.0, 40.0, 2.0)
    assert xla_analysis.normalise_cost([entry, entry]) == xla_analysis.Cost(20.0, 80.0, 4.0)
    assert xla_analysis.normalise_cost(None) == xla_analysis.Cost()
    assert xla_analysis.normalise_cost([]) == xla_analysis.Cost()
    assert xla_analysis.normalise_cost({"flops": -1.0, "bytes accessed": 8.0}) == xla_analysis.Cost(None, 8.0, 0.0)


def test_normalise_memory_is_none_safe():
    assert xla_analysis.normalise_memory(None) is None
    stats = SimpleNamespace(argument_size_in_bytes=8, output_size_in_bytes=4, temp_size_in_bytes=-1)
    memory = xla_analysis.normalise_memory(stats)
    assert (memory.argument_bytes, memory.output_bytes, memory.temp_bytes, memory.peak_bytes) == (8, 4, None, None)


def test_clip_keeps_short_texts_and_says_when_it_cuts():
    assert introspect.clip("abc\ndef", 100) == ("abc\ndef", False)
    text = "\n".join(f"line {i}" for i in range(1000))
    shown, clipped = introspect.clip(text, 100)
    assert clipped and shown.startswith("line 0\n") and "download the full text" in shown
    assert len(shown) < 200
