"""The engine: timings reported apart, executables cached, divergence caught, devices checked."""

import os
import re
import threading

import numpy as np
import pytest
from specs import tutorial_spec

from core.data.counts import CountData
from core.data.datasets import simulate
from core.run import cold_compile, engine, prepared, repeats
from core.spec import DatasetSpec, FitSpec, OptimizerSpec, SpecError

TINY = DatasetSpec(kind="simulated", n=40, p=6, d=2, seed=0)


def _spec(**changes):
    values = dict(dataset=TINY, strategy="scan", iterations=30, precision="float64", repeats=2)
    values.update(changes)
    return tutorial_spec(**values)


def test_run_reports_every_timing_and_the_environment():
    result = engine.run(_spec(), cache=prepared.ExecutableCache())
    assert result.status == "ok" and result.error is None
    assert (result.n, result.p, result.d) == (40, 6, 2)
    assert len(result.elbo) == result.iterations_run == 30
    assert np.all(np.isfinite(result.elbo)) and result.final_elbo == result.elbo[-1]
    for field in ("transfer_s", "trace_lower_s", "compile_s", "first_call_s", "run_s"):
        assert getattr(result, field) > 0, field
    assert result.run_s_min <= result.run_s <= result.run_s_max
    assert result.per_iter_ms == pytest.approx(1e3 * result.run_s / 30)
    assert result.cache == "compiled" and result.compile_count >= 1 and result.recompile_count == 0
    assert result.versions["jax"] and result.versions["jaxlib"] == "0.10.1"
    assert result.versions["cpu_count"] >= 1 and result.device_kind
    assert result.spec_key == _spec().key and FitSpec.from_dict(result.spec) == _spec()


@pytest.mark.parametrize("strategy", ["jit_per_function", "jit_step", "scan", "scan_namedtuple",
                                      "scan_pytree_class", "fori_loop", "while_loop"])
def test_second_run_reuses_executables_without_recompiling(strategy):
    cache = prepared.ExecutableCache()
    first = engine.run(_spec(strategy=strategy), cache=cache)
    second = engine.run(_spec(strategy=strategy), cache=cache)
    # Compiled, loaded, or both: the persistent cache is shared by the suite, and an earlier
    # test may have left some of jit_per_function's functions there ("compiled 4, disk 1").
    assert set(re.findall("[a-z]+", first.cache)) <= {"compiled", "disk"} and first.recompile_count == 0
    assert second.cache == "memory"
    assert second.compile_count == 0 and second.recompile_count == 0
    assert second.trace_lower_s == 0 and second.compile_s == 0
    assert second.elbo == first.elbo


@pytest.mark.parametrize("strategy", ["jit_per_function", "scan"])
def test_a_cold_run_compiles_again_and_leaves_its_executables_cached(strategy):
    cache = prepared.ExecutableCache()
    engine.run(_spec(strategy=strategy), cache=cache)
    cold = engine.run(_spec(strategy=strategy), cache=cache, cold=True)
    assert cold.cache == "compiled" and cold.from_scratch == 1
    assert cold.compile_count >= 1 and cold.disk_cache_hits == 0 and cold.compile_s > 0
    assert engine.run(_spec(strategy=strategy), cache=cache).cache == "memory"
    # Nothing ahead to skip: eager says it did not compile from scratch.
    assert engine.run(_spec(strategy="eager", iterations=3, repeats=1), cold=True).from_scratch == 0


def test_compiling_from_scratch_is_per_thread():
    seen = {}
    with cold_compile.from_scratch():
        worker = threading.Thread(target=lambda: seen.update(other=cold_compile.active()))
        worker.start(), worker.join()
        seen["mine"] = cold_compile.active()
    assert seen == {"mine": True, "other": False} and not cold_compile.active()


