"""What every page shares: cached resources, the problem sidebar, and how runs are shown.

Nothing heavy happens at import: JAX is imported by `strategy_catalog()` and `devices()`
(each once per server process, through `st.cache_resource`) and by `run_specs()` when a
run is actually requested.

Session state written here is prefixed "sb_" (the sidebar). Pages read the sidebar through
`current_problem()`, `dataset_spec()`, `fit_spec()`, `run_counts()` and `problem_label()`.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Iterable

import streamlit as st

from core import data as datasets
from core.spec import MAX_COLUMNS, MAX_COVARIATES, MAX_ITERATIONS, MAX_REPEATS, MAX_ROWS, DatasetSpec, FitSpec, \
    OptimizerSpec, SpecError
from core.store import RunStore, StoreError, default_db_path

if TYPE_CHECKING:
    import pandas as pd

    from core.result import RunResult

log = logging.getLogger(__name__)

OAKS_ROWS, OAKS_COLUMNS = 116, 114
REPLICATES = (1, 10, 100, 1000)
DATASETS = {"oaks": "oaks", "simulated": "simulated", "csv": "upload CSV"}
PLATFORMS = ("cpu", "gpu", "tpu")
OPTIMIZER_LABELS = {"seed": "seed: RAdam, clipped at 0.1 (the tutorial's)",
                    "adam": "adam", "rprop": "rprop (pyPLNmodels')"}
INIT_LABELS = {"seed": "seed: M = 0, S = 1 (the tutorial's)",
               "log_counts": "log_counts: M = log Y, S = 0.5 (pyPLNmodels')"}
# Defaults finish in well under a minute on a laptop CPU for the five tutorial levels.
DEFAULTS: dict[str, Any] = {
    "sb_dataset": "oaks", "sb_replicate": 1, "sb_sim_n": 1000, "sb_sim_p": 50, "sb_sim_d": 1,
    "sb_sim_seed": 0, "sb_device": "cpu", "sb_precision": "float32", "sb_optimizer": "seed",
    "sb_lr": 0.01, "sb_init": "seed", "sb_iterations": 150, "sb_repeats": 3, "sb_tol": 0.0,
}
# Relative spread of final ELBOs under which strategies "agree" (rounding noise only).
AGREEMENT_TOLERANCE = {"float32": 1e-4, "float64": 1e-6}
PHASE_TEXT = {"data": "loading data", "transfer": "copying data to the device",
              "compile": "tracing, lowering and compiling", "first_call": "first call",
              "repeat": "timing steady state", "done": "done"}
TABLE_COLUMNS = {
    "strategy": st.column_config.TextColumn("strategy"),
    "cache": st.column_config.TextColumn("cache", help="compiled now, reused from memory or disk, or none (eager)"),
    "compile_s": st.column_config.NumberColumn("compile (s)", format="%.3f", help="XLA compilation"),
    "first_call_s": st.column_config.NumberColumn("first call (s)", format="%.3f"),
    "run_s": st.column_config.NumberColumn("steady run (s)", format="%.4f",
                                           help="median of the timed repeats"),
    "per_iter_ms": st.column_config.NumberColumn("per iteration (ms)", format="%.3f"),
    "compile_count": st.column_config.NumberColumn("compiles", help="XLA compilations during the run"),
    "recompile_count": st.column_config.NumberColumn("recompiles",
                                                     help="compilations during the steady-state repeats"),
    "final_elbo": st.column_config.NumberColumn("final ELBO", format="%.2f",
                                                help="the ELBO itself, exact log Y! (gammaln)"),
    "status": st.column_config.TextColumn("status"),
}


# --- cached resources ----------------------------------------------------------------

@st.cache_resource(show_spinner=False)
def _open_store(path: str) -> RunStore:
    return RunStore(path)


def run_store() -> RunStore:
    """The run store at $PLNLAB_DB (or the per-user default), shared with the CLI.

    Raises:
        StoreError: the file is not a usable run store.
    """
    return _open_store(str(default_db_path()))


def store_or_stop() -> RunStore:
    """`run_store()`, or an error message and the end of this page's run."""
    try:
        return run_store()
    except StoreError as exc:
        st.error(f"The run store cannot be used: {exc}")
        st.stop()


