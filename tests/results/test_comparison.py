"""Compare's defaults: like with like, a baseline of the same size."""

import pandas as pd

from core.results import comparison


def _frame(rows):
    keys = ("id", "strategy", "dataset", "n", "status", "per_iter_ms", "created_at")
    return pd.DataFrame([dict(zip(keys, row), p=114) for row in rows])


RUNS = _frame([
    (1, "eager", "oaks x1", 116, "ok", 16.0, 1.0),
    (2, "scan", "oaks x1", 116, "ok", 0.3, 2.0),
    (3, "eager", "oaks x100", 11600, "ok", 900.0, 3.0),
    (4, "scan", "oaks x100", 11600, "ok", 20.0, 4.0),
    (5, "jit_step", "oaks x100", 11600, "diverged", 5000.0, 5.0),
])


def test_the_default_baseline_is_eager_of_the_newest_runs_problem():
    assert comparison.default_baseline(RUNS) == 3
    assert comparison.default_baseline(RUNS[RUNS["id"] <= 2]) == 1
    # No eager of that size: its slowest finished run, never a diverged one.
    slower = pd.concat([RUNS[RUNS["id"] != 3], _frame([(6, "fori_loop", "oaks x100", 11600, "ok", 30.0, 6.0)])],
                       ignore_index=True)
    assert comparison.default_baseline(slower) == 6
    # One run of that size finished: nothing to compare it with there, so the size before it.
    assert comparison.default_baseline(RUNS[RUNS["id"] != 3]) == 1
    assert comparison.default_baseline(RUNS.iloc[:0]) is None


def test_the_default_baseline_is_of_the_newest_problem_that_ran_more_than_one_program():
    # The newest problem, an upload, ran only the scan strategies: one program, "same program"
    # on every bar and none drawn. The problem before it ran two programs: divided by its slowest.
    runs = pd.concat([RUNS, _frame([(6, "scan", "csv good.csv", 60, "ok", 0.2, 6.0),
                                    (7, "scan_namedtuple", "csv good.csv", 60, "ok", 0.21, 7.0)])],
                     ignore_index=True).assign(program=["", "a", "", "b", "c", "u", "u"], host="h", iterations=500,
                                               iterations_run=40)
    assert comparison.default_baseline(runs) == 3
    # A second program of the upload's problem (eager has none: a program of its own) makes it the newest.
    more = pd.concat([runs, _frame([(8, "eager", "csv good.csv", 60, "ok", 9.0, 8.0)]).assign(
        program="", host="h", iterations=500, iterations_run=40)], ignore_index=True)
    assert comparison.default_baseline(more) == 8
    # Every problem one program: the newest problem's, as before.
    assert comparison.default_baseline(runs[runs["id"] >= 6]) == 7
    # The newest problem's fits did not converge (no time to solution) where older ones did: a
    # baseline there drew "Run #9 has no time to solution". The newest problem that has one.
    solved = more.assign(time_to_solution_s=[None, 0.01, None, 1.0, None, None, None, None])
    assert comparison.default_baseline(solved, "time_to_solution_s") == 4
    assert comparison.default_baseline(solved, "per_iter_ms") == 8  # every run has this one


def test_the_default_baseline_is_not_of_a_problem_where_one_run_finished():
    # An upload where one strategy finished and the others diverged: the chart showed the
    # baseline beside a column of "diverged". The problem before it has two runs to compare.
    runs = pd.concat([RUNS, _frame([(6, "scan", "csv m.csv", 400, "ok", 2.0, 6.0),
                                    (7, "eager", "csv m.csv", 400, "diverged", 90.0, 7.0)])], ignore_index=True)
    assert comparison.default_baseline(runs) == 3
    assert comparison.default_baseline(runs[runs["id"] >= 6]) == 6  # nothing else to compare: its own


def test_the_default_baseline_has_the_timing_shown():
    solved = RUNS.assign(time_to_solution_s=[None, 0.01, None, 1.0, None])
    assert comparison.default_baseline(solved, "time_to_solution_s") == 4  # eager ran a fixed number of iterations
    assert comparison.default_baseline(solved, "per_iter_ms") == 3
    assert comparison.default_baseline(solved.assign(time_to_solution_s=None), "time_to_solution_s") == 3