def test_eager_compiles_nothing_ahead():
    result = engine.run(_spec(strategy="eager", iterations=5, repeats=1))
    assert result.cache == "none" and result.compile_s == 0 and result.trace_lower_s == 0
    assert result.recompile_count == 0


def test_float32_run_stays_float32():
    result = engine.run(_spec(precision="float32"))
    # A float32 ELBO of this size carries about 7 significant digits.
    values = np.asarray(result.elbo)
    assert np.array_equal(values, values.astype(np.float32).astype(np.float64))


def test_a_blow_up_is_diverged_from_the_iteration_it_started():
    # Adam at lr 10 on oaks: the ELBO goes from -3.3e7 to -3.5e29 and stays there; every
    # value is finite, and it used to be stored as "ok".
    spec = tutorial_spec(strategy="scan", optimizer=OptimizerSpec("adam", 10.0), iterations=200, precision="float32",
                         repeats=1)
    result = engine.run(spec)
    assert result.status == "diverged" and result.diverged_at == 4
    assert "blew up" in result.error and "from iteration 4 on" in result.error
    assert len(result.elbo) == result.iterations_run == 200  # the finite curve is kept, blow-up and all
    assert result.elbo[-1] < 1e3 * result.elbo[0] and result.converged is None


def test_float32_refuses_counts_it_cannot_hold_and_float64_fits_them():
    # Counts of a million: float32 rounds each such cell's ELBO terms by more than the whole
    # ELBO's accuracy (core.fit.precision_guard), so a float32 fit is refused before it runs.
    counts = np.full((20, 5), 1e6)
    counts[::2] = 3
    data = CountData(counts, np.full((20, 5), -10.0), np.ones((20, 1)), "large counts")
    with pytest.raises(SpecError, match="float32 cannot fit these counts.*choose float64"):
        engine.run(_spec(precision="float32", iterations=10, repeats=1), counts=data)
    result = engine.run(_spec(precision="float64", iterations=10, repeats=1), counts=data)
    assert result.status == "ok" and result.warnings == []


def _csv_bytes(table, names) -> bytes:
    return (",".join(names) + "\n" + "\n".join(",".join(map(str, row)) for row in table) + "\n").encode()


def test_an_all_zero_column_is_dropped_and_the_fit_is_that_of_the_data_without_it():
    from core.data.csv_counts import read_csv_bytes

    counts = simulate(40, 6, d=1, seed=0).counts.astype(int)
    with_zero = np.insert(counts, 2, 0, axis=1)
    names = [f"sp{j}" for j in range(7)]
    kept = [name for j, name in enumerate(names) if j != 2]
    spec = _spec(dataset=DatasetSpec(kind="csv", counts_path="c.csv"), iterations=30, repeats=1)
    dropped = engine.run(spec, counts=read_csv_bytes(_csv_bytes(with_zero, names), None, "c.csv"))
    without = engine.run(spec, counts=read_csv_bytes(_csv_bytes(counts, kept), None, "c.csv"))
    assert dropped.p == without.p == 6 and dropped.elbo == without.elbo
    assert dropped.warnings[0].startswith("c.csv: dropped 1 all-zero column (column 3 ('sp2'))")
    assert without.warnings == []


def test_absent_device_is_a_clear_error():
    with pytest.raises(SpecError, match="device 'tpu' is not available here; available: cpu"):
        engine.run(_spec(device="tpu"))


def test_counts_given_directly_match_loading_from_the_spec():
    from_spec = engine.run(_spec(iterations=10))
    given = engine.run(_spec(iterations=10), counts=simulate(40, 6, d=2, seed=0))
    assert given.elbo == from_spec.elbo


def test_executable_cache_is_bounded():
    cache = prepared.ExecutableCache(size=2)
    for key in "abc":
        cache.put((key,), {})
    assert len(cache) == 2 and cache.get(("a",)) is None and cache.get(("c",)) == {}


