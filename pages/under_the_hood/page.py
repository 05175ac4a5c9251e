"""Under the hood: what a strategy hands to XLA, an iteration traced, and the seed tutorial's pitfalls run live."""

from __future__ import annotations

import dataclasses
import time

import pandas as pd
import streamlit as st

from core.cluster import submit, tasks
from core.inspect import findings, pitfall_notes
from core.run import lifecycle
from core.spec import DEFAULTS, FitSpec, SpecError
from pages.ui import display, resources, running, settings, shared_results, state
from pages.ui.display import guarded, si
from pages.ui.text import md
from pages.under_the_hood import roofline_panel, timeline_panel

TEXT_HEIGHT = 480  # px: long texts scroll inside their box instead of stretching the page


def inspect_cached(spec: FitSpec, counts=None, on_progress=None) -> tuple[findings.Inspection, float]:
    """(`core.inspect.introspect.inspect_fit` on a worker, when it was made: epoch seconds),
    kept per spec for every session (an uploaded CSV's spec names its content hash);
    `on_progress` hears its wait in the queue."""
    def make() -> tuple[findings.Inspection, float]:
        inspection = submit.call(resources.cluster(), tasks.inspection, spec, counts, platform=spec.device,
                                 label=f"inspecting {lifecycle.label(spec)}", owner="dashboard",
                                 on_progress=on_progress)
        return inspection, time.time()

    return shared_results.kept("inspection", spec.key, make, max_entries=16)


def text_block(title: str, text: str, language: str, file_name: str, key: str) -> None:
    """A text clipped for the screen, with the full text downloadable."""
    shown, clipped = findings.clip(text)
    top, button = st.columns([4, 1], vertical_alignment="center")
    top.caption(f"{title} · {len(text):,} characters" + (" (first part shown)" if clipped else ""))
    button.download_button("Download", text, file_name=file_name, mime="text/plain", key=key,
                           icon=":material/download:", on_click="ignore", width="stretch")
    short = shown.count("\n") < 20  # a short function gets its own height, not an empty box
    st.code(shown or "(not available on this backend)", language=language, height="content" if short else TEXT_HEIGHT)


def per_executable(inspection: findings.Inspection, attribute: str, language: str, what: str) -> None:
    executables = inspection.executables
    tabs = st.tabs([e.name for e in executables]) if len(executables) > 1 else [st.container()]
    for tab, executable in zip(tabs, executables):
        with tab:
            text_block(f"{what} of `{executable.name}`", getattr(executable, attribute), language,
                       f"{inspection.strategy}_{executable.name}_{attribute}.txt",
                       f"uth_dl_{attribute}_{executable.name}")


def show_inspection(inspection: findings.Inspection) -> None:
    st.subheader(f"{inspection.strategy} · {inspection.dataset} (n = {inspection.n:,}, p = {inspection.p})")
    st.caption(f"{inspection.precision} · {inspection.device} · {inspection.iterations:,} iterations · "
               f"optimizer {inspection.optimizer} · "
               f"jax {inspection.versions['jax']}, jaxlib {inspection.versions['jaxlib']}")
    described = inspection.description.removeprefix(f"{inspection.strategy}: ")
    st.markdown(described[:1].upper() + described[1:])  # a paragraph of its own, not a list item's tail
    if not inspection.compiled:
        st.info("**Nothing is compiled ahead of time.** Each JAX operation is dispatched to XLA on its own, "
                "so there is no whole-program HLO, cost analysis or memory analysis to show. Its source is "
                "below, and, for reference, the jaxpr one iteration would have under `jax.jit`.",
                icon=":material/info:")
    else:
        per_iteration, per_run = inspection.cost_per_iteration, inspection.cost_per_run
        columns = st.columns(4)
        columns[0].metric("FLOP / iteration", si(per_iteration.flops),
                          help="XLA's estimate of floating-point operations in one iteration")
        columns[1].metric("Bytes accessed / iteration", si(per_iteration.bytes_accessed, "B"),
                          help="XLA's estimate of bytes read and written in one iteration")
        columns[2].metric("Exp, log… / iteration", si(per_iteration.transcendentals),
                          help="transcendental function calls (exp, log, ...) in one iteration")
        columns[3].metric("FLOP / run", si(per_run.flops),
                          help=f"per iteration x {inspection.iterations:,} iterations, the cap: a fit that stops at "
                               "its tolerance does less (the note under these figures says)")
        st.caption(inspection.cost_note)
        columns = st.columns(4)
        columns[0].metric("Executables", len(inspection.executables),
                          help="compiled functions the strategy calls")
        columns[1].metric("XLA compilations", inspection.compile_count,
                          help="counted from jax.monitoring events while tracing, lowering and compiling; "
                               "includes small op-by-op compilations of argument set-up")
        columns[2].metric("Trace + lower", f"{inspection.trace_lower_s:.2f} s",
                          help="Python running the strategy's functions on abstract arrays (tracing) and "
                               "turning the result into StableHLO (lowering), before XLA compiles it")
        columns[3].metric(findings.compile_heading(inspection.compile_count, inspection.disk_cache_hits),
                          f"{inspection.compile_s:.2f} s",
                          help="XLA compiling, and loading executables from JAX's persistent cache (the "
                               "persistent-cache loads below)")
        instructions = sum(findings.hlo_instructions(e.optimized_hlo) for e in inspection.executables)
        st.caption(f"Cache: **{inspection.cache}** ({inspection.disk_cache_hits} persistent-cache load"
                   f"{'s' * (inspection.disk_cache_hits != 1)}). Figures for a cold in-process cache. "
                   f"Program size: **{findings.jaxpr_equations(inspection.jaxpr):,} jaxpr equations** "
                   f"({inspection.jaxpr_of}), **{instructions:,} HLO instructions** after XLA's passes, in "
                   f"{len(inspection.executables)} executable{'s' * (len(inspection.executables) != 1)}.")
        st.markdown("**Per executable**: XLA's cost and memory analyses (sizes in MB)")
        table = pd.DataFrame(findings.executable_rows(inspection))
        table = table.loc[:, (table.notna() & (table != 0)).any()]  # e.g. code size: 0 on CPU
        display.table(table, hide_index=True, column_config={
            c: st.column_config.NumberColumn(format="%d" if c == "HLO instructions" else "%.2f")
            for c in table.columns if c != "executable"})