@st.cache_resource(show_spinner=False)
def executable_cache():
    """One `engine.ExecutableCache` for every session of this server."""
    from core import engine

    return engine.ExecutableCache()


@st.cache_resource(show_spinner="Looking for devices…")
def devices() -> dict[str, Any]:
    """Platforms JAX offers here, their device kinds, and why absent ones are absent.

    Returns:
        {"available": ["cpu", ...], "kinds": {platform: "NVIDIA H100 80GB HBM3 x1"},
         "missing": {platform: reason}}.
    """
    import jax

    from core import runtime

    runtime.configure()
    available = runtime.available_platforms()
    kinds = {}
    for platform in available:
        found = jax.devices(platform)
        kinds[platform] = f"{found[0].device_kind} x{len(found)}" if platform != "cpu" else \
            f"{os.cpu_count()} cores"
    plugins = _accelerator_plugins()
    missing = {}
    for platform in PLATFORMS:
        if platform in available:
            continue
        if platform == "gpu":
            missing[platform] = ("not available on this server: a GPU jaxlib plugin is installed "
                                 "but no GPU is visible") if plugins["gpu"] else \
                "not available on this server (no CUDA jaxlib plugin / no device)"
        else:
            missing[platform] = "not available on this server (no TPU runtime / no device)"
    return {"available": available, "kinds": kinds, "missing": missing}


def _accelerator_plugins() -> dict[str, bool]:
    from importlib import metadata

    names = {(dist.metadata["Name"] or "").lower().replace("_", "-") for dist in metadata.distributions()}
    return {"gpu": any(n.startswith(("jax-cuda", "jax-rocm")) for n in names),
            "tpu": any(n.startswith("libtpu") for n in names)}


@st.cache_resource(show_spinner=False)
def strategy_catalog() -> list[dict[str, Any]]:
    """Every strategy in teaching order: name, one-line summary, description, python_loop."""
    from core import strategies

    out = []
    for item in strategies.describe():
        text = item["description"].removeprefix(f"{item['name']}: ")
        summary = text.split(". ")[0].rstrip(".") + "."
        out.append({"name": item["name"], "summary": summary, "description": text,
                    "python_loop": strategies.get(item["name"]).python_loop})
    return out


def tutorial_levels() -> tuple[str, ...]:
    from core.strategies import TUTORIAL_LEVELS

    return TUTORIAL_LEVELS


def strategy_help(names: Iterable[str] | None = None) -> str:
    """Markdown list of strategies and their one-line summaries (for `help=`)."""
    wanted = None if names is None else set(names)
    return "\n".join(f"- **{s['name']}**: {s['summary']}" for s in strategy_catalog()
                     if wanted is None or s["name"] in wanted)


# --- session state helpers -------------------------------------------------------------

def keep(*keys: str) -> None:
    """Keep widget values across pages and hidden widgets.

    Streamlit forgets a widget's value when a run does not draw it; re-assigning the key
    turns it into plain session state that survives until the widget is drawn again.
    """
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def default(key: str, value: Any) -> None:
    """Set a widget's initial value through session state (so no `value=` is needed)."""
    if key not in st.session_state:
        st.session_state[key] = value


# --- the sidebar -------------------------------------------------------------------------

def sidebar() -> None:
    """The problem settings shared by Run, Scaling and Under the hood."""
    for key, value in DEFAULTS.items():
        default(key, value)
    pass  # keep(*DEFAULTS)
    with st.sidebar:
        st.header("Problem")
        _dataset_inputs()
        _device_inputs()
        left, right = st.columns(2)
        left.number_input("Iterations", 1, MAX_ITERATIONS, key="sb_iterations", step=50,
                          help="gradient steps per fit")
        right.number_input("Repeats", 1, MAX_REPEATS, key="sb_repeats",
                           help="timed steady-state calls after the first call; the median is reported")
        _optimizer_inputs()
        pass  # st.session_state["sb_store_slot"] = st.empty()
        refresh_store_caption()


