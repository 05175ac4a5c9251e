"""What a talk and a shared server need, under Streamlit's AppTest: the story page, compiling
from scratch, links that carry a view, Compare's like-with-like defaults, who may delete.

The store fixture (conftest.py) gives each test a fresh store and JAX cache; the helpers are
test_app's; fits are tiny.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pandas as pd
import pyarrow as pa
import pytest
from test_app import CHART, fake_run, open_app, tiny_problem

from core.results import story
from core.results.result import RunResult
from core.spec import DatasetSpec, OptimizerSpec
from pages.ui import clock, display, links, settings
from pages.ui.text import plain


def _chart_data(at) -> list[pd.DataFrame]:
    """Every chart's data (Streamlit ships the rows apart from the spec, as Arrow)."""
    return [pa.ipc.open_stream(named.data.data).read_all().to_pandas()
            for chart in at.get(CHART) for named in chart.proto.datasets]


def _chart_text(at) -> str:
    """Every chart's data, as text."""
    frames = _chart_data(at)
    return pd.concat(frames, ignore_index=True).to_string() if frames else ""


def test_the_story_walks_stored_steps_one_click_at_a_time(store):
    # The story runs the sidebar's problem its own way (the tutorial's optimizer, no tolerance).
    specs = story.specs(settings.DEFAULTS.fit_spec("eager"))
    for index, step in enumerate(story.STEPS[:3]):
        store.add(fake_run(step.strategy, run_s=[2.0, 0.2, 0.05][index], spec=specs[index]))
    at = open_app("pages/story/page.py")
    assert not at.error and at.subheader[0].value.startswith("Step 1 of")
    # The optimizer and its start are both the tutorial's, and the page says so, beside the sidebar's.
    assert any("optimizer, `seed` from its start `seed`, not the sidebar's `preconditioned_lbfgs` from "
               "`log_rates_sd`" in c.value for c in at.caption), [c.value for c in at.caption]
    # Named beside the step too, where the speed-up is read.
    captions = [c.value for c in at.caption]
    assert "from the tutorial, level 0 · strategy `eager` · optimizer `seed` (see below)" in captions
    assert [b.key for b in at.button] == ["story_prev", "story_next", "story_warm"]
    assert at.button(key="story_prev").disabled
    at.button(key="story_next").click().run()
    at.button(key="story_next").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.subheader[0].value == "Step 3 of 7: The whole loop in lax.scan"
    assert at.session_state["story_step"] == 2
    # The big number is the speed-up per iteration since step 1 (2.0 s over its 40 iterations
    # against 0.05 s over 500), on a chart of three bars.
    assert specs[0].iterations == 40 and specs[2].iterations == 500
    assert any(">×500<" in html.proto.body for html in at.get("html"))
    # Timed at different moments: the page says so.
    assert any("Timed apart from step 1" in caption.value for caption in at.caption)
    assert "2 · jit each function" in _chart_text(at) and len(store.list()) == 3  # stored: nothing ran
    assert any("ArrowRight" in html.proto.body for html in at.get("html"))  # the keys are bound
    # scan's step is about what Python launches: it points to the traced iteration.
    assert any("See it happen" in m.value for m in at.markdown)
    assert "One iteration traced" in " ".join(link.proto.label for link in at.get("page_link"))


def test_a_step_that_compiles_nothing_ahead_says_so(store):
    specs = story.specs(settings.DEFAULTS.fit_spec("eager"))
    store.add(dataclasses.replace(fake_run("eager", run_s=2.0, spec=specs[0]), cache="none", compile_s=0.0,
                                  trace_lower_s=0.0))
    at = open_app("pages/story/page.py")
    assert not at.exception
    notes = " ".join(caption.value for caption in at.caption)
    assert "nothing compiled ahead" in notes and "paid once" not in notes


def test_a_step_that_ran_one_program_with_the_next_says_its_figure_pools_both(store):
    specs = story.specs(settings.DEFAULTS.fit_spec("eager"))
    for index, (run_s, program) in enumerate([(2.0, ""), (0.5, "p-jit"), (0.05, "p-scan"), (0.06, "p-scan")]):
        store.add(dataclasses.replace(fake_run(story.STEPS[index].strategy, run_s=run_s, spec=specs[index]),
                                      program=program))
    at = AppTestWithLink({"step": "3"})
    at.switch_page("pages/story/page.py").run()
    assert at.subheader[0].value.startswith("Step 3 of")
    notes = " ".join(caption.value for caption in at.caption)
    assert "Steps 3 and 4 ran one compiled program: their speed-ups pool all their repeats" in notes
    # Its iteration's figure is the pooled one the bar and its whisker draw, said so.
    assert "iterations (the repeats of steps 3 and 4 together)" in notes


