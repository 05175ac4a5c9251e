"""How long a plan will hold the device, from the server's stored runs: scaled from the
stored run of the same kind nearest in size, said when long, and a warning when the plans'
sum passes the run's time budget (three strategies at oaks x1,000 on a 2-core server were
once offered without a word and stopped at the budget minutes later)."""

from __future__ import annotations

import pytest
from specs import tutorial_spec

from core.run import time_estimate
from core.spec import DatasetSpec
from core.store.run_store import RunStore

from fake_runs import make_run

OAKS_X1000 = DatasetSpec(kind="oaks", replicate=1000)
CELLS_X1000 = 116_000 * 114


@pytest.fixture
def store(tmp_path):
    found = RunStore(tmp_path / "runs.sqlite3")
    # The tutorial's kind of run (seed optimizer, float32, cpu) at oaks x1 and x100: 0.8 and 30 ms an iteration.
    for strategy in ("scan", "jit_step", "eager"):
        found.add(_stored(strategy, 1, run_s=0.04))
        found.add(_stored(strategy, 100, run_s=1.5))
    return found


def _stored(strategy, replicate, run_s, tol=0.0, **changes):
    spec = tutorial_spec(strategy=strategy, dataset=DatasetSpec(kind="oaks", replicate=replicate), iterations=50,
                         tol=tol)
    return make_run(strategy, iterations=50, spec=spec.to_dict(), spec_key=spec.key, dataset=f"oaks x{replicate}",
                    n=116 * replicate, p=114, tol=tol, run_s=run_s, run_s_min=run_s, run_s_max=run_s, **changes)


def _spec(strategy="scan", **changes):
    return tutorial_spec(**({"strategy": strategy, "dataset": OAKS_X1000, "iterations": 50, "repeats": 3} | changes))


def test_an_estimate_scales_the_nearest_stored_run_by_cells(store):
    spec = _spec()
    found = time_estimate.estimate(spec, CELLS_X1000, time_estimate.history_of(store, spec))
    assert (found.basis.n, found.basis.p) == (11_600, 114)  # x100, not x1
    # 30 ms an iteration at x100, ten times the cells: 0.3 s, 50 iterations, 4 calls, and the compile.
    assert found.seconds == pytest.approx(4 * 50 * 0.3 + 0.02 + 0.3)


def test_a_python_loops_fixed_cost_is_not_scaled_by_cells(tmp_path):
    # eager at oaks x1: 40 ms an iteration, nearly all dispatch; scan at x100: 30 ms, nearly
    # all arithmetic, 30 ms / 1,322,400 cells. eager at x1,000 is its 40 ms plus that
    # arithmetic for the cells added, not 1,000 times 40 ms.
    store = RunStore(tmp_path / "runs.sqlite3")
    store.add(_stored("eager", 1, run_s=2.0))
    store.add(_stored("scan", 100, run_s=1.5))
    spec = _spec("eager")
    found = time_estimate.estimate(spec, CELLS_X1000, time_estimate.history_of(store, spec))
    per_iteration = 0.040 + 0.030 / (11_600 * 114) * (CELLS_X1000 - 116 * 114)
    assert found.seconds == pytest.approx(4 * 50 * per_iteration + 0.02 + 0.3)
    assert found.basis.strategy == "eager"
    # Nothing stored of a strategy: no estimate, however many runs of others.
    assert time_estimate.estimate(_spec("jit_step"), CELLS_X1000, time_estimate.history_of(store, spec)) is None


def test_only_runs_of_the_same_kind_count(store):
    for changes in ({"precision": "float64"}, {"device": "gpu"}):
        spec = _spec(**changes)
        assert time_estimate.estimate(spec, CELLS_X1000, time_estimate.history_of(store, spec)) is None
    spec = _spec()
    failed = [_stored("scan", 1000, status="timed_out", error="passed its time budget", run_s=900.0)]
    assert time_estimate.estimate(spec, CELLS_X1000, failed) is None
    # A run imported from another machine says nothing of this one's speed.
    store.add(_stored("scan", 1000, run_s=900.0, owner="imported"))
    found = time_estimate.estimate(spec, CELLS_X1000, time_estimate.history_of(store, spec))
    assert (found.basis.n, found.basis.p) == (11_600, 114)


