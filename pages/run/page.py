"""Run: fit the sidebar's problem under the chosen JIT strategies, time them, compare them."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core import catalog
from core.charts import bars, lines, style
from core.results import compile_cost, headline, outcome, spread
from core.results.frame import results_frame
from core.results.ordering import listed
from core.spec import FitSpec, SpecError
from core.store import cold_compiles
from pages.ui import clock, display, estimates_download, resources, running, settings, state
from pages.ui.text import md, public

# The first chart in the first screen of a projector, however many strategies, with the tie line
# above it (at 160 px the axis title fell 23 px below 768 with three strategies tied).
CHART_HEIGHT = 120
# The phases chart (right, beside the speed-up) grows past that by its rows, its cold compiles
# included: at 20 px a row Vega dropped every other run's name.
ROW_PX = 24
# A run still changing its ELBO by this many times its tolerance when its iterations ran out is
# offered the optimizer that converges beside more iterations.
SWITCH_FACTOR = 1000

st.title("Which JIT strategy is fastest?", anchor=False)

names = [r.name for r in resources.runnables()]
# The tutorial's compiled levels that run the sidebar's default optimizer (jit_per_function
# runs only gradient steps; the Story page walks every level with the tutorial's own), so
# that a first click answers in seconds: level 0, eager, takes tens of seconds at the
# default iterations and waits to be ticked.
state.default("run_strategies",
              settings.DEFAULTS.runnable([n for n in resources.tutorial_levels()[1:] if n in names])[0])

problem = settings.current()
try:
    dataset = problem.dataset_spec()
except SpecError as exc:
    settings.show_refusal(exc)
    st.stop()

# Laid out for a projector (1024x768, sidebar open): the choice, the problem and the Run
# button take a few lines, so that after a run its headline and first chart are in the
# first screen. The strategies sit in a popover whose label names the chosen ones.
# A strategy ticked that the sidebar's optimizer cannot run is named in the label as not run:
# seen at the top, in a line, where a box there pushed the first chart below a projector's fold.
picked, refused = problem.runnable([n for n in names if n in (st.session_state.get("run_strategies") or [])])
pick, go = st.columns([5, 2], vertical_alignment="bottom")
with pick.popover((f"Strategies: {', '.join(picked)}" if picked else "Strategies: choose")
                  + (f" · not run: {', '.join(refused)}" if refused else ""), width="stretch",
                  icon=":material/tune:", help="the ways of compiling the fit to time side by side"):
    chosen = st.pills("Strategies", names, selection_mode="multi", key="run_strategies", persist_state="session",
                      help=resources.strategy_help(), label_visibility="collapsed") or []
    refusal_slot = st.empty()  # why, and how to run them, where they are ticked
    st.markdown(resources.strategy_help())
chosen = [n for n in names if n in chosen]  # teaching order, whatever the click order
runnable, skipped = problem.runnable(chosen)  # e.g. jit_per_function has no pieces for a line search
if skipped:
    refusal_slot.warning(problem.refused_note(skipped), icon=":material/block:")


def say_not_run() -> None:
    """Which ticked strategies were not run, and why, in a box: ticked and silently left out,
    a strategy read as run. Drawn under the charts, which it pushed below the fold at the top."""
    if skipped:
        st.warning(problem.refused_note(skipped), icon=":material/block:")


try:
    specs = [problem.fit_spec(name, dataset=dataset) for name in runnable]
except SpecError as exc:
    st.error(public(exc), icon=":material/error:")
    st.stop()
if not specs:
    st.caption(problem.label)
    say_not_run()
    st.info("Choose at least one strategy to run." if not skipped else
            "Choose a strategy that runs the sidebar's optimizer, or a gradient optimizer in the sidebar.",
            icon=":material/checklist:")
    st.stop()

store = resources.store_or_stop()
running.runs_under_way(store)
# The runs a click just fitted, handed over the rerun that redraws the page: drawn as they came
# back, not read again from the store. The others, the newest stored run of each spec (an
# interrupted run, whose process died mid-run, has no result to show: run that spec again).
handed = {result.spec_key: result for result in st.session_state.pop("run_handed", [])}
stored = {spec.strategy: found[0] for spec in specs
          if (found := [handed[spec.key]] if spec.key in handed else
              store.find_by_spec_key(spec.key, limit=1, interrupted=False, with_elbo=False, imported=False))}
missing = [spec for spec in specs if spec.strategy not in stored]

# One key whatever the label: a click made while the page still showed the label of a
# moment ago (settings just changed) runs what the settings say now, instead of being
# dropped as a click on a button that is no longer drawn.
label = f"Run {len(missing)} strateg{'y' if len(missing) == 1 else 'ies'}" if missing else "Run again"
clicked = go.button(label, type="primary", key="run_go", width="stretch",
                    icon=":material/play_arrow:" if missing else ":material/replay:")
about, cold_slot = st.columns([5, 2], vertical_alignment="top")
with about:
    note = problem.label
    if stored and missing:
        note += (f" · {len(stored)} of these already ran and {'is' if len(stored) == 1 else 'are'} shown below; "
                 f"this runs {', '.join(s.strategy for s in missing)}")
    st.caption(note)
    if specs[0].tol == 0 and not catalog.OPTIMIZERS[specs[0].optimizer.name].set_steps:
        # oaks at tol 0, 150 iterations: 13 ms an iteration, against 0.6 ms to convergence.
        st.caption(":material/info: Tolerance 0 runs every iteration, past convergence too, where a line search "
                   "that finds no step evaluates the ELBO dozens of times before it stays put: the time per "
                   "iteration then counts those searches. A tolerance above 0 times the fit's own iterations.")
    if missing:
        running.say_planned_time(store, missing, problem.counts,
                                 cold=bool(st.session_state.get("run_cold")))  # (its toggle is drawn below)
with cold_slot:
    cold = st.toggle("Compile from scratch", key="run_cold", persist_state="session",
                     help="compile from scratch: skip the in-memory and on-disk compilation caches for this run, so "
                          "the compile time is measured again; the new executables are cached afterwards")

progress, body = running.places(clicked)  # no faded last results under the run
error = None
if clicked:
    todo = missing or specs
    with progress.container():
        # Timed together, their repeats in turn: a moment of load lands on each strategy alike.
        results, error = running.run(todo, counts=problem.counts, cold=cold,
                                     title=f"Running {len(todo)} strateg{'y' if len(todo) == 1 else 'ies'}")
    if results:
        stored.update({r.strategy: r for r in results})
        # What the page shows after this run, those stored before it included: kept whole for when the
        # sidebar moves to other settings (the new runs alone named another fastest).
        st.session_state["run_last_ids"] = [stored[name].id for name in chosen if name in stored]
    if error:
        body = body.container()
    else:  # redraw, so that the button offers "Run again" rather than a finished run
        st.session_state["run_flash"] = running.stored_flash(results)
        st.session_state["run_handed"] = results
        estimates_download.keep(results)
        st.rerun()
with body:
    if error:
        st.error(error, icon=":material/error:")
    running.show_cancelled()
    if flash := st.session_state.pop("run_flash", None):
        text, icon = flash
        st.toast(text, icon=icon)

    shown = [stored[name] for name in chosen if name in stored]
    note = ""
    if not shown and st.session_state.get("run_last_ids"):
        shown = []
        for run_id in st.session_state["run_last_ids"]:
            try:
                shown.append(store.get(run_id))
            except KeyError:  # deleted on the Compare page since
                pass
        last = FitSpec.from_dict(shown[0].spec) if shown else None
        differ = settings.differences(last, shown[0].strategy) if shown else []
        note = ("Your last runs, with settings that differ from the sidebar's now"
                + (f" ({'; '.join(differ)})" if differ else "") + ": "
                + (settings.spec_summary(last, (shown[0].n, shown[0].p)) if shown else ""))
    if not shown:
        say_not_run()
        if problem.counts is not None:
            # What reading the upload found (coefficients with no finite value), before the first
            # Run too: it sat in the sidebar only, below its fold.
            for warning in problem.counts.warnings:
                st.warning(md(warning), icon=":material/warning:")
        st.info("Press **Run** to fit and time the chosen strategies. Each run is stored, so anyone can "
                "compare it later.", icon=":material/play_circle:")
        st.stop()

    # --- results -----------------------------------------------------------------------------
    if note:
        st.caption(note)

    frame = results_frame(shown)
    ok = frame[frame["status"] == "ok"]
    # A diverged fit, or a float32 fit that stopped short, is no dead end: its advice, one click away
    # under Numbers, for the next Run. Offered while the sidebar does not already hold it (a start:
    # for the optimizer that diverged).
    remedies = {(r.remedy, r.optimizer) for r in shown
                if r.remedy is not None and settings.remedy_pending(r.remedy, r.optimizer)}
    # A fit that ran out of iterations is no dead end either: one click puts four times as many in
    # the sidebar, and at least the default's (microcosm 150 x 280 stopped at 50 needed 246: four
    # times 50 would have been a second dead end), and Run then fits again from the start.
    capped = [r for r in display.still_moving(shown) if r.status == "ok"]
    more = min(max(4 * max((r.iterations for r in capped), default=0), settings.DEFAULTS.iterations),
               settings.iterations_cap())
    more_iterations = bool(capped) and more > settings.current().iterations
    # A run whose ELBO still changed by over SWITCH_FACTOR times its tolerance is far from it: four
    # times the iterations of a gradient optimizer rarely get there, the default optimizer in tens.
    converging = settings.FRONT_DOOR.optimizer
    far = sorted({r.optimizer for r in capped if r.optimizer != converging and r.final_change is not None
                  and r.final_change > SWITCH_FACTOR * r.tol})
    switch = bool(far) and settings.current().optimizer != converging
    # Said where the trouble is said, at the top: the buttons sit under Numbers, past the charts,
    # or, where no run finished and the charts have nothing to show, right below.
    where = "right below" if ok.empty else "under Numbers"
    button_hint = (f" A button {where} applies the advice, for the next Run." if remedies
                   else f" Buttons {where} set Iterations to {more:,} or switch to {converging}, for the next "
                        "Run." if more_iterations and switch
                   else f" The button {where} sets Iterations to {more:,}, for the next Run." if more_iterations
                   else "")

    told: set[str] = set()  # warnings said near the top, not said again under Numbers

    def say_data_warnings() -> None:
        for warning in dict.fromkeys(warning for run in shown for warning in run.warnings):
            st.warning(md(warning), icon=":material/warning:")
            told.add(warning)

    def advice_buttons() -> None:
        for remedy, optimizer in sorted(remedies, key=str):
            st.button(settings.remedy_label(remedy, optimizer), key=f"run_remedy_{remedy.setting}_{remedy.value}",
                      icon=":material/healing:", on_click=settings.apply_remedy, args=(remedy.setting, remedy.value),
                      help="what the run's note advises, in the sidebar for the next Run")
        if more_iterations:
            st.button(f"Set Iterations to {more:,}", key="run_more_iterations", icon=":material/add:",
                      on_click=settings.set_iterations, args=(more,),
                      help="the sidebar's Iterations, for the next Run: it fits again from the start")
        if switch:
            st.button(f"Switch to {converging}", key="run_switch_optimizer", icon=":material/swap_horiz:",
                      on_click=settings.apply_remedy, args=("optimizer", converging),
                      help=f"{listed(far)} still changed the ELBO by over {SWITCH_FACTOR:,} times the tolerance: far "
                           f"from converged. {converging} (L-BFGS with a model of the curvature) converges in tens "
                           "of iterations on oaks; the sidebar's optimizer, for the next Run")
    # For each run loaded from a cache, the latest run that compiled its program: what compiling it cost.
    made_by = cold_compiles.makers(store, shown)
    cold_runs = results_frame(list(made_by.values()))
    metrics = st.columns(4)
    if not ok.empty:
        # The headline is what a user waits for: the time until the fit stopped at its tolerance,
        # with the range of its repeats. Time per iteration, beside it, ranks strategies of one
        # algorithm; the speed-up chart below gives their ratios with ranges.
        winner = headline.fastest(ok)
        if winner is not None:
            fastest = winner.run
            # Short, as the metric's column is narrow at 1024 px: a line under the metrics names a tie.
            metrics[0].metric("Fastest to solution", display.duration(fastest["time_to_solution_s"]), winner.brief(),
                              delta_color="off", delta_arrow="off",
                              help="steady-state time from the first iteration to the stop at the tolerance: the "
                                   "median of the repeats; they ranged over "
                                   + display.duration_range(spread.Spread.of_run(fastest),
                                                            like=fastest["time_to_solution_s"]))
        else:
            fastest = ok.loc[ok["run_s"].idxmin()]
            # Said of every run: "scan: no solution" read as that strategy's failure.
            metrics[0].metric("Fastest fit", display.duration(fastest["run_s"]),
                              f"{fastest['strategy']} · none converged", delta_color="off", delta_arrow="off",
                              # Said as the runs were set: "set a tolerance" misled where one was set and not met.
                              help="steady-state time of the fit; "
                                   + ("none met its tolerance within its iterations: more iterations in the sidebar "
                                      "let a fit stop there and time the solution" if fastest.get("tol", 0) > 0 else
                                      "set a tolerance in the sidebar to stop at convergence and time the solution"))
        # The range alone under it (the help names the strategy): with the name it wrapped at 1024 px.
        metrics[1].metric("Per iteration", display.duration(fastest["per_iter_ms"] / 1e3),
                          "repeats " + display.duration_range(spread.Spread.of_run(fastest, "run_s"),
                                                              scale=1 / max(1, fastest["iterations_run"]),
                                                              like=fastest["per_iter_ms"] / 1e3),
                          delta_color="off", delta_arrow="off",
                          help=f"{fastest['strategy']}'s steady-state time per iteration: the median of the repeats, "
                               "and the fastest to the slowest repeat"
                               + (winner.one_speed() if winner is not None else ""))
        cost = compile_cost.longest(ok, cold_runs)
        if cost is not None and cost.seconds is not None:
            metrics[2].metric(cost.label, display.duration(cost.seconds),
                              f"{cost.loaded} loaded from {cost.places}" if cost.loaded else None,
                              delta_color="off", delta_arrow="off",
                              help="trace + lower + XLA compile of these strategies' programs, as it was paid: by this "
                                   "run, or for a program loaded from a cache, by the run on this machine that made it "
                                   f"(the same program, whichever strategy asked for it); the longest: {cost.paid_by}")
        elif cost is not None:
            metrics[2].metric(cost.label, "not measured", f"loaded from {cost.places}", delta_color="off",
                              delta_arrow="off",
                              help="every program came from a cache made before any stored run compiled it: "
                                   "tick Compile from scratch to measure it")
    with metrics[3]:
        st.markdown("Final ELBOs", help="largest relative difference between the strategies' final ELBOs")
        agreement_found = display.agreement_badge(frame)
        # Where the numbers are read, and in this column's spare line: a line of its own under the
        # metrics put the first chart below a projector's fold.
        display.timing_caveat_badge(shown, missing)
    if not ok.empty and winner is not None and winner.ties:
        # The tie's names, across the page: the metric's column is too narrow for them at 1024 px.
        st.caption(winner.sentence(), help="; ".join(f"{tie.strategy}: {tie.why}" for tie in winner.ties))
    elif ok.empty:
        # Nothing finished: why, at the top, not only in each run's notes further down.
        failed = frame.iloc[0]
        others = f" ({len(frame) - 1} more, in the notes below)" if len(frame) > 1 else ""
        st.error(f"No run finished. **{failed['strategy']}** {failed['status']}: {public(failed.get('error') or '')}"
                 f"{others}{'.' + button_hint if button_hint else ''}", icon=":material/error:")
        # Nothing finished, so the charts below show at most a dot each: the advice right under
        # the error, not four screens down under Numbers (nor under the warnings, past the fold).
        advice_buttons()
        # What the data's reading found may be why (covariates nearly combinations of each
        # other diverged in float32, where the error above names float32): beside it, not only
        # under Numbers.
        say_data_warnings()
    elif not ok.empty and winner is None:  # no solution to time: say what the numbers above are instead
        why = (f"None met the tolerance ({fastest['tol']:.0e}) within its iterations" if fastest["tol"] > 0
               else "No tolerance is set (the sidebar's Tolerance)")
        gap = fastest.get("estimated_gap")
        # How far it believes it is: what a user needs to choose more iterations or another optimizer.
        how_far = (f" (checked in float64, {outcome.how_far(gap)})"
                   if fastest["tol"] > 0 and gap is not None and np.isfinite(gap) else "")
        st.caption(f"{why}, so no strategy has a time to solution: **{fastest['strategy']}** ran its "
                   f"{int(fastest['iterations_run']):,} iterations fastest{how_far}, and the charts below compare the "
                   f"fits as run.{button_hint}")

    # Your own counts: what the fit estimates is what you came for, offered at the top; on the
    # built-in data, a demo's, under Numbers (the first chart stays in a projector's first screen).
    uploaded = shown[0].spec.get("dataset", {}).get("kind") == "csv"
    if uploaded:
        if not ok.empty:  # (else said above, beside the error)
            # What reading them found (columns dropped, coefficients with no finite value):
            # read before the estimates, not under Numbers past the charts.
            say_data_warnings()
        estimates_download.offer(shown)

    # The speed-up first: on a projector the charts stack, and it is the one to see at once. Both
    # at a fixed height, so that a run of many strategies still keeps its chart in the first screen.
    left, right = st.columns(2)
    with left:
        # The least compiled strategy run: the same baseline at every click (the slowest run's,
        # noise among near-equal strategies, changed from one run to the next).
        baseline = catalog.least_compiled(frame["strategy"])
        groups = headline.one_program_groups(ok)
        one_program = len(ok) == len(frame) and len(groups) == 1 and len(groups[0].strategies) == len(ok)
        speedup = bars.speedup_bars(frame, baseline=baseline)
        display.chart(speedup if style.is_note(speedup) else speedup.properties(height=CHART_HEIGHT),
                      # No finished run of the baseline: the chart's own note says so, and a caption on
                      # how to read bars that are not there read as a missing chart.
                      None if baseline not in set(ok["strategy"]) else
                      # Every run one program (the first Run's scan strategies): no bar or whisker to explain.
                      f"{', '.join(groups[0].strategies)} compiled to one XLA program, so they run at one speed and no "
                      "bar is drawn: add jit_step or eager to Strategies to see what compiling the whole loop buys."
                      if one_program and len(ok) > 1 else
                      # One run: nothing to divide by; its ratios and tests have nothing to explain.
                      f"{baseline} alone: add another strategy (eager or jit_step) to Strategies to see a speed-up."
                      if len(frame) == 1 else
                      f"How many times faster than {baseline} one full fit runs once compiled: the median of "
                      "repeats, its whisker a 95% interval; the ? says what a bar's label means."
                      # Said where the ratios are read: the badge's help alone went unseen.
                      + (f" {apart}" if (apart := display.timed_apart(shown, missing)) else ""),
                      legend=None,
                      # Looked up, not read: in the caption these made 90 words under a half-width chart.
                      caption_help="- **whisker**: a 95% bootstrap interval of the ratio\n"
                                   "- **within noise**: no significant difference, by a Mann–Whitney U test on "
                                   "the repeats\n"
                                   "- **not told apart**: too few repeats for that test, and their ranges overlap\n"
                                   "- **same program**: XLA compiled one program for both, whose repeats are pooled "
                                   "into one speed-up, so a bar can differ from its own run's time in Numbers")
    with right:
        dashed = bars.cold_compile_rows(cold_runs, frame)
        rows = len(frame) + len(dashed)
        timing = bars.timing_bars(frame, cold_compiles=cold_runs).properties(height=max(CHART_HEIGHT, ROW_PX * rows))
        display.chart(timing,
                      "Seconds per run, by phase: tracing and compiling are paid once; steady state is one full fit, "
                      "its whisker the fastest to the slowest repeat."
                      + (f" {listed(name for name, _ in cut)}: "
                         f"{'bars' if len(cut) > 1 else 'bar'} cut at the dashed line, with "
                         f"{'each' if len(cut) > 1 else 'its'} total beside it (drawn whole, the others would be a few "
                         "pixels wide)." if (cut := bars.cut_runs(frame, cold_runs)) else "")
                      + (" A (cached) run loaded its compiled program instead of compiling it (one already in a "
                         "cache, whichever strategy made it)"
                         + ("; the dashed bar under it is what compiling that program cost the stored run it "
                            "names, which made it here" if not dashed.empty else "") + "."
                         if frame["cache"].isin(["memory", "disk"]).any() else ""), legend="top")
    for group in groups:
        # Said in words too: a chart's "same program" label is easy to miss from the back of a room.
        st.caption(f"**Same program**: {', '.join(group.strategies)} lower to one XLA program (fingerprint "
                   f"`{display.short_program(group.program)}`), so they run at one speed: the differences between "
                   "their timings are noise.")

    # The curves of runs in hand (just fitted) as they came; the others' from the store.
    in_hand = {r.id: np.asarray(r.elbo, float) for r in shown if len(r.elbo)}
    curves = display.elbo_long(shown, curves={**store.curves([r.id for r in shown if r.id not in in_hand]), **in_hand},
                               compiled_when_made=cold_compiles.paid_when_made(made_by))
    left, right = st.columns(2)
    with left:
        display.chart(lines.elbo_curves(curves, x="iteration").properties(height=280),
                      display.same_curve_caption(agreement_found) + lines.coinciding_note(curves))
    with right:
        unpaid = [r.strategy for r in shown if r.cache in ("memory", "disk") and r.id not in made_by]
        # The control under the chart, read before it is drawn: the two charts side by side keep one top.
        drawn = st.container()
        x = clock.choose(curves, key="run_clock")
        with drawn:
            display.chart(lines.elbo_curves(curves, x=x).properties(height=280), clock.caption(x, curves, unpaid))

    say_not_run()
    st.subheader("Numbers")
    dates = sorted({display.when(r.created_at) for r in shown})
    # The store is shared: a visitor who has run nothing sees the newest runs of these settings,
    # made by anyone on any page, and should be told so.
    theirs = sum(not running.ran_here(r.id) for r in shown)
    st.caption(f"{len(shown)} run{'s' * (len(shown) > 1)} · finished {dates[0]}"
               + (f" to {dates[-1]}" if len(dates) > 1 else "") + f" · device: {md(shown[0].device_kind)}"
               + ("" if not theirs else
                  f" · {'all' if theirs == len(shown) else theirs} from the shared store, not run in this session"))
    display.show_runs_table(frame)
    display.show_run_notes(shown, told)
    if not ok.empty:  # else drawn at the top
        advice_buttons()
    if not uploaded:
        estimates_download.offer(shown)