def show_layout(inspection: findings.Inspection) -> None:
    """Where the sharded strategy put each array: row blocks, or a copy on every device."""
    st.subheader("Where the arrays live", anchor="sharding")
    devices = max((row.devices for row in inspection.layout), default=1)
    held = sum(row.bytes_per_device for row in inspection.layout)
    st.caption(f"The placed data and initial state over **{devices} device{'s' * (devices != 1)}**: arrays with "
               "one row per sample are split in equal row blocks (`PartitionSpec('rows', None)`, rows padded "
               "to a multiple of the device count), the small ones are copied to every device. Each device "
               f"holds {si(held, 'B')} of them. From each array's `sharding` and `addressable_shards`.")
    display.table(pd.DataFrame(findings.table_rows(inspection.layout)), hide_index=True,
                  column_config={"bytes per device": st.column_config.NumberColumn(format="%d")})


def show_texts(inspection: findings.Inspection) -> None:
    with st.expander("Python source: the strategy, one iteration, the ELBO", icon=":material/code:"):
        for index, (title, code) in enumerate(inspection.sources):
            text_block(title, code, "python", f"{inspection.strategy}_source_{index}.py", f"uth_dl_source_{index}")
    with st.expander(f"jaxpr: {inspection.jaxpr_of}", icon=":material/account_tree:"):
        text_block("jax.make_jaxpr", inspection.jaxpr, "text", f"{inspection.strategy}_jaxpr.txt", "uth_dl_jaxpr")
    if inspection.executables:
        with st.expander("StableHLO: lowered, before XLA's optimisation passes", icon=":material/description:"):
            per_executable(inspection, "stablehlo", "text", "Lowered.as_text()")
        with st.expander("Optimized HLO: after XLA's passes (fusions, layouts)", icon=":material/bolt:"):
            per_executable(inspection, "optimized_hlo", "text", "Compiled.as_text()")


def show_pitfalls() -> None:
    st.header("Pitfalls of the seed tutorial")
    st.caption("Gangloff, \"JIT compilation with JAX\" (FinistR 2023) has bugs this product does not reproduce. "
               "Each one runs here as a small demonstration: the tutorial's way next to the right way. The last "
               "is no bug of the tutorial's but the way any JIT level loses its speed: compiling every iteration.")
    for key in pitfall_notes.keys():
        state_key = f"uth_pitfall_{key}"
        title = pitfall_notes.TITLES[key]
        with st.container(border=True):
            st.subheader(title)
            st.markdown(pitfall_notes.SUMMARIES[key])
            with st.expander("Code of the demonstration", icon=":material/code:"):
                st.code(pitfall_notes.source(key), language="python")
            if st.button("Run it live", key=f"uth_run_{key}", icon=":material/play_arrow:"):
                waiting = st.empty()
                with st.spinner(f"Running on a worker: {title}…"):
                    st.session_state[state_key] = guarded(lambda: run_pitfall(key, running.queue_notice(waiting)),
                                                          title)
                waiting.empty()
            result = st.session_state.get(state_key)
            if result is not None:
                show_pitfall_result(result)


def run_pitfall(key: str, on_progress=None) -> pitfall_notes.PitfallResult:
    """`core.inspect.pitfalls.run(key)` on a worker; `on_progress` hears its wait in the queue."""
    return submit.call(resources.cluster(), tasks.pitfall, key, platform="cpu", label=f"pitfall demo: {key}",
                       owner="dashboard", on_progress=on_progress)