def test_three_strategies_at_oaks_x1000_are_told_they_pass_the_budget_and_what_fits(store):
    specs = [_spec(name) for name in ("scan", "jit_step", "eager")]
    # 60.3 s each (above), 15 s a call: timed together they share one budget.
    text, over = time_estimate.plan_note(specs, None, store, budget_seconds=100.0)
    assert over
    assert text.startswith("About 3 minutes 1 s for the 3 strategies by this server's earlier runs, scaled to this "
                           "size (the longest, ")
    assert "50 iterations x 4 calls at 300 ms, from 30 ms at 11,600 x 114" in text
    assert "That passes the 100 s a run may hold the device" in text
    assert text.endswith("With Repeats at 1 it would fit.")  # 2 calls of 45 s
    # One of them alone fits, at twice the estimate too: said, not warned.
    text, over = time_estimate.plan_note(specs[:1], None, store, budget_seconds=150.0)
    assert not over and text.startswith("About 60.3 s")
    # Not even one call fits: fewer iterations would.
    text, over = time_estimate.plan_note(specs[:1], None, store, budget_seconds=10.0)
    assert over and text.endswith("At about 8 iterations it would fit (a fit may not converge in them).")


def test_a_fit_that_stops_at_its_tolerance_is_counted_at_the_iterations_it_stopped_after(tmp_path):
    # The default on oaks stops after about 50 iterations of its 500 at any size: counted at
    # its cap, the estimate read five to ten times too long.
    store = RunStore(tmp_path / "runs.sqlite3")
    store.add(_stored("scan", 100, run_s=49 * 0.030, iterations_run=49, tol=1e-7))
    stopping = _spec(iterations=500, tol=1e-7)
    found = time_estimate.estimate(stopping, CELLS_X1000, time_estimate.history_of(store, stopping))
    assert found.iterations == 49
    assert found.seconds == pytest.approx(4 * 49 * 0.3 + 0.02 + 0.3)
    fixed = _spec(iterations=500)  # tol 0: every iteration runs
    assert time_estimate.estimate(fixed, CELLS_X1000, time_estimate.history_of(store, fixed)).iterations == 500


def test_a_short_plan_or_one_nothing_stored_tells_is_said_nothing(store, tmp_path):
    oaks = tutorial_spec(strategy="scan", dataset=DatasetSpec(kind="oaks", replicate=1), iterations=50, repeats=3)
    assert time_estimate.plan_note([oaks], None, store, budget_seconds=300.0) is None
    empty = RunStore(tmp_path / "empty.sqlite3")
    assert time_estimate.plan_note([_spec()], None, empty, budget_seconds=300.0) is None
    # A file not read yet: its size is unknown.
    csv = tutorial_spec(strategy="scan", dataset=DatasetSpec(kind="csv", counts_path="counts.csv"))
    assert time_estimate.plan_note([csv], None, store, budget_seconds=300.0) is None


def test_strategies_nothing_stored_tells_are_named_and_the_time_is_a_least(store):
    # Left out silently, the slowest strategy (eager, never run) made the total smaller.
    specs = [_spec("scan"), _spec("scan_pytree_class"), _spec("fori_loop")]
    text, _ = time_estimate.plan_note(specs, None, store, budget_seconds=300.0)
    assert text.startswith("At least 60.3 s by this server's earlier runs")
    assert "; scan_pytree_class and fori_loop not counted: no earlier run of their kind" in text


