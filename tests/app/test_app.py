"""The dashboard's Run, Compare and Scaling pages under Streamlit's AppTest.

Each test gets its own run store and JAX cache (set before the AppTest is created) and a
cleared `st.cache_resource`, so sessions and stores never leak between tests. Real fits
use tiny problems (simulated 40 x 5, 6 iterations, 1 repeat).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from specs import tutorial_spec
from streamlit.testing.v1 import AppTest

from core.data.counts import DataError
from core.results import result as result_module
from core.results.result import RunResult
from core.spec import DatasetSpec, FitSpec, OptimizerSpec, cap
from core.store.run_store import RunStore
from pages.ui import settings
from pages.ui.text import plain

from project import APP

TIMEOUT = 120
CHART = "vega_lite_chart"  # the element type of st.altair_chart in Streamlit 1.67


def open_app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    if page is not None:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def tiny_problem(at: AppTest, strategies=("scan", "jit_step")) -> AppTest:
    """Sidebar: simulated 40 x 5, 6 iterations, 1 repeat; the Run page: `strategies`."""
    at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
    at.sidebar.number_input(key="sb_sim_n").set_value(40)
    at.sidebar.number_input(key="sb_sim_p").set_value(5)
    at.sidebar.number_input(key="sb_iterations").set_value(6)
    at.sidebar.number_input(key="sb_repeats").set_value(1)
    at.pills(key="run_strategies").set_value(list(strategies))
    return at.run()


def fake_run(strategy: str = "scan", replicate: int = 1, run_s: float = 0.05, compile_s: float = 0.3,
             created_at: float | None = None, spec: FitSpec | None = None) -> RunResult:
    """A stored-looking run of the sidebar's default settings on oaks x`replicate` (or of `spec`)."""
    spec = spec or settings.DEFAULTS.fit_spec(strategy, dataset=DatasetSpec(kind="oaks", replicate=replicate))
    elbo = [-2.0e5 + 300.0 * i for i in range(spec.iterations)]
    return RunResult(
        spec=spec.to_dict(), spec_key=spec.key, strategy=strategy, dataset=spec.dataset.label,
        n=116 * replicate, p=114, d=1, precision=spec.precision, device="cpu", iterations=spec.iterations,
        optimizer=spec.optimizer.name, lr=spec.optimizer.lr, init=spec.init, repeats=spec.repeats, tol=spec.tol,
        status="ok", error=None,
        diverged_at=None, iterations_run=spec.iterations, transfer_s=0.001, trace_lower_s=0.05,
        compile_s=compile_s, first_call_s=run_s * 1.5, run_s=run_s, run_s_min=run_s, run_s_max=run_s,
        per_iter_ms=1e3 * run_s / spec.iterations, compile_count=1, disk_cache_hits=0, recompile_count=0,
        cache="compiled", final_elbo=elbo[-1], elbo=elbo, devices=1, device_kind="cpu",
        versions={"jax": "0.10.1", "platform": "cpu", "host": "test-host"},
        created_at=created_at or time.time())


@pytest.mark.parametrize("page", ["pages/run/page.py", "pages/compare/page.py", "pages/scaling/page.py"])
def test_pages_render_with_an_empty_store(store, page):
    at = open_app(page)
    assert at.title and at.sidebar.radio(key="sb_dataset").value == "oaks"
    assert not at.error
    if page == "pages/compare/page.py":
        assert at.get("page_link"), "an empty store points to the Run page"


def test_no_message_shows_a_server_path(store, tmp_path, monkeypatch):
    at = open_app()
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "0 stored runs" in captions and str(tmp_path) not in captions
    # A store that cannot be opened: the message says why, not where.
    monkeypatch.setenv("PLNLAB_DB", str(tmp_path / "not-a-folder" / "runs.sqlite3"))
    (tmp_path / "not-a-folder").write_text("a file where a folder should be")
    st.cache_resource.clear()
    at = open_app("pages/compare/page.py")
    shown = " ".join(e.value for e in [*at.error, *at.sidebar.error])
    assert "cannot open the run store" in plain(shown) and str(tmp_path) not in plain(shown)


def test_pages_render_with_stored_runs(store):
    for strategy in ("eager", "scan"):
        store.add(fake_run(strategy, run_s=2.0 if strategy == "eager" else 0.05))
    for page in ("pages/run/page.py", "pages/compare/page.py", "pages/scaling/page.py"):
        at = open_app(page)
        assert not at.error, [e.value for e in at.error]


def test_a_phases_bar_that_dwarfs_the_rest_is_cut_and_the_caption_says_so(store):
    for strategy, seconds in (("eager", 2.0), ("jit_step", 0.06), ("scan", 0.05)):
        store.add(fake_run(strategy, run_s=seconds))
    at = open_app()
    at.pills(key="run_strategies").set_value(["eager", "jit_step", "scan"]).run()
    assert not at.exception, [e.value for e in at.exception]
    said = [c.value for c in at.caption if c.value.startswith("Seconds per run, by phase")]
    assert said and ("eager: bar cut at the dashed line, with its total beside it (drawn whole, the others would "
                     "be a few pixels wide).") in said[0], said


def test_a_plan_past_the_time_budget_is_told_before_run(store, monkeypatch):
    # Three strategies at oaks x1,000 on a 2-core server were offered without a word and
    # stopped at the budget minutes later: the page says so from the server's stored runs.
    monkeypatch.setenv("PLNLAB_MAX_RUN_SECONDS", "300")
    for strategy in ("eager", "jit_step", "scan"):
        store.add(fake_run(strategy, replicate=100, run_s=3.0))  # 6 ms an iteration: 2 minutes a strategy at x1000
    at = open_app()
    at.sidebar.selectbox(key="sb_replicate").set_value(1000).run()
    at.pills(key="run_strategies").set_value(["eager", "jit_step", "scan"]).run()
    assert not at.exception, [e.value for e in at.exception]
    (said,) = [w.value for w in at.warning if "a run may hold the device" in w.value]
    assert said.startswith("About ") and "That passes the 5 minutes a run may hold the device" in said, said
    # One strategy fits in it, at twice the estimate too: said in a caption, not warned.
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert not [w for w in at.warning if "a run may hold the device" in w.value]
    assert [c.value for c in at.caption if c.value.startswith("About ")]


def test_tolerance_zero_with_a_line_search_says_what_its_time_per_iteration_counts(store):
    # oaks at tol 0 and 150 iterations read 13 ms an iteration for scan, against 0.6 ms to
    # convergence: past it, every line search fails through dozens of evaluations.
    at = open_app()
    said = lambda: [c.value for c in at.caption if "Tolerance 0 runs every iteration" in c.value]  # noqa: E731
    assert not said()
    at.sidebar.number_input(key="sb_tol").set_value(0.0).run()
    assert not at.exception, [e.value for e in at.exception]
    assert said() and "the time per iteration then counts those searches" in said()[0]
    at.sidebar.selectbox(key="sb_optimizer").set_value("adam").run()  # set steps: no search to fail
    assert not said()


def test_a_sweep_is_told_its_time_and_a_size_past_the_budget_before_it_runs(store, monkeypatch):
    # The Scaling page's sweep holds the device size after size, each size under its own budget.
    monkeypatch.setenv("PLNLAB_MAX_RUN_SECONDS", "300")
    for strategy in ("jit_step", "scan"):
        store.add(fake_run(strategy, replicate=100, run_s=4.0))  # 8 ms an iteration
    at = open_app("pages/scaling/page.py")
    at.pills(key="scl_strategies").set_value(["jit_step", "scan"])
    at.pills(key="scl_sizes").set_value([10, 1000]).run()
    assert not at.exception, [e.value for e in at.exception]
    (said,) = [w.value for w in at.warning if "a run may hold the device" in w.value]
    assert said.startswith("About ") and "in all by this server's earlier runs, scaled to each size" in said, said
    assert "oaks x1000 passes the 5 minutes a run may hold the device" in said, said
    at.pills(key="scl_sizes").set_value([10, 100]).run()  # within the budget: said, not warned
    assert not [w for w in at.warning if "a run may hold the device" in w.value]
    assert [c.value for c in at.caption if c.value.startswith("About ") and "the longest, oaks x100" in c.value]


def test_final_elbos_equal_to_the_last_bit_are_said_to_agree_exactly(store):
    # One compiled program run by two strategies ends on the same ELBO: "agree to 1e-5"
    # undersold that; runs apart by a rounding still agree to their criterion's limit.
    for strategy in ("scan", "scan_namedtuple"):
        store.add(fake_run(strategy))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan", "scan_namedtuple"]).run()
    assert not at.exception, [e.value for e in at.exception]
    badges = [m.value for m in at.markdown if "badge[" in m.value]
    assert any("agree exactly" in badge for badge in badges), badges
    apart = fake_run("jit_step")
    elbo = apart.elbo[:-1] + [apart.elbo[-1] * (1 + 1e-9)]
    store.add(dataclasses.replace(apart, elbo=elbo, final_elbo=elbo[-1]))
    at.pills(key="run_strategies").set_value(["scan", "jit_step"]).run()
    badges = [m.value for m in at.markdown if "badge[" in m.value]
    assert any("agree to 1e-" in badge for badge in badges) and not any("exactly" in b for b in badges), badges


