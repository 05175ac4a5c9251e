"""Text from users and the store is shown as text (`pages.ui.text.md`): no block of markdown
(a setext heading, a list, a thematic break) can start from it, and labels of long file names
stay within what a stored run keeps."""

import pytest

from core.spec import LABEL_NAME_CHARS, DatasetSpec
from pages.ui.text import md, plain


@pytest.mark.parametrize("stored, shown", [
    ("x\n===", r"x \=\=\="),  # a setext heading's underline, on the same line and escaped
    ("x\r\n---", r"x \-\-\-"),
    ("- item", r"\- item"),
    ("+ item", r"\+ item"),
    ("1. item", r"1\. item"),
    ("  3) item", r"  3\) item"),
    ("a-b = c", r"a\-b \= c"),
])
def test_stored_text_starts_no_block_and_reads_back_as_typed(stored, shown):
    assert md(stored) == shown
    assert plain(md(stored)) == " ".join(stored.replace("\r\n", "\n").split("\n"))


def test_a_long_uploaded_file_name_is_cut_in_labels_keeping_its_ends():
    name = "counts_" + "x" * 600 + "_final.csv"
    label = DatasetSpec(kind="csv", counts_path=name).label
    assert len(label) <= len("csv ") + LABEL_NAME_CHARS
    assert label.startswith("csv counts_xxx") and label.endswith("x_final.csv") and "…" in label


def test_eagers_missing_program_reads_as_missing_in_the_runs_tables(monkeypatch):
    # The tables as handed to Streamlit. (Not an AppTest of a function: that makes its script
    # this process's __main__, and a Dask worker spawned later in it runs that script.)
    import pandas as pd

    from pages.ui import display

    drawn = []
    monkeypatch.setattr(display.st, "dataframe", lambda data, **options: drawn.append((data, options)))
    display.show_runs_table(pd.DataFrame({"strategy": ["eager", "scan"], "program": ["", "4a82b59198920044"],
                                          "compile_total_s": [0.0, 1.9]}))
    fit, options = drawn[2]  # timings, compilation, fit (the fingerprint's column, where it fits at 1024 px)
    assert options["placeholder"] == "—"
    assert fit["program"].isna().tolist() == [True, False]  # drawn as the placeholder, not blank


def test_the_estimated_wall_clock_starts_eager_after_the_compiling_its_first_call_did():
    # Eager compiles its operations one by one inside its first call, which compile_s does not
    # hold: left out, its curve started before the compiled strategies' and read as faster.
    from pages.ui import display

    from fake_runs import make_run

    eager = make_run("eager", id=1, trace_lower_s=0.0, compile_s=0.0, first_call_s=5.0, run_s=0.4,
                     iterations_run=40)
    scan = make_run("scan", id=2, trace_lower_s=0.5, compile_s=1.5, first_call_s=0.11, run_s=0.1,
                    iterations_run=40)
    curves = display.elbo_long([eager, scan])
    first = curves.groupby("strategy")["wall_s"].min()
    assert first["eager"] == pytest.approx(4.6 + 0.01)  # 5.0 - 0.4 beyond a steady fit, then one iteration
    assert first["scan"] == pytest.approx(2.0 + 0.01 + 0.0025)
    # A program loaded from a cache starts where compiling it started when it was made: not
    # ahead of the strategies that compiled it, though the load took a millisecond.
    loaded = make_run("scan_namedtuple", id=3, trace_lower_s=0.001, compile_s=0.0, first_call_s=0.11, run_s=0.1,
                      iterations_run=40, cache="disk")
    curves = display.elbo_long([scan, loaded], compiled_when_made={3: 2.0})
    first = curves.groupby("strategy")["wall_s"].min()
    assert first["scan_namedtuple"] == pytest.approx(first["scan"])