def test_a_sweep_is_told_its_total_and_which_size_passes_the_budget(store):
    """A sweep runs each size's strategies together, one size after another, each under its
    own budget: the total is the sizes' sum, and a warning names the size that passes it."""
    sizes = {replicate: DatasetSpec(kind="oaks", replicate=replicate) for replicate in (100, 1000)}
    sweep = [_spec(name, dataset=dataset) for dataset in sizes.values() for name in ("scan", "jit_step")]
    # x100: 30 ms a run's iteration, 50 iterations x 4 calls, + 0.32 s: 6.32 s each; x1,000: 60.32 s each.
    text, over = time_estimate.sweep_note(sweep, store, budget_seconds=100.0)
    assert over
    # Two strategies' calls of 15 s: three calls fit in 100 s.
    assert text == ("About 2 minutes 13 s in all by this server's earlier runs, scaled to each size; the longest, "
                    "oaks x1000, about 2 minutes 1 s; scaled up from runs 10 times smaller, where work that "
                    "outgrows the processor's caches can take up to twice as long. oaks x1000 passes the 100 s a run "
                    "may hold the device: it would stop there and keep what finished. With Repeats at 2 it would "
                    "fit."), text
    # Under the budget, each size: said, not warned.
    text, over = time_estimate.sweep_note(sweep, store, budget_seconds=300.0)
    assert not over and "the longest, oaks x1000, about 2 minutes 1 s; scaled up from runs 10 times smaller" in text
    # A strategy never run is named once, however many sizes it is in.
    with_new = [*sweep, _spec("fori_loop"), _spec("fori_loop", dataset=sizes[100])]
    text, _ = time_estimate.sweep_note(with_new, store, budget_seconds=300.0)
    assert text.startswith("At least 2 minutes 13 s in all") and text.count("fori_loop") == 1
    # Short sweeps are said nothing of.
    small = [_spec(name, dataset=DatasetSpec(kind="oaks", replicate=1)) for name in ("scan", "jit_step")]
    assert time_estimate.sweep_note(small, store, budget_seconds=300.0) is None


def test_a_strategys_own_cost_of_a_cell_scales_it_and_far_scaling_may_pass_the_budget(tmp_path):
    """eager's unfused passes cost it more a cell than scan's: scaled by scan's (the least of
    any), eager at oaks x1,000 read a third of what it took on a 2-core CPU (341 against
    1,051 ms an iteration). Its own runs at two sizes give its own cost; and an estimate
    scaled ten times up says it may be short, and warns where twice it would pass."""
    store = RunStore(tmp_path / "runs.sqlite3")
    # Those runs' times an iteration (20 iterations each, this 2-core CPU): x1 and x100.
    for strategy, x1_ms, x100_ms in (("eager", 1.67, 52.18), ("scan", 0.53, 32.15)):
        store.add(_stored(strategy, 1, run_s=50 * x1_ms / 1e3))
        store.add(_stored(strategy, 100, run_s=50 * x100_ms / 1e3))
    eager = _spec("eager")
    found = time_estimate.estimate(eager, CELLS_X1000, time_estimate.history_of(store, eager))
    own = (52.18 - 1.67) / (11_600 * 114 - 116 * 114)  # ms a cell
    assert 1e3 * found.per_iteration_s == pytest.approx(52.18 + own * (CELLS_X1000 - 11_600 * 114))  # 511 ms
    assert found.reach == pytest.approx(10.0)
    # scan's own cost a cell is about the least: never below the least times the cells.
    scan = time_estimate.estimate(_spec("scan"), CELLS_X1000, time_estimate.history_of(store, eager))
    assert 1e3 * scan.per_iteration_s == pytest.approx(32.15 / (11_600 * 114) * CELLS_X1000)
    # About 2 minutes 2 s for eager alone: under a budget of 3 minutes, but not at twice.
    text, over = time_estimate.plan_note([eager], None, store, budget_seconds=180.0)
    assert over and "; scaled up from runs 10 times smaller, where work that outgrows the processor's caches can " \
                    "take up to twice as long. That may pass the 3 minutes a run may hold the device" in text, text
    assert text.endswith("even at twice the estimate."), text
    text, over = time_estimate.plan_note([eager], None, store, budget_seconds=300.0)
    assert not over


def test_making_the_program_is_counted_as_compiling_cost_where_it_must_compile(tmp_path):
    # scan at oaks x100 loaded from memory (0.0 s), and at x1 compiled (2 s): x100 again is
    # its cached program's cost; compiled from scratch, or at a size not run, what compiling cost.
    store = RunStore(tmp_path / "runs.sqlite3")
    store.add(_stored("scan", 1, run_s=0.04, trace_lower_s=0.5, compile_s=1.5))
    store.add(_stored("scan", 100, run_s=1.5, trace_lower_s=0.0, compile_s=0.0, cache="memory"))
    spec = _spec(dataset=DatasetSpec(kind="oaks", replicate=100))
    history = time_estimate.history_of(store, spec)
    assert time_estimate.estimate(spec, 11_600 * 114, history).compile_s == 0.0
    assert time_estimate.estimate(spec, 11_600 * 114, history, cold=True).compile_s == 2.0
    assert time_estimate.estimate(_spec(), CELLS_X1000, history).compile_s == 2.0