def test_runs_that_all_diverged_say_why_at_the_top(store):
    run = fake_run("scan")
    store.add(dataclasses.replace(run, status="diverged", error="ELBO not finite at iteration 1; try [this](x)",
                                  diverged_at=1, iterations_run=1, elbo=run.elbo[:1],
                                  warnings=["t.csv: covariate columns 'temp' (2e+07) are nearly combinations"]))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert not at.exception
    (said,) = [e.value for e in at.error]
    assert plain(said) == "No run finished. **scan** diverged: ELBO not finite at iteration 1; try [this](x)"
    assert "\\[this\\]" in said  # the stored text is shown as text
    # What the data's reading warned of, beside the error at the top (it may be why), and not
    # again under Numbers, past the charts.
    warned = [w.value for w in at.warning if "nearly combinations" in w.value]
    assert len(warned) == 1 and plain(at.warning[0].value).startswith("t.csv: covariate columns"), warned
    # The speed-up chart's note says it has nothing to draw; no caption tells how to read its bars.
    other = fake_run("jit_step")
    store.add(dataclasses.replace(other, status="diverged", error="ELBO not finite", diverged_at=1, iterations_run=1,
                                  elbo=other.elbo[:1]))
    at.pills(key="run_strategies").set_value(["jit_step", "scan"]).run()
    assert not at.exception and len(at.error) == 1
    assert not [c.value for c in at.caption if c.value.startswith(("How many times faster", "jit_step alone"))]


@pytest.mark.parametrize("optimizer, init, precision, lr, button, setting, value", [
    ("seed", "log_rates_sd", "float64", 0.01, "Use seed's own start: M = 0, S = 1 (the tutorial's)", "sb_init",
     settings.OPTIMIZERS_INIT),
    ("adam", "log_rates", "float32", 0.01, "Switch to float64", "sb_precision", "float64"),
    ("adam", "log_rates", "float32", 10.0, "Set the learning rate to 0.01", "sb_lr", 0.01),
])
def test_a_diverged_runs_advice_is_one_click(store, optimizer, init, precision, lr, button, setting, value):
    chosen = dataclasses.replace(settings.DEFAULTS, optimizer=optimizer, init=init, precision=precision, lr=lr)
    spec = chosen.fit_spec("scan")
    remedy = result_module.divergence_remedy(precision, optimizer, init, lr)
    run = fake_run("scan", spec=spec)
    store.add(dataclasses.replace(run, status="diverged", error=f"ELBO not finite at iteration 1; {remedy.why}",
                                  diverged_at=1, iterations_run=1, elbo=run.elbo[:1]))
    at = open_app()
    for field in ("optimizer", "init", "precision", "lr"):
        at.session_state[settings.key(field)] = getattr(chosen, field)
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert not at.exception, [e.value for e in at.exception]
    (offered,) = [b for b in at.button if b.key.startswith("run_remedy_")]
    assert offered.label == button
    # Said at the top, where the trouble is said, and the button right below it: nothing finished,
    # so the charts have nothing to show, and under Numbers it sat four screens down.
    (said,) = [e.value for e in at.error]
    assert plain(said).endswith(f"{remedy.why}. A button right below applies the advice, for the next Run.")
    order = [getattr(node, "key", None) or (shown if isinstance(shown := getattr(node, "value", None), str) else "")
             for node in at.main]
    assert order.index(offered.key) < order.index("Numbers")
    offered.click().run()
    assert at.session_state[setting] == value
    assert settings.start_of(at.session_state["sb_optimizer"], at.session_state["sb_init"]) == \
        ("seed" if optimizer == "seed" else init)
    assert not [b for b in at.button if b.key.startswith("run_remedy_")]  # applied: not offered again


def test_the_toast_after_a_run_says_how_many_finished():
    from pages.ui.running import stored_flash

    ok, diverged = fake_run("scan"), dataclasses.replace(fake_run("jit_step"), status="diverged")
    assert stored_flash([ok, ok]) == ("2 runs finished and stored.", ":material/check_circle:")
    assert stored_flash([diverged] * 3)[0] == "3 runs stored; none finished: the page says why not."
    assert stored_flash([ok, diverged])[0] == "2 runs stored; 1 finished: the page says why the others did not."


def test_a_float32_fit_that_stopped_short_offers_float64(store):
    run = fake_run("scan")
    store.add(dataclasses.replace(run, iterations_run=40, elbo=run.elbo[:40], final_elbo=run.elbo[39],
                                  per_iter_ms=1e3 * run.run_s / 40, final_change=6e-8, estimated_gap=2e-5))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert store.list()[0].short and any("stopped short of the optimum" in w.value for w in at.warning)
    (offered,) = [b for b in at.button if b.key.startswith("run_remedy_")]
    assert offered.label == "Switch to float64"
    offered.click().run()
    assert at.session_state["sb_precision"] == "float64" and not at.exception


def test_converged_fits_say_how_far_their_float64_check_puts_them(store):
    for strategy, gap in (("scan", 4e-9), ("jit_step", 2e-7)):  # stopped at the tolerance after 40 iterations
        run = fake_run(strategy)
        store.add(dataclasses.replace(run, iterations_run=40, elbo=run.elbo[:40], final_elbo=run.elbo[39],
                                      per_iter_ms=1e3 * run.run_s / 40, final_change=6e-8, estimated_gap=gap))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan", "jit_step"]).run()
    assert all(run.converged for run in store.list())
    assert any(plain(c.value) == "Checked in float64 where they stopped: jit_step and scan lie at most about 2e-07 "
                                 "(relative) below the optimum, to within a few times." for c in at.caption), \
        [plain(c.value) for c in at.caption if "Checked" in c.value]


def test_a_run_without_a_stopping_test_is_said_so_beside_runs_that_have_one(store):
    seed = dataclasses.replace(settings.DEFAULTS, optimizer="seed")  # an optimizer the PyTorch twin runs
    store.add(fake_run("scan", spec=seed.fit_spec("scan")))
    store.add(fake_run("torch_eager", run_s=0.5, spec=seed.fit_spec("torch_eager")))
    assert store.list()[0].tol == 0 and store.list()[1].tol > 0  # the twin has no stopping test
    at = open_app()
    at.session_state["sb_optimizer"] = "seed"
    at.pills(key="run_strategies").set_value(["scan", "torch_eager"]).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert any(plain(c.value) == "torch_eager ran every one of its iterations, with no stopping test: not judged "
                                 "converged or not." for c in at.caption), [c.value for c in at.caption]


def test_the_note_on_refused_strategies_agrees_with_their_number():
    one = settings.DEFAULTS.refused_note(["torch_eager"])
    two = settings.DEFAULTS.refused_note(["torch_eager", "torch_compile"])
    assert "torch_eager, which runs only" in one and one.endswith("to run it.")
    assert "torch_compile, which run only" in two and two.endswith("to run them.")


def test_new_settings_keep_the_whole_last_result_in_view_not_only_its_new_runs(store):
    # A Run that adds jit_step beside a stored scan shows both; after the sidebar moves on, the
    # page's "last runs" are those two, not the one it ran (which named another fastest).
    at = tiny_problem(open_app(), strategies=("scan",))
    at.button(key="run_go").click().run()
    at.pills(key="run_strategies").set_value(["jit_step", "scan"]).run()
    assert at.button(key="run_go").label == "Run 1 strategy"
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    at.sidebar.number_input(key="sb_iterations").set_value(7).run()
    (said,) = [c.value for c in at.caption if c.value.startswith("Your last runs, with settings that differ")]
    # It names what differs, not only the whole of the runs' settings.
    assert said.startswith("Your last runs, with settings that differ from the sidebar's now (iterations 6 "
                           "(sidebar: 7)): "), said
    assert sorted(at.dataframe[0].value["strategy"]) == ["jit_step", "scan"]


def test_a_strategy_ticked_beside_an_optimizer_it_cannot_run_is_said_not_run_in_a_box(store):
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan", "torch_eager"]).run()  # the default optimizer: profiled
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    note = plain(settings.DEFAULTS.refused_note(["torch_eager"]))
    # Where it is ticked (the popover) and on the page, which shows no run yet; the popover's
    # label, at the top, names it as not run.
    assert [plain(w.value) for w in at.warning] == [note, note]
    assert at.get("popover")[0].proto.popover.label == "Strategies: scan · not run: torch_eager"
    assert [b.label for b in at.button] == ["Run 1 strategy"]