def test_peers_run_through_the_engine_into_the_same_result():
    from core.store.run_store import RunStore

    result = engine.run(_spec(strategy="torch_eager", iterations=10))
    jax_result = engine.run(_spec(iterations=10))
    assert result.status == "ok" and result.cache == "none" and len(result.elbo) == 10
    assert result.final_elbo == pytest.approx(jax_result.final_elbo, rel=1e-9)
    assert result.versions["torch"]
    stored = RunStore(os.environ["PLNLAB_DB"])
    assert stored.get(stored.add(result)).strategy == "torch_eager"
    plnmodels = engine.run(_spec(strategy="pyplnmodels", iterations=10, repeats=1))
    # pyPLNmodels runs its own algorithm, and the row says so.
    assert (plnmodels.optimizer, plnmodels.init) == ("rprop", "log_counts")


def test_fits_timed_together_take_their_repeats_in_turn_and_share_a_mark():
    specs = [_spec(strategy="eager", iterations=5), _spec(strategy="scan"), _spec(strategy="scan_namedtuple")]
    heard = []
    results = engine.run_together(specs, on_progress=heard.append, cache=prepared.ExecutableCache())
    assert [r.strategy for r in results] == ["eager", "scan", "scan_namedtuple"]
    assert [r.iterations_run for r in results] == [5, 30, 30]
    assert all(r.status == "ok" and r.run_s_min <= r.run_s <= r.run_s_max for r in results)
    marks = {r.timed_with for r in results}
    assert len(marks) == 1 and marks != {""}
    assert len({(r.timed_start, r.timed_end) for r in results}) == 1  # one hold of the device
    # Round-robin: repeat 1 of every fit before any repeat 2.
    repeats = [(p.member, p.done) for p in heard if p.phase == "repeat"]
    assert repeats == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    # The same trajectory as each fit timed alone.
    alone = engine.run(specs[1], cache=prepared.ExecutableCache())
    np.testing.assert_allclose(results[1].elbo, alone.elbo, rtol=1e-12)
    assert alone.timed_with == ""


def test_fits_timed_together_must_share_their_data_and_leave_peers_alone():
    with pytest.raises(SpecError, match="share their data"):
        engine.run_together([_spec(), _spec(dataset=DatasetSpec(kind="simulated", n=50, p=6, d=2, seed=0))])
    with pytest.raises(SpecError, match="peer"):
        engine.run_together([_spec(), _spec(strategy="torch_eager")])


SAME_PROGRAM = """
import dataclasses, json, sys
from core.run import prepared
from core.spec import DatasetSpec, FitSpec, OptimizerSpec
spec = FitSpec(dataset=DatasetSpec(kind="simulated", n=40, p=6, d=2, seed=0), iterations=30,
               optimizer=OptimizerSpec("seed"), init="seed", tol=0.0)
print(json.dumps([prepared.prepare(dataclasses.replace(spec, strategy=name), cache=prepared.ExecutableCache())
                  .compilation.cache for name in sys.argv[1:]]))
"""


def test_a_namedtuple_state_is_the_same_compiled_program_as_a_dict(tmp_path):
    # What the story says of its step 4, held by XLA itself: in a fresh process with an empty
    # persistent cache, scan_namedtuple finds scan's executable there (the same program).
    import json
    import subprocess
    import sys

    from project import ROOT

    env = {**os.environ, "PLNLAB_JAX_CACHE": str(tmp_path / "jax")}
    done = subprocess.run([sys.executable, "-c", SAME_PROGRAM, "scan", "scan_namedtuple", "jit_step"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # jit_step is another program: it compiles.
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["compiled", "disk", "compiled"]


def test_the_start_is_the_same_whichever_emitters_compile_it():
    """On a CPU the starting state compiles with XLA's quicker emitters (`prepared.initial_state`);
    elsewhere with the defaults. Both programs give the same state, to rounding."""
    import jax

    from core.fit import model, strategies

    counts = simulate(60, 8, seed=3)
    for dtype, close in (("float32", 1e-6), ("float64", 1e-13)):
        data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, dtype))
        problem = strategies.Problem(60, 8, 1, dtype, 10, OptimizerSpec("preconditioned_lbfgs"))
        quick = prepared.initial_state(data, "log_rates", problem, "cpu")
        default = prepared.initial_state(data, "log_rates", problem, "gpu")  # the accelerators' program, on the CPU
        for a, b in zip(jax.tree.leaves(quick), jax.tree.leaves(default)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=close, atol=close)


