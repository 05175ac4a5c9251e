"""The agreement badge's criterion: rounding, the optimizer's drift before convergence, one optimum after."""

import math

import pandas as pd

from core.results import agreement


def _runs(finals, optimizer="rprop", precision="float64", final_change=1e-3, **extra):
    rows = [dict(final_elbo=v, status="ok", precision=precision, optimizer=optimizer, lr=0.01, init="log_counts",
                 final_change=final_change, **extra) for v in finals]
    return pd.DataFrame(rows)


def test_rounding_noise_agrees_whatever_the_optimizer():
    found = agreement.verdict(_runs([-32026.01570, -32026.01570001], optimizer="adam"))
    assert found.state == "agree" and found.limit == agreement.ROUNDING["float64"]


def test_rprop_mid_run_drifts_yet_is_no_disagreement():
    # The numbers: strategies 1.2e-2 apart along the way with rprop.
    found = agreement.verdict(_runs([-32400.0, -32010.0]))
    assert found.state == "drift" and "sign" in found.reason and found.limit == agreement.DRIFT["rprop"][1]
    # The same spread for an optimizer that does not amplify rounding is a disagreement.
    assert agreement.verdict(_runs([-32400.0, -32010.0], optimizer="lbfgs")).state == "differ"
    # Beyond the drift rprop shows, even rprop differs.
    assert agreement.verdict(_runs([-40000.0, -32010.0])).state == "differ"


def test_converged_runs_are_held_to_one_optimum():
    at_rest = dict(final_change=1e-12)
    assert agreement.verdict(_runs([-32026.0157, -32026.0157 * (1 + 5e-8)], **at_rest)).state == "agree"
    # Converged and 1e-5 apart: two optima, whatever the optimizer's drift.
    found = agreement.verdict(_runs([-32026.0, -32026.0 * (1 + 1e-5)], **at_rest))
    assert found.state == "differ" and "different optima" in found.reason


def test_mixed_algorithms_and_too_few_runs():
    runs = pd.concat([_runs([-100.0]), _runs([-101.0], optimizer="seed")])
    assert agreement.verdict(runs).state == "mixed"
    one = agreement.verdict(_runs([-100.0]))
    assert one.state == "unknown" and math.isnan(one.spread)
    diverged = _runs([-100.0, -1e30]).assign(status=["ok", "diverged"])
    assert agreement.verdict(diverged).state == "unknown"


def test_runs_that_stalled_short_of_the_optimum_are_not_two_optima():
    # float32 ties (final change 0) 2e-5 apart: each stopped where its steps stopped changing
    # the ELBO, as oaks x1000 did before its sums were widened.
    stalled = _runs([-32026828.0, -32026828.0 * (1 - 2e-5)], optimizer="preconditioned_lbfgs", precision="float32",
                    final_change=0.0)
    found = agreement.verdict(stalled)
    assert found.state == "drift" and "stalled" in found.reason and found.limit == agreement.STALLED_GAP["float32"]
    # The same spread between runs that converged is a disagreement.
    at_rest = stalled.assign(final_change=1e-7 / 2)
    assert agreement.verdict(at_rest).state == "differ"
    # Stalled far apart is still a disagreement.
    assert agreement.verdict(stalled.assign(final_elbo=[-100.0, -101.0])).state == "differ"
