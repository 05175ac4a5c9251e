"""How a fit ended, from its ELBO trace alone: diverged (non-finite or blown up), converged or not."""

import dataclasses

import numpy as np
import pytest
from specs import tutorial_spec

from core.results import outcome
from core.results.result import Measurement, RunResult, cache_label, is_cache_label

NAN = float("nan")


def test_a_rising_trace_is_ok_and_converged_only_against_a_tolerance():
    trace = [-1000.0, -500.0, -400.0, -399.96]
    fixed = outcome.judge(trace, tol=0.0)
    assert fixed.status == "ok" and fixed.diverged_at is None and fixed.error is None
    assert fixed.final_change == pytest.approx(0.04 / 399.96)
    # tol = 0 asks for every iteration, not for convergence: nothing to judge.
    assert fixed.converged is None
    assert outcome.judge(trace, tol=1e-3).converged is True
    # Stopped improving by more than the tolerance at the last step: not converged.
    assert outcome.judge(trace, tol=1e-5).converged is False
    assert outcome.judge(trace, tol=1e-5, iterations=4).converged is False
    # A compiled loop that stopped before its cap stopped at tol, on a float64 ELBO that a
    # float32 trace may round to a larger last change.
    assert outcome.judge(trace, tol=1e-5, iterations=500).converged is True


def test_a_non_finite_value_cuts_the_trace_where_it_went_wrong():
    ended = outcome.judge([-10.0, -9.0, NAN, -8.0], tol=0.0)
    assert ended.status == "diverged" and ended.diverged_at == 2
    np.testing.assert_array_equal(ended.elbo, [-10.0, -9.0])
    assert ended.error == "ELBO not finite at iteration 2"
    assert ended.final_change is None and ended.converged is None


def test_an_elbo_ending_orders_of_magnitude_below_its_start_is_diverged():
    # The adam lr 10 case on oaks: -3.3e7 to -3.5e29, finite all the way.
    trace = [-3.3e7, -3.7e20, -4.4e6, -6.2e6, -2.6e12] + [-3.5e29] * 5
    ended = outcome.judge(trace, tol=1e-6)
    assert ended.status == "diverged"
    # Iteration 1 was far below too, but the fit came back; it went wrong for good at 4.
    assert ended.diverged_at == 4
    assert len(ended.elbo) == len(trace)  # every value is finite: the whole curve is kept
    assert "blew up" in ended.error and "from iteration 4 on" in ended.error
    assert ended.converged is None


def test_a_fit_that_dips_and_recovers_is_not_diverged():
    assert outcome.judge([-3.3e7, -3.7e20, -4.4e6, -3.0e4], tol=0.0).status == "ok"
    # An ELBO near 0 is measured from at least one unit: -1 to -500 is not a blow-up.
    assert outcome.judge([-0.001, -500.0], tol=0.0).status == "ok"
    assert outcome.judge([-0.001, -5000.0], tol=0.0).status == "diverged"


def test_a_blow_up_that_ends_non_finite_says_both():
    ended = outcome.judge([-100.0, -1e9, -1e12, float("-inf")], tol=0.0)
    assert ended.diverged_at == 1 and len(ended.elbo) == 3
    assert "from iteration 1 on" in ended.error and "not finite at iteration 3" in ended.error


def _measurement(elbo):
    return Measurement(elbo=np.asarray(elbo), times=[1.0], shape=(2, 2, 1), transfer_s=0.0, trace_lower_s=0.0,
                       compile_s=0.0, first_call_s=1.0, compile_count=0, disk_cache_hits=0, recompile_count=0,
                       cache="none", devices=1, processes=1, device_kind="cpu", versions={}, optimizer="seed",
                       lr=0.01, init="seed")


def test_the_result_carries_the_outcome_warnings_and_advice():
    spec = tutorial_spec(tol=1e-3, precision="float32")
    result = RunResult.measured(spec, _measurement([-10.0, -9.0, -8.999]), 0.0, (0.0, 1.0),
                                 warnings=("data changed",))
    assert result.status == "ok" and result.converged is True and result.to_dict()["converged"] is True
    assert result.final_change == pytest.approx(0.001 / 8.999) and result.warnings == ["data changed"]
    broken = RunResult.measured(spec, _measurement([-10.0, NAN]), 0.0, (0.0, 1.0))
    assert broken.status == "diverged" and broken.iterations_run == 1 and broken.converged is None
    # seed has no learning rate to lower; adam has.
    assert broken.error.endswith("try float64")
    adam = dataclasses.replace(_measurement([-10.0, NAN]), optimizer="adam")
    assert RunResult.measured(spec, adam, 0.0, (0.0, 1.0)).error.endswith("try float64 or a smaller learning rate")
    # float64 has no such excuse: no advice.
    plain = RunResult.measured(tutorial_spec(precision="float64"), _measurement([-10.0, NAN]), 0.0, (0.0, 1.0))
    assert plain.error == "ELBO not finite at iteration 1"


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_a_set_step_optimizer_diverged_from_the_small_s_start_is_told_its_own_start(precision):
    # From log_rates_sd (S = 0.03 at a count of 1,000) seed's steps of 0.1 take S through zero:
    # the start is the cause in either precision, not float32 or a learning rate.
    from_sd = dataclasses.replace(_measurement([-10.0, NAN]), init="log_rates_sd")
    error = RunResult.measured(tutorial_spec(precision=precision), from_sd, 0.0, (0.0, 1.0)).error
    assert error == ("ELBO not finite at iteration 1; seed steps by a set size, which can take the small S of the "
                     "log_rates_sd start through zero: start it from seed, its default")