def _dataset_inputs() -> None:
    st.radio("Dataset", list(DATASETS), format_func=DATASETS.get, key="sb_dataset", horizontal=True,
             help="oaks: 116 tree-leaf samples x 114 amplicons (pyPLNmodels). simulated: PLN draws "
                  "with a known B and Sigma. upload: your own counts.")
    kind = st.session_state["sb_dataset"]
    if kind == "oaks":
        if st.session_state["sb_replicate"] not in REPLICATES:
            st.session_state["sb_replicate"] = 1
        st.selectbox("Size: each row repeated", REPLICATES, key="sb_replicate",
                     format_func=lambda k: f"x{k:,}  (n = {OAKS_ROWS * k:,} rows)",
                     help="np.repeat(Y, k, axis=0), as the seed tutorial grows the data; p = 114")
    elif kind == "simulated":
        left, right = st.columns(2)
        left.number_input("n (rows)", 2, MAX_ROWS, key="sb_sim_n", step=100)
        right.number_input("p (columns)", 1, MAX_COLUMNS, key="sb_sim_p", step=10)
        left.number_input("d (covariates)", 1, MAX_COVARIATES, key="sb_sim_d",
                          help="columns of X, intercept included")
        right.number_input("seed", 0, 2**31 - 1, key="sb_sim_seed")
    else:
        _csv_inputs()


def _csv_inputs() -> None:
    st.file_uploader("Counts (CSV, one row per sample)", type=["csv"], key="sb_upload_counts",
                     on_change=_parse_upload, help="whole numbers >= 0; a header row of names is allowed")
    st.file_uploader("Log-offsets (optional CSV, same shape)", type=["csv"], key="sb_upload_offsets",
                     on_change=_parse_upload)
    counts_file = st.session_state.get("sb_upload_counts")
    if counts_file is not None and _upload_ids() != st.session_state.get("sb_csv_ids"):
        _parse_upload()
    if st.session_state.get("sb_csv_error"):
        st.error(st.session_state["sb_csv_error"], icon=":material/error:")
    elif st.session_state.get("sb_csv"):
        upload = st.session_state["sb_csv"]
        st.caption(f"Using **{upload['name']}**: n = {upload['data'].n:,} rows, p = {upload['data'].p:,} "
                   f"columns{', with log-offsets' if upload['offsets_name'] else ''}.")
    else:
        st.info("Upload a counts CSV to fit your own data.", icon=":material/upload_file:")


def _upload_ids() -> tuple:
    files = [st.session_state.get(k) for k in ("sb_upload_counts", "sb_upload_offsets")]
    return tuple(None if f is None else f.file_id for f in files)


def load_upload(counts_bytes: bytes, counts_name: str, offsets_bytes: bytes | None = None,
                offsets_name: str = "") -> dict[str, Any]:
    """Validates uploaded CSV bytes.

    Returns:
        {"data": CountData, "hash": content hash, "name", "offsets_name"}.

    Raises:
        DataError: saying which file, line and column is wrong and what is accepted.
    """
    counts = datasets.read_csv_bytes(counts_bytes, offsets_bytes, name=counts_name,
                                     offsets_name=offsets_name or "offsets")
    sources = [counts_bytes] + ([offsets_bytes] if offsets_bytes is not None else [])
    return {"data": counts, "hash": datasets.content_hash(*sources), "name": counts_name,
            "offsets_name": offsets_name if offsets_bytes is not None else ""}


def _parse_upload() -> None:
    counts_file = st.session_state.get("sb_upload_counts")
    offsets_file = st.session_state.get("sb_upload_offsets")
    st.session_state["sb_csv_ids"] = _upload_ids()
    st.session_state["sb_csv_error"] = None
    if counts_file is None:  # the user removed the file
        st.session_state["sb_csv"] = None
        return
    try:
        st.session_state["sb_csv"] = load_upload(
            counts_file.getvalue(), counts_file.name,
            offsets_file.getvalue() if offsets_file is not None else None,
            offsets_file.name if offsets_file is not None else "")
    except datasets.DataError as exc:
        st.session_state["sb_csv"] = None  # never fit a file that failed validation
        st.session_state["sb_csv_error"] = str(exc)


