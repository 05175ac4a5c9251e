"""Time to solution: what a run reports, how far into a curve a run came within X of the
best, which stored configuration `solve` picks, and the benchmark's table."""

import dataclasses
import json
import socket

import numpy as np
import pytest
from specs import tutorial_spec

from core.bench import solve
from core.bench import time_to_solution as tts
from core.results import reach
from core.results.result import RunResult, met_tolerance
from core.run import engine
from core.spec import DEFAULTS, DatasetSpec, OptimizerSpec, SpecError
from core.store.run_store import RunStore

TINY = DatasetSpec(kind="simulated", n=40, p=6, d=1, seed=2)


def _spec(**changes):
    values = dict(dataset=TINY, strategy="scan", iterations=400, precision="float64",
                  optimizer=OptimizerSpec("preconditioned_lbfgs"), init="log_rates", tol=1e-9, repeats=2)
    return tutorial_spec(**(values | changes))


def test_a_fit_that_stops_at_tol_reports_its_steady_state_as_time_to_solution():
    stopped = engine.run(_spec())
    assert stopped.status == "ok" and 3 <= stopped.iterations_run < 400
    assert stopped.time_to_solution_s == stopped.run_s
    assert stopped.run_s_min <= stopped.time_to_solution_s <= stopped.run_s_max
    assert stopped.to_dict()["time_to_solution_s"] == stopped.run_s
    # A fixed number of iterations, or a tolerance not met in them: no solution claimed. (In
    # 20 iterations this small fit reaches float64's resolution, where no step is found and
    # it stays put: two quiet iterations, and its float64 gradient says it arrived.)
    assert engine.run(_spec(tol=0.0, iterations=20)).time_to_solution_s is None
    unmet = engine.run(_spec(tol=1e-15, iterations=6))
    assert unmet.iterations_run == 6 and unmet.time_to_solution_s is None and unmet.converged is False


def test_met_tolerance_reads_the_curve():
    spec = _spec(tol=1e-3, iterations=10)
    assert met_tolerance(np.array([-100.0, -50.0, -49.99]), spec)  # stopped early
    assert not met_tolerance(np.linspace(-100, -50, 10), spec)  # ran out of iterations
    assert met_tolerance(np.r_[np.linspace(-100, -50, 9), -50.001], spec)  # met at the last one
    assert not met_tolerance(np.array([-100.0, -50.0]), dataclasses.replace(spec, tol=0.0))


def test_iterations_to_within_a_distance_of_the_best():
    curve = np.array([-200.0, -110.0, -100.01, -100.0001, -100.0])
    assert reach.iterations_to(curve, -100.0, 1e-3) == 3
    assert reach.iterations_to(curve, -100.0, 1e-5) == 4
    assert reach.iterations_to(curve[:2], -100.0, 1e-3) is None


def _stored(store, strategy="scan", optimizer="preconditioned_lbfgs", run_s=0.05, final=-100.0, host=None,
            tol=1e-7, precision="float32", dataset=TINY, program=""):
    """A stored run made by hand: 3 iterations ending at `final`, on this host unless `host`."""
    spec = tutorial_spec(dataset=dataset, strategy=strategy, iterations=50, precision=precision, tol=tol,
                         optimizer=OptimizerSpec(optimizer), init="log_rates", repeats=1)
    elbo = [final - 50.0, final - 1.0, final]
    run = RunResult(
        spec=spec.to_dict(), spec_key=spec.key, strategy=strategy, dataset=dataset.label, n=40, p=6, d=1,
        precision=precision, device="cpu", iterations=50, optimizer=optimizer, lr=0.01, init="log_rates",
        repeats=1, tol=tol, status="ok", error=None, diverged_at=None, iterations_run=3, transfer_s=0.0,
        trace_lower_s=0.1, compile_s=0.2, first_call_s=run_s, run_s=run_s, run_s_min=run_s, run_s_max=run_s,
        per_iter_ms=1e3 * run_s / 3, compile_count=1, disk_cache_hits=0, recompile_count=0, cache="compiled",
        final_elbo=final, elbo=elbo, devices=1, device_kind="cpu",
        versions={"host": host or socket.gethostname()},
        time_to_solution_s=run_s if tol else None, program=program)
    store.add(run)
    return run


