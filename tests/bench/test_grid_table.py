"""The benchmark's per-iteration table as printed: a ratio with nothing to divide by is a dash."""

from core.bench import grid

from fake_runs import make_run


def test_a_ratio_to_a_run_that_is_not_there_is_a_dash_not_nan():
    alone = grid.table([(make_run("scan"), None), (make_run("jit_step", per_iter_ms=16.0), None)])
    header, _, scan, jit_step = alone.splitlines()
    assert "nan" not in alone
    # ("oaks x1" is two words.) x fastest is there; x pyPLN (no pyPLNmodels run) and the roofline's columns are not.
    assert scan.split()[9:13] == ["1.00", "-", "-", "-"] and jit_step.split()[9] == "2.00"
    with_peer = grid.table([(make_run("scan"), None), (make_run("pyplnmodels", per_iter_ms=40.0), None)])
    assert with_peer.splitlines()[2].split()[10] == "0.20"