def _device_inputs() -> None:
    found = devices()
    available = found["available"] or ["cpu"]
    if st.session_state["sb_device"] not in available:
        st.session_state["sb_device"] = available[0]
    st.radio("Device", available, key="sb_device", horizontal=True,
             captions=[found["kinds"].get(p, "") for p in available] if len(available) > 1 else None)
    for platform, why in found["missing"].items():
        st.caption(f":material/block: ~~{platform}~~: {why}")
    if len(available) == 1:
        st.caption(f"{available[0]}: {found['kinds'].get(available[0], '')}")
    st.radio("Precision", ["float32", "float64"], key="sb_precision", horizontal=True,
             help="every array of the fit has this dtype")


def _optimizer_inputs() -> None:
    name = st.session_state["sb_optimizer"]
    with st.expander(f"Optimizer: {name} · init: {st.session_state['sb_init']}"):
        st.selectbox("Optimizer", list(OPTIMIZER_LABELS), key="sb_optimizer", format_func=OPTIMIZER_LABELS.get)
        if st.session_state["sb_optimizer"] != "seed":
            st.number_input("Learning rate", 1e-6, 10.0, key="sb_lr", format="%g", step=0.001)
        st.selectbox("Initialisation", list(INIT_LABELS), key="sb_init", format_func=INIT_LABELS.get)
        st.number_input("Tolerance (while_loop only)", 0.0, 0.99, key="sb_tol", format="%g", step=1e-6,
                        help="relative ELBO change under which while_loop stops; 0 runs every iteration. "
                             "Other strategies ignore it.")


def refresh_store_caption() -> None:
    """Redraws the sidebar's store line (path and run count), e.g. after runs were added."""
    slot = st.session_state.get("sb_store_slot")
    if slot is None:
        return
    try:
        store = run_store()
        count = len(store.list())
    except StoreError as exc:
        slot.error(f"Run store unusable: {exc}")
        return
    slot.caption(f":material/database: {count:,} stored run{'s' if count != 1 else ''} in `{store.path}`")


# --- what the sidebar describes ----------------------------------------------------------

def current_problem() -> dict[str, Any]:
    """The sidebar's settings as plain values (defaults where the sidebar was not drawn)."""
    values = {key.removeprefix("sb_"): st.session_state.get(key, value) for key, value in DEFAULTS.items()}
    values["csv"] = st.session_state.get("sb_csv") if values["dataset"] == "csv" else None
    return values


def dataset_spec(problem: dict[str, Any] | None = None) -> DatasetSpec:
    """The DatasetSpec of the sidebar's data. Raises SpecError (e.g. no valid upload)."""
    problem = problem or current_problem()
    kind = problem["dataset"]
    if kind == "oaks":
        return DatasetSpec(kind="oaks", replicate=int(problem["replicate"]))
    if kind == "simulated":
        return DatasetSpec(kind="simulated", n=int(problem["sim_n"]), p=int(problem["sim_p"]),
                           d=int(problem["sim_d"]), seed=int(problem["sim_seed"]))
    upload = problem.get("csv")
    if not upload:
        raise SpecError("no valid counts CSV: upload one in the sidebar (or pick oaks or simulated data)")
    return DatasetSpec(kind="csv", counts_path=upload["name"], offsets_path=upload["offsets_name"],
                       content_hash=upload["hash"])


def fit_spec(strategy: str, dataset: DatasetSpec | None = None, problem: dict[str, Any] | None = None) -> FitSpec:
    """The FitSpec for `strategy` with the sidebar's settings (and `dataset` if given).

    Settings a strategy ignores are normalised (lr for the seed optimizer, tol outside
    while_loop) so that the same computation always has the same `FitSpec.key`.
    """
    problem = problem or current_problem()
    name = problem["optimizer"]
    optimizer = OptimizerSpec(name, OptimizerSpec.lr if name == "seed" else float(problem["lr"]))
    return FitSpec(
        dataset=dataset or dataset_spec(problem), strategy=strategy, iterations=int(problem["iterations"]),
        precision=problem["precision"], device=problem["device"], optimizer=optimizer, init=problem["init"],
        repeats=int(problem["repeats"]), tol=float(problem["tol"]) if strategy == "while_loop" else 0.0)


def run_counts(problem: dict[str, Any] | None = None):
    """The uploaded CountData to pass to `engine.run(counts=...)`, or None."""
    problem = problem or current_problem()
    return problem["csv"]["data"] if problem["dataset"] == "csv" and problem.get("csv") else None