def test_the_time_chart_starts_on_the_fits_own_clock_where_compiling_dwarfs_every_fit(monkeypatch):
    # oaks x1's first Run: 2 s of compile for 30 ms of fit, and from a cold start each curve
    # stood upright at 2.1 s on the log axis, its shape lost.
    from pages.ui import clock, display

    from fake_runs import make_run

    scan = make_run("scan", id=2, trace_lower_s=0.3, compile_s=1.8, first_call_s=0.031, run_s=0.03,
                    iterations_run=49)
    eager = make_run("eager", id=1, trace_lower_s=0.0, compile_s=0.0, first_call_s=5.0, run_s=3.0,
                     iterations_run=49)
    curves = display.elbo_long([scan])
    assert curves["fit_s"].min() == pytest.approx(0.03 / 49) and curves["fit_s"].max() == pytest.approx(0.03)
    assert (curves["wall_s"] - curves["fit_s"]).round(9).nunique() == 1  # one start per run
    assert clock.compile_over_fit(curves) == pytest.approx((2.1 + 0.001) / 0.03)
    assert clock.upright(curves) and not clock.upright(display.elbo_long([scan, eager]))

    chosen = {}
    monkeypatch.setattr(clock.st, "session_state", {})
    monkeypatch.setattr(clock.st, "segmented_control", lambda label, options, key, **kw: chosen.setdefault(
        key, clock.st.session_state[key]))
    assert clock.choose(curves, key="k") == "fit_s"  # a visitor who picked nothing sees the shape
    assert clock.choose(display.elbo_long([scan, eager]), key="other") == "wall_s"
    # Until the visitor picks the other clock, it follows the runs shown; then it stays picked.
    drawn = {}
    monkeypatch.setattr(clock.st, "segmented_control", lambda label, options, key, **kw: drawn.setdefault(
        key, clock.st.session_state[key]) and clock.st.session_state[key])
    assert clock.choose(display.elbo_long([scan, eager]), key="k") == "wall_s"
    clock.st.session_state["k"] = clock.FIT  # picked while the cold start was suggested
    assert clock.choose(display.elbo_long([scan, eager]), key="k") == "fit_s"
    assert clock.choose(curves, key="k") == "fit_s" and clock.choose(display.elbo_long([eager]), key="k") == "fit_s"
    said = clock.caption("fit_s", curves)
    assert said.startswith(clock.FIT_CLOCK_CAPTION) and "at least 70 times as long as a whole fit" in said
    # Picked back to the cold start, its caption says why the curves stand upright and where to look.
    assert clock.caption("wall_s", curves).endswith("so the curves stand upright: **the fit alone** shows their shape.")
    assert clock.caption("wall_s", display.elbo_long([scan, eager])) == clock.WALL_CLOCK_CAPTION


def test_a_finished_runs_status_says_how_it_ended():
    from core.results.outcome import finished_as

    assert finished_as("ok", True, False, False) == "converged"
    assert finished_as("ok", False, True, False) == "stalled"
    assert finished_as("ok", False, False, True) == "short"
    assert finished_as("ok", False, False, False) == "not converged"
    assert finished_as("ok", None, False, False) == "ok"  # no tolerance: a fixed number of iterations
    assert finished_as("diverged", False, False, False) == "diverged"


def test_the_runs_table_shows_no_blown_up_elbo_and_a_short_fingerprint():
    # A blow-up's -2.7e+31 came out 31 digits wide and pushed the fit table past the page at
    # 1024 px; the run's note gives it.
    import pandas as pd

    from pages.ui.display import table_view

    frame = pd.DataFrame({"final_elbo": [-32026.3, -2.72e31, float("nan")], "program": ["96b9b619bec94d1c", "", "b2"],
                          "status": ["ok", "diverged", "ok"], "converged": [True, False, None],
                          "stalled": [False] * 3, "short": [False] * 3})
    shown = table_view(frame)
    assert shown["final_elbo"].iloc[0] == -32026.3 and shown["final_elbo"].iloc[1:].isna().all()
    assert pd.isna(shown["program"].iloc[1]) and shown["program"].iloc[2] == "b2"
    # 10 digits: all 16 (and 12, with five strategies) took the fit table past its column at 1024 px.
    assert shown["program"].iloc[0] == "96b9b619be"
    assert list(shown["status"]) == ["converged", "diverged", "ok"]


@pytest.mark.parametrize("state, says", [
    ("agree", None),
    ("differ", "Here they end 2.0e-03 apart (relative), more than the 1e-09 that rounding explains"),
    ("drift", "Here they drift apart by 2e-03 (relative), within what this optimizer's rounding explains"),
])
def test_the_elbo_curves_caption_does_not_promise_one_curve_beside_a_differ_badge(state, says):
    from core.results.agreement import Verdict
    from pages.ui import display

    caption = display.same_curve_caption(Verdict(state, 2e-3, 1e-9, "a reason"))
    assert caption.startswith("Every strategy should trace the same curve: only the compilation differs.")
    assert (says in caption) if says else caption.endswith("differs.")


def test_a_range_under_a_figure_is_in_the_figures_unit():
    from core.results.spread import Spread
    from pages.ui import display

    repeats = Spread(median=0.000581, low=0.000527, high=0.00103)
    assert display.duration(0.000581) == "581 µs"
    # Under "581 µs": "0.527–1.03 ms" read as another unit and wrapped at 1024 px.
    assert display.duration_range(repeats, like=0.000581) == "527–1,030 µs"
    assert display.duration_range(repeats) == "0.527–1.03 ms"
    assert display.duration(1234.0) == "1,234 s"
