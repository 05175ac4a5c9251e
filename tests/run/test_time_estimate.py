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


def _stored(strategy, replicate, run_s, **changes):
    spec = tutorial_spec(strategy=strategy, dataset=DatasetSpec(kind="oaks", replicate=replicate), iterations=50)
    return make_run(strategy, iterations=50, spec=spec.to_dict(), spec_key=spec.key, dataset=f"oaks x{replicate}",
                    n=116 * replicate, p=114, run_s=run_s, run_s_min=run_s, run_s_max=run_s, **changes)


def _spec(strategy="scan", **changes):
    return tutorial_spec(strategy=strategy, dataset=OAKS_X1000, iterations=50, repeats=3, **changes)


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


def test_three_strategies_at_oaks_x1000_are_told_they_pass_the_budget(store):
    specs = [_spec(name) for name in ("scan", "jit_step", "eager")]
    # 60.3 s each (above): timed together they share one budget.
    text, over = time_estimate.plan_note(specs, None, store, budget_seconds=100.0)
    assert over
    assert text.startswith("About 3 minutes by this server's stored runs, scaled to this size")
    assert "past the 100 s a run may hold the device" in text
    assert "Fewer strategies, iterations or repeats" in text
    # One of them alone fits: said, not warned.
    text, over = time_estimate.plan_note(specs[:1], None, store, budget_seconds=100.0)
    assert not over and text.startswith("About 60.3 s")


def test_a_short_plan_or_one_nothing_stored_tells_is_said_nothing(store, tmp_path):
    oaks = tutorial_spec(strategy="scan", dataset=DatasetSpec(kind="oaks", replicate=1), iterations=50, repeats=3)
    assert time_estimate.plan_note([oaks], None, store, budget_seconds=300.0) is None
    empty = RunStore(tmp_path / "empty.sqlite3")
    assert time_estimate.plan_note([_spec()], None, empty, budget_seconds=300.0) is None
    # A file not read yet: its size is unknown.
    csv = tutorial_spec(strategy="scan", dataset=DatasetSpec(kind="csv", counts_path="counts.csv"))
    assert time_estimate.plan_note([csv], None, store, budget_seconds=300.0) is None


def test_a_plan_partly_told_says_for_how_many(store):
    specs = [_spec("scan"), _spec("scan_pytree_class")]
    text, _ = time_estimate.plan_note(specs, None, store, budget_seconds=300.0)
    assert "for the 1 of 2 with stored runs of their kind" in text