def test_a_step_within_noise_of_the_last_names_both_speed_ups(store):
    # Steps 2 and 3 overlap (medians 0.10 and 0.13 s, samples spread over both): one speed,
    # though their speed-ups since step 1 differ; the sentence says both and why.
    specs = story.specs(settings.DEFAULTS.fit_spec("eager"))
    shapes = [(2.0, [1.8, 1.9, 2.0, 2.1, 2.2]), (0.10, [0.05, 0.07, 0.10, 0.15, 0.16]),
              (0.13, [0.06, 0.09, 0.13, 0.17, 0.18])]
    for index, (median, times) in enumerate(shapes):
        run = fake_run(story.STEPS[index].strategy, run_s=median, spec=specs[index])
        store.add(dataclasses.replace(run, run_s_min=min(times), run_s_max=max(times), repeat_times=times,
                                      repeats=len(times), program=f"program-{index}"))
    at = open_app("pages/story/page.py")
    at.button(key="story_next").click().run()
    at.button(key="story_next").click().run()
    assert at.subheader[0].value.startswith("Step 3 of")
    said = next(m.value for m in at.markdown if "The same speed as step 2" in m.value)
    figures = re.findall(r"×[\d.]+", said)
    assert said.startswith("The same speed as step 2: no significant difference (×") and len(set(figures)) == 2, said
    assert any(f">{figures[0]}<" in html.proto.body for html in at.get("html"))  # the big number is "here"


def test_a_step_judged_by_ranges_alone_is_not_said_the_same_speed_as_the_last(store):
    # Runs stored without each repeat (as before they were kept) have only their ranges: too
    # little for a test, and overlapping ranges are no finding of one speed.
    specs = story.specs(settings.DEFAULTS.fit_spec("eager"))
    shapes = [(2.0, 1.9, 2.1), (0.10, 0.06, 0.16), (0.13, 0.07, 0.17)]
    for index, (median, low, high) in enumerate(shapes):
        run = fake_run(story.STEPS[index].strategy, run_s=median, spec=specs[index])
        store.add(dataclasses.replace(run, run_s_min=low, run_s_max=high, repeat_times=[], program=f"program-{index}"))
    at = open_app("pages/story/page.py")
    at.button(key="story_next").click().run()
    at.button(key="story_next").click().run()
    said = next(m.value for m in at.markdown if "step 2" in m.value)
    assert said.startswith("Not told apart from step 2: too few repeats for a test, and their ranges overlap"), said


def test_the_last_step_leads_back_to_the_first(store):
    at = open_app("pages/story/page.py")
    at.session_state["story_step"] = len(story.STEPS) - 1
    at.run()
    assert not at.exception and at.subheader[0].value.startswith(f"Step {len(story.STEPS)} of")
    assert [b.key for b in at.button] == ["story_prev", "story_restart", "story_warm"]  # no dead, greyed Next
    at.button(key="story_restart").click().run()
    assert at.session_state["story_step"] == 0 and at.subheader[0].value.startswith("Step 1 of")
    assert len(store.list()) == 0  # going back runs nothing


def test_a_step_timed_before_step_1_says_what_its_speed_up_waits_for(store):
    specs = story.specs(settings.DEFAULTS.fit_spec("eager"))
    store.add(fake_run("scan", run_s=0.05, spec=specs[2]))
    at = open_app("pages/story/page.py")
    at.session_state["story_step"] = 2
    at.run()
    assert not at.warning and not at.exception
    assert any("once step 1 has run" in info.value for info in at.info)


def test_warming_up_times_every_step_together(store, monkeypatch):
    # On a quiet machine (the suite's load would make the runs "unstable", and the button
    # then offers to time them again: the next test).
    from core.results.result import RunResult

    monkeypatch.setattr(RunResult, "unstable", property(lambda run: ""))
    at = tiny_problem(open_app(), strategies=("scan",))
    at.switch_page("pages/story/page.py").run()
    assert at.button(key="story_warm").label == f"Warm up: time the {len(story.STEPS)} steps together"
    at.button(key="story_warm").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    runs = store.list()
    assert sorted(r.strategy for r in runs) == sorted(s.strategy for s in story.STEPS)
    assert len({r.timed_with for r in runs}) == 1 and runs[0].timed_with  # one group, repeats in turn
    assert at.button(key="story_warm").disabled and at.button(key="story_warm").label.startswith("Warmed up")
    at.button(key="story_next").click().run()
    assert len(store.list()) == len(story.STEPS)  # the next step was stored: shown, not run
    assert not any("Timed apart" in caption.value for caption in at.caption)