def spec_summary(spec: FitSpec) -> str:
    """One line naming the settings of a spec, strategy aside."""
    size = {"oaks": f"(n = {OAKS_ROWS * spec.dataset.replicate:,}, p = {OAKS_COLUMNS})"}.get(spec.dataset.kind, "")
    parts = [f"**{spec.dataset.label}** {size}".strip(), spec.precision, spec.device,
             f"{spec.iterations:,} iterations", f"first call + {spec.repeats} timed repeat{'s' * (spec.repeats > 1)}",
             f"optimizer {spec.optimizer.label}", f"init {spec.init}"]
    return " · ".join(parts)


def problem_label(problem: dict[str, Any] | None = None) -> str:
    """`spec_summary` of the sidebar's settings, or what is missing."""
    try:
        return spec_summary(fit_spec("scan", problem=problem))
    except SpecError as exc:
        return str(exc)


# --- running -----------------------------------------------------------------------------

def check_device(platform: str) -> None:
    """SpecError when `platform` has no device here (before anything runs)."""
    available = devices()["available"]
    if platform not in available:
        raise SpecError(f"device {platform!r} is not available here; available: {', '.join(available)}")


class _Reporter:
    """Feeds engine Progress reports to one progress bar and the shared live ELBO chart."""

    def __init__(self, bar, live, label: str, live_points: list[dict], run_index: int) -> None:
        self.bar, self.live, self.label = bar, live, label
        self.points, self.run_index = live_points, run_index
        self.last_draw = 0.0

    def __call__(self, progress) -> None:
        phase = progress.phase
        fraction = {"data": 0.02, "transfer": 0.05, "compile": 0.1, "done": 1.0}.get(phase, 0.0)
        text = PHASE_TEXT.get(phase, phase)
        if phase == "first_call":
            fraction = 0.15 + 0.45 * progress.done / max(1, progress.total)
            if progress.total and progress.done:
                text += f": iteration {progress.done:,}/{progress.total:,}"
        elif phase == "repeat":
            fraction = 0.6 + 0.4 * progress.done / max(1, progress.total)
            text += f": repeat {progress.done + 1}/{progress.total}"
        if progress.elbo is not None:
            text += f", ELBO {progress.elbo:,.1f}"
            self.points.append({"run_id": self.run_index, "strategy": self.label, "label": self.label,
                                "iteration": progress.done, "elbo": progress.elbo})
            # Redraws are throttled: reports arrive inside the timed first call.
            now = time.perf_counter()
            if now - self.last_draw > 0.5 or progress.done == progress.total:
                self.last_draw = now
                self._draw_live()
        self.bar.progress(min(1.0, fraction), text=f"**{self.label}**: {text}")

    def _draw_live(self) -> None:
        import pandas as pd

        from core import charts

        chart = charts.elbo_curves(pd.DataFrame(self.points)).properties(
            title="Live: log(-ELBO) during the first call (Python-loop strategies)", height=220)
        self.live.altair_chart(chart, width="stretch")


def run_specs(specs: list[FitSpec], counts=None, labels: list[str] | None = None,
              title: str = "Running") -> tuple[list[RunResult], str | None]:
    """Runs and stores `specs` in order, showing a status box with a progress bar per spec.

    Args:
        specs: what to run; checked for device availability before anything runs.
        counts: uploaded CountData for csv specs, else None.
        labels: progress-bar label per spec (default: the strategy).
        title: the status box's label while running.

    Returns:
        (the stored results, an error message or None). Each result is stored as soon as
        its run has finished; a run that fails stores nothing.
    """
    from core import engine

    labels = labels or [spec.strategy for spec in specs]
    try:
        for platform in {spec.device for spec in specs}:
            check_device(platform)
        store = run_store()
    except (SpecError, StoreError) as exc:
        return [], str(exc)
    results: list[RunResult] = []
    error = None
    live_points: list[dict] = []
    with st.status(f"{title}…", expanded=True) as status:
        bars = [st.progress(0.0, text=f"**{label}**: waiting") for label in labels]
        live = st.empty()
        for index, (spec, label, bar) in enumerate(zip(specs, labels, bars)):
            status.update(label=f"{title}: {label} ({index + 1} of {len(specs)})…")
            try:
                result = engine.run(spec, counts=counts, cache=executable_cache(),
                                    on_progress=_Reporter(bar, live, label, live_points, index))
                store.add(result)
            except (SpecError, StoreError) as exc:
                error = f"{label}: {exc}"
            except Exception as exc:  # noqa: BLE001 - shown, not raised: a projector must not show a traceback
                log.exception("run of %s failed", spec)
                error = f"{label} failed with an internal error ({type(exc).__name__}: {exc}); see the server log"
            if error:
                bar.progress(0.0, text=f"**{label}**: failed")
                break
            results.append(result)
            bar.progress(1.0, text=f"**{label}**: done: {result.per_iter_ms:,.3f} ms/iteration, "
                                   f"compile {result.trace_lower_s + result.compile_s:.2f} s ({result.cache})")
        done = f"{len(results)} run{'s' * (len(results) != 1)} stored"
        if error:
            status.update(label=f"Stopped: {done}; {error}", state="error", expanded=True)
        else:
            status.update(label=f"Done: {done}", state="complete", expanded=False)
    refresh_store_caption()
    return results, error


