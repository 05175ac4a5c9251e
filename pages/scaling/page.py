"""Scaling: how compile and run times grow with n (the oaks replication factor), and with the device count."""

from __future__ import annotations

import math

import streamlit as st

from core.charts import lines
from core.results import headline
from core.results.ordering import listed
from core.spec import OAKS_REPLICATES, OAKS_ROWS, DatasetSpec, SpecError
from pages.scaling import device_count
from pages.ui import display, resources, running, settings, state
from pages.ui.text import public

DEFAULT_STRATEGIES = ("scan", "jit_step", "fori_loop")

st.title("When does compilation stop mattering?", anchor=False)
st.caption("Compilation costs about the same whatever n; the fit itself grows with n. Sweep the oaks data "
           "(each row repeated ×k) to see where the curves cross.")
running.show_cancelled()  # above both tabs: either may have been cancelled


def crossover(runs, strategy: str) -> str:
    """Where the steady-state fit starts to take longer than compiling, for one strategy.

    Uses medians per n of freshly compiled, non-diverged runs; between two sizes the
    crossing is interpolated on log-log axes, where both timings are near straight lines.
    """
    mine = runs[(runs["strategy"] == strategy) & (runs["status"] == "ok")]
    compiled = mine[mine["cache"] == "compiled"]
    if mine.empty:
        return f"**{strategy}**: no finished runs."
    if compiled.empty:
        if (mine["cache"] == "none").all():
            return f"**{strategy}** compiles nothing ahead: there is no compile cost to amortise."
        return (f"**{strategy}**: every run stored here loaded a cached executable, so no compile was measured: "
                "tick **Compile from scratch** and run the sweep again.")
    compile_s = (compiled["trace_lower_s"] + compiled["compile_s"]).groupby(compiled["n"]).median()
    run_s = mine.groupby("n")["run_s"].median()
    sizes = sorted(set(compile_s.index) & set(run_s.index))
    if not sizes:
        return f"**{strategy}**: no size has both a compiled and a timed run."
    gaps = [math.log(run_s[n]) - math.log(compile_s[n]) for n in sizes]
    if gaps[0] > 0:
        return (f"**{strategy}**: a fit already takes longer than compiling at n = {sizes[0]:,} "
                f"({run_s[sizes[0]]:.3g} s vs {compile_s[sizes[0]]:.3g} s).")
    for (n0, g0), (n1, g1) in zip(zip(sizes, gaps), zip(sizes[1:], gaps[1:])):
        if g1 > 0:
            estimate = math.exp(math.log(n0) + g0 / (g0 - g1) * (math.log(n1) - math.log(n0)))
            # Two significant digits: interpolated on a log scale between two sizes a decade
            # apart, "7,459" claimed a precision no sweep has.
            return (f"**{strategy}**: compilation stops mattering beyond n ≈ {float(f'{estimate:.2g}'):,.0f} "
                    f"(between {n0:,} and {n1:,}), where one fit outlasts the {compile_s[n1]:.2g} s compile.")
    last = sizes[-1]
    # Larger sizes that ran from a cached executable have no compile to weigh: named, so that the
    # sentence does not contradict the chart, which draws them.
    beyond = sorted(n for n in run_s.index if n > last)
    unmeasured = (f"; n = {', '.join(f'{n:,}' for n in beyond)} loaded a cached executable, so no compile was "
                  "measured there: tick **Compile from scratch** to weigh it") if beyond else ""
    return (f"**{strategy}**: compiling ({compile_s[last]:.3g} s) still outweighs one fit ({run_s[last]:.3g} s) "
            f"at the largest n with a measured compile, {last:,}{unmeasured}.")


n_tab, devices_tab = st.tabs(["Growing n", "More devices (sharded)"])
# The devices tab first: an empty n sweep below ends the script (st.stop) once drawn.
with devices_tab:
    device_count.show()
