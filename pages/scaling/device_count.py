"""The Scaling page's device-count section: strong and weak scaling of the sharded strategy.

Stored runs are shown at once; one button runs the missing ones. On CPU each device
count runs on a worker in its own `python -m core run` process with that many simulated
devices (`core.bench.device_sweep`), because JAX fixes the count when it starts; on a GPU or
TPU the runs go to a worker as any fit does, over the first k devices it sees.
"""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from core.bench import device_sweep
from core.charts import lines
from core.cluster import submit, tasks
from core.cluster.errors import WorkerDied
from core.results.result import RunResult
from core.run import watched
from core.run.progress import PHASES, Cancelled
from core.spec import OAKS_ROWS, DatasetSpec, SpecError
from core.store.run_store import StoreError
from pages.ui import display, resources, running, settings, sign_in, state
from pages.ui.sidebar import refresh_store_caption
from pages.ui.text import md, public

log = logging.getLogger(__name__)


def _sweep(cluster, store, specs: list, labels: list[str], owner_id: str, post, cancel) -> None:
    """In the sweep's thread: runs and stores each of `specs` in turn, posting (what, its index,
    a value): "starting" (its devices), "phase" (a phase's name), "stored" (its stored result)
    or "failed" (the message); the first failure ends the sweep."""
    for index, (spec, label) in enumerate(zip(specs, labels)):
        post(("starting", index, spec.devices))
        try:
            result = submit.call(cluster, tasks.sweep_point, spec, platform=spec.device, label=label,
                                 owner="dashboard", cancel=cancel,
                                 on_progress=lambda progress, index=index: post(("phase", index, progress.phase)))
            result.owner = owner_id
            store.add(result)
        except (SpecError, Cancelled, WorkerDied) as exc:
            post(("failed", index, f"{md(label)}: {public(exc)}"))
            return
        except Exception as exc:  # noqa: BLE001 - shown, not raised: a projector must not show a traceback
            log.exception("device sweep run of %s failed", spec)
            post(("failed", index, f"{md(label)} failed: {public(exc)}"))
            return
        post(("stored", index, result))


def point_label(spec) -> str:
    """"2 devices · oaks ×100 (n = 11,600)"."""
    k, replicate = spec.devices, spec.dataset.replicate
    return f"{k} device{'s' * (k != 1)} · oaks ×{replicate:,} (n = {OAKS_ROWS * replicate:,})"


def run_in_processes(specs: list) -> tuple[list[RunResult], str | None]:
    """Runs and stores `specs` one after the other, each in its own process, with a progress
    bar per run; (the stored runs, an error message or None). Stops at the first failure. The
    runs are waited for in a thread of their own, as a page's runs are (`running.follow`): a
    closed tab leaves them to finish."""
    try:
        store = resources.run_store()
        cluster = resources.cluster()
    except (StoreError, SpecError) as exc:
        return [], public(exc)
    labels = [point_label(spec) for spec in specs]
    owner_id = sign_in.identity()  # read here: the sweep's thread has no session to read it from
    results: list[RunResult] = []
    error = None
    title = f"Device sweep of {len(specs)} run{'s' * (len(specs) != 1)}"
    with st.status(f"{title}…", expanded=True) as status:
        cancel_slot = running.cancel_button(title)
        bars = [st.progress(0.0, text=f"**{label}**: waiting") for label in labels]

        def draw(post: tuple) -> None:
            nonlocal error
            what, index, value = post
            label, bar = labels[index], bars[index]
            if what == "starting":
                status.update(label=f"{title}: {label} ({index + 1} of {len(specs)})…", expanded=True)
                bar.progress(0.02, text=f"**{label}**: starting a process with {value} simulated "
                                        f"device{'s' * (value != 1)}")
            elif what == "phase":
                bar.progress(PHASES[value].start, text=f"**{label}**: {PHASES[value].text}")
            elif what == "stored":
                results.append(value)
                bar.progress(1.0, text=f"**{label}**: done: {value.per_iter_ms:,.3f} ms/iteration")
            else:
                error = value
                bar.progress(0.0, text=f"**{label}**: failed")

        work = watched.Watched(lambda post, cancel: _sweep(cluster, store, specs, labels, owner_id, post, cancel),
                               name=f"run: {title}")
        running.follow(work, draw, title)
        running.close_status(status, cancel_slot, len(results), error)
    refresh_store_caption()
    return results, error


def series_summary(table: pd.DataFrame, series: str) -> str:
    """One line with the largest count's figures against one device."""
    mine = table[table["series"] == series].dropna(subset=["speed_up"])
    if len(mine) < 2:
        return "Run it on 1 device and at least one more count to compare."
    last = mine.iloc[-1]
    first = mine.iloc[0]
    if series == "strong":
        return (f"n = {int(last['n']):,}: {first['per_iter_ms']:.3g} ms/iteration on 1 device, "
                f"{last['per_iter_ms']:.3g} ms on {int(last['devices'])}: speed-up {last['speed_up']:.2f}×, "
                f"efficiency {last['efficiency']:.2f} (1.00 would be ideal).")
    return (f"{int(first['rows_per_device']):,} rows per device: {first['per_iter_ms']:.3g} ms/iteration on 1 device, "
            f"{last['per_iter_ms']:.3g} ms on {int(last['devices'])} (n = {int(last['n']):,}): efficiency "
            f"{last['efficiency']:.2f} (1.00 would be a flat line).")


