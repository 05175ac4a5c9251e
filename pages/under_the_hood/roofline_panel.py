"""The Under-the-hood page's roofline section: this machine's peaks, a strategy's floor, runs against it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.charts import roofline as roofline_chart
from core.cluster import submit, tasks
from core.inspect import findings, floor
from core.spec import FitSpec
from pages.ui import display, resources, running, shared_results
from pages.ui.display import guarded, si


def measure_peaks(platform: str, dtype: str, remeasure: bool = False, on_progress=None) -> findings.Peaks:
    """`core.inspect.roofline.device_peaks` on a worker serving `platform`: read from its JSON
    cache there, or measured (seconds); `on_progress` hears its wait in the queue."""
    return submit.call(resources.cluster(), tasks.peaks, platform, dtype, remeasure, platform=platform,
                       label=f"measuring the peaks of {platform} in {dtype}", owner="dashboard",
                       on_progress=on_progress)


def machine_peaks(platform: str, dtype: str, on_progress=None) -> findings.Peaks:
    """`measure_peaks`, kept per platform and dtype for every session."""
    return shared_results.kept("peaks", (platform, dtype),
                               lambda: measure_peaks(platform, dtype, on_progress=on_progress), max_entries=8)


def analysis_cached(spec: FitSpec, counts=None, on_progress=None) -> findings.Analysis:
    """`core.inspect.roofline.analyse_apart` on a worker, kept per spec like `inspect_cached`."""
    return shared_results.kept("analysis", spec.key, lambda: submit.call(
        resources.cluster(), tasks.analysis, spec, counts, platform=spec.device,
        label=f"analysing {spec.strategy} · {spec.dataset.label}", owner="dashboard", on_progress=on_progress),
        max_entries=16)


def duration(seconds: float) -> str:
    """0.000123 -> "123 µs": per-iteration times span ns (floors) to seconds (eager)."""
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= factor:
            return f"{seconds / factor:,.3g} {unit}"
    return f"{seconds / 1e-9:,.3g} ns"


FLOOR_EXPLAINED = (
    "The **floor** is the least time one iteration could take on this machine. Its **compute side** "
    "runs XLA's flop count at the measured matmul rate and its exp, log… count at the measured exp "
    "rate; its **memory side** moves the bytes an iteration cannot avoid (read the data, read and write "
    "the state) at the measured bandwidth. The larger side binds. The floor is optimistic on purpose: "
    "the elementwise flops of the ELBO never run at matmul speed, so strategies stay well above 1×. "
    "(The bandwidth is that of main memory: a problem small enough to stay in cache can beat the memory side.)")


def show_peaks(spec: FitSpec) -> findings.Peaks | None:
    """The machine's peaks for the spec's device and precision, with a button to re-measure."""
    columns = st.columns([1, 1, 1, 1], vertical_alignment="bottom")
    if columns[3].button("Re-measure peaks", key="uth_remeasure", icon=":material/speed:", width="stretch",
                         help="Run the three kernels again (a few seconds) and overwrite the cached figures, "
                              "e.g. after the machine's load or power settings changed"):
        waiting = st.empty()
        with st.spinner(f"Measuring the peaks of {spec.device}, {spec.precision}…"):
            if guarded(lambda: measure_peaks(spec.device, spec.precision, remeasure=True,
                                             on_progress=running.queue_notice(waiting)),
                       "Measuring the peaks") is not None:
                shared_results.forget("peaks")
        waiting.empty()
    waiting = st.empty()
    with st.spinner(f"Measuring this machine's peaks for {spec.device}, {spec.precision} (once per host)…"):
        machine = guarded(lambda: machine_peaks(spec.device, spec.precision, running.queue_notice(waiting)),
                          "Measuring the peaks")
    waiting.empty()
    if machine is None:
        return None
    columns[0].metric("Matmul GFLOP/s", f"{machine.matmul_flops_per_s / 1e9:,.1f}",
                      help="dense square matmul, the fastest flops this device has")
    columns[1].metric("exp G/s", f"{machine.exp_per_s / 1e9:,.2f}", help="billions of exp evaluations per second")
    columns[2].metric("Bandwidth GB/s", f"{machine.bytes_per_s / 1e9:,.1f}",
                      help="bytes read per second by a sum over a large array")
    st.caption(f"Peaks of **{machine.device_kind}** in **{machine.dtype}** on host `{machine.host}`, "
               "measured once with small jitted kernels and cached on disk beside the compilation cache.")
    return machine


def show_measured(spec: FitSpec, machine: findings.Peaks, bound: findings.Floor) -> tuple[float, int] | None:
    """The stored runs of this work on this host against the floor; the fastest one's seconds and id."""
    # SQLite narrows the store down to this strategy, device and host; matching_runs does the rest.
    candidates = guarded(lambda: resources.run_store().find(
        strategy=spec.strategy, precision=spec.precision, device=spec.device, iterations=spec.iterations,
        status="ok", host=machine.host, device_kind=machine.device_kind), "Reading the runs")
    runs = None if candidates is None else floor.matching_runs(candidates, spec, machine)
    if not runs:
        if runs is not None:
            st.info("No stored run of this strategy, data, precision, device and iteration count on this host "
                    "yet. Run it on the **Run** page (or `python -m core run`) to see its time as a multiple "
                    "of the floor.", icon=":material/timer:")
        return None
    rows = floor.times_floor(runs, spec, bound)
    best = rows[0]
    which = "these settings" if best["same_settings"] else \
        "the same strategy, data, precision, device and iterations (another optimizer or init)"
    columns = st.columns(4)
    columns[0].metric("Measured / iteration", duration(best["per_iter_ms"] / 1e3),
                      help="steady-state time per iteration of the run named below")
    columns[1].metric("× floor", f"{best['x_floor']:,.1f}×",
                      help="measured time per iteration over the floor: 1× would be the machine's limit")
    # Runs of these very settings come first (`floor.matching_runs`): "the fastest of" counts only them.
    peers = [row for row in rows if row["same_settings"] == best["same_settings"]]
    others = len(rows) - len(peers)
    among = f"the fastest of {len(peers)} stored runs" if len(peers) > 1 else "the one stored run"
    st.caption(f"Run #{best['id']} ({display.when(best['created_at'])}), {among} of {which} on this host"
               + (f"; {others} more of the same problem with another optimizer or init below." if others else "."))
    if best["x_floor"] < 1:
        st.warning("Faster than the floor: the data and state stay in cache, which is faster than the main-memory "
                   "bandwidth measured above, or the peaks were measured while the machine was busy "
                   "(**Re-measure peaks**).", icon=":material/warning:")
    if len(rows) > 1:
        with st.expander(f"All {len(rows)} matching runs", icon=":material/list:"):
            display.table(pd.DataFrame(rows).assign(created_at=lambda f: f["created_at"].map(display.when)),
                          hide_index=True, column_config={
                             "id": "run", "created_at": "created", "same_settings": "same settings",
                             "per_iter_ms": st.column_config.NumberColumn("ms / iter", format="%.4f"),
                             "x_floor": st.column_config.NumberColumn("× floor", format="%.1f")})
    return best["per_iter_ms"] / 1e3, best["id"]