def test_only_runs_of_the_baselines_size_are_divided_by_it():
    assert list(RUNS.loc[comparison.same_problem(RUNS, 1), "id"]) == [1, 2]
    assert list(RUNS.loc[comparison.same_problem(RUNS, 4), "id"]) == [3, 4, 5]
    assert not comparison.same_problem(RUNS, 99).any()
    assert comparison.DEFAULT_GROUPS[0] == "dataset"


def test_groups_hold_one_optimizer_and_one_start_and_those_without_the_timing_are_named():
    assert comparison.DEFAULT_GROUPS == ["dataset", "strategy", "optimizer", "init", "precision"]
    mixed = RUNS.assign(optimizer=["seed", "seed", "seed", "preconditioned_lbfgs", "seed"],
                        time_to_solution_s=[None, None, None, 1.0, None], precision="float32", init="seed")
    by = comparison.DEFAULT_GROUPS
    # The diverged jit_step run is no finished run: its group is drawn as diverged, not named here.
    assert comparison.unmeasured_groups(mixed, by, "time_to_solution_s") == [
        "oaks x1 · eager · seed · seed · float32", "oaks x1 · scan · seed · seed · float32",
        "oaks x100 · eager · seed · seed · float32"]
    # One precision a group, and one start: a float64 run, or one from another start, of the
    # same problem is a group of its own (two starts take different numbers of iterations).
    twins = pd.concat([mixed.iloc[[1]], mixed.iloc[[1]].assign(precision="float64"),
                       mixed.iloc[[1]].assign(init="log_rates_sd")], ignore_index=True)
    assert list(comparison.group_names(twins, by)) == ["oaks x1 · scan · seed · seed · float32",
                                                       "oaks x1 · scan · seed · seed · float64",
                                                       "oaks x1 · scan · seed · log_rates_sd · float32"]
    assert comparison.unmeasured_groups(mixed, by, "per_iter_ms") == []
    assert comparison.unmeasured_groups(mixed.iloc[:0], by, "per_iter_ms") == []


def test_a_run_is_named_by_what_sets_it_apart_from_the_others_on_offer():
    named = comparison.run_names(RUNS.assign(optimizer="seed", precision="float32", device="cpu"))
    assert named[1] == "#1 eager · oaks x1" and named[4] == "#4 scan · oaks x100"
    one_size = RUNS[RUNS["n"] == 116].assign(optimizer=["seed", "lbfgs"], device="cpu")
    assert comparison.run_names(one_size) == {1: "#1 eager · seed", 2: "#2 scan · lbfgs"}
    # Two starts of one optimizer: the start tells them apart.
    starts = RUNS[RUNS["n"] == 116].assign(strategy="scan", optimizer="preconditioned_lbfgs",
                                           init=["log_rates", "log_rates_sd"])
    assert comparison.run_names(starts) == {1: "#1 scan · log_rates", 2: "#2 scan · log_rates_sd"}
    # Two learning rates of one optimizer: the rate, named.
    rates = RUNS[RUNS["n"] == 116].assign(strategy="scan", optimizer="adam", lr=[0.01, 10.0])
    assert comparison.run_names(rates) == {1: "#1 scan · lr 0.01", 2: "#2 scan · lr 10"}
    # An optimizer without a learning rate is not named by the placeholder it stores.
    mixed = rates.assign(optimizer=["adam", "lbfgs"], lr=[0.01, 0.0])
    assert comparison.run_names(mixed) == {1: "#1 scan · adam · lr 0.01", 2: "#2 scan · lbfgs"}


def test_labels_leave_out_the_columns_every_run_shares():
    runs = RUNS.assign(optimizer="preconditioned_lbfgs", precision="float32")
    by = ["dataset", "strategy", "optimizer", "precision"]
    assert comparison.labelling_columns(runs, by) == (
        ["dataset", "strategy"], {"optimizer": "preconditioned_lbfgs", "precision": "float32"})
    # The groups are the same ones, named shorter.
    assert comparison.group_names(runs, ["dataset", "strategy"]).nunique() == comparison.group_names(runs, by).nunique()
    one = runs[runs["id"] == 2]  # one run, one group: named whole, nothing left out
    assert comparison.labelling_columns(one, by) == (by, {})
    mixed = runs.assign(precision=["float32", "float64", "float32", "float32", "float32"])
    assert comparison.labelling_columns(mixed, by) == (["dataset", "strategy", "precision"],
                                                       {"optimizer": "preconditioned_lbfgs"})
    assert comparison.labelling_columns(runs, ["dataset", "host"]) == (["dataset", "host"], {})  # absent: kept