def test_a_fit_that_blew_up_to_a_finite_elbo_is_told_what_to_try():
    spec = tutorial_spec(tol=1e-3, precision="float32")
    blown = [-10.0, -1e6, -1e9]  # finite, ending far more than BLOW_UP_FACTOR below its start
    # adam at a learning rate of 10: its steps overshoot; float32's overflow is not the cause here.
    adam = dataclasses.replace(_measurement(blown), optimizer="adam", lr=10.0, init="log_rates")
    result = RunResult.measured(spec, adam, 0.0, (0.0, 1.0))
    assert result.status == "diverged" and "blew up" in result.error
    assert result.error.endswith("adam's steps at a learning rate of 10 overshoot: try the default, 0.01")
    assert result.remedy == ("lr", 0.01, "adam's steps at a learning rate of 10 overshoot: try the default, 0.01")
    # At its default rate, a finite blow-up in float32 gets no float64 advice (nothing overflowed).
    plain = RunResult.measured(spec, dataclasses.replace(adam, lr=0.01), 0.0, (0.0, 1.0))
    assert "blew up" in plain.error and "float64" not in plain.error and plain.remedy is None
    # Went non-finite after all: float64 is worth a try.
    overflowed = RunResult.measured(spec, dataclasses.replace(adam, lr=0.01, elbo=np.asarray([-10.0, NAN])), 0.0,
                                    (0.0, 1.0))
    assert overflowed.remedy.setting == "precision" and overflowed.error.endswith(overflowed.remedy.why)


def test_cache_labels_say_where_each_executable_came_from():
    assert cache_label(1, 0, 0) == "compiled" and cache_label(0, 5, 0) == "disk"
    assert cache_label(0, 0, 5) == "memory" and cache_label(0, 0, 0) == "none"
    assert cache_label(1, 3, 0) == "compiled 1, disk 3"
    assert cache_label(1, 0, 4) == "compiled 1, memory 4"
    for label in ("compiled", "disk", "memory", "none", "compiled 1, disk 3", "disk 2, memory 1"):
        assert is_cache_label(label), label
    for label in ("", "cached", "disk 3, compiled 1", "compiled 0, disk 3", "compiled 1", "none 1, disk 2"):
        assert not is_cache_label(label), label


# oaks x1000 in float32: two ELBOs in a row rounded to one float32 value (a step that
# changed nothing), after gains of 16 to 62 per iteration.
X1000_TIE = [-32027000.0, -32026938.0, -32026890.0, -32026828.0, -32026828.0]


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_a_stop_on_a_tie_is_a_stall_never_convergence(precision):
    ended = outcome.judge(X1000_TIE, tol=1e-7, iterations=500, precision=precision)
    assert ended.final_change == 0.0
    assert ended.stalled is True and ended.converged is False
    assert "stalled at " + precision in outcome.stall_note(ended.final_change, precision)
    assert ("run in float64" in outcome.stall_note(0.0, precision)) == (precision == "float32")


def test_a_stop_reads_the_change_the_stopping_test_read_not_the_rounded_trace():
    # The float64-accumulated ELBOs differed by 2.6 (8e-8 of the ELBO): under tol 1e-7 and
    # above what a float32 fit's ELBO resolves (3e-8), so the fit converged though its
    # trace shows a tie; so did one whose change fell faster (3.6e-8).
    moved = outcome.judge(X1000_TIE, tol=1e-7, iterations=500, precision="float32", tested_change=8e-8)
    assert moved.final_change == 8e-8 and moved.converged is True and moved.stalled is False
    assert outcome.judge(X1000_TIE, tol=1e-7, iterations=500, precision="float32",
                         tested_change=3.6e-8).converged is True
    # A change under that is none: stalled, whatever tol says.
    under = outcome.judge(X1000_TIE, tol=1e-7, iterations=500, precision="float32", tested_change=5e-9)
    assert under.stalled is True and under.converged is False
    # float64 resolves it.
    assert outcome.judge(X1000_TIE, tol=1e-7, iterations=500, precision="float64",
                         tested_change=5e-9).converged is True
    # Without a tolerance there is no stop to judge.
    assert outcome.judge(X1000_TIE, tol=0.0, precision="float32").stalled is False