def show() -> None:
    """The section: counts and sizes, the run button, the caveat, both charts and their table."""
    state.default("scl_dev_counts", list(device_sweep.DEVICE_COUNTS))
    state.default("scl_dev_strong", device_sweep.STRONG_REPLICATE)
    state.default("scl_dev_weak", device_sweep.WEAK_REPLICATE_PER_DEVICE)
    st.caption("The **sharded** strategy splits the rows over several devices. **Strong scaling** fits the same "
               "data on more devices (ideal: time / k); **weak scaling** grows the data with the devices, the "
               "rows per device fixed (ideal: a flat line).")
    counts = st.pills("Device counts", device_sweep.DEVICE_COUNT_CHOICES, selection_mode="multi",
                      key="scl_dev_counts", persist_state="session") or []
    # Two boxes a row: a third of the column at 1024 px cut their values.
    middle, right = st.columns(2)
    strong = middle.selectbox("Strong scaling: the same data on every count",
                              device_sweep.STRONG_REPLICATE_CHOICES, key="scl_dev_strong",
                              persist_state="session",
                              format_func=lambda k: f"oaks ×{k:,} · n = {OAKS_ROWS * k:,}")
    weak = right.selectbox("Weak scaling: data per device", device_sweep.WEAK_REPLICATE_CHOICES, key="scl_dev_weak",
                           persist_state="session",
                           format_func=lambda k: f"×{k:,} · {OAKS_ROWS * k:,} rows a device")
    problem = settings.current()
    try:
        base = problem.fit_spec("sharded", dataset=DatasetSpec(kind="oaks"))
        points = device_sweep.sweep_points(base, counts, strong, weak)
    except SpecError as exc:
        st.error(public(exc), icon=":material/error:")
        return
    simulated = base.device == "cpu"
    if simulated:
        st.warning("**Simulated devices.** On CPU every device count is a separate process with that many "
                   "simulated devices (`XLA_FLAGS=--xla_force_host_platform_device_count=k`), and they all "
                   "share the cores of the worker's machine: more devices cannot make a fit faster here. "
                   "The charts show how the work is split and what partitioning costs, not the speed-up of real "
                   "devices (one GPU each).", icon=":material/info:")
    else:
        st.caption(f"On {base.device}: the runs use the first k devices of the worker that runs them; "
                   "a count above what it has is refused.")

    store = resources.store_or_stop()
    frame = store.frame()
    specs = device_sweep.distinct_specs(points)
    stored_keys = set(frame.loc[frame["status"] != "interrupted", "spec_key"]) if not frame.empty else set()
    go, retime_slot = st.columns([2, 3], vertical_alignment="center")
    retime = retime_slot.checkbox("Re-time device counts already in the store", key="scl_dev_retime",
                                  persist_state="session")
    todo = specs if retime else [spec for spec in specs if spec.key not in stored_keys]
    label = f"Run device sweep: {len(todo)} run{'s' * (len(todo) != 1)}" if todo else "Run device sweep"
    clicked = go.button(label, type="primary", key="scl_dev_go", disabled=not todo, icon=":material/play_arrow:",
                        width="stretch", help="runs every (device count, size) point not yet in the store" if todo
                        else "every point is already in the store: tick Re-time to run them again")
    if clicked:
        if simulated:
            results, error = run_in_processes(todo)
        else:
            # One device count per run: each is its own sharded program, never timed beside another.
            results, error = running.run(todo, labels=[point_label(spec) for spec in todo],
                                         title=f"Device sweep of {len(todo)} runs", together=False)
        if error:
            st.error(error, icon=":material/error:")
            frame = store.frame()
        else:  # redraw, so that the button counts what is left to run
            done = len(results)
            st.session_state["scl_dev_flash"] = f"Device sweep done: {done} run{'s' * (done != 1)} stored."
            st.rerun()
    if flash := st.session_state.pop("scl_dev_flash", None):
        st.toast(flash, icon=":material/check_circle:")

    table = device_sweep.scaling_table(frame, points)
    if table.empty:
        st.info("No point of this sweep has run with the sidebar's settings yet: press **Run device sweep**.",
                icon=":material/play_circle:")
        return
    st.caption(f"{len(table)} stored point{'s' * (len(table) != 1)} with these settings; medians where a point "
               "ran more than once. " + problem.label.split(" · ", 1)[1])
    left, right = st.columns(2)
    with left:
        display.chart(lines.device_scaling(table, "strong").properties(height=280),
                      series_summary(table, "strong"))
    with right:
        display.chart(lines.device_scaling(table, "weak").properties(height=280),
                      series_summary(table, "weak"))
    with st.expander("The points behind these charts"):
        display.table(table, hide_index=True, column_config={
            "per_iter_ms": st.column_config.NumberColumn("ms / iter", format="%.3f"),
            "ideal_ms": st.column_config.NumberColumn("ideal ms / iter", format="%.3f"),
            "speed_up": st.column_config.NumberColumn("speed-up", format="%.2f"),
            "efficiency": st.column_config.NumberColumn(format="%.2f"),
            "rows_per_device": st.column_config.NumberColumn("rows / device")})
