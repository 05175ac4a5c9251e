"""Runs in hand as one table (`core.results.frame`), as the Run page tabulates them."""

from core.results.frame import results_frame

from fake_runs import make_run


def test_one_row_per_run_with_the_columns_the_run_page_reads():
    busy = make_run("scan", host="node-a", repeat_times=[0.04, 0.041, 0.039, 0.04])
    busy.versions["others_cpu_share"] = 0.6  # others took 60% of the cores while it was timed
    runs = [busy, make_run("eager", host="node-b", repeats=3)]
    frame = results_frame(runs)
    assert list(frame["strategy"]) == ["scan", "eager"]
    assert list(frame["host"]) == ["node-a", "node-b"]
    # The repeats actually timed where they were kept, else the spec's count.
    assert list(frame["timed_repeats"]) == [4, 3]
    assert list(frame["busy"]) == [True, False]
    assert list(frame["compile_total_s"]) == [0.02 + 0.3, 0.02 + 0.3]
    assert "spec" not in frame and "versions" not in frame and "elbo" not in frame


def test_no_runs_is_an_empty_frame():
    assert results_frame([]).empty