# --- showing runs ------------------------------------------------------------------------

def runs_frame(results: list[RunResult]) -> pd.DataFrame:
    """One row per run, every scalar field of RunResult (no ELBO curve)."""
    import pandas as pd

    rows = [r.to_dict(with_elbo=False) for r in results]
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame.drop(columns=["spec", "versions"])
    return frame


def elbo_long(results: list[RunResult], labels: list[str] | None = None) -> pd.DataFrame:
    """ELBO curves in long format for `charts.elbo_curves`.

    `wall_s` is an estimate, not a measurement: trace+lower and compile time plus
    (iteration + 1) steady-state iterations, so that compilation shows as a late start.
    """
    import numpy as np
    import pandas as pd

    labels = labels or [r.strategy for r in results]
    parts = []
    for result, label in zip(results, labels):
        iteration = np.arange(len(result.elbo))
        start = result.trace_lower_s + result.compile_s
        parts.append(pd.DataFrame({
            "run_id": result.id, "strategy": result.strategy, "label": label, "iteration": iteration,
            "elbo": np.asarray(result.elbo, dtype=float),
            "wall_s": start + (iteration + 1) * result.per_iter_ms / 1e3}))
    if not parts:
        return pd.DataFrame(columns=["run_id", "strategy", "label", "iteration", "elbo", "wall_s"])
    return pd.concat(parts, ignore_index=True)


def show_runs_table(frame: pd.DataFrame, **kwargs) -> Any:
    """The compact results table (strategy, cache, timings, compile counts, ELBO, status)."""
    columns = [c for c in TABLE_COLUMNS if c in frame]
    return st.dataframe(frame[columns], hide_index=True, column_config=TABLE_COLUMNS, **kwargs)


def agreement_badge(frame: pd.DataFrame) -> float:
    """A badge with the largest relative difference of the final ELBOs; returns it."""
    from core import charts

    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    spread = charts.agreement(ok["final_elbo"])
    tolerance = AGREEMENT_TOLERANCE["float64" if set(ok.get("precision", [])) == {"float64"} else "float32"]
    if len(ok) < 2 or spread != spread:  # NaN: nothing to compare
        st.badge("Agreement: needs two finished runs", color="gray", icon=":material/help:")
    elif spread < tolerance:
        st.badge(f"Final ELBOs agree: max relative difference {spread:.1e} (< {tolerance:.0e})",
                 color="green", icon=":material/check_circle:")
    else:
        st.badge(f"Final ELBOs differ: max relative difference {spread:.1e} (> {tolerance:.0e})",
                 color="orange", icon=":material/warning:")
    return spread


def when(created_at: float) -> str:
    """Epoch seconds as local 'YYYY-MM-DD HH:MM'."""
    return datetime.datetime.fromtimestamp(created_at).strftime("%Y-%m-%d %H:%M")


def chart(figure, caption: str | None = None) -> None:
    """An Altair chart across its column, with a one-line caption under it."""
    st.altair_chart(figure, width="stretch")
    if caption:
        st.caption(caption)


def replace_spec(spec: FitSpec, **changes) -> FitSpec:
    return dataclasses.replace(spec, **changes)
