"""The Under-the-hood page's timeline: one iteration of eager, jit_step and scan, traced."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from core.charts import timeline as timeline_chart
from core.cluster import submit, tasks
from core.inspect import trace_findings
from core.inspect.trace_findings import STRATEGIES, Timeline
from core.spec import FitSpec, refusal
from pages.ui import display, resources, running
from pages.ui.display import guarded
from pages.ui.text import md

EXPLAINED = (
    "A few iterations of each strategy on the sidebar's problem, under JAX's profiler. Each row is one "
    "iteration's worth of its run: the executables the host **launches** above, XLA's **ops** below, and in grey "
    "the **gaps** where no XLA program runs (Python, dispatching, waiting). Nothing traced is stored as a run.")


def trace(spec: FitSpec, counts, on_progress=None) -> Timeline:
    """`core.inspect.timeline.trace_strategies` on a worker serving `spec.device`."""
    return submit.call(resources.cluster(), tasks.timeline, spec, counts, STRATEGIES, platform=spec.device,
                       label=f"timeline · {spec.dataset.label}", owner="dashboard", on_progress=on_progress)


def problem_key(spec: FitSpec) -> str:
    """The traced problem's key, whichever strategy the page's box names (every one is traced)."""
    return dataclasses.replace(spec, strategy=STRATEGIES[-1]).key


def show_timeline(spec: FitSpec | None, counts) -> None:
    """The button, and the last timeline traced in this session."""
    st.header("Inside one iteration: a timeline", anchor="timeline")
    st.markdown(EXPLAINED)
    # The button names what will be traced: a strategy that cannot run the sidebar's optimizer
    # (jit_per_function runs the gradient optimizers only) is left out, and the result says why.
    traced_here = [name for name in STRATEGIES if spec is None or refusal(name, spec.optimizer.name) is None]
    clicked = st.button(f"Trace {', '.join(traced_here)}", key="uth_trace", icon=":material/timeline:",
                        disabled=spec is None)
    if clicked and spec is not None:
        waiting = st.empty()

        def work():
            resources.check_device(spec.device)
            return trace(spec, counts, running.queue_notice(waiting))

        with st.spinner(f"Tracing {len(traced_here)} strategies on {spec.dataset.label} (compiling each first)…"):
            traced = guarded(work, "Tracing the strategies")
        waiting.empty()
        if traced is not None:
            st.session_state["uth_timeline"] = (problem_key(spec), traced)
    shown = st.session_state.get("uth_timeline")
    if shown is None:
        return
    key, timeline = shown
    if spec is not None and key != problem_key(spec):
        st.caption(":material/history: Showing the last timeline; the sidebar's problem has changed since.")
    show(timeline)


def show(timeline: Timeline) -> None:
    st.markdown(f"Traced: **{md(timeline.dataset)}** ({timeline.n:,} × {timeline.p:,}) · {timeline.precision} · "
                f"{timeline.device} · optimizer {timeline.optimizer} · "
                f"{timeline.traces[0].iterations if timeline.traces else 0} iterations each · "
                f"jax {timeline.versions.get('jax', '?')}")
    if not timeline.traces:
        for name, why in timeline.skipped:
            st.caption(f":material/block: **{name}** left out: {md(why)}.")
        return
    # A launches row may be empty: said, or "Dark: a launch" reads as a bar that failed to draw.
    quiet = trace_findings.drawn_without_launch(timeline)
    display.chart(timeline_chart.timeline_chart(timeline),
                  caption="Each row is one iteration of its strategy (the tick marks its end). Dark: a launch; "
                          "colour: an XLA op; grey: a gap, no XLA program running; white: inside a program, between "
                          "its ops. Hover a bar for its name and duration."
                          + (f" No launch in the iteration drawn for {md(', '.join(quiet))}: "
                             f"{'its' if len(quiet) == 1 else 'their'} programs were launched before it (the "
                             "host dispatches ahead of the device, and a compiled loop is launched once for the "
                             "whole run)." if quiet else ""))
    for name, why in timeline.skipped:
        st.caption(f":material/block: **{name}** left out: {md(why)}. Pick one of those in the sidebar to see it.")
    left = sum(trace.spans_left_out for trace in timeline.traces)
    if left:
        st.caption(f"{left:,} more bars in these windows are not drawn; the trace file has them all.")
    rows = pd.DataFrame(trace_findings.summary_rows(timeline))
    rows["gaps"] = 100 * rows["gaps"]  # whole percents: Streamlit's "percent" wrote 67.86% beside 15.8%
    display.table(rows, hide_index=True, column_config={
        "gaps": st.column_config.ProgressColumn(format="%.0f%%", min_value=0.0, max_value=100.0, help=(
            "share of the traced run during which no XLA program ran: Python, launching, waiting")),
        "launches/it": st.column_config.NumberColumn(format="%.1f", help=(
            "executables launched from the host per iteration: a compiled loop is one for the whole run")),
        "XLA ops/it": st.column_config.NumberColumn(format="%.0f", help="XLA's ops (thunks) run per iteration"),
        "ms/it": st.column_config.NumberColumn(format="%.3f", help="an iteration without the profiler"),
        "ms/it traced": st.column_config.NumberColumn(format="%.3f", help=(
            "an iteration under the profiler, which adds its own cost")),
    })
    st.caption("Compare the strategies' speeds by **ms/it**, measured without the profiler: the profiler records "
               "every op and launch, and its cost grows with their number, so under it a strategy of many short ops "
               "can fall behind one it outruns (\"ms/it traced\"). The timeline shows where an iteration's time "
               "goes, not how long it takes.")
    parts = trace_findings.part_rows(timeline)
    if parts:
        st.markdown("**By part of the algorithm**: where a compiled iteration's XLA time goes, its ops' times "
                    "under the profiler added up by the part of the algorithm they come from. The profiler "
                    "lengthens every op, so the parts add up to more than **ms/it** above: compare them with each "
                    "other, by their shares. The p x p work (Sigma's factor, Omega and its log-determinant) grows "
                    "as p³ and is timed apart from the line search's evaluations it is part of.")
        shares = pd.DataFrame(parts)
        shares["share of XLA's time"] *= 100  # whole percents, as the gaps above
        display.table(shares, hide_index=True, column_config={
            "µs / iteration": st.column_config.NumberColumn(format="%.1f",
                                                            help="under the profiler, which adds to each op"),
            "share of XLA's time": st.column_config.ProgressColumn(
                format="%.0f%%", min_value=0.0, max_value=100.0, help="of the ops' summed time, gaps left out")})
    with st.expander("The heaviest ops of each strategy", icon=":material/list:"):
        display.table(pd.DataFrame(trace_findings.top_op_rows(timeline)), hide_index=True, column_config={
            "µs / iteration": st.column_config.NumberColumn(format="%.1f"),
            "calls / iteration": st.column_config.NumberColumn(format="%.1f"),
            "share of the iteration": st.column_config.NumberColumn(format="percent")})
    if timeline.perfetto:
        st.download_button("Download the trace (Perfetto JSON)", timeline.perfetto, key="uth_trace_file",
                           file_name="plnlab_timeline.perfetto.json.gz", mime="application/gzip",
                           icon=":material/download:",
                           help="Open it at ui.perfetto.dev or chrome://tracing: every event of the traced runs")