def show_roofline(spec: FitSpec, counts, inspection: findings.Inspection) -> None:
    """Peaks, this strategy's floor per iteration, stored runs against it, and the chart."""
    st.subheader("Roofline: how far from this machine's limit", anchor="roofline")
    st.markdown(FLOOR_EXPLAINED)
    machine = show_peaks(spec)
    if machine is None:
        return
    if not inspection.compiled:
        st.info("Eager hands XLA nothing ahead of time: no cost analysis, so no floor. Its time goes to "
                "dispatching each operation from Python.", icon=":material/info:")
        return
    waiting = st.empty()
    with st.spinner("Reading XLA's cost analysis…"):
        analysis = guarded(lambda: analysis_cached(spec, counts, running.queue_notice(waiting)),
                           "Analysing the roofline")
    waiting.empty()
    if analysis is None:
        return
    cost = analysis.cost
    if cost.flops is None or cost.transcendentals is None:
        st.info("XLA gave no flop or transcendental count for this strategy here: no floor.", icon=":material/info:")
        return
    # Against the peaks shown above, which a re-measure may have changed since the analysis was cached.
    bound = floor.floor(cost.flops, cost.transcendentals, analysis.compulsory_bytes, machine)
    columns = st.columns(4)
    columns[0].metric("Floor / iteration", duration(bound.seconds), help="the larger of the two sides")
    columns[1].metric("Compute side", duration(bound.compute_s),
                      help="flops / matmul peak + transcendentals / exp rate")
    columns[2].metric("Memory side", duration(bound.memory_s), help="compulsory bytes / bandwidth")
    columns[3].metric("Binds", bound.bound, help="which side sets the floor")
    peak = f"; XLA's peak memory {si(analysis.peak_bytes, 'B')}" if analysis.peak_bytes else ""
    # Compulsory bytes are often several times the model's arrays, which reads as a mistake unless said why.
    st.caption(f"Compulsory bytes per iteration: {si(analysis.compulsory_bytes, 'B')}, the data read once and the "
               f"fit's whole state read and written. The model's own arrays (Y, O, X, B, M, S and Omega) hold "
               f"{si(analysis.model_bytes, 'B')}; the rest of the state is the optimizer's (L-BFGS's kept steps and "
               f"gradient changes, Adam's moments: arrays the size of M and S). XLA counts "
               f"{si(cost.bytes_accessed, 'B')} accessed, every operand of every op, cache hits included: an upper "
               f"bound, not a floor{peak}.")
    measured = show_measured(spec, machine, bound)
    measured_s, run_id = measured if measured else (None, None)
    if cost.flops > 0 and analysis.compulsory_bytes > 0:
        display.chart(roofline_chart.roofline_chart(
            machine.matmul_flops_per_s, machine.bytes_per_s, machine.exp_per_s, cost.flops,
            cost.transcendentals, analysis.compulsory_bytes, measured_s, f"run #{run_id}"),
            caption="Each exp, log… counts as the matmul flops its time would buy, so the roof above the "
                    "point is the floor's rate; the gap down to the measured point is its multiple of the floor.",
            # Below: at 1024 px a legend of roofs beside the chart left the plot about 160 px wide.
            legend="bottom")