def test_a_strategy_not_run_is_said_under_the_charts_after_a_run(store):
    # At the top, the box pushed the first chart below a projector's fold (1024 x 768).
    at = tiny_problem(open_app(), ("scan", "torch_eager"))
    at.button(key="run_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    order = [type(e).__name__ + ":" + (e.value if isinstance(getattr(e, "value", None), str) else "") for e in at.main]
    box = max(k for k, kind in enumerate(order) if kind.startswith("Warning:Not run: torch_eager"))
    speedup = next(k for k, kind in enumerate(order) if "Speed\\-up over" in kind)
    assert order.index("Subheader:Numbers") == box + 1 and box > speedup
    assert sum(kind.startswith("Warning:Not run") for kind in order) == 2  # and in the popover, first


def test_run_page_runs_stores_and_shows_results(store):
    at = tiny_problem(open_app())
    assert [b.label for b in at.button] == ["Run 2 strategies"]
    at.button(key="run_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    runs = store.list()
    assert sorted(r.strategy for r in runs) == ["jit_step", "scan"]
    assert all(r.dataset == "simulated 40x5 d=1 (seed 0)" and r.iterations == 6 for r in runs)
    assert len(at.get(CHART)) >= 4  # timing bars, speed-up, two ELBO curves
    # The speed-up's baseline is the least compiled strategy run, whichever was slower this time.
    assert any("faster than jit_step one full fit" in c.value for c in at.caption)
    # 6 iterations do not meet the sidebar's tolerance: a fit, not a solution, says so.
    assert [m.label for m in at.metric][:2] == ["Fastest fit", "Per iteration"]
    assert at.metric[0].delta.endswith(" · none converged")
    assert "more iterations in the sidebar" in at.metric[0].help  # a tolerance was set: not "set a tolerance"
    # With how far the fastest believes it is, from the float64 check of where it stopped.
    assert any(c.value.startswith("None met the tolerance (1e-07) within its iterations, so no strategy has a time "
                                  "to solution") and re.search(r"ran its 6 iterations fastest \(checked in float64, "
                                                               r"its gradient puts it about \de-\d\d \(relative\) "
                                                               r"below the optimum, to within a few times\)", c.value)
               and c.value.endswith("fits as run. The button under Numbers sets Iterations to 500, for the next Run.")
               for c in at.caption)
    assert any("-badge[" in m.value and "agree" in m.value for m in at.markdown)
    # Three narrow tables (none scrolls sideways on a projector): timings, compilation, fit.
    table = pd.concat([at.dataframe[0].value] + [at.dataframe[i].value.drop(columns="strategy") for i in (1, 2)],
                      axis=1)
    assert sorted(table["strategy"]) == ["jit_step", "scan"]
    assert {"compile_total_s", "per_iter_ms", "recompile_count", "final_elbo", "status"} <= set(table.columns)
    # The status says what the page says: these 6 iterations did not converge (a finished run is not just "ok").
    assert set(table["status"]) == {"not converged"}
    # The same spec again: the stored runs are shown at once, nothing runs. Out of iterations,
    # not at a dead end: a button offers four times as many, and at least the default's 500.
    assert [b.label for b in at.button] == ["Run again", "Set Iterations to 500"]
    at.run()
    assert not [c.value for c in at.caption if "shared store" in c.value]
    again = tiny_problem(open_app())
    assert [b.label for b in again.button] == ["Run again", "Set Iterations to 500"]
    # A new session has run none of them, and is told whose they are.
    assert any(c.value.endswith("· all from the shared store, not run in this session") for c in again.caption)
    assert len(again.get(CHART)) >= 4 and len(store.list()) == 2
    # A quick hand: new settings, and a click on the button still labelled "Run again",
    # reach the server together: what runs is what the settings say now.
    again.sidebar.number_input(key="sb_iterations").set_value(11)
    again.button(key="run_go").click().run()
    assert not again.exception, [e.value for e in again.exception]
    assert sorted(r.iterations for r in store.list()) == [6, 6, 11, 11]
    # (11 iterations met the tolerance: no button there.) In the first session, one click sets
    # the sidebar's Iterations to the default's 500 (four times the runs' is fewer), and Run
    # offers the new fits.
    assert [b.label for b in again.button] == ["Run again"]
    at.button(key="run_more_iterations").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.number_input(key="sb_iterations").value == 500
    assert [b.label for b in at.button] == ["Run 2 strategies"]


def test_a_gradient_optimizer_far_from_its_tolerance_is_offered_the_one_that_converges(store):
    # adam after 6 iterations still changes the ELBO by far more than 1,000 times its tolerance:
    # four times the iterations rarely get such a fit there, so the converging optimizer is one
    # click away beside them.
    at = open_app()
    at.session_state["sb_optimizer"] = "adam"
    at = tiny_problem(at.run(), strategies=("scan",))
    at.button(key="run_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    run = store.list()[0]
    assert run.optimizer == "adam" and run.final_change > 1000 * run.tol
    assert [b.label for b in at.button] == ["Run again", "Set Iterations to 500", "Switch to preconditioned_lbfgs"]
    assert any("switch to preconditioned_lbfgs, for the next Run" in c.value for c in at.caption)
    at.button(key="run_switch_optimizer").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="sb_optimizer").value == "preconditioned_lbfgs"
    # Run now offers the new fit, and no second switch.
    assert at.button(key="run_go").label == "Run 1 strategy"
    assert "run_switch_optimizer" not in [b.key for b in at.button]


def test_the_run_page_draws_the_runs_a_click_fitted_without_reading_them_back(store, monkeypatch):
    at = tiny_problem(open_app())
    looked_up, curves_read = [], []
    find, curves = RunStore.find_by_spec_key, RunStore.curves
    monkeypatch.setattr(RunStore, "find_by_spec_key",
                        lambda self, key, **kw: looked_up.append(key) or find(self, key, **kw))
    monkeypatch.setattr(RunStore, "curves", lambda self, ids, *a: curves_read.extend(ids) or curves(self, ids, *a))
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    runs = store.list()
    assert len(runs) == 2 and at.button(key="run_go").label == "Run again"
    # Each spec looked up once, before the click's fit; the redraw after it takes the runs it
    # was handed, their curves included.
    assert sorted(looked_up) == sorted(r.spec_key for r in runs) and curves_read == []
    assert sorted(at.dataframe[0].value["strategy"]) == ["jit_step", "scan"] and len(at.get(CHART)) >= 4
    # The next look at the page reads the store again, as any other session's does.
    at.run()
    assert len(looked_up) == 4 and sorted(curves_read) == sorted(r.id for r in runs)


def test_the_run_pages_default_fit_converges_and_heads_with_its_time_to_solution(store):
    at = tiny_problem(open_app(), strategies=("scan",))
    at.sidebar.number_input(key="sb_iterations").set_value(500)
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    (run,) = store.list()
    assert run.optimizer == "preconditioned_lbfgs" and run.iterations_run < 500 and run.converged
    assert run.time_to_solution_s == run.run_s
    headline = at.metric[0]
    assert headline.label == "Fastest to solution" and f"{run.iterations_run:,} it" in headline.delta


def test_a_tie_for_fastest_is_named_under_the_headline(store):
    def solved(strategy, seconds, low, high):
        return dataclasses.replace(fake_run(strategy, run_s=seconds), time_to_solution_s=seconds, run_s_min=low,
                                   run_s_max=high)

    store.add(solved("scan", 0.050, 0.048, 0.053))
    store.add(solved("scan_namedtuple", 0.049, 0.047, 0.052))  # overlaps: tied with the fastest
    store.add(solved("scan_pytree_class", 0.080, 0.079, 0.081))
    at = open_app()
    assert not at.exception, [e.value for e in at.exception]
    assert at.metric[0].label == "Fastest to solution" and at.metric[0].delta == "tied with 1 other"
    named = [c.value for c in at.caption if c.value.startswith("Fastest to solution:")]
    # Ranges of a few repeats, no test: said as not told apart, not as "no significant difference".
    assert named == ["Fastest to solution: **scan_namedtuple**, converged in 500 iterations; not told apart from scan: "
                     "too few repeats for a test, and their ranges overlap (more Repeats in the sidebar can tell them "
                     "apart)."]
    store.add(solved("scan", 0.060, 0.058, 0.061))  # no longer overlapping: a winner, named in the metric
    at = open_app()
    assert at.metric[0].delta.startswith("scan_namedtuple · ")
    assert not any(c.value.startswith("Fastest to solution:") for c in at.caption)


def test_one_program_is_one_speed_on_the_run_page(store):
    """Runs of one compiled program (one fingerprint, one problem, one host) tie whatever their
    repeats say, and the page says they are one program; a different program 20% slower, with
    its repeats kept, is told apart by the test."""
    def solved(strategy, times, program):
        times = [float(t) for t in times]
        run = fake_run(strategy, run_s=statistics.median(times))
        return dataclasses.replace(run, time_to_solution_s=run.run_s, run_s_min=min(times), run_s_max=max(times),
                                   repeat_times=times, program=program)

    store.add(solved("scan", np.linspace(0.050, 0.052, 12), "0123456789abcdef"))
    store.add(solved("scan_namedtuple", np.linspace(0.040, 0.041, 12), "0123456789abcdef"))
    store.add(solved("scan_pytree_class", np.linspace(0.060, 0.062, 12), "fedcba9876543210"))
    at = open_app()
    assert not at.exception, [e.value for e in at.exception]
    assert at.metric[0].delta == "same program as 1 other"
    assert any("scan and scan_namedtuple, one compiled program: one speed" in c.value for c in at.caption)
    assert any(c.value.startswith("**Same program**: scan, scan_namedtuple lower to one XLA program (fingerprint "
                                  "`0123456789`)") for c in at.caption)  # its first 10 digits, as the table


def test_runs_of_one_program_alone_say_why_the_speed_up_chart_has_no_bar(store):
    # The first Run's defaults: the three scan strategies, one program. The chart's usual
    # caption explained whiskers and tests that the chart, rightly, does not draw.
    for strategy in ("scan", "scan_namedtuple", "scan_pytree_class"):
        run = fake_run(strategy)
        store.add(dataclasses.replace(run, time_to_solution_s=run.run_s, program="0123456789abcdef"))
    at = open_app()
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.value.startswith("scan, scan_namedtuple, scan_pytree_class compiled to one XLA program, so they "
                                  "run at one speed and no bar is drawn") for c in at.caption)
    assert not any("bootstrap interval" in c.value for c in at.caption)


def test_one_run_alone_says_what_would_draw_a_speed_up(store):
    store.add(fake_run("scan"))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert any(c.value.startswith("scan alone: add another strategy") for c in at.caption)
    assert not any("bootstrap interval" in c.value for c in at.caption)


def test_stored_run_appears_on_compare_and_can_be_deleted(store):
    kept, dropped = fake_run("scan"), fake_run("jit_step")
    store.add(kept), store.add(dropped)
    at = open_app("pages/compare/page.py")
    assert sorted(at.dataframe[0].value["id"]) == sorted([kept.id, dropped.id])
    assert len(at.get(CHART)) >= 3
    # Two runs set apart by their strategy alone: said in a line, not a table of one column.
    assert any(c.value.startswith("Only the strategy differs") for c in at.caption)
    row = list(at.dataframe[0].value["id"]).index(dropped.id)
    at.session_state["cmp_table_0"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    at.button(key="cmp_delete_ask").click().run()
    # One run, in the singular, and where to restore it from.
    assert [w.value for w in at.warning if w.value.startswith(f"Delete run #{dropped.id} (")] and \
        any("at the bottom of this page" in w.value for w in at.warning), "deleting asks for confirmation first"
    assert len(store.list()) == 2
    at.button(key="cmp_delete_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [r.id for r in store.list()] == [kept.id]
    assert list(at.dataframe[0].value["source"]) == ["measured here"]
    # A delete is soft: the run is listed under Recently deleted and comes back from there.
    at.multiselect(key="cmp_restore_ids").select(dropped.id).run()
    at.button(key="cmp_restore").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert sorted(r.id for r in store.list()) == sorted([kept.id, dropped.id])
    assert store.deleted() == []


def test_compare_shows_the_newest_runs_of_a_large_store_and_filters_reach_the_rest(store):
    """The table (and what is drawn from it) stops at the TABLE_ROWS newest runs, so a page's cost
    does not grow with the store; a filter brings older runs back."""
    for i in range(500):
        store.add(fake_run("jit_step", created_at=1e9 + i))
    old = fake_run("scan", created_at=1e8)
    store.add(old)
    at = open_app("pages/compare/page.py")
    shown = at.dataframe[0].value["id"]
    assert len(shown) == 500 and old.id not in set(shown)
    assert any("newest 500 of 501 matching runs (501 stored)" in c.value for c in at.caption)
    assert len(at.get(CHART)) >= 3
    at.multiselect(key="cmp_f_strategy").set_value(["scan"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert list(at.dataframe[0].value["id"]) == [old.id]
    assert any("1 of 501 runs shown" in c.value for c in at.caption)


def test_compare_filters_by_optimizer_and_start(store):
    """Runs of one strategy by different optimizers and starts: the filters tell them apart."""
    default = fake_run("scan")
    seed = fake_run("scan", spec=dataclasses.replace(default_spec(), optimizer=OptimizerSpec("seed"), init=None))
    adam_from_seed = fake_run("scan", spec=dataclasses.replace(default_spec(), optimizer=OptimizerSpec("adam"),
                                                               init="seed"))
    for run in (default, seed, adam_from_seed):
        store.add(run)
    at = open_app("pages/compare/page.py")
    assert sorted(at.multiselect(key="cmp_f_optimizer").options) == ["adam", "preconditioned_lbfgs", "seed"]
    at.multiselect(key="cmp_f_init").set_value(["seed"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert sorted(at.dataframe[0].value["id"]) == sorted([seed.id, adam_from_seed.id])
    at.multiselect(key="cmp_f_optimizer").set_value(["adam"]).run()
    assert list(at.dataframe[0].value["id"]) == [adam_from_seed.id]
    assert at.query_params["filter_optimizer"] == "adam" and at.query_params["filter_init"] == "seed"
    assert "optimizer" not in at.query_params  # the sidebar's, which a filter leaves alone


def test_compare_offers_no_baseline_among_runs_that_all_diverged(store):
    """Filtered to runs that all diverged, the baseline section says why there is nothing to divide
    by, rather than choosing one of them and refusing it in the chart below."""
    seed = dataclasses.replace(fake_run("scan", spec=dataclasses.replace(default_spec(),
                                                                          optimizer=OptimizerSpec("seed"))),
                               status="diverged", error="ELBO not finite at iteration 1")
    for run in (fake_run("scan"), seed):
        store.add(run)
    at = open_app("pages/compare/page.py")
    assert at.selectbox(key="cmp_baseline").value is not None
    at.multiselect(key="cmp_f_optimizer").set_value(["seed"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(i.value.startswith("None of these runs finished") for i in at.info)
    assert not [box for box in at.selectbox if box.key == "cmp_baseline"]
    assert not [m.value for m in at.markdown if "Pin a finished" in m.value]


def default_spec() -> FitSpec:
    return settings.DEFAULTS.fit_spec("scan", dataset=DatasetSpec(kind="oaks", replicate=1))


def test_compare_imports_a_runs_file_or_says_why_not(store, tmp_path):
    other = RunStore(tmp_path / "other.sqlite3")
    other.add(fake_run("scan")), other.add(fake_run("eager", run_s=2.0))
    other.export(tmp_path / "runs.json")
    at = open_app("pages/compare/page.py")
    at.file_uploader(key="cmp_import").set_value(("broken.json", b'[{"strategy": "scan"', "application/json"))
    at.run()
    at.button(key="cmp_import_go").click().run()
    assert any(plain(e.value).startswith("Nothing imported: cannot read broken.json: ") for e in at.error)
    assert not any("/" in e.value for e in at.error)  # no server folder in the message
    at.file_uploader(key="cmp_import").set_value(("partial.json", b'[{"strategy": "scan"}]', "application/json"))
    at.run()
    at.button(key="cmp_import_go").click().run()
    assert [plain(s.value) for s in at.success] == ["Imported 0 new runs from partial.json."]
    assert [plain(w.value) for w in at.warning] == [
        "Refused 1 of 1 record of partial.json: record 1: missing field 'spec'"]
    assert store.list() == []
    at.file_uploader(key="cmp_import").set_value(
        ("runs.json", (tmp_path / "runs.json").read_bytes(), "application/json"))
    at.run()
    at.button(key="cmp_import_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Imported 2 new runs" in s.value for s in at.success)
    assert sorted(at.dataframe[0].value["strategy"]) == ["eager", "scan"]


def test_scaling_page_uses_stored_runs_without_running(store):
    for replicate, run_s in ((1, 0.02), (10, 0.2), (100, 2.0)):
        store.add(fake_run("scan", replicate, run_s=run_s, compile_s=0.4))
    at = open_app("pages/scaling/page.py")
    assert len(at.get(CHART)) == 3
    text = " ".join(m.value for m in at.markdown)
    # compile 0.45 s; run 0.2 s at n = 1,160 and 2 s at 11,600: log-log crossing near 2,600.
    assert "compilation stops mattering beyond n ≈ 2,600 " in text and "between 1,160 and 11,600" in text
    assert len(store.list()) == 3
    assert not any("Runs at one size so far" in i.value for i in at.info)
    # Compile from scratch (on here by default) runs every pair again: Re-time would do nothing.
    assert at.toggle(key="scl_cold").value and at.checkbox(key="scl_retime").disabled
    at.toggle(key="scl_cold").set_value(False).run()
    assert not at.checkbox(key="scl_retime").disabled


def test_scaling_says_which_ticked_strategies_the_optimizer_leaves_out(store):
    # Each of these refuses the sidebar's optimizer: the sweep leaves them out, and says so.
    at = open_app("pages/scaling/page.py")
    at.pills(key="scl_strategies").set_value(["scan", "scan_analytic", "torch_eager"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [w.value for w in at.warning if w.value.startswith("Not run")] == [
        settings.DEFAULTS.refused_note(["scan_analytic", "torch_eager"])]
    assert at.button(key="scl_go").label == "Run sweep: 3 runs"  # scan at the three sizes ticked


def test_scaling_with_one_size_asks_for_more(store):
    store.add(fake_run("scan", 1, run_s=0.02, compile_s=0.4))
    at = open_app("pages/scaling/page.py")
    # Three sizes are ticked at first: the sweep is what is missing, not the ticks.
    assert any("Runs at one size so far: press **Run sweep** to time the sizes ticked above" in i.value
               for i in at.info)
    at.pills(key="scl_sizes").set_value([1]).run()  # said before a sweep, too
    assert any("Runs at one size so far: tick two or more sizes" in i.value for i in at.info)
    assert any("One size draws no slope: tick two or more." in c.value for c in at.caption)


def device_sweep_page(iterations: int = 5) -> AppTest:
    """Scaling page, More devices tab: devices 1 and 2, oaks x1 on each, x1 per device; tiny runs."""
    at = open_app()
    at.session_state["sb_iterations"], at.session_state["sb_repeats"] = iterations, 1
    at.switch_page("pages/scaling/page.py").run()
    at.pills(key="scl_dev_counts").set_value([1, 2])
    at.selectbox(key="scl_dev_strong").set_value(1)
    return at.selectbox(key="scl_dev_weak").set_value(1).run()


def test_scaling_page_runs_each_device_count_in_its_own_process(store):
    at = device_sweep_page()
    assert at.button(key="scl_dev_go").label == "Run device sweep: 3 runs"  # x1 on 1 device is in both series
    assert any("Simulated devices" in w.value and "share the cores of the worker's machine" in w.value
               for w in at.warning)
    at.button(key="scl_dev_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    runs = store.list()
    assert sorted((r.devices, r.n) for r in runs) == [(1, 116), (2, 116), (2, 232)]
    assert all(r.strategy == "sharded" and r.processes == 1 and r.iterations == 5 and r.status == "ok" for r in runs)
    assert {r.spec.get("devices") for r in runs} == {1, 2}
    # 2 devices compute the same fit as 1 (float32: rounding only).
    strong = {r.devices: r.final_elbo for r in runs if r.n == 116}
    assert strong[2] == pytest.approx(strong[1], rel=1e-4)
    # Stored results are shown at once, and nothing is left to run.
    again = device_sweep_page()
    assert again.button(key="scl_dev_go").label == "Run device sweep" and again.button(key="scl_dev_go").disabled
    assert len(again.get(CHART)) == 2
    captions = " ".join(c.value for c in again.caption)
    assert "n = 116:" in captions and "speed-up" in captions and "116 rows per device" in captions
    assert len(store.list()) == 3


def test_a_failed_device_count_is_shown_and_stops_the_sweep(store, monkeypatch):
    from core.cluster import submit
    from core.run.progress import Progress
    from core.spec import SpecError

    tried = []

    def refused(cluster, function, spec, **options):  # what the worker's task raises, sent back
        tried.append(spec.devices)
        options["on_progress"](Progress("data"))
        raise SpecError("devices = 1, but this process has 0 cpu devices")

    at = device_sweep_page()
    monkeypatch.setattr(submit, "call", refused)
    at.button(key="scl_dev_go").click().run()
    assert not at.exception
    errors = [plain(e.value) for e in at.error]
    assert any(e.startswith("1 device · oaks ×1 (n = 116): devices = 1, but") for e in errors), errors
    assert tried == [1] and store.list() == []  # the first failure stops the sweep
    assert at.button(key="scl_dev_go").label == "Run device sweep: 3 runs"


@pytest.mark.parametrize("page", [None, "pages/story/page.py", "pages/under_the_hood/page.py"])
def test_choosing_csv_invites_an_upload_without_an_error(store, page):
    """Nothing has gone wrong before a file is given: an invitation, never a red box."""
    at = open_app(page)
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    assert not at.exception and not at.error and not at.sidebar.error, [e.value for e in [*at.error, *at.sidebar.error]]
    assert any("Upload a counts CSV" in plain(i.value) for i in [*at.info, *at.sidebar.info])


def test_the_counts_uploader_says_its_cap_in_the_docs_unit(store, monkeypatch):
    # Streamlit writes the uploader's limit in MiB ("47MB" for a cap of 50 MB).
    monkeypatch.setenv("PLNLAB_MAX_CSV_MB", "20")
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    said = at.sidebar.file_uploader(key="sb_upload_counts").help
    assert "At most 20 MB a file (the box says 19MB" in said, said


def test_bad_csv_upload_shows_the_error_and_stores_nothing(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(
        ("bad.csv", b"a,b\n1,-2\n3,4\n", "text/csv"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [plain(e.value) for e in at.error]
    assert any("negative count" in e and "bad.csv" in e for e in errors), errors
    assert not at.get("button") or "run_go" not in [b.key for b in at.button]
    assert store.list() == []


@pytest.mark.parametrize("content, said", [
    (b"a,b\n1," + b"x" * 200_000 + b"\n3,4\n", "line 2 is 200,002 characters long"),
    (b"a,b\n" + b"1,2\n" * 3000 + b"1," + b"x" * 200_000 + b"\n", "(200,000 characters)"),
])
def test_a_csv_with_a_huge_cell_is_refused_with_a_message(store, content, said):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(("huge.csv", content, "text/csv"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [plain(e.value) for e in at.error]
    assert any(said in e and "huge.csv" in e and len(e) < 400 for e in errors), errors
    assert store.list() == []


def run_jit_step(at: AppTest, iterations: int) -> AppTest:
    """Runs jit_step alone for `iterations` (1 repeat) on the sidebar's data; no error shown."""
    at.sidebar.number_input(key="sb_iterations").set_value(iterations)
    at.sidebar.number_input(key="sb_repeats").set_value(1)
    at.run()
    at.pills(key="run_strategies").set_value(["jit_step"]).run()
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def test_good_csv_upload_is_fitted_from_memory(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    rows = "\n".join(f"{i % 3},{i % 5},{(i * 7) % 4}" for i in range(12))
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(
        ("good.csv", f"a,b,c\n{rows}\n".encode(), "text/csv"))
    run_jit_step(at, 5)
    (run,) = store.list()
    tag = FitSpec.from_dict(run.spec).dataset.data_tag
    assert run.dataset == f"csv good.csv #{tag}" and (run.n, run.p) == (12, 3)
    assert run.spec["dataset"]["content_hash"]
    # The settings' line names a CSV's size as it names oaks' (only reading the file tells it).
    said = [element.value for element in [*at.markdown, *at.caption]]
    assert any(f"**csv good.csv \\#{tag}** (n = 12, p = 3)" in line for line in said), said


def test_a_run_on_uploaded_counts_offers_its_estimates_named_by_the_files_columns(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    rows = "\n".join(f"{i % 3 + 1},{i % 5},{(i * 7) % 4}" for i in range(30))
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(("counts.csv", f"a,b,c\n{rows}\n".encode(),
                                                                 "text/csv")).run()
    run_jit_step(at, 40)
    (button,) = [b for b in at.get("download_button") if b.proto.id.endswith("run_estimates_file")] or [None]
    (run,) = store.list()
    # Which run and which data: after other files are chosen the button still offers this run's.
    assert button is not None and plain(button.proto.label) == \
        f"Download run #{run.id}'s estimates (B and Sigma): {run.dataset}"
    (kept,) = at.session_state["run_estimates"].values()
    assert kept.column_names == ("a", "b", "c") and kept.covariate_names == ("(intercept)",)
    assert kept.coef.shape == (1, 3) and kept.covariance.shape == (3, 3)
    # And on the page: B, a row per count column, with each column's latent variance.
    (table,) = [frame for frame in at.dataframe if list(frame.value.index) == ["a", "b", "c"]]
    assert list(table.value.columns) == ["(intercept)", "Sigma (variance)"]
    assert table.value["(intercept)"].tolist() == kept.coef[0].tolist()
    # Another session reads the run from the store, which keeps no estimates: it says how to get them.
    other = open_app()
    other.sidebar.radio(key="sb_dataset").set_value("csv").run()
    other.sidebar.file_uploader(key="sb_upload_counts").set_value(("counts.csv", f"a,b,c\n{rows}\n".encode(),
                                                                    "text/csv")).run()
    other.sidebar.number_input(key="sb_iterations").set_value(40)
    other.sidebar.number_input(key="sb_repeats").set_value(1)
    other.run()
    other.pills(key="run_strategies").set_value(["jit_step"]).run()
    assert not [b for b in other.get("download_button") if b.proto.id.endswith("run_estimates_file")]
    assert any("Run again** to download them" in c.value for c in other.caption)


def test_oaks_with_its_tree_covariate_is_a_sidebar_choice(store):
    at = open_app()
    at.sidebar.selectbox(key="sb_formula").set_value("~ 1 + tree")
    run_jit_step(at, 4)
    (run,) = store.list()
    assert run.dataset == "oaks x1 ~ 1 + tree" and run.d == 3  # the constant, and tree's 3 levels less one


def test_the_start_left_to_its_default_follows_the_optimizer(store):
    at = open_app()
    box = at.sidebar.selectbox(key="sb_init")
    # A fixed text: the browser sends back the text shown, which must name an option after a switch.
    assert box.value == "default" and box.options[0] == "the optimizer's own"
    assert "init: log_rates_sd" in at.sidebar.expander[-1].label
    assert "preconditioned_lbfgs starts from **log_rates_sd**: M = log Y - O, S = 1/√(Y + 1)" in [
        c.value for c in at.sidebar.caption]
    # The tutorial's optimizer steps S by up to 0.1: it starts from its own start, with no write to the box.
    at.sidebar.selectbox(key="sb_optimizer").set_value("seed").run()
    assert at.sidebar.expander[-1].label.endswith("init: seed")
    assert "seed starts from **seed**: M = 0, S = 1 (the tutorial's)" in [c.value for c in at.sidebar.caption]
    run_jit_step(at, 4)
    (run,) = store.list()
    assert (run.optimizer, run.init) == ("seed", "seed")
    # A start chosen is kept when the optimizer changes.
    at.sidebar.selectbox(key="sb_init").set_value("log_counts").run()
    at.sidebar.selectbox(key="sb_optimizer").set_value("preconditioned_lbfgs").run()
    assert "init: log_counts" in at.sidebar.expander[-1].label
    assert not any("starts from" in c.value for c in at.sidebar.caption)


def test_each_sidebar_box_is_sent_with_the_sessions_value_as_its_default(store):
    """The browser draws a box at the default it was sent whenever it has lost the box's own
    state (a page change that moved the box did it): that default is the session's value, not
    the first option or 0 (which the next click then made the setting)."""
    at = open_app()
    at.sidebar.radio(key="sb_precision").set_value("float64").run()
    at.sidebar.number_input(key="sb_iterations").set_value(300).run()
    at.sidebar.selectbox(key="sb_optimizer").set_value("adam").run()
    at.sidebar.selectbox(key="sb_init").set_value("log_counts").run()
    at.sidebar.number_input(key="sb_tol").set_value(0.0).run()  # a link's tol=0: once lost to the default
    for page in ("pages/compare/page.py", "pages/run/page.py"):
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        sent = {key: box.proto for key, box in (("sb_precision", at.sidebar.radio(key="sb_precision")),
                                                ("sb_optimizer", at.sidebar.selectbox(key="sb_optimizer")),
                                                ("sb_init", at.sidebar.selectbox(key="sb_init")))}
        assert {key: proto.options[proto.default] for key, proto in sent.items()} == \
            {"sb_precision": "float64", "sb_optimizer": "adam", "sb_init": "log_counts"}, page
        assert at.sidebar.number_input(key="sb_iterations").proto.default == 300.0
        assert at.sidebar.number_input(key="sb_repeats").proto.default == settings.DEFAULTS.repeats
        assert at.sidebar.number_input(key="sb_tol").proto.default == 0.0 and at.sidebar.number_input(
            key="sb_tol").value == 0.0


def test_a_covariates_upload_is_fitted_and_a_bad_one_names_its_column(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    rows = "\n".join(f"{i % 3},{i % 5},{(i * 7) % 4}" for i in range(12))
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(("counts.csv", f"a,b,c\n{rows}\n".encode(), "text/csv"))
    samples = "\n".join(f"{'xy'[i % 2]},{i / 3:.2f}" for i in range(12))
    at.sidebar.file_uploader(key="sb_upload_covariates").set_value(
        ("samples.csv", f"group,dose\n{samples}\n".encode(), "text/csv"))
    at.sidebar.text_input(key="sb_csv_formula").set_value("~ 1 + group")
    assert any("d = 2 covariates" in c.value for c in at.run().sidebar.caption), [c.value for c in at.sidebar.caption]
    run_jit_step(at, 4)
    (run,) = store.list()
    assert run.d == 2 and run.spec["dataset"]["formula"] == "~ 1 + group"
    at.sidebar.text_input(key="sb_csv_formula").set_value("~ 1 + height").run()
    errors = " ".join(plain(e.value) for e in at.sidebar.error)
    assert "height" in errors, errors
    # The page says which file was refused, not that no counts were given.
    shown = " ".join(plain(e.value) for e in at.main.error)
    assert "the uploaded data cannot be used" in shown and "height" in shown, shown
    # Its results give way to the error: said not to be lost.
    assert any("Nothing stored is lost" in c.value for c in at.main.caption)
    assert len(store.list()) == 1


def test_coefficients_with_no_finite_value_are_said_before_a_run_and_their_rows_come_first(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    # Column c counts only in group x: its group[y] coefficient has no finite value.
    rows = "\n".join(f"{i % 3 + 1},{i % 5},{2 * (i % 4 == 0)}" for i in range(12))
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(("counts.csv", f"a,b,c\n{rows}\n".encode(), "text/csv"))
    samples = "\n".join("xy"[i % 2] for i in range(12))
    at.sidebar.file_uploader(key="sb_upload_covariates").set_value(
        ("samples.csv", f"group\n{samples}\n".encode(), "text/csv"))
    at.run()
    before = [plain(w.value) for w in at.main.warning]
    assert any(w.startswith("group: columns with no count above 0 at a level of it (at 'y': c)") for w in before), \
        before
    run_jit_step(at, 4)
    (table,) = [frame for frame in at.dataframe if "no finite value" in frame.value.columns]
    assert list(table.value.index) == ["c", "a", "b"] and table.value["no finite value"].iloc[0] == "group[y]"


def test_upload_says_how_it_read_the_file_and_takes_the_header_choice(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    # Semicolons, numeric column ids, a column of zeros: as a spreadsheet might save it.
    rows = "\n".join(f"{i % 3};0;{(i * 7) % 4 + 1}" for i in range(60))
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(("ids.csv", f"101;102;103\n{rows}\n".encode(),
                                                                "text/csv"))
    at.run()
    captions = plain(" ".join(c.value for c in at.sidebar.caption))
    # Read as data, line 1 is a sample: n one too many, and the ids' 102 hides the zero column.
    assert "n = 61 rows, p = 3 columns" in captions and "cells separated by semicolons" in captions
    assert "line 1 read as data" in captions and "choose header: yes" in captions
    assert not at.sidebar.warning, [w.value for w in at.sidebar.warning]
    at.sidebar.radio(key="sb_csv_header").set_value("yes").run()
    captions = plain(" ".join(c.value for c in at.sidebar.caption))
    assert "n = 60 rows, p = 2 columns" in captions and "line 1 read as column names (header: yes)" in captions
    assert any("column 2 ('102')" in plain(w.value) for w in at.sidebar.warning)
    at.sidebar.number_input(key="sb_iterations").set_value(5)
    at.sidebar.number_input(key="sb_repeats").set_value(1)
    at.run()
    at.pills(key="run_strategies").set_value(["jit_step"]).run()
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (run,) = store.list()
    assert (run.n, run.p) == (60, 2) and run.spec["dataset"]["header"] == "yes" and len(run.warnings) == 1
    assert any("dropped 1 all-zero column" in plain(w.value) for w in at.warning)  # shown with the results
    # At the top, for the user's own counts: before the charts and the numbers.
    order = [plain(shown) if isinstance(shown := getattr(node, "value", None), str) else "" for node in at.main]
    dropped = [i for i, value in enumerate(order) if "all-zero column" in value]
    assert len(dropped) == 1 and dropped[0] < order.index("Numbers")  # and not said again under Numbers


def test_upload_warns_before_a_run_when_float32_cannot_fit_it():
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    at.sidebar.file_uploader(key="sb_upload_counts").set_value(
        ("big.csv", b"a,b\n1000000000,2\n3,4\n5,6\n", "text/csv"))
    at.run()
    assert any("float32 cannot fit these counts" in plain(w.value) and "choose float64" in plain(w.value)
               for w in at.sidebar.warning)
    at.sidebar.radio(key="sb_precision").set_value("float64").run()
    assert not any("float32" in w.value for w in at.sidebar.warning)


def test_upload_validation_names_the_bad_cell():
    from pages.ui import upload

    with pytest.raises(DataError, match="line 3, column 2"):
        upload.load_upload(b"a,b\n1,2\n3,-4\n", "counts.csv")
    ok = upload.load_upload(b"1,2\n3,4\n", "counts.csv", b"0,0\n0,0\n", "offsets.csv")
    assert (ok.data.n, ok.data.p, ok.offsets_name) == (2, 2, "offsets.csv")
    assert ok.content_hash != upload.load_upload(b"1,2\n3,4\n", "counts.csv").content_hash


# (counts bytes, offsets bytes or None, what the message must say)
BAD_UPLOADS = [
    (b"", None, "is empty"),
    (b"a,b\n", None, "header but no data rows"),
    (b"a,b\n1,x\n3,4\n", None, "non-numeric cell"),
    (b"a,b\n1,-2\n3,4\n", None, "negative count"),
    (b"a,b\n1,2.5\n3,4\n", None, "non-integer count"),
    (b"a,b\n1,\n3,4\n", None, "missing value"),
    (b"a,b\n1,NA\n3,4\n", None, "missing value"),
    (b"a,b\n1,2\n", None, "has 1 row"),
    (b"a\n1\n2\n3\n", None, "has 1 column"),
    (b"a,b\n1,2,3\n4,5\n", None, "every row needs the same number"),
    (b"1,2\n4,5,6\n", None, "not a readable table"),
    (b"\x00\xff\xfe", None, "not readable as UTF-8 text"),
    (b"1,2\n3,4\n", b"0,0,0\n0,0,0\n", "offsets have shape 2 x 3"),
    (b"1,2\n3,4\n", b"0,inf\n0,0\n", "non-finite value"),
    (b"1,2\n3,4\n", b"0,0\n", "has 1 row"),
    (b"1,2\n3,4\n" * 40_000, None, "larger than the 0.2 MB accepted"),
    (b"".join(b"1," * 9_999 + b"0\n" for _ in range(4)), None,
     "10,000 columns; this server fits at most 2,000 (PLNLAB_MAX_COLUMNS)"),
]


def test_every_bad_upload_is_refused_with_its_reason_and_nothing_stored(store, monkeypatch):
    monkeypatch.setenv("PLNLAB_MAX_CSV_MB", "0.2")
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("csv").run()
    good = b"a,b,c\n" + b"".join(f"{i % 3},{i % 5},{i % 4}\n".encode() for i in range(12))
    refused = 0
    for counts, offsets, message in BAD_UPLOADS:
        at.sidebar.file_uploader(key="sb_upload_counts").set_value(("good.csv", good, "text/csv")).run()
        assert not at.error and "Using **good.csv**" in " ".join(c.value for c in at.sidebar.caption)
        at.sidebar.file_uploader(key="sb_upload_counts").set_value(("bad.csv", counts, "text/csv"))
        at.sidebar.file_uploader(key="sb_upload_offsets").set_value(
            None if offsets is None else ("offsets.csv", offsets, "text/csv"))
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        errors = [plain(e.value) for e in at.error]
        assert any(message in e for e in errors), (message, errors)
        # The good file uploaded before is not fitted in the bad one's place.
        assert "run_go" not in [b.key for b in at.button]
        at.sidebar.file_uploader(key="sb_upload_offsets").set_value(None)
        refused += 1
    assert refused == len(BAD_UPLOADS) == 17
    assert store.list() == []


def test_a_server_others_can_reach_without_a_password_or_sso_opens_no_page(store, monkeypatch):
    from streamlit import config

    monkeypatch.delenv("PLNLAB_PASSWORD", raising=False)
    shared = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.run()
        assert not at.exception and not at.sidebar.radio  # nothing but the refusal
        refusal = plain(at.error[0].value)
        assert "every network interface" in refusal and "PLNLAB_PASSWORD_FILE" in refusal
        monkeypatch.setenv("PLNLAB_PASSWORD", "s3cret")
        at.run()
        assert not at.error and at.text_input(key="access_guess")  # with a password: its form
    finally:
        config.set_option("server.address", shared)


def test_a_configured_password_gates_every_page_and_deleting(store, monkeypatch):
    monkeypatch.setenv("PLNLAB_PASSWORD", "s3cret")
    kept, dropped = fake_run("scan"), fake_run("jit_step")
    store.add(kept), store.add(dropped)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception and not at.sidebar.radio  # nothing but the password form
    assert [t.value for t in at.title] == ["PLN JIT Lab"]
    at.text_input(key="access_guess").input("wrong")
    at.button[0].click().run()
    assert [e.value for e in at.error] == ["Wrong password."] and not at.sidebar.radio
    at.text_input(key="access_guess").input("s3cret")
    at.button[0].click().run()
    assert not at.exception and at.sidebar.radio(key="sb_dataset")
    at.switch_page("pages/compare/page.py").run()
    row = list(at.dataframe[0].value["id"]).index(dropped.id)
    at.session_state["cmp_table_0"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    at.button(key="cmp_delete_ask").click().run()
    # Without SSO a session owns its runs: one of another session, which a reload is too, says so.
    assert "(made in another session: without sign-in, a reload starts a new one)" in at.warning[-1].value
    at.text_input(key="cmp_delete_password").input("wrong")
    at.button(key="cmp_delete_yes").click().run()
    assert "Wrong password. Nothing was deleted." in [e.value for e in at.error]
    assert "Wrong password. Nothing was deleted." in [t.value for t in at.toast]  # seen wherever the page is scrolled
    assert len(store.list()) == 2
    at.text_input(key="cmp_delete_password").input("s3cret")
    at.button(key="cmp_delete_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [r.id for r in store.list()] == [kept.id]


def test_password_guesses_are_slowed_after_a_few_wrong_ones(store, monkeypatch):
    from core import access

    monkeypatch.setenv("PLNLAB_PASSWORD", "s3cret")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    errors = []
    for _ in range(10):  # 1 + 2 + ... + 32 + 60 s of waits: the last one lasts a minute
        at.text_input(key="access_guess").input("guess")
        at.button[0].click().run()
        errors.append(at.error[0].value)
    assert errors[:access.FREE_GUESSES - 1] == ["Wrong password."] * (access.FREE_GUESSES - 1)
    assert all("the next try is possible in" in e for e in errors[access.FREE_GUESSES:]), errors
    at.text_input(key="access_guess").input("s3cret")  # right, but too soon: not even checked
    at.button[0].click().run()
    assert not at.sidebar.radio and "the next try is possible in" in at.error[0].value
    # Said as what it was: not checked, not "wrong" (the right one read as refused on its merits).
    assert at.error[0].value.startswith("Too many wrong passwords: this one was not checked")


def _badges(at) -> list[str]:
    return [plain(m.value) for m in at.markdown if "-badge[" in m.value]


def test_runs_of_separate_timings_say_so_beside_the_headline(store):
    for strategy in ("scan", "scan_namedtuple"):
        store.add(dataclasses.replace(fake_run(strategy), timed_with="one-click"))
    at = open_app()
    assert not any("timed apart" in badge for badge in _badges(at))
    store.add(dataclasses.replace(fake_run("scan_pytree_class"), timed_with="another-click"))
    at = open_app()
    (apart,) = [m for m in at.markdown if "timed apart" in m.value]
    assert "Timed in 2 separate groups" in apart.help
    # And under the speed-up chart, whose ratios span the groups: which strategy was timed when.
    (said,) = [plain(c.value) for c in at.caption if "Timed apart" in c.value]
    assert re.search(r"Timed apart: scan and scan_namedtuple at \d\d:\d\d; scan_pytree_class at \d\d:\d\d\. A ratio "
                     r"across them carries each moment's load; Run again times them together\.$", said), said


def test_runs_timed_on_a_busy_machine_say_so_beside_the_headline(store):
    busy = fake_run("scan")
    busy.versions = {**busy.versions, "others_cpu_share": 0.58, "usable_cores": 2}
    store.add(busy)
    at = open_app()
    assert not at.exception
    (badge,) = [m for m in at.markdown if "timings: busy" in m.value]
    assert "other processes used 58% of the cores" in badge.help


def test_a_variable_that_is_no_setting_is_told_in_the_servers_log_once(store, monkeypatch, capfd):
    from pages.ui import resources

    monkeypatch.setenv("PLNLAB_STORE", "/tmp/elsewhere.sqlite3")
    resources.unknown_settings_told.clear()
    open_app()
    open_app()  # a second session: the log has it already
    logged = [line for line in capfd.readouterr().err.splitlines() if "PLNLAB_STORE" in line]
    assert logged == ["PLN JIT Lab: warning: PLNLAB_STORE is no setting of PLN JIT Lab and is ignored (did you mean "
                      "PLNLAB_DB?); docs/configuration.md lists them"], logged
    resources.unknown_settings_told.clear()


def test_a_warning_the_runs_share_is_said_once_naming_them_all(store):
    said = "dropped 1 all-zero column of the counts (column 2): it has no finite optimum"
    for strategy in ("scan", "scan_namedtuple"):
        run = fake_run(strategy)
        run.warnings = [said]
        store.add(run)
    at = open_app()
    shown = [plain(w.value) for w in at.warning if said in plain(w.value)]
    assert shown == [f"scan and scan_namedtuple: {said}"], shown


def test_repeats_that_ranged_widely_say_so_beside_the_headline(store):
    store.add(fake_run("scan"))  # repeats all alike: no caveat
    at = open_app()
    assert not any("timings" in badge for badge in _badges(at)), _badges(at)
    wide = fake_run("scan")
    wide.run_s_min, wide.run_s_max = 0.03, 0.43  # a repeat that caught a moment of load
    store.add(wide)
    at = open_app()
    (badge,) = [m for m in at.markdown if "timings vary" in m.value]
    assert "scan's repeats ranged from 30 ms to 430 ms (14 times)" in badge.help


def test_with_a_password_its_holder_can_cancel_a_run_another_session_started(store, monkeypatch):
    import threading

    from core.run import stored_run
    from core.run.progress import Cancelled

    monkeypatch.setenv("PLNLAB_PASSWORD", "s3cret")
    outcome = []

    def someone_elses_run():
        try:
            stored_run.run_and_store(RunStore(store.path),
                                     tutorial_spec(strategy="eager", iterations=100_000, repeats=1))
            outcome.append("finished")
        except Cancelled:
            outcome.append("cancelled")

    thread = threading.Thread(target=someone_elses_run)
    thread.start()
    while not store.in_flight() and thread.is_alive():
        time.sleep(0.05)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.text_input(key="access_guess").input("s3cret")
    at.button[0].click().run()
    (note,) = store.in_flight()
    # Where it stands, from its device-queue ticket, which carries its note's key.
    listed = [plain(c.value) for c in at.caption if "iterations, started" in c.value]
    assert len(listed) == 1 and re.search(r"; (running|waiting) for \d+ s$", listed[0]), listed
    at.text_input(key="run_cancel_any_password").input("wrong")
    at.button(key=f"run_cancel_any_{note['id']}").click().run()
    assert "Wrong password. Nothing was cancelled." in [e.value for e in at.error]
    assert "Wrong password. Nothing was cancelled." in [t.value for t in at.toast]  # seen wherever the page is scrolled
    assert thread.is_alive()
    at.text_input(key="run_cancel_any_password").input("s3cret")
    at.button(key=f"run_cancel_any_{note['id']}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    thread.join(120)
    assert outcome == ["cancelled"] and store.list() == [] and store.in_flight() == []


def test_an_interrupted_run_is_listed_but_neither_drawn_nor_taken_as_done(store):
    import subprocess
    import sys

    from project import ROOT

    spec = tutorial_spec(dataset=DatasetSpec(kind="oaks"), strategy="scan")
    done = fake_run("jit_step")
    store.add(done)
    # A process that notes a run and dies before it finishes.
    code = (f"import sys, os; sys.path.insert(0, {str(ROOT)!r}); from core.store.run_store import RunStore; "
            f"RunStore({str(store.path)!r}).begin({spec.to_dict()!r}); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    (interrupted,) = [r for r in store.list() if r.status == "interrupted"]
    assert interrupted.spec_key == spec.key and interrupted.n == 116

    at = open_app("pages/compare/page.py")
    assert sorted(at.dataframe[0].value["status"]) == ["interrupted", "ok"]
    assert any("1 interrupted or timed-out run" in c.value for c in at.caption)
    assert not at.exception
    at.switch_page("pages/run/page.py").run()
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert at.button(key="run_go").label == "Run 1 strategy"  # not "Run again": it never finished


def test_a_fit_too_big_for_memory_is_refused_with_the_estimate(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
    at.sidebar.number_input(key="sb_sim_n").set_value(10_000_000)
    at.sidebar.number_input(key="sb_sim_p").set_value(2_000)
    at.sidebar.radio(key="sb_precision").set_value("float64")
    at.pills(key="run_strategies").set_value(["scan"])
    at.run()
    at.button(key="run_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    errors = " ".join(plain(e.value) for e in at.error)
    assert "not enough memory: this fit needs about 8,640 GB" in errors and "GB free" in errors
    assert "float32 or a device with more memory" in errors  # float64 here: float32 would halve it
    assert store.list() == [] and store.in_flight() == []


def test_the_sidebar_says_who_holds_the_device(store, tmp_path, monkeypatch):
    from core.coordination.device_queue import DeviceQueue

    monkeypatch.setenv("PLNLAB_QUEUE_DIR", str(tmp_path / "queue"))
    at = open_app()
    assert any("**cpu** is free" in c.value for c in at.sidebar.caption)
    with DeviceQueue(tmp_path / "queue").hold("cpu", "scan · oaks x1000 · float32", "command line"):
        at.run()
    busy = [plain(c.value) for c in at.sidebar.caption if "busy" in c.value]
    assert busy and "scan · oaks x1000 · float32 (command line, pid" in busy[0] and "running for" in busy[0]


def test_settings_survive_other_pages_and_hidden_widgets(store):
    at = open_app()
    at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
    at.sidebar.number_input(key="sb_sim_n").set_value(123)
    at.sidebar.number_input(key="sb_iterations").set_value(77)
    at.pills(key="run_strategies").set_value(["scan"]).run()
    at.sidebar.radio(key="sb_dataset").set_value("oaks").run()
    at.run()  # two whole runs without the simulated inputs
    at.switch_page("pages/scaling/page.py").run()
    at.run()  # nor the Run page's strategies
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/run/page.py").run()
    at.sidebar.radio(key="sb_dataset").set_value("simulated").run()
    assert at.sidebar.number_input(key="sb_sim_n").value == 123
    assert at.sidebar.number_input(key="sb_iterations").value == 77
    assert at.pills(key="run_strategies").value == ["scan"]

    store.add(fake_run())
    at.switch_page("pages/compare/page.py").run()
    at.multiselect(key="cmp_group").set_value(["precision"]).run()
    at.switch_page("pages/run/page.py").run()
    at.run()
    at.switch_page("pages/compare/page.py").run()
    assert at.multiselect(key="cmp_group").value == ["precision"]


def test_a_rerun_does_not_push_the_settings_back_to_the_browser(store):
    # A value the script sends with set_value replaces the widget's in the browser: sent on
    # every run, a run still drawing an old value would undo what was just typed or clicked.
    at = open_app()
    at.sidebar.number_input(key="sb_iterations").set_value(60).run()
    at.sidebar.radio(key="sb_precision").set_value("float64").run()
    at.run()
    sent = {key: at.sidebar.number_input(key=key).proto.set_value for key in ("sb_iterations", "sb_repeats")}
    sent |= {key: at.sidebar.radio(key=key).proto.set_value for key in ("sb_dataset", "sb_precision")}
    sent["run_strategies"] = at.pills(key="run_strategies").proto.set_value
    assert sent == dict.fromkeys(sent, False)


@pytest.mark.parametrize("typed", [1e9, 0.0, -3.0])
def test_iterations_outside_their_range_keep_the_last_value_and_say_so(store, typed):
    at = open_app()
    at.sidebar.number_input(key="sb_iterations").set_value(60).run()
    at.sidebar.number_input(key="sb_iterations").set_value(typed).run()
    assert not at.exception, [e.value for e in at.exception]
    high = cap("iterations")
    said = [w.value for w in at.sidebar.warning]
    assert said == [f"Iterations: {typed:,.0f} is outside the allowed range, 1 to {high:,}; kept 60."], said
    assert at.sidebar.number_input(key="sb_iterations").value == 60
    at.run()  # said once: the next rerun shows the kept value and no message
    assert not at.sidebar.warning and at.sidebar.number_input(key="sb_iterations").value == 60


def test_a_fraction_of_iterations_keeps_the_last_value_and_says_so(store):
    at = open_app()
    at.sidebar.number_input(key="sb_iterations").set_value(60).run()
    at.sidebar.number_input(key="sb_iterations").set_value(12.5).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert [w.value for w in at.sidebar.warning] == ["Iterations: 12.5 is not a whole number; kept 60."]
    assert at.sidebar.number_input(key="sb_iterations").value == 60
    assert [b.label for b in at.button if b.key == "run_go"]  # the page still offers its Run button