def test_steps_timed_on_a_busy_machine_can_be_timed_again(store, monkeypatch):
    # Each step then says "time it again on a quiet machine": the button does that, rather
    # than stand greyed out as "Warmed up" (a dead end).
    from core.results.result import RunResult

    monkeypatch.setattr(RunResult, "unstable", property(lambda run: ""))  # timed on a quiet machine, first
    at = tiny_problem(open_app(), strategies=("scan",))
    at.switch_page("pages/story/page.py").run()
    at.button(key="story_warm").click().run()
    assert at.button(key="story_warm").disabled
    monkeypatch.setattr(RunResult, "unstable", property(lambda run: "unstable: a busy machine"))
    at.run()
    again = at.button(key="story_warm")
    assert not again.disabled and again.label == f"Time the {len(story.STEPS)} steps again"
    again.click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    runs = store.list()
    assert len(runs) == 2 * len(story.STEPS) and len({r.timed_with for r in runs}) == 2


def test_next_from_a_fresh_story_runs_step_1_with_step_2(store):
    at = tiny_problem(open_app(), strategies=("scan",))
    at.switch_page("pages/story/page.py").run()
    at.button(key="story_next").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    runs = store.list()
    assert sorted(r.strategy for r in runs) == sorted(s.strategy for s in story.STEPS[:2])
    assert runs[0].timed_with and runs[0].timed_with == runs[1].timed_with  # timed together
    # Step 2's speed-up since step 1 is there at once, in large type.
    assert any("story-speedup" in html.proto.body for html in at.get("html"))