with n_tab:
    # The sweep's status box goes here, above the choices: drawn under the button it started
    # below the fold at 1024 x 768, and a sweep seemed to do nothing until one scrolled.
    sweep_slot = st.container()
    names = [r.name for r in resources.runnables()]
    state.default("scl_strategies", [n for n in DEFAULT_STRATEGIES if n in names])
    state.default("scl_sizes", [1, 10, 100])

    chosen = st.pills("Strategies", names, selection_mode="multi", key="scl_strategies", persist_state="session",
                      help=resources.strategy_help()) or []
    chosen = [n for n in names if n in chosen]
    sizes = st.pills("Sizes: oaks rows repeated ×k", list(OAKS_REPLICATES), selection_mode="multi",
                     key="scl_sizes", persist_state="session",
                     format_func=lambda k: f"×{k:,} · n = {OAKS_ROWS * k:,}") or []
    sizes = sorted(sizes)
    st.caption("Uses the sidebar's device, precision, iterations, repeats, optimizer and initialisation; the data "
               "here are always oaks."
               + (" eager is slow: expect minutes at large n." if "eager" in chosen else "")
               + (" ×1,000 (n = 116,000) can take minutes per strategy on a CPU." if 1000 in sizes else "")
               + (" One size draws no slope: tick two or more." if len(sizes) == 1 else ""))
    # As wide as the device-count tab's: at 1024 px a quarter wrapped "Run sweep: 9 runs" onto two lines.
    go, retime_slot = st.columns([2, 3], vertical_alignment="center")

    problem = settings.current()
    chosen, skipped = problem.runnable(chosen)
    if skipped:  # said as on Run: the sweep leaves them out
        st.warning(problem.refused_note(skipped), icon=":material/block:")
    try:
        grid = [problem.fit_spec(name, dataset=DatasetSpec(kind="oaks", replicate=k))
                for k in sizes for name in chosen]
    except SpecError as exc:
        st.error(public(exc), icon=":material/error:")
        st.stop()

    store = resources.store_or_stop()
    keys = {spec.key for spec in grid}
    # This page asks what compiling costs: a sweep compiles from scratch unless told otherwise, or
    # a warm cache leaves it nothing to answer with.
    state.default("scl_cold", True)
    with retime_slot:
        # Compiling from scratch runs the stored pairs again anyway: the box would do nothing then.
        compiling = bool(st.session_state.get("scl_cold"))
        retime = st.checkbox("Re-time (strategy, size) pairs already in the store", key="scl_retime",
                             persist_state="session", disabled=compiling,
                             help="**Compile from scratch** (on) runs every pair again, compiling each anew"
                             if compiling else "run stored pairs again with the programs already compiled")
        retime = retime and not compiling
        cold = st.toggle("Compile from scratch", key="scl_cold", persist_state="session",
                         help="skip the in-memory and on-disk compilation caches for these runs, so each compile "
                              "is measured; the new executables are cached afterwards")
    frame = store.frame()
    stored_keys = set(frame.loc[frame["status"] != "interrupted", "spec_key"]) if not frame.empty else set()
    # Compiling from scratch is measuring again: it runs the stored pairs too.
    todo = grid if retime or cold else [spec for spec in grid if spec.key not in stored_keys]
    label = f"Run sweep: {len(todo)} run{'s' * (len(todo) != 1)}" if todo else "Run sweep"
    stored_here = sum(spec.key in stored_keys for spec in grid)
    if stored_here and (retime or cold):  # the button's count includes stored pairs: say so, and how to skip them
        why = [name for name, on in (("Re-time", retime), ("Compile from scratch", cold)) if on]
        pairs = ("The pair here is" if len(grid) == 1 else "Every pair here is" if stored_here == len(grid)
                 else f"{stored_here} of the {len(grid)} pairs here {'is' if stored_here == 1 else 'are'}")
        st.caption(f"{pairs} stored already; **{'** and **'.join(why)}** "
                   f"run{'s' * (len(why) == 1)} {'it' if stored_here == 1 else 'them'} again"
                   + (f" (turn {'it' if len(why) == 1 else 'both'} off to run only the {len(grid) - stored_here} left)."
                      if len(grid) > stored_here else "."))
    elif stored_here and todo:
        st.caption(f"{stored_here} of the {len(grid)} pairs here {'is' if stored_here == 1 else 'are'} stored "
                   "already and left out: tick **Re-time** to run them again.")
    if todo:
        running.say_planned_time(store, todo, sweep=True, cold=cold)
    clicked = go.button(label, type="primary", key="scl_go",
                        disabled=not todo, icon=":material/play_arrow:", width="stretch",
                        help=("runs every (strategy, size) pair of the grid, the stored ones again" if todo and
                              (retime or cold) else "runs every (strategy, size) pair of the grid not yet in the store"
                              if todo else "every pair is already in the store: tick Re-time to run them again"))
    if clicked:
        # The status box is drawn above the choices (sweep_slot); a user scrolled down to this
        # button saw only the faded page for the whole sweep. A toast shows wherever one is.
        st.toast(f"Sweep of {len(todo)} run{'s' * (len(todo) != 1)} started: its progress and Cancel are at the top "
                 "of this tab.", icon=":material/arrow_upward:")
        # One call: each size's strategies timed together, their repeats in turn (core.run.batches),
        # so that ratios between strategies at one size carry no load of another moment.
        with sweep_slot:
            results, error = running.run(todo, labels=[f"{spec.strategy} · n = {OAKS_ROWS * spec.dataset.replicate:,}"
                                                       for spec in todo],
                                         cold=cold, title=f"Sweep of {len(todo)} run{'s' * (len(todo) != 1)}")
        if error:
            sweep_slot.error(error, icon=":material/error:")
            frame = store.frame()
        else:  # redraw, so that the button counts what is left to run
            st.session_state["scl_flash"] = f"Sweep done: {len(results)} run{'s' * (len(results) != 1)} stored."
            st.rerun()
    if flash := st.session_state.pop("scl_flash", None):
        st.toast(flash, icon=":material/check_circle:")

    # Interrupted runs have no timings to draw.
    runs = frame[frame["spec_key"].isin(keys) & (frame["status"] != "interrupted")] if not frame.empty else frame
    if runs.empty:
        st.info("None of these (strategy, size) pairs has run with the sidebar's settings yet: press **Run sweep**.",
                icon=":material/play_circle:")
        st.stop()

    st.divider()
    st.caption(f"{len(runs)} stored run{'s' * (len(runs) != 1)} with these settings "
               f"({runs['n'].nunique()} size{'s' * (runs['n'].nunique() != 1)}); "
               "medians where a pair ran more than once. "
               + problem.label.split(" · ", 1)[1])
    if runs["n"].nunique() < 2:  # one point per strategy draws no slope
        # With sizes already ticked (three are, at first), asking to tick them read as a dead end.
        ask = ("press **Run sweep** to time the sizes ticked above" if len(sizes) >= 2
               else "tick two or more sizes above and **Run sweep**")
        st.info(f"Runs at one size so far: {ask} to see how the timings grow with n.", icon=":material/trending_up:")
    # Strategies of one program draw one line: the others' lines lie under it, unseen.
    hidden = "".join(f" {listed(group)} ran one compiled program at every size: one speed, their lines drawn over "
                     "one another." for group in headline.one_program_at_every_size(runs))
    left, right = st.columns(2)
    with left:
        display.chart(lines.scaling_lines(runs, "per_iter_ms").properties(height=280),
                      "Milliseconds per iteration at steady state, log-log: a slope of 1 means time grows like n. "
                      "Whiskers: the fastest to the slowest repeat." + hidden)
    with right:
        display.chart(lines.scaling_lines(runs, "run_s").properties(height=280),
                      "Seconds for one whole fit (all iterations) at steady state, log-log. Whiskers: the "
                      "fastest to the slowest repeat." + hidden)

    display.chart(lines.compile_vs_run(runs).properties(height=340),
                  "Dashed: trace+lower+compile of runs that compiled, solid: one steady-state fit. Where solid "
                  "rises above dashed, one fit takes longer than compiling it: from there on compiling is the "
                  "smaller part of a run."
                  + (" Hollow diamonds: runs that loaded a cached executable instead (a cache load, not a compile)."
                     if lines.draws_cache_loads(runs) else ""), legend="right")
    with st.container(border=True):
        st.subheader("Compilation stops mattering…")
        for name in [n for n in names if n in set(runs["strategy"])]:
            st.markdown(crossover(runs, name))

    with st.expander("The runs behind these charts"):
        table = runs.sort_values(["strategy", "n"])
        display.show_runs_table(table.assign(strategy=table["strategy"] + " · n = " + table["n"].map("{:,}".format)))
