"""Scaling: how compile and run times grow with n, sweeping the oaks replication factor."""

from __future__ import annotations

import math

import streamlit as st

from core import charts
from core.spec import DatasetSpec, SpecError
from pages import shared

DEFAULT_STRATEGIES = ("scan", "jit_step", "jit_per_function")

st.title("When does compilation stop mattering?")
st.caption("Compilation costs about the same whatever n; the fit itself grows with n. Sweep the oaks data "
           "(each row repeated ×k) to see where the curves cross.")

catalog = shared.strategy_catalog()
names = [s["name"] for s in catalog]
shared.default("scl_strategies", [n for n in DEFAULT_STRATEGIES if n in names])
shared.default("scl_sizes", [1, 10, 100])
shared.keep("scl_strategies", "scl_sizes", "scl_retime")

left, right, go = st.columns([3, 2, 1], vertical_alignment="bottom")
chosen = left.multiselect("Strategies", names, key="scl_strategies", help=shared.strategy_help(),
                          placeholder="Choose strategies")
chosen = [n for n in names if n in chosen]
sizes = right.multiselect("oaks rows repeated ×k", list(shared.REPLICATES), key="scl_sizes",
                          format_func=lambda k: f"×{k:,} (n = {shared.OAKS_ROWS * k:,})", placeholder="Choose sizes")
sizes = sorted(sizes)
st.caption("Uses the sidebar's device, precision, iterations, repeats, optimizer and initialisation; the data "
           "here are always oaks."
           + (" eager is slow: expect minutes at large n." if "eager" in chosen else "")
           + (" ×1,000 (n = 116,000) can take minutes per strategy on a CPU." if 1000 in sizes else ""))

problem = shared.current_problem()
try:
    grid = [shared.fit_spec(name, dataset=DatasetSpec(kind="oaks", replicate=k), problem=problem)
            for k in sizes for name in chosen]
except SpecError as exc:
    st.error(str(exc), icon=":material/error:")
    st.stop()

store = shared.store_or_stop()
keys = {spec.key for spec in grid}
retime = st.checkbox("Re-time settings already in the store", key="scl_retime")
frame = store.frame()
stored_keys = set(frame["spec_key"]) if not frame.empty else set()
todo = grid if retime else [spec for spec in grid if spec.key not in stored_keys]
clicked = go.button(f"Run sweep ({len(todo)})" if todo else "Run sweep", type="primary", key="scl_go",
                    disabled=not todo, icon=":material/play_arrow:", width="stretch",
                    help="runs every (strategy, size) pair of the grid not yet in the store")
if clicked:
    labels = [f"{spec.strategy} · n = {shared.OAKS_ROWS * spec.dataset.replicate:,}" for spec in todo]
    results, error = shared.run_specs(todo, labels=labels, title=f"Sweep of {len(todo)} runs")
    if error:
        st.error(error, icon=":material/error:")
    frame = store.frame()

runs = frame[frame["spec_key"].isin(keys)] if not frame.empty else frame
if runs.empty:
    st.info("None of these (strategy, size) pairs has run with the sidebar's settings yet: press **Run sweep**.",
            icon=":material/play_circle:")
    st.stop()

st.divider()
st.caption(f"{len(runs)} stored run{'s' * (len(runs) != 1)} with these settings "
           f"({runs['n'].nunique()} size{'s' * (runs['n'].nunique() != 1)}); medians where a pair ran more than once. "
           + shared.problem_label(problem).split(" · ", 1)[1])
left, right = st.columns(2)
with left:
    shared.chart(charts.scaling_lines(runs, "per_iter_ms"),
                 "Milliseconds per iteration at steady state, log-log: a slope of 1 means time grows like n.")
with right:
    shared.chart(charts.scaling_lines(runs, "run_s"),
                 "Seconds for one whole fit (all iterations) at steady state, log-log.")


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
        return f"**{strategy}**: every run reused a cached executable, so no compile time was measured."
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
            return (f"**{strategy}**: compilation stops mattering beyond n ≈ {estimate:,.0f} "
                    f"(between {n0:,} and {n1:,}), where one fit outlasts the {compile_s[n1]:.2g} s compile.")
    last = sizes[-1]
    return (f"**{strategy}**: compiling ({compile_s[last]:.3g} s) still outweighs one fit ({run_s[last]:.3g} s) "
            f"at the largest n run, {last:,}.")


left, right = st.columns([3, 2])
with left:
    shared.chart(charts.compile_vs_run(runs),
                 "Dashed: trace+lower+compile, solid: one steady-state fit. Where solid rises above dashed, "
                 "compiling has paid for itself.")
with right:
    st.subheader("Compilation stops mattering…")
    for name in [n for n in names if n in set(runs["strategy"])]:
        st.markdown(crossover(runs, name))

with st.expander("The runs behind these charts"):
    table = runs.sort_values(["strategy", "n"])
    shared.show_runs_table(table.assign(strategy=table["strategy"] + " · n = " + table["n"].map("{:,}".format)))