def show_pitfall_result(result: pitfall_notes.PitfallResult) -> None:
    if result.reproduced:
        st.badge(f"{result.kind} reproduced here", color="red", icon=":material/bug_report:")
    else:
        st.badge("Not reproduced on this installation", color="green", icon=":material/check_circle:")
    st.markdown(result.explanation)
    # Strings, not numbers: the Stirling sums differ in the sixth significant digit.
    def value(number: float) -> str:  # counts as counts; the Stirling sums differ in the sixth digit
        return f"{number:,.0f}" if float(number).is_integer() else f"{number:,.4f}"

    rows = [{"computed": result.wrong_way, "quantity": k, "value": value(v)} for k, v in result.buggy.items()]
    rows += [{"computed": "the right way", "quantity": k, "value": value(v)} for k, v in result.correct.items()]
    display.table(pd.DataFrame(rows), hide_index=True)
    if result.recompiles:
        st.markdown("**Each compile, and why** (JAX's own words):")
        st.markdown("\n".join(f"- **{md(row['way'])}** · `{row['function']}` at `{row['where']}`: {md(row['why'])}"
                              + (f" ({row['stages']})" if row["stages"] else "")
                              for row in pitfall_notes.compile_rows(result)))
    if result.note:
        st.caption(result.note)


st.title("Under the hood")
st.caption("What a JIT strategy hands to XLA (source, jaxpr, StableHLO, optimized HLO) and what XLA "
           "estimates it costs. The problem (data, size, precision, device, iterations) is set in the sidebar.")

# Peers (pyPLNmodels, PyTorch) hand nothing to XLA: only JAX strategies can be inspected.
summaries = {r.name: r.summary for r in resources.runnables() if r.inspectable}
state.default("uth_strategy", DEFAULTS.strategy if DEFAULTS.strategy in summaries else next(iter(summaries)))
pick, go = st.columns([3, 1], vertical_alignment="bottom")  # room for the button at 1024 px
# The name alone in the box (a box cuts what it cannot hold), its summary under the row, wrapped.
strategy = pick.selectbox("Strategy", list(summaries), key="uth_strategy", persist_state="session",
                          help=resources.strategy_help())
problem = settings.current()
try:
    # Repeats do not change what is compiled; fixing them shares the cache across settings.
    spec = dataclasses.replace(problem.fit_spec(strategy), repeats=1)
except SpecError as exc:
    spec = None
    settings.show_refusal(exc)
clicked = go.button("Inspect", type="primary", key="uth_go", icon=":material/search:", width="stretch",
                    disabled=spec is None)
st.caption(f"**{strategy}**: {summaries[strategy]}")
if spec is not None:
    st.markdown(f"Sidebar problem: **{md(spec.dataset.label)}** · {spec.precision} · {spec.device} · "
                f"{spec.iterations:,} iterations · optimizer {spec.optimizer.label} · init {spec.init}")

if clicked and spec is not None:
    counts = problem.counts
    waiting = st.empty()  # the queue ahead, while the inspection waits for a worker and the device

    def work():
        resources.check_device(spec.device)
        return inspect_cached(spec, counts, running.queue_notice(waiting))

    with st.spinner(f"Tracing, lowering and compiling {strategy} for {spec.dataset.label}…"):
        if guarded(work, f"Inspecting {strategy}") is not None:
            st.session_state["uth_inspected"] = (spec, counts)
    waiting.empty()

inspected = st.session_state.get("uth_inspected")
if inspected is None and spec is not None and shared_results.peek("inspection", spec.key) is not None:
    # Kept for every session, as its caption says: a new session sees it without pressing again.
    inspected = st.session_state["uth_inspected"] = (spec, problem.counts)
if inspected is None and spec is not None:
    st.info("Press **Inspect** to compile the chosen strategy for the sidebar's problem and look at "
            "what XLA receives. It takes a few seconds, longer for large problems.", icon=":material/search:")
elif inspected is not None:
    if spec is not None and inspected[0].key != spec.key:
        st.caption(":material/history: Showing the last inspection; the settings above have changed since. "
                   "Press **Inspect** to see them.")
    inspection, made_at = inspect_cached(*inspected)
    # Inspect again shows the kept inspection at once: say so, or its unchanged compile
    # figures read as a second compile that cost the same.
    made = time.strftime("%H:%M:%S", time.localtime(made_at))
    st.caption(f":material/history: Inspected at {made} (server time) and kept by this server for every session: "
               "its figures are that compile's.")
    show_inspection(inspection)
    if inspection.strategy == "sharded" and inspection.layout:
        show_layout(inspection)
    roofline_panel.show_roofline(*inspected, inspection)
    show_texts(inspection)

st.divider()
timeline_panel.show_timeline(spec, problem.counts)
st.divider()
show_pitfalls()