def test_solve_picks_the_fastest_stored_run_that_reached_the_best(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    given = {"strategy": None, "optimizer": None, "init": None, "tol": None, "iterations": None}
    default = solve.choose(store.list(), TINY, "float32", "cpu", given)
    assert default.settings["optimizer"] == "preconditioned_lbfgs" and "default" in default.why
    assert default.settings["tol"] == DEFAULTS.tol_for("float32") == 1e-7
    # It fits to convergence: a cap ten times a dashboard Run's, for a fit that needs more than 500.
    assert default.settings["iterations"] == DEFAULTS.solve_iterations == 10 * DEFAULTS.iterations
    _stored(store, "scan", run_s=0.05)
    fastest = _stored(store, "while_loop", run_s=0.03)
    _stored(store, "jit_step", run_s=0.01, final=-100.5)  # faster, but not within 1e-5 of the best
    _stored(store, "fori_loop", run_s=0.001, host="elsewhere")  # another machine's
    _stored(store, "scan", run_s=0.001, tol=0.0)  # a fixed number of iterations: no time to solution
    _stored(store, "scan", run_s=0.001, precision="float64")  # another problem
    chosen = solve.choose(store.list(), TINY, "float32", "cpu", given)
    assert chosen.settings["strategy"] == "while_loop" and f"#{fastest.id}" in chosen.why
    narrowed = solve.choose(store.list(), TINY, "float32", "cpu", given | {"strategy": "scan"})
    assert narrowed.settings["strategy"] == "scan" and "stored" in narrowed.why
    spec = solve.solve_spec(TINY, "float32", "cpu", 2, chosen)
    assert (spec.strategy, spec.optimizer.name, spec.tol, spec.repeats) == ("while_loop", "preconditioned_lbfgs",
                                                                           1e-7, 2)


def test_solve_names_the_first_strategy_of_the_fastest_program_not_the_one_noise_put_first(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    given = {"strategy": None, "optimizer": None, "init": None, "tol": None, "iterations": None}
    _stored(store, "scan", run_s=0.031, program="abc")
    _stored(store, "scan_pytree_class", run_s=0.029, program="abc")
    _stored(store, "jit_step", run_s=0.05, program="def")
    chosen = solve.choose(store.list(), TINY, "float32", "cpu", given)
    assert chosen.settings["strategy"] == "scan"
    assert chosen.why.endswith("(one compiled program with scan_pytree_class: one speed)")
    # Another program a hair faster is another speed: named as it was measured.
    faster = _stored(store, "while_loop", run_s=0.028, program="ghi")
    chosen = solve.choose(store.list(), TINY, "float32", "cpu", given)
    assert chosen.settings["strategy"] == "while_loop" and chosen.why.endswith(f"run #{faster.id}, 0.028 s to solution")


def test_solve_takes_a_python_loop_only_beside_the_default_or_when_asked(tmp_path):
    # The one stored run of an upload was eager's: solve fitted eagerly, the slowest way there is.
    store = RunStore(tmp_path / "runs.sqlite3")
    given = {"strategy": None, "optimizer": None, "init": None, "tol": None, "iterations": None}
    _stored(store, "eager", run_s=0.5)
    chosen = solve.choose(store.list(), TINY, "float32", "cpu", given)
    assert chosen.settings["strategy"] == DEFAULTS.strategy and "the lab's default" in chosen.why
    asked = solve.choose(store.list(), TINY, "float32", "cpu", given | {"strategy": "eager"})
    assert asked.settings["strategy"] == "eager" and "the one stored run that reached" in asked.why
    # Measured beside the default and faster (by hand here): taken, as measured.
    _stored(store, "scan", run_s=0.9)
    assert solve.choose(store.list(), TINY, "float32", "cpu", given).settings["strategy"] == "eager"


def test_solve_trusts_an_imported_run_only_when_asked(tmp_path):
    """An import may name this host; only a run measured here says how fast this machine is."""
    source = RunStore(tmp_path / "elsewhere.sqlite3")
    _stored(source, "while_loop", run_s=1e-5)  # names this host, and is implausibly fast
    source.export(tmp_path / "runs.json")
    store = RunStore(tmp_path / "runs.sqlite3")
    assert store.import_file(tmp_path / "runs.json").added == 1
    measured = _stored(store, "scan", run_s=0.05)
    given = {"strategy": None, "optimizer": None, "init": None, "tol": None, "iterations": None}
    chosen = solve.choose(store.list(), TINY, "float32", "cpu", given)
    assert chosen.settings["strategy"] == "scan" and f"#{measured.id}" in chosen.why
    trusting = solve.choose(store.list(), TINY, "float32", "cpu", given, any_host=True)
    assert trusting.settings["strategy"] == "while_loop"


def test_a_stored_time_to_solution_must_be_a_steady_state_time(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    run = _stored(store)
    bad = run.to_dict() | {"time_to_solution_s": run.run_s_max * 2}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([bad]))
    done = store.import_file(path)
    assert done.refused and "time_to_solution_s" in done.refusals()


def test_the_benchmark_table_gives_ratios_to_pyplnmodels_on_the_same_problem(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    peer = _stored(store, run_s=0.4)
    ours = _stored(store, run_s=0.04)
    far = _stored(store, run_s=0.01)
    contenders = tts.contenders(["scan"], ["preconditioned_lbfgs", "diagonal_newton"])
    assert [c.label for c in contenders] == ["pyPLNmodels Pln.fit", "scan · preconditioned_lbfgs · log_rates_sd",
                                             "scan · diagonal_newton · log_rates_sd"]
    solutions = [tts.Solution(contenders[0], peer, -100.0, 3, (peer,)),
                 tts.Solution(contenders[1], ours, -100.0, 3, (ours,)), tts.Solution(contenders[2], far, -100.0, None)]
    text = tts.table(solutions)
    lines = text.splitlines()
    assert "x pyPLN" in lines[0]
    assert " 0.100 " in lines[3]  # 0.04 s against pyPLNmodels' 0.4 s
    assert "not within 1e-5" in lines[4]
    with pytest.raises(SpecError, match="runs only the optimizers"):
        tts.contenders(["scan_analytic"], ["lbfgs"])[1].spec(TINY, 5, "float32", 1, "cpu")


def test_the_optimum_is_set_by_this_projects_float64_summed_elbos_not_the_peers_float32(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    peer, ours = _stored(store, final=-99.9995), _stored(store, final=-100.0)  # the peer 5e-6 above
    chosen = tts.contenders(["scan"], ["preconditioned_lbfgs"])
    assert tts.optimum(list(zip(chosen, [peer, ours]))) == -100.0
    assert tts.optimum([(chosen[0], peer)]) == -99.9995  # alone, it is all there is


def test_the_timing_rounds_take_the_contenders_in_turn_and_report_the_median(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    chosen = tts.contenders(["scan", "scan_namedtuple"], ["preconditioned_lbfgs"], with_peer=False)
    order = []
    solutions = tts.run([1], chosen, store, repeats=3, cap=100,
                        on_result=lambda run: order.append((run.strategy, run.iterations)))
    trajectories, timed = order[:2], order[2:]
    assert [iterations for _, iterations in trajectories] == [100, 100]
    assert [strategy for strategy, _ in timed] == ["scan", "scan_namedtuple"] * 3  # in turn, not one after the other
    for solution in solutions:
        assert len(solution.rounds) == 3 and all(run.repeats == 1 for run in solution.rounds)
        times = sorted(run.run_s for run in solution.rounds)
        assert solution.timed.run_s == times[1] and solution.spread_s == (times[0], times[2])
    assert len(store.list()) == 2 + 6  # every run stored
