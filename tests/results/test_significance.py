"""Differences tested, not eyeballed: the Mann–Whitney U test on stored repeats, its fallback
to ranges with few repeats, one program as one speed, and the verdicts pages show."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from core.results import comparison, headline, significance, spread


def _times(median: float, n: int, seed: int, noise: float = 0.02) -> list[float]:
    return list(median * (1 + noise * np.random.default_rng(seed).standard_normal(n)))


def _run(run_id: int, strategy: str, times: list[float] | None, program: str = "", host: str = "h",
         **changes) -> dict:
    times = times or []
    run = dict(id=run_id, strategy=strategy, run_s=float(np.median(times)), run_s_min=min(times),
               run_s_max=max(times), repeats=3, repeat_times=times, program=program, host=host, dataset="oaks",
               n=116, p=114, d=1, optimizer="seed", lr=0.01, init="seed", tol=1e-7, iterations=150,
               iterations_run=40, status="ok", per_iter_ms=1e3 * float(np.median(times)) / 40)
    run["time_to_solution_s"] = run["run_s"]
    run.update(changes)
    return run


def test_the_least_p_of_the_exact_test_rules_out_three_against_three():
    assert significance.least_p(3, 3) == pytest.approx(0.1)
    assert significance.least_p(5, 5) == pytest.approx(2 / 252)
    # 3 against 3 repeats falls back to the ranges, however far apart they are.
    test = significance.compare([1.0, 1.1, 1.2], [5.0, 5.1, 5.2])
    assert (test.method, test.differs, test.p_value) == (significance.RANGES, True, None)
    assert "too few" in test.describe()


def test_a_real_difference_is_significant_and_one_distribution_is_not():
    faster, slower = _times(1.0, 12, 0), _times(1.05, 12, 1)
    test = significance.compare(faster, slower)
    assert test.method == significance.MANN_WHITNEY and test.differs is True and test.p_value < 0.05
    assert "12 and 12 repeats: p = " in test.describe()
    # Two samples of one distribution: no difference (seeded, so this cannot flake).
    same = significance.compare(_times(1.0, 12, 2), _times(1.0, 12, 3))
    assert same.differs is False and same.p_value >= 0.05


def test_a_significant_difference_under_one_percent_does_not_count():
    # Every repeat of one below every repeat of the other (p tiny), but 0.5% apart.
    first = [1.000 + 1e-5 * i for i in range(10)]
    second = [1.005 + 1e-5 * i for i in range(10)]
    test = significance.compare(first, second)
    assert test.p_value < 1e-3 and test.differs is False


def test_one_program_on_one_problem_and_host_is_one_speed_whatever_the_repeats_say():
    fast, slow = _run(1, "scan", _times(1.0, 12, 0), "abc"), _run(2, "scan_namedtuple", _times(1.3, 12, 1), "abc")
    found = spread.speedup(spread.Spread.of_run(fast), spread.Spread.of_run(slow))
    assert found.same_program and found.significant is False
    assert found.label == "same program: differences are noise" and found.brief == "same program"
    # The same fingerprint fed another problem, run for other iterations, or on another host: two speeds.
    for changes in ({"host": "other"}, {"n": 1160}, {"iterations_run": 80}, {"init": "log_rates"}):
        other = _run(2, "scan_namedtuple", _times(1.3, 12, 1), "abc", **changes)
        assert not spread.speedup(spread.Spread.of_run(fast), spread.Spread.of_run(other)).same_program, changes
    # No fingerprint (eager, the peers, older runs): never one program.
    assert significance.program_identity(_run(3, "eager", [1.0, 1.1])) == ""


def test_the_interval_is_a_bootstrap_of_the_medians_ratio_and_holds_the_true_ratio():
    base, other = _times(2.0, 20, 4), _times(1.0, 20, 5)
    found = spread.speedup(spread.Spread(float(np.median(base)), min(base), max(base), 20, tuple(base)),
                           spread.Spread(float(np.median(other)), min(other), max(other), 20, tuple(other)))
    assert found.low < 2.0 < found.high and found.high - found.low < 0.1
    assert found.low < found.value < found.high
    # Seeded: the same pair of runs shows one interval.
    assert significance.ratio_interval(base, other) == significance.ratio_interval(base, other)


def test_runs_stored_before_repeats_were_kept_fall_back_to_their_ranges():
    old = {"run_s": 1.0, "run_s_min": 0.9, "run_s_max": 1.1, "repeats": 3}
    apart = {"run_s": 2.0, "run_s_min": 1.9, "run_s_max": 2.1, "repeats": 3}
    found = spread.speedup(spread.Spread.of_run(apart), spread.Spread.of_run(old))
    assert found.significant is True and found.test.method == significance.RANGES
    assert found.why.startswith("the ranges of 3 and 3 repeats, apart")
    single = {"run_s": 1.0, "run_s_min": 1.0, "run_s_max": 1.0, "repeats": 1}
    assert spread.speedup(spread.Spread.of_run(single), spread.Spread.of_run(old)).significant is None


def test_ranges_that_miss_by_under_one_percent_tie_and_say_they_are_apart():
    # oaks x10, three repeats each: jit_step 0.19995 to 0.2118 s, scan_pytree_class 0.1602 to
    # 0.1992 s. A tie (the ranges' ratio reaches x1.004), once explained as "overlapping" beside
    # a table whose ranges did not meet.
    jit_step = _run(13, "jit_step", [0.2091, 0.2118, 0.19995], "a")
    pytree = _run(16, "scan_pytree_class", [0.1992, 0.1602, 0.1689], "b")
    found = spread.speedup(spread.Spread.of_run(jit_step), spread.Spread.of_run(pytree))
    assert found.significant is False and found.test.method == significance.RANGES and found.test.near
    assert found.why == ("the ranges of 3 and 3 repeats, apart by under 1%, too little to count (too few repeats "
                         "kept for a test at p < 0.05)")
    overlapping = _run(17, "scan", [0.205, 0.180, 0.190], "c")
    found = spread.speedup(spread.Spread.of_run(jit_step), spread.Spread.of_run(overlapping))
    assert found.significant is False and not found.test.near and found.why.startswith(
        "the ranges of 3 and 3 repeats, overlapping")


def test_samples_are_read_from_a_result_a_dict_or_a_frame_row():
    assert significance.samples({"repeat_times": [1, 2]}) == (1.0, 2.0)
    assert significance.samples(pd.Series({"repeat_times_json": json.dumps([0.5, 0.25])})) == (0.5, 0.25)
    assert significance.samples(pd.Series({"repeat_times_json": None})) == ()
    assert significance.samples(pd.Series({"repeat_times_json": math.nan})) == ()


def test_the_fastest_is_named_only_where_it_is_significantly_faster():
    runs = pd.DataFrame([_run(1, "jit_step", _times(1.5, 12, 6)), _run(2, "scan", _times(1.0, 12, 7), "abc"),
                         _run(3, "scan_namedtuple", _times(1.01, 12, 8), "abc"),
                         _run(4, "fori_loop", _times(1.0, 12, 9), "def")])
    found = headline.fastest(runs)
    assert found.run["strategy"] in ("scan", "fori_loop", "scan_namedtuple")
    tied = {tie.strategy: tie.why for tie in found.ties}
    assert "jit_step" not in tied and len(tied) == 2
    groups = headline.one_program_groups(runs)
    assert [(g.program, g.strategies) for g in groups] == [("abc", ["scan", "scan_namedtuple"])]


def test_strategies_of_one_program_at_every_size_are_named_for_a_chart_against_n():
    times = _times(1.0, 12, 7)
    runs = pd.DataFrame([_run(1, "scan", times, "a116", n=116), _run(2, "fori_loop", times, "a116", n=116),
                         _run(3, "jit_step", times, "j116", n=116),
                         _run(4, "scan", times, "a1160", n=1160), _run(5, "fori_loop", times, "a1160", n=1160),
                         _run(6, "jit_step", times, "j1160", n=1160),
                         # Ran at one size alone: nothing to tell it from there.
                         _run(7, "scan", times, "a11600", n=11600)])
    assert headline.one_program_at_every_size(runs) == [["fori_loop", "scan"]]
    # One size where the two compiled apart: their lines part there.
    parted = pd.concat([runs, pd.DataFrame([_run(8, "fori_loop", times, "other", n=11600)])], ignore_index=True)
    assert headline.one_program_at_every_size(parted) == []


def test_the_headline_says_one_program_apart_from_a_tie_of_two_programs():
    one = pd.DataFrame([dict(_run(1, "scan", _times(1.0, 12, 7), "abc"), iterations_run=40),
                        dict(_run(2, "scan_namedtuple", _times(1.01, 12, 8), "abc"), iterations_run=40)])
    found = headline.fastest(one)
    assert found.brief() == "same program as 1 other" and found.not_told_apart == []
    # No winner named among strategies of one program: the program is what was fastest.
    assert found.sentence() == ("Fastest to solution: scan and scan_namedtuple, one compiled program: one speed, "
                                "converged in 40 iterations.")
    # Beside the per-iteration figure, which shows one of them: the others are the same speed.
    other = ({"scan", "scan_namedtuple"} - {found.run["strategy"]}).pop()
    assert found.one_speed() == f"; {other} ran the same compiled program: one speed"
    both = pd.concat([one, pd.DataFrame([_run(3, "fori_loop", _times(1.0, 12, 9), "def")])], ignore_index=True)
    found = headline.fastest(both)
    assert found.brief() == "tied with 2 others"
    assert "one speed; tied with" in found.sentence() and found.sentence().endswith("is noise.")
    # Three repeats a side: no test, and overlapping ranges are said as such, not as "no difference".
    found = headline.fastest(pd.DataFrame([_run(1, "scan", [0.069, 0.068, 0.134], "abc"),
                                           _run(5, "jit_step", [0.113, 0.112, 0.114], "ghi")]))
    assert found.untested == ["jit_step"] and found.brief() == "tied with 1 other"
    assert found.sentence() == ("Fastest to solution: **scan**, converged in 40 iterations; not told apart from "
                                "jit_step: too few repeats for a test, and their ranges overlap (more Repeats in the "
                                "sidebar can tell them apart).")
    alone = headline.fastest(one.iloc[:1])
    assert alone.brief() == "scan · converged in 40 it" and alone.sentence() == alone.one_speed() == ""


def test_compare_retests_two_stored_runs_in_one_sentence():
    rows = pd.DataFrame([dict(_run(1, "eager", _times(10.0, 8, 10)), repeat_times_json=None),
                         _run(2, "scan", _times(1.0, 8, 11))])
    rows["repeat_times_json"] = [json.dumps(t) for t in rows["repeat_times"]]
    rows = rows.drop(columns=["repeat_times"])
    sentence = comparison.retest(rows.iloc[1], rows.iloc[0], "time_to_solution_s")
    assert sentence.startswith("Run #2 against #1: ×0.1") and "the baseline's time" in sentence
    assert "**faster**, a speed-up of ×9.99" in sentence  # said as the Story and Run say it, too
    assert "95% interval" in sentence and "Mann–Whitney U, two-sided, 8 and 8 repeats: p = 0.00016" in sentence
    assert "measured once per run" in comparison.retest(rows.iloc[1], rows.iloc[0], "compile_s")
    assert "Different optimizers" not in sentence
    # Per iteration, two optimizers compare unlike steps: said.
    rows["optimizer"], rows["per_iter_ms"] = ["seed", "preconditioned_lbfgs"], rows["run_s"] * 25.0
    across = comparison.retest(rows.iloc[1], rows.iloc[0], "per_iter_ms")
    assert "Different optimizers (preconditioned_lbfgs against seed): this compares their iterations" in across
    # A whole run's time counts its iterations: runs of other lengths (another start) say so.
    rows["iterations_run"] = [80, 50]
    whole = comparison.retest(rows.iloc[1], rows.iloc[0], "run_s")
    assert whole.endswith("The runs took 50 and 80 iterations: a whole run's time counts them; time per iteration "
                          "compares the strategies' speed.")
    assert "iterations:" not in comparison.retest(rows.iloc[1], rows.iloc[0], "per_iter_ms")
    # A diverged run timed a fit that stopped early: nothing to test.
    rows["status"] = ["diverged", "ok"]
    assert comparison.retest(rows.iloc[1], rows.iloc[0], "run_s") == (
        "Run #1 diverged: its times are of a fit that stopped early, not a speed to test. Pin or pick a finished run.")
    # Three repeats a side, ranges overlapping: no test decided, so nothing is said alike.
    few = pd.DataFrame([_run(1, "scan", [0.069, 0.068, 0.134], "abc"),
                        _run(5, "jit_step", [0.113, 0.112, 0.114], "ghi")])
    few["repeat_times_json"] = [json.dumps(t) for t in few["repeat_times"]]
    untested = comparison.retest(few.iloc[1], few.iloc[0], "time_to_solution_s")
    assert ("**not told apart**: too few repeats for a test, and their ranges overlap" in untested
            and "significant" not in untested), untested


@pytest.mark.parametrize("p_value, text", [(0.032, "0.032"), (0.5, "0.5"), (0.00031, "0.00031"), (1e-8, "< 1e-6"),
                                           (None, "n/a")])
def test_p_values_read_as_a_reader_expects(p_value, text):
    assert significance.p_text(p_value) == text