def test_compiling_from_scratch_on_the_run_page_and_the_cold_compile_beside_a_cached_run(store):
    at = tiny_problem(open_app(), strategies=("scan",))
    at.button(key="run_go").click().run()
    first = store.list()[0]
    # The worker may hold the executable already (an earlier run of the same problem).
    assert first.cache in ("compiled", "disk", "memory") and first.from_scratch == 0
    at.toggle(key="run_cold").set_value(True).run()
    at.button(key="run_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    cold = store.list()[0]
    assert cold.cache == "compiled" and cold.from_scratch == 1 and cold.compile_s > 0
    at.toggle(key="run_cold").set_value(False).run()
    at.button(key="run_go").click().run()
    warm = store.list()[0]
    assert warm.cache == "memory"  # the cold run left its executable in the worker's cache
    assert f"scan: compiled by run #{cold.id}" in _chart_text(at)
    # Not "0 µs": what compiling the loaded program cost when the cold run made it.
    longest = next(m for m in at.metric if m.label == "First compile")  # nothing compiled by this run
    assert longest.proto.delta == "1 loaded from memory"
    assert longest.value == display.duration(cold.trace_lower_s + cold.compile_s)


def test_a_link_sets_the_view_and_the_view_writes_the_link(store):
    at = AppTestWithLink({"strategies": "scan,jit_step,not_a_strategy", "iterations": "12", "precision": "float64",
                          "dataset": "simulated", "n": "not a number", "repeats": "0", "init": "[x](http://e.vil)"})
    assert sorted(at.pills(key="run_strategies").value) == ["jit_step", "scan"]
    assert at.sidebar.number_input(key="sb_iterations").value == 12
    assert at.sidebar.radio(key="sb_precision").value == "float64"
    # A value that does not parse, or is out of range, leaves the default, and the page says so,
    # the link's text shown as text.
    assert at.sidebar.number_input(key="sb_sim_n").value == 1000
    assert at.sidebar.number_input(key="sb_repeats").value == 3
    assert at.sidebar.selectbox(key="sb_init").value == "default"
    (note,) = [toast.value for toast in at.toast]
    assert note == links.refused_note(["n=not a number", "init=[x](http://e.vil)", "repeats=0"])
    assert note.endswith("repeats\\=0 could not be read: their defaults stand.") and "init\\=\\[x\\]" in note
    at.run()
    assert not at.toast  # said once, when the link is opened
    at.sidebar.number_input(key="sb_iterations").set_value(40).run()
    assert at.query_params["iterations"] == "40" and at.query_params["precision"] == "float64"
    assert "repeats" not in at.query_params  # defaults stay out of the address
    # float64 without a tolerance: float64's default, as on the command line.
    assert at.sidebar.number_input(key="sb_tol").value is None and _run_line_tolerance(at) == "1e-09"
    assert "tol" not in at.query_params


def test_a_story_link_past_the_last_step_is_refused_with_the_note_not_clamped():
    (step,) = links.PAGES["story"]
    assert step.read("3") == 2 and step.read(str(len(story.STEPS))) == len(story.STEPS) - 1
    for text in ("0", str(len(story.STEPS) + 1), "99", "abc"):
        with pytest.raises(ValueError):
            step.read(text)


def test_switching_precision_moves_a_default_tolerance_and_keeps_a_chosen_one(store):
    from core.spec import DEFAULTS

    at = open_app("pages/run/page.py")
    tolerance = at.sidebar.number_input(key="sb_tol")
    assert tolerance.value is None and tolerance.proto.placeholder == f"default: {DEFAULTS.tol:g}"
    assert _run_line_tolerance(at) == f"{DEFAULTS.tol:g}"
    # The empty box follows the precision with nothing written to it, so no merged rerun can
    # leave float64 at float32's tolerance.
    at.sidebar.radio(key="sb_precision").set_value("float64").run()
    tolerance = at.sidebar.number_input(key="sb_tol")
    assert tolerance.value is None and tolerance.proto.placeholder == f"default: {DEFAULTS.tol_float64:g}"
    assert _run_line_tolerance(at) == f"{DEFAULTS.tol_float64:g}"
    at.sidebar.radio(key="sb_precision").set_value("float32").run()
    assert _run_line_tolerance(at) == f"{DEFAULTS.tol:g}"
    at.sidebar.number_input(key="sb_tol").set_value(1e-5).run()
    at.sidebar.radio(key="sb_precision").set_value("float64").run()
    assert at.sidebar.number_input(key="sb_tol").value == 1e-5 and _run_line_tolerance(at) == "1e-05"
    assert at.query_params["tol"] == "1e-05" and not at.exception
    at.sidebar.button(key="sb_tol_default").click().run()  # emptied: the default again
    assert at.sidebar.number_input(key="sb_tol").value is None
    assert "sb_tol_default" not in [button.key for button in at.sidebar.button]
    assert _run_line_tolerance(at) == f"{DEFAULTS.tol_float64:g}" and "tol" not in at.query_params


def _run_line_tolerance(at) -> str | None:
    """The tolerance the Run page's settings line says a click runs with."""
    for caption in at.caption:
        if found := re.search(r"stopping at a change of (\S+?)(?: ·|$)", caption.value):
            return found.group(1)
    return None


def AppTestWithLink(params: dict[str, str]):
    from streamlit.testing.v1 import AppTest

    from project import APP

    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_ratios_over_a_baseline_of_another_precision_say_what_they_hold(store):
    eager_id = store.add(fake_run("eager", run_s=2.0))
    f64 = dataclasses.replace(settings.DEFAULTS, precision="float64").fit_spec(
        "scan", dataset=DatasetSpec(kind="oaks"))
    store.add(dataclasses.replace(fake_run("scan", run_s=0.08, spec=f64), precision="float64"))
    at = open_app("pages/compare/page.py")
    assert at.selectbox(key="cmp_baseline").value == eager_id
    said = [plain(c.value) for c in at.caption if "The baseline is float32" in plain(c.value)]
    assert said and "the float64 runs' ratios hold what the precision changes too" in said[0], said
    # One precision: nothing to say.
    at.multiselect(key="cmp_f_precision").select("float32").run()
    assert not [c for c in at.caption if "The baseline is float" in plain(c.value)]


def test_a_link_carries_the_baseline_the_page_settled_on_not_a_label_or_a_stale_pin(store):
    eager_id = store.add(fake_run("eager", run_s=2.0))
    scan_id = store.add(fake_run("scan", run_s=0.05))
    # A widget's state briefly held the baseline box's label once: never written to a link.
    at = AppTestWithLink({"baseline": "#1 eager"})
    at.switch_page("pages/compare/page.py").run()
    assert at.selectbox(key="cmp_baseline").value == eager_id
    assert at.query_params["baseline"] == str(eager_id)
    assert at.query_params["retest"] == str(scan_id)  # the run tested against it travels too
    # Filtered to the scan run, the page pins it at once, and the address says so in the same run.
    assert not any("For the runs now shown" in c.value for c in at.caption)
    at.multiselect(key="cmp_f_strategy").select("scan").run()
    assert at.selectbox(key="cmp_baseline").value == scan_id
    assert at.query_params["baseline"] == str(scan_id)
    # And says that it chose it, and why.
    assert any(f"For the runs now shown, the baseline is #{scan_id} scan" in plain(c.value) for c in at.caption)


def test_compares_filters_travel_in_a_link_apart_from_the_sidebars_settings(store):
    # Bare, Compare's "dataset=oaks x1&optimizer=adam" were the sidebar's own parameters: refused
    # as a dataset, and the next Run's optimizer changed by opening a link to a view.
    for page, params in links.PAGES.items():  # a link names one page: its own and the sidebar's
        names = [param.name for param in (*links.SIDEBAR, *params)]
        assert len(names) == len(set(names)), (page, sorted({name for name in names if names.count(name) > 1}))
    adam = dataclasses.replace(settings.DEFAULTS.fit_spec("scan"), optimizer=OptimizerSpec("adam", lr=0.01))
    store.add(fake_run("scan", spec=adam))
    store.add(fake_run("scan", replicate=10))
    at = AppTestWithLink({"filter_dataset": "oaks x1", "filter_optimizer": "adam", "precision": "float64"})
    at.switch_page("pages/compare/page.py").run()
    assert not at.exception and not at.toast, [t.value for t in at.toast]
    assert at.multiselect(key="cmp_f_dataset").value == ["oaks x1"]
    assert at.multiselect(key="cmp_f_optimizer").value == ["adam"]
    assert at.sidebar.selectbox(key="sb_optimizer").value == settings.DEFAULTS.optimizer
    assert at.sidebar.radio(key="sb_precision").value == "float64"  # the link's own sidebar setting
    assert at.query_params["filter_optimizer"] == "adam" and at.query_params["precision"] == "float64"
    assert any(c.value.startswith("1 of 2 runs shown") for c in at.caption), [c.value for c in at.caption]
    # Filters that match no run: the table empties and the page says so (it raised on int(NaN)).
    at.multiselect(key="cmp_f_dataset").set_value(["oaks x10"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [i.value for i in at.info] == ["No run matches these filters (2 stored)."]
    assert not any(c.value.startswith("0 of 2 runs shown") for c in at.caption)
    at.button(key="cmp_clear_filters").click().run()  # one click back to every run
    assert at.multiselect(key="cmp_f_dataset").value == [] and at.multiselect(key="cmp_f_optimizer").value == []
    assert any(c.value.startswith("2 of 2 runs shown") for c in at.caption), [c.value for c in at.caption]


def test_compare_names_runs_by_what_sets_them_apart_in_its_curves_and_reach(store):
    single = store.add(fake_run("scan"))
    in_float64 = dataclasses.replace(settings.DEFAULTS.fit_spec("scan"), precision="float64")
    double = store.add(fake_run("scan", spec=in_float64))
    at = open_app("pages/compare/page.py")
    assert not at.exception
    drawn = _chart_text(at)
    # Not "#1 scan" beside "#2 scan": the ELBO legends, the reach bars and the ratios say the precision.
    assert f"#{single} scan · float32" in drawn and f"#{double} scan · float64" in drawn
    ratios = [frame for chart in at.get(CHART) for named in chart.proto.datasets
              if "verdict" in (frame := pa.ipc.open_stream(named.data.data).read_all().to_pandas())]
    assert ratios and f"#{double} scan · float64" in set(ratios[0]["run"])


def test_compare_starts_a_cached_programs_curve_where_compiling_it_started(store):
    maker = store.add(dataclasses.replace(fake_run("scan", compile_s=1.5), program="p-scan"))
    loaded = store.add(dataclasses.replace(fake_run("scan_namedtuple", compile_s=0.001), program="p-scan",
                                           cache="disk", compile_count=0))
    at = open_app("pages/compare/page.py")
    assert not at.exception
    frames = [pa.ipc.open_stream(named.data.data).read_all().to_pandas()
              for chart in at.get(CHART) for named in chart.proto.datasets]
    curves = next(frame for frame in frames if "wall_s" in frame and "run_id" in frame)
    starts = curves.groupby("run_id")["wall_s"].min()
    # Not 1.5 s ahead of the run that compiled its program, as a load of a millisecond drew it.
    assert starts[loaded] == pytest.approx(starts[maker])


def test_compare_divides_only_by_a_baseline_of_the_same_size(store):
    for strategy, replicate, run_s in (("eager", 1, 2.0), ("scan", 1, 0.05), ("eager", 100, 200.0),
                                       ("scan", 100, 5.0)):
        store.add(fake_run(strategy, replicate, run_s=run_s))
    at = open_app("pages/compare/page.py")
    newest_eager = [r for r in store.list() if r.strategy == "eager" and r.n == 11600][0]
    assert at.selectbox(key="cmp_baseline").value == newest_eager.id
    like_with_like = ["dataset", "strategy", "optimizer", "init", "precision"]
    assert at.multiselect(key="cmp_group").value == like_with_like
    assert any("2 runs of other problem sizes left out" in c.value for c in at.caption)
    assert any(f"relative to run #{newest_eager.id}" in plain(m.value) for m in at.markdown)
    # Grouped by size first: never x100 runs beside x1 runs in one group. What every run shares
    # (one optimizer, one precision) is said once, not on every label.
    groups = set(pd.concat(_chart_data(at))["group"].dropna())
    assert {"oaks x1 · scan", "oaks x100 · scan", "oaks x1 · eager", "oaks x100 · eager"} <= groups, groups
    assert any("Every run here has the same optimizer" in c.value and "precision (float32)" in c.value
               for c in at.caption)
    # Grouped by optimizer (one value, left out of the labels): no group mixes optimizers.
    assert not any("several optimizers" in c.value for c in at.caption)


def _solved_unsolved_and_eager(store) -> tuple[RunResult, RunResult, RunResult]:
    """A scan run with a time to solution, a jit_step run without (a fixed number of
    iterations), and an eager run with one, stored in that order."""
    solved = dataclasses.replace(fake_run("scan", run_s=0.05), time_to_solution_s=0.05)
    unsolved = fake_run("jit_step", run_s=0.08)
    eager = dataclasses.replace(fake_run("eager", run_s=2.0), time_to_solution_s=2.0)
    for run in (solved, unsolved, eager):
        store.add(run)
    return solved, unsolved, eager


def test_a_missing_value_reads_as_a_dash_not_none(store):
    _solved_unsolved_and_eager(store)  # the jit_step run has no time to solution
    at = open_app("pages/compare/page.py")
    assert at.dataframe and all(frame.proto.placeholder == "—" for frame in at.dataframe)


def test_compare_tests_only_runs_that_have_the_timing_against_the_baseline(store):
    solved, unsolved, baseline = _solved_unsolved_and_eager(store)
    at = open_app("pages/compare/page.py")
    at.selectbox(key="cmp_baseline").set_value(baseline.id).run()
    at.selectbox(key="cmp_metric_ratio").set_value("time_to_solution_s").run()
    assert not at.exception
    tested = at.selectbox(key="cmp_retest")
    assert tested.value == solved.id and len(tested.options) == 1  # the untimed run is not offered


def test_a_new_set_of_runs_gets_a_baseline_with_the_timing_a_pin_among_them_stays(store):
    solved, unsolved, _ = _solved_unsolved_and_eager(store)
    at = open_app("pages/compare/page.py")
    assert at.selectbox(key="cmp_metric_ratio").value == "time_to_solution_s"
    at.selectbox(key="cmp_baseline").set_value(unsolved.id).run()
    assert at.selectbox(key="cmp_baseline").value == unsolved.id  # pinned among the same runs: kept
    at.multiselect(key="cmp_f_strategy").set_value(["jit_step", "scan"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="cmp_baseline").value == solved.id  # not the untimed pin, which draws nothing


def test_a_new_set_of_runs_without_a_time_to_solution_gets_the_timings_they_have(store):
    _, unsolved, _ = _solved_unsolved_and_eager(store)
    at = open_app("pages/compare/page.py")
    assert at.selectbox(key="cmp_metric").value == "time_to_solution_s"
    at.multiselect(key="cmp_f_strategy").set_value(["jit_step"]).run()  # runs of a fixed number of iterations
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="cmp_metric").value == "per_iter_ms"
    # Per iteration: whole runs of different lengths divided by each other say nothing.
    assert at.selectbox(key="cmp_metric_ratio").value == "per_iter_ms"
    assert not any("no time to solution" in c.value for c in at.caption)


def test_compare_draws_the_elbo_curves_of_one_problem_at_a_time(store):
    for strategy, replicate in (("scan", 1), ("eager", 1), ("scan", 100)):
        store.add(fake_run(strategy, replicate))
    x1, x100 = ([r.id for r in store.list() if r.n == n] for n in (116, 11600))

    def curves_drawn(at) -> str:  # the first chart: ELBO against iteration
        return pd.concat([pa.ipc.open_stream(named.data.data).read_all().to_pandas()
                          for named in at.get(CHART)[0].proto.datasets]).to_string()

    at = open_app("pages/compare/page.py")
    assert at.selectbox(key="cmp_elbo_problem").value == x100[0]  # the newest run's problem first
    drawn = curves_drawn(at)
    assert f"#{x100[0]} scan" in drawn and not any(f"#{i} " in drawn for i in x1)
    at.selectbox(key="cmp_elbo_problem").set_value(x1[0]).run()
    drawn = curves_drawn(at)
    assert all(f"#{i} " in drawn for i in x1) and f"#{x100[0]} " not in drawn


def test_compare_draws_one_optimizer_at_a_time_and_names_each_curves_optimizer_when_overlaid(store):
    store.add(fake_run("scan"))
    seeded = settings.DEFAULTS.fit_spec("scan", dataset=DatasetSpec(kind="oaks", replicate=1))
    seeded = dataclasses.replace(seeded, optimizer=OptimizerSpec("seed"), init="seed")
    store.add(fake_run("scan", spec=seeded))
    at = open_app("pages/compare/page.py")

    def drawn() -> str:  # the first chart: ELBO against iteration
        return pd.concat([pa.ipc.open_stream(named.data.data).read_all().to_pandas()
                          for named in at.get(CHART)[0].proto.datasets]).to_string()

    # One optimizer at a time, the newest run's: a 500-iteration curve beside a 49-iteration one
    # flattened the shorter into a stub.
    (seed_id,) = [r.id for r in store.list() if r.optimizer == "seed"]
    (lbfgs_id,) = [r.id for r in store.list() if r.optimizer == "preconditioned_lbfgs"]
    assert at.selectbox(key="cmp_elbo_optimizer").value == "seed"
    assert f"#{seed_id} scan" in drawn() and f"#{lbfgs_id} " not in drawn()
    assert any("1 other optimizer in the box above" in c.value for c in at.caption)
    at.selectbox(key="cmp_elbo_optimizer").set_value("all, overlaid").run()
    assert "scan · seed" in drawn() and "scan · preconditioned_lbfgs" in drawn()
    assert any("2 optimizers here" in c.value and "meet only at the optimum" in c.value for c in at.caption)


def test_deleting_others_runs_can_be_turned_off_while_own_runs_stay_deletable(store, monkeypatch):
    monkeypatch.setenv("PLNLAB_ALLOW_DELETE", "0")
    theirs = fake_run("jit_step")
    store.add(theirs)
    at = tiny_problem(open_app(), strategies=("scan",))
    at.button(key="run_go").click().run()
    mine = [r for r in store.list() if r.strategy == "scan"][0]
    at.switch_page("pages/compare/page.py").run()
    ids = list(at.dataframe[0].value["id"])
    at.session_state["cmp_table_0"] = {"selection": {"rows": [ids.index(theirs.id)], "columns": [], "cells": []}}
    at.run()
    assert "cmp_delete_ask" not in [b.key for b in at.button]
    assert any("turned off on this server" in c.value for c in at.caption)
    at.session_state["cmp_table_0"] = {"selection": {"rows": [ids.index(mine.id)], "columns": [], "cells": []}}
    at.run()
    at.button(key="cmp_delete_ask").click().run()
    at.button(key="cmp_delete_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [r.id for r in store.list()] == [theirs.id]


def test_restoring_anothers_deleted_run_takes_what_deleting_it_takes(store, monkeypatch):
    monkeypatch.setenv("PLNLAB_PASSWORD", "s3cret")
    theirs = fake_run("jit_step")
    store.add(theirs)
    store.delete([theirs.id])
    from streamlit.testing.v1 import AppTest

    from project import APP

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.text_input(key="access_guess").input("s3cret")
    at.button[0].click().run()
    at.switch_page("pages/compare/page.py").run()
    at.multiselect(key="cmp_restore_ids").select(theirs.id).run()
    at.text_input(key="cmp_restore_password").input("wrong")
    at.button(key="cmp_restore").click().run()
    assert "Wrong password. Nothing was restored." in [e.value for e in at.error]
    assert "Wrong password. Nothing was restored." in [t.value for t in at.toast]  # seen wherever the page is scrolled
    assert store.list() == []
    at.text_input(key="cmp_restore_password").input("s3cret")
    at.button(key="cmp_restore").click().run()
    assert not at.exception and [r.id for r in store.list()] == [theirs.id]


def test_a_scaling_sweep_over_two_sizes_times_each_sizes_strategies_together(store):
    # One status box for the whole sweep (two boxes, one per size, drew two Cancel buttons with
    # one key: StreamlitDuplicateElementKey at the second size).
    at = open_app("pages/scaling/page.py")
    at.session_state["sb_iterations"], at.session_state["sb_repeats"] = 5, 1
    at.pills(key="scl_strategies").set_value(["scan", "jit_step"])
    at.pills(key="scl_sizes").set_value([1, 10]).run()
    at.toggle(key="scl_cold").set_value(False).run()
    assert at.button(key="scl_go").label == "Run sweep: 4 runs"
    at.button(key="scl_go").click().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    runs = store.list()
    assert sorted((r.n, r.strategy) for r in runs) == [(116, "jit_step"), (116, "scan"), (1160, "jit_step"),
                                                       (1160, "scan")]
    marks = {n: {r.timed_with for r in runs if r.n == n} for n in (116, 1160)}
    assert all(len(found) == 1 and "" not in found for found in marks.values())  # each size timed together
    assert len({r.timed_with for r in runs}) == 2
    assert at.button(key="scl_go").disabled  # every pair stored


def test_a_scaling_sweep_from_scratch_reruns_stored_pairs(store):
    at = open_app("pages/scaling/page.py")
    at.session_state["sb_iterations"], at.session_state["sb_repeats"] = 5, 1
    at.pills(key="scl_strategies").set_value(["scan"])
    at.pills(key="scl_sizes").set_value([1]).run()
    # The page asks what compiling costs: it compiles from scratch unless told otherwise.
    assert at.toggle(key="scl_cold").value is True
    at.toggle(key="scl_cold").set_value(False).run()
    at.button(key="scl_go").click().run()
    assert at.button(key="scl_go").disabled  # every pair stored
    at.toggle(key="scl_cold").set_value(True).run()
    assert not at.button(key="scl_go").disabled and at.button(key="scl_go").label == "Run sweep: 1 run"
    # The count includes the stored pair: the page says so.
    assert any(c.value.startswith("The pair here is stored already; **Compile from scratch** runs it again.")
               for c in at.caption), [c.value for c in at.caption]
    at.button(key="scl_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    runs = store.list()
    assert [r.from_scratch for r in runs] == [1, 0] and runs[0].cache == "compiled"


def test_the_run_pages_time_chart_shows_the_fits_own_clock_when_compiling_dwarfs_them(store):
    # The first Run on oaks x1: seconds of compile for milliseconds of fit. From a cold start
    # every curve stood upright; the page starts on the fit's own clock and says why.
    for strategy in ("scan", "scan_namedtuple"):
        store.add(fake_run(strategy, compile_s=2.0, run_s=0.03))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan", "scan_namedtuple"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.segmented_control(key="run_clock").value == clock.FIT
    assert any(c.value.startswith(clock.FIT_CLOCK_CAPTION) and "times as long as a whole fit" in c.value
               for c in at.caption), [c.value for c in at.caption]
    # One click back to the cold start, and the caption points to the other clock.
    at.segmented_control(key="run_clock").set_value(clock.COLD).run()
    assert any(c.value.startswith(clock.WALL_CLOCK_CAPTION) and c.value.endswith("shows their shape.")
               for c in at.caption), [c.value for c in at.caption]
    # The phases' legend above the bars, in two columns: below them it fell past a projector's first screen.
    specs = [json.loads(chart.proto.spec) for chart in at.get(CHART)]
    (timing,) = [spec for spec in specs if '"phase"' in json.dumps(spec.get("layer", spec))]
    assert timing["config"]["legend"]["orient"] == "top" and timing["config"]["legend"]["columns"] == 2


def test_the_run_page_says_when_a_cached_programs_compile_is_not_known(store):
    # Loaded from a cache that no stored run made (Under the hood's Inspect, say): no compile
    # time to start its wall-clock curve at, and the caption says so rather than drawing it at 0.
    store.add(dataclasses.replace(fake_run("scan", compile_s=0.001), program="p-unmade", cache="disk",
                                  compile_count=0))
    at = open_app()
    at.pills(key="run_strategies").set_value(["scan"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.value.startswith(clock.WALL_CLOCK_CAPTION) and "scan loaded its program from a cache that no "
               "stored run made: no compile time is known, so its curve starts at the load" in c.value
               for c in at.caption), [c.value for c in at.caption]
    assert any(m.value == "not measured" for m in at.metric)