def test_a_run_keeps_each_repeat_and_the_fingerprint_of_its_program():
    cache = prepared.ExecutableCache()
    first = engine.run(_spec(repeats=3), cache=cache)
    assert len(first.repeat_times) == 3 and first.run_s == float(np.median(first.repeat_times))
    assert (first.run_s_min, first.run_s_max) == (min(first.repeat_times), max(first.repeat_times))
    assert re.fullmatch(r"[0-9a-f]{16}", first.program)
    # From the in-process cache, the program is the one it was compiled as.
    again = engine.run(_spec(repeats=3), cache=cache)
    assert again.cache == "memory" and again.program == first.program
    # Another problem is another program; eager compiles nothing ahead and has none.
    assert engine.run(_spec(iterations=31), cache=cache).program not in ("", first.program)
    assert engine.run(_spec(strategy="eager", iterations=3), cache=cache).program == ""


def test_strategies_that_lower_to_one_program_share_its_fingerprint_and_others_do_not():
    # With the seed's optimizer a NamedTuple carry lowers as the tuple does; fori_loop is another loop.
    names = ("scan", "scan_namedtuple", "fori_loop")
    programs = {name: prepared.prepare(_spec(strategy=name), cache=prepared.ExecutableCache()).compilation.program
                for name in names}
    assert programs["scan"] == programs["scan_namedtuple"] != programs["fori_loop"]


def test_a_short_fit_is_repeated_until_enough_time_is_measured(monkeypatch):
    monkeypatch.setenv("PLNLAB_MIN_MEASURED_S", "0.05")
    specs = [_spec(strategy="eager", iterations=30), _spec(strategy="scan", iterations=5)]
    heard = []
    results = engine.run_together(specs, on_progress=heard.append, cache=prepared.ExecutableCache())
    counts = [len(r.repeat_times) for r in results]
    # Each planned from its own first repeat: enough to reach 0.05 s, at least the 2 asked for,
    # at most the bound; the quick scan takes more than the 2 asked for.
    assert counts == [repeats.planned(2, r.repeat_times[0], 0.05) for r in results]
    assert 2 < counts[1] <= repeats.MAX_REPEATS and all(r.repeats == 2 for r in results)
    # Still in turn: each round takes every fit that still wants a repeat, in order.
    said = [(p.member, p.done) for p in heard if p.phase == "repeat"]  # eager also reports within a repeat
    order = [step for index, step in enumerate(said) if index == 0 or said[index - 1] != step]
    assert order[:4] == [(0, 0), (1, 0), (0, 1), (1, 1)] and len(order) == len(set(order)) == sum(counts)
    monkeypatch.setenv("PLNLAB_MIN_MEASURED_S", "soon")
    with pytest.raises(SpecError, match="PLNLAB_MIN_MEASURED_S"):
        engine.run(_spec(), cache=prepared.ExecutableCache())


@pytest.mark.parametrize("asked, first, target, expected", [
    (3, 0.016, 0.25, 16), (3, 0.5, 0.25, 3), (3, 1e-5, 0.25, 25), (30, 1e-5, 0.25, 30),
    (3, 0.016, 0.0, 3), (0, 0.016, 0.25, 0), (3, 0.0, 0.25, 3)])
def test_the_repeats_are_planned_from_the_first(asked, first, target, expected):
    assert repeats.planned(asked, first, target) == expected