def test_a_stalled_run_reports_no_convergence_and_no_time_to_solution():
    spec = tutorial_spec(tol=1e-7, precision="float32", iterations=500)
    stalled = RunResult.measured(spec, _measurement(X1000_TIE), 0.0, (0.0, 1.0))
    assert stalled.status == "ok" and stalled.stalled is True and stalled.converged is False
    assert stalled.time_to_solution_s is None
    assert stalled.to_dict()["stalled"] is True and stalled.to_dict()["converged"] is False
    measured = _measurement(X1000_TIE)
    measured.final_change = 8e-8
    converged = RunResult.measured(spec, measured, 0.0, (0.0, 1.0))
    assert converged.final_change == 8e-8 and converged.converged is True and converged.stalled is False
    assert converged.time_to_solution_s == 1.0


def test_the_float64_gradient_decides_where_it_is_known():
    trace = [-1000.0, -500.0, -400.0, -399.99999999]
    # The ELBO stopped moving, and the gradient agrees: converged.
    met = outcome.judge(trace, tol=1e-7, iterations=500, estimated_gap=1e-8)
    assert met.converged is True and not met.stalled and not met.short
    # The ELBO stopped moving, the gradient says 1e-4 short of the optimum: not converged.
    short = outcome.judge(trace, tol=1e-7, iterations=500, estimated_gap=1e-4)
    assert short.converged is False and short.short and not short.stalled
    assert "1e-04" in outcome.short_note(1e-4)
    # A stall that is at the optimum all the same is converged, not stalled ...
    tie = [-1000.0, -500.0, -400.0, -400.0]
    assert outcome.judge(tie, tol=1e-7, iterations=500, precision="float32", estimated_gap=1e-9).converged is True
    # ... and one that is not stays stalled.
    stuck = outcome.judge(tie, tol=1e-7, iterations=500, precision="float32", estimated_gap=1e-4)
    assert stuck.stalled and not stuck.converged and not stuck.short
    # A fit that ran out of iterations has not converged, whatever the gradient says.
    assert outcome.judge(trace[:3], tol=1e-7, iterations=3, estimated_gap=0.0).converged is False


def test_a_stored_run_reads_its_verdict_the_same_way():
    measurement = Measurement(elbo=np.array([-1000.0, -500.0, -400.0, -399.99999999]), times=[0.01],
                              shape=(10, 3, 1), transfer_s=0.0, first_call_s=0.01, device_kind="cpu",
                              versions={}, optimizer="preconditioned_lbfgs", lr=0.01, init="log_rates",
                              final_change=5e-8, certified_elbo=-399.9, estimated_gap=1e-4)
    spec = tutorial_spec(tol=1e-7, iterations=500)
    run = RunResult.measured(spec, measurement, 0.0, (1.0, 2.0))
    assert run.short and run.converged is False and run.time_to_solution_s is None
    assert run.to_dict()["short"] is True and run.estimated_gap == 1e-4
    at_optimum = RunResult.measured(spec, dataclasses.replace(measurement, estimated_gap=1e-9), 0.0, (1.0, 2.0))
    assert at_optimum.converged and at_optimum.time_to_solution_s == 0.01


def test_a_fit_that_ran_out_of_iterations_says_how_far_it_believes_it_is():
    said = outcome.capped_note(7.8e-4, 1e-7, 10, 1.2e-3)
    assert said == ("not converged: the relative ELBO change was still 7.8e-04 after all 10 iterations, above the "
                    "tolerance 1e-07; checked in float64, its gradient puts it about 1e-03 (relative) below the "
                    "optimum, to within a few times; run more iterations")
    # Without the float64 check (a peer, data drawn on the devices), the change alone.
    assert "gradient" not in outcome.capped_note(7.8e-4, 1e-7, 10, None)


def test_an_estimate_beyond_the_quadratic_model_is_not_read_as_a_distance():
    # Where a cell is far off its optimum the certificate's model is not a distance (7e9 for a
    # point 4.6e-4 below): the notes say far, not a number.
    for note in (outcome.short_note(7e9), outcome.capped_note(1e-3, 1e-7, 10, 0.5)):
        assert "far below the optimum, too far for the distance to be estimated" in note
        assert "e+09" not in note and "5e-01" not in note
    assert "about 1e-01 (relative)" in outcome.short_note(outcome.FAR_GAP)
