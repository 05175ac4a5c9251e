"""The sidebar drawn on every page: the problem's settings and the run store's line.

Its widgets are the fields of `settings.Settings`, under the keys `settings.key(field)`;
their choices come from `core.spec`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import NamedTuple

import streamlit as st

from core import catalog
from core.cluster.devices import Offered
from core.spec import DEFAULTS as FRONT_DOOR
from core.spec import (
    INITS,
    LEARNING_RATE_OPTIMIZERS,
    LR_RANGE,
    OAKS_FORMULAS,
    OAKS_REPLICATES,
    OAKS_ROWS,
    OPTIMIZERS,
    PRECISIONS,
    TOL_RANGE,
    SpecError,
    cap,
    default_cap,
)
from core.store.run_store import StoreError
from pages.ui import resources, state, upload
from pages.ui.settings import DEFAULTS, OPTIMIZERS_INIT, START_FORMULAS, key, start_of
from pages.ui.text import md, public

# How often this session's own progress redraws the sidebar's device line.
QUEUE_REFRESH_S = 1.0
# How often the device line redraws itself while the device is busy (`sidebar`).
BUSY_REFRESH_S = 2.0

# The dataset kinds drawn from the host that the sidebar offers, and how it names them.
DATASETS = {"oaks": "oaks", "simulated": "simulated", "csv": "CSV"}
# Short enough for the box in Compare's folded problem (158 px at 1024): "the optimizer's default" was cut.
DEFAULT_INIT_TEXT = "the optimizer's own"
INIT_LABELS = {OPTIMIZERS_INIT: f"{DEFAULT_INIT_TEXT}: {FRONT_DOOR.starts()}",
               **{name: f"{name}: {formula}" for name, formula in START_FORMULAS.items()}}


# Whole-number settings, typed in float boxes (see `_whole_number_input`).
WHOLE_NUMBERS = ("replicate", "sim_n", "sim_p", "sim_d", "sim_seed", "iterations", "repeats")


# Pages (their url_path) that read no problem from the sidebar: there its boxes fold away, as a
# sidebar reading "oaks x1" beside Compare's table of every run read as a filter of it.
PAGES_WITHOUT_PROBLEM = ("compare", "about")
FOLDED_PROBLEM = "Problem: for Run, Story, Scaling and Under the hood"


def sidebar(page: str = "run") -> None:
    """The problem settings shared by Run, Story, Scaling and Under the hood; on `page`s that
    read none (`PAGES_WITHOUT_PROBLEM`) they are drawn folded, so that they keep their values."""
    for field in dataclasses.fields(DEFAULTS):
        if field.name in WHOLE_NUMBERS and field.name != "replicate":
            state.default(key(field.name), float(getattr(DEFAULTS, field.name)))
        elif field.name != "upload":
            state.default(key(field.name), getattr(DEFAULTS, field.name))
    with st.sidebar:
        if page in PAGES_WITHOUT_PROBLEM:
            with st.expander(FOLDED_PROBLEM, icon=":material/tune:"):
                _problem_inputs()
        else:
            st.header("Problem")
            _problem_inputs()
        # While the device is busy the line redraws itself (a fragment, every `BUSY_REFRESH_S`):
        # drawn once with the page it kept saying "busy" after the run ended, a cancelled one too,
        # until the next click. A page drawn while it is free sets no timer; one set while busy
        # ends at the page's next run (the browser drops fragments' timers then). Ending it
        # sooner with a rerun of the page would wipe what the page just said (an error, "cancelled").
        line = _device_line_text()
        st.session_state["sb_queue_page_run"] = True
        st.fragment(_device_line, run_every=BUSY_REFRESH_S if line.busy else None)(line)
        st.session_state["sb_store_slot"] = st.empty()
        refresh_store_caption()


class _Line(NamedTuple):
    """The device line's text, and whether the device is busy (or its queue unreadable)."""

    text: str
    busy: bool


def _device_line_text() -> _Line:
    """What holds and waits for the chosen device (`resources.tickets`), as one line."""
    platform = st.session_state["sb_device"]
    try:
        tickets = resources.tickets(platform)
    except Exception as exc:  # noqa: BLE001 - a cluster or queue that does not answer: runs will say so too
        return _Line(f":material/error: the device queue cannot be read: {public(exc)}", True)
    if not tickets:
        return _Line(f":material/check_circle: **{platform}** is free", False)
    running = [ticket for ticket in tickets if ticket.running]
    waiting = len(tickets) - len(running)
    busy = md(running[0].describe()) if running else "starting"
    more = f" and {len(running) - 1} more" if len(running) > 1 else ""
    queued = f"; {waiting} waiting" if waiting else ""
    return _Line(f":material/hourglass_top: **{platform}** busy: {busy}{more}{queued}", True)


def _device_line(drawn_with_the_page: _Line) -> None:
    """The device line's slot, written as soon as it is made (an empty slot, then a line read
    a moment later, blinked at every redraw). `drawn_with_the_page`: the line the page's own run
    just read; a redraw of the fragment alone is handed the same argument, so reads again."""
    fresh = st.session_state.pop("sb_queue_page_run", False)
    line = drawn_with_the_page if fresh else _device_line_text()
    st.session_state["sb_queue_slot"] = slot = st.empty()
    slot.caption(line.text)
    st.session_state["sb_queue_drawn"] = time.monotonic()


def queue_caption_is_stale() -> None:
    """The device line is out of date (a run is about to be queued): the next
    `refresh_queue_caption` redraws it, however soon."""
    st.session_state["sb_queue_drawn"] = 0.0


def refresh_queue_caption(now: bool = False) -> None:
    """Redraws the sidebar's device line (`_device_line_text`). The sidebar is drawn before a
    page's work begins, so this session's own progress reports call this (at most every
    `QUEUE_REFRESH_S`; `now`: at once): the session that started a run sees the device busy
    with it, not "free"."""
    slot = st.session_state.get("sb_queue_slot")
    if slot is None:
        return
    moment = time.monotonic()
    if not now and moment - st.session_state.get("sb_queue_drawn", 0.0) < QUEUE_REFRESH_S:
        return
    st.session_state["sb_queue_drawn"] = moment
    slot.caption(_device_line_text().text)


def _problem_inputs() -> None:
    _dataset_inputs()
    _device_inputs()
    # One box a row: two abreast at 1024 px, each under 130 px wide, lost their - and + buttons
    # (Streamlit hides them in a narrow box), and a talk's settings then had to be typed.
    _whole_number_input(st, "Iterations", 1, _cap("iterations"), "sb_iterations", step=50,
                        help="the most iterations a fit runs (fewer when it stops at the tolerance)")
    _whole_number_input(st, "Repeats", 1, _cap("repeats"), "sb_repeats",
                        help="timed steady-state calls after the first call, at least: a short fit gets "
                             "more, until 0.25 s of calls are timed by default. A test that two timings differ "
                             "at p < 0.05 needs 4 repeats of each (or 3 against 5); the median is reported")
    _optimizer_inputs()


def _shown(key: str, options=None) -> dict:
    """A sidebar widget's `value=`, or its `index=` among `options`: what the session holds.

    Its default, in the browser's terms. After a page change with the Optimizer box open the
    browser drew every sidebar box at the default it was sent (the first option, the least
    number, 0 for a box without one: float32, seed, Iterations 0) while the session still held
    the user's settings, and sent those back at the next click, which made them the settings.
    Sent as the default, the session's value is what such a box shows and sends."""
    held = st.session_state[key]
    if options is None:
        return {"value": held}
    options = list(options)
    return {"index": options.index(held)} if held in options else {}


def _whole_number_input(container, label: str, low: int, high: int, key: str, step: int = 1, **options) -> None:
    """A box for a whole number that refuses what it cannot take, with a message.

    Streamlit's integer box reads "1e9" as 1 (its browser side stops at the first
    non-digit) without a word; a float box reads it as 1e9. Given bounds, the browser
    then refuses it with a generic note and the server never hears of it, so the box has
    none: a value outside [low, high] reaches this page, which keeps the last valid one
    and says so, naming the range (drawn under the box's row, across the sidebar). A
    fraction is put back the same way: the box would show it rounded ("13" for 12.5) beside a
    refusal of 12.5 that stayed until a whole number was typed.
    """
    if isinstance(st.session_state.get(key), int):  # set by a test or an older session: the box's own type
        st.session_state[key] = float(st.session_state[key])
    refused = _keep_in_range(label, key, low, high)
    container.number_input(label, key=key, persist_state="session", step=float(step), format="%.0f", **_shown(key),
                           **options)
    if refused:
        st.warning(refused, icon=":material/block:")
        st.toast(refused, icon=":material/block:")  # in view on a projector, where the sidebar's foot is not


def _keep_in_range(label: str, key: str, low: int, high: int) -> str | None:
    """Put back the last valid value of box `key` when it holds a fraction or a value outside
    [low, high]; the message saying so, or None."""
    last_valid = f"{key}_last_valid"
    value = st.session_state.get(key)
    in_range = isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high
    if not isinstance(value, (int, float)) or (in_range and float(value).is_integer()):
        if isinstance(value, (int, float)):
            st.session_state[last_valid] = value
        return None
    kept = st.session_state.get(last_valid)
    kept = float(min(max(kept, low), high)) if isinstance(kept, (int, float)) else float(low)
    st.session_state[key] = kept
    if in_range:
        return f"{label}: {value:g} is not a whole number; kept {kept:,.0f}."
    typed = f"{value:,.0f}" if math.isfinite(value) and abs(value) < 1e15 else f"{value:g}"
    return f"{label}: {typed} is outside the allowed range, {low:,} to {high:,}; kept {kept:,.0f}."


def _cap(name: str) -> int:
    """The widget's maximum, `core.spec.cap(name)` (a value above it is put back by `_keep_in_range`)."""
    try:
        high = cap(name)
    except SpecError as exc:  # a bad cap on the server (its variable, core.config): say so, use the built-in
        st.error(public(exc), icon=":material/error:")
        high = default_cap(name)
    return high


def refresh_store_caption() -> None:
    """Redraws the sidebar's store line (its run count; never its path, which is the
    server's business), e.g. after runs were added."""
    slot = st.session_state.get("sb_store_slot")
    if slot is None:
        return
    try:
        store = resources.run_store()
        count = store.count()
    except StoreError as exc:
        slot.error(f"Run store unusable: {public(exc)}")
        return
    slot.caption(f":material/database: {count:,} stored run{'s' if count != 1 else ''}")


def _dataset_inputs() -> None:
    st.radio("Dataset", list(DATASETS), format_func=DATASETS.get, key="sb_dataset", persist_state="session",
             **_shown("sb_dataset", DATASETS),
             horizontal=True,
             help="oaks: 116 tree-leaf samples x 114 amplicons (pyPLNmodels). simulated: PLN draws "
                  "with a known B and Sigma. upload: your own counts.")
    kind = st.session_state["sb_dataset"]
    if kind != "csv":  # first: a run cut short by the next click has still said it
        upload.uploaders_hidden()
    if kind == "oaks":
        if st.session_state["sb_replicate"] not in OAKS_REPLICATES:
            st.session_state["sb_replicate"] = DEFAULTS.replicate
        st.selectbox("Size: each row repeated", OAKS_REPLICATES, key="sb_replicate", persist_state="session",
                     **_shown("sb_replicate", OAKS_REPLICATES),
                     format_func=lambda k: f"x{k:,}  (n = {OAKS_ROWS * k:,} rows)",
                     help="np.repeat(Y, k, axis=0), as the seed tutorial grows the data; p = 114")
        if st.session_state["sb_formula"] not in OAKS_FORMULAS:
            st.session_state["sb_formula"] = DEFAULTS.formula
        st.selectbox("Covariates", OAKS_FORMULAS, key="sb_formula", persist_state="session",
                     **_shown("sb_formula", OAKS_FORMULAS),
                     format_func=lambda formula: formula or "~ 1 (intercept only)",
                     help="from oaks' samples table, as pyPLNmodels' formulas: tree (3 levels, one-hot, "
                          "'intermediate' the reference), orientation (SW or NE), dist2ground (a number)")
    elif kind == "simulated":
        # One box a row, for its - and + buttons (as Iterations).
        _whole_number_input(st, "n (rows)", 2, _cap("rows"), "sb_sim_n", step=100)
        _whole_number_input(st, "p (columns)", 1, _cap("columns"), "sb_sim_p", step=10)
        _whole_number_input(st, "d (covariates)", 1, _cap("covariates"), "sb_sim_d",
                            help="columns of X, intercept included")
        _whole_number_input(st, "seed", 0, 2**31 - 1, "sb_sim_seed")
    else:
        upload.csv_inputs()


def _device_inputs() -> None:
    try:
        found = resources.devices()
    except Exception as exc:  # noqa: BLE001 - the cluster cannot be reached: say so, offer the CPU
        st.error(f"The cluster that runs the fits cannot be reached: {public(exc)}", icon=":material/lan:")
        found = Offered(available=(), kinds={}, missing={}, workers=0)  # the error says why
    available = list(found.available) or ["cpu"]
    if st.session_state["sb_device"] not in available:
        st.session_state["sb_device"] = available[0]
    st.radio("Device", available, key="sb_device", persist_state="session", horizontal=True,
             **_shown("sb_device", available),
             captions=[found.kinds.get(p, "") for p in available])
    for platform, why in found.missing.items():
        st.caption(f":material/block: **{platform}** {why}")
    st.radio("Precision", PRECISIONS, key="sb_precision", persist_state="session", horizontal=True,
             **_shown("sb_precision", PRECISIONS),
             help="every array of the fit has this dtype")


def _optimizer_inputs() -> None:
    name = st.session_state["sb_optimizer"]
    # A key keeps the box open while its label follows the choices made inside it. The
    # options are bare names (a sidebar box is about 200 px wide); the help describes them.
    start = start_of(name, st.session_state["sb_init"])
    with st.expander(f"Optimizer: {name} · init: {start}", key="optimizer_box"):
        st.selectbox("Optimizer", OPTIMIZERS, key="sb_optimizer", persist_state="session",
                     **_shown("sb_optimizer", OPTIMIZERS),
                     help="\n".join(f"- {o.label}" for o in catalog.OPTIMIZERS.values()))
        # The optimizer's own start by default, read when the fit is specified, as the tolerance
        # below is: an optimizer switch moves it with no write to the box. The option's text is
        # fixed: the browser sends back the text shown, and a text naming the last optimizer's
        # start matched no option after a switch, so the box kept showing that start.
        st.selectbox("Initialisation", (OPTIMIZERS_INIT, *INITS), key="sb_init", persist_state="session",
                     **_shown("sb_init", (OPTIMIZERS_INIT, *INITS)),
                     format_func=lambda v: DEFAULT_INIT_TEXT if v == OPTIMIZERS_INIT else v,
                     help="\n".join(f"- {label}" for label in INIT_LABELS.values()))
        if st.session_state["sb_init"] == OPTIMIZERS_INIT:
            # With the start's formula: "seed starts from seed" alone read as a riddle.
            st.caption(f"{name} starts from **{start}**: {START_FORMULAS[start]}")
        # Under the start rather than between the two boxes: there, choosing a gradient optimizer
        # pushed Initialisation below the fold of a 768 px sidebar.
        if st.session_state["sb_optimizer"] in LEARNING_RATE_OPTIMIZERS:
            st.number_input("Learning rate", *LR_RANGE, key="sb_lr", persist_state="session", format="%g", step=0.001,
                            **_shown("sb_lr"))
        # Empty means the precision's default, read when the fit is specified (its value is the
        # placeholder; one naming the precision too was cut at 1024 px): the tolerance follows a
        # precision switch with no write to this box. A callback that wrote the other precision's
        # default into it was lost when a quick hand's clicks were merged into one rerun
        # (Streamlit ran no callback), and float64 then ran at float32's tolerance.
        precision = st.session_state["sb_precision"]
        # Sent with what it holds, as every box (`_shown`): sent empty, a redrawn box came back
        # empty and a link's tol=0 became the default. A box sent a number cannot be emptied, so a
        # button empties it.
        st.number_input("Tolerance", *TOL_RANGE, key="sb_tol", persist_state="session", format="%g",
                        **_shown("sb_tol"), step=1e-7, placeholder=f"default: {FRONT_DOOR.tol_for(precision):g}",
                        help="every strategy stops after two iterations in a row whose relative ELBO change is "
                             f"under this; 0 runs every iteration. Empty: the precision's default "
                             f"({FRONT_DOOR.tol_for('float32'):g} in float32, {FRONT_DOOR.tol_for('float64'):g} in "
                             "float64, whose sums resolve a smaller change), as on the command line")
        if st.session_state["sb_tol"] is not None:
            # Short: "Use float64's default (1e-09)" broke inside the number at 1024 px.
            st.button(f"Default: {FRONT_DOOR.tol_for(precision):g}", key="sb_tol_default",
                      icon=":material/restart_alt:", on_click=_empty_tolerance,
                      help="empties the Tolerance box: the precision's default (this one's shown), which follows a "
                           "precision switch")


def _empty_tolerance() -> None:
    """The Tolerance box's button: the box empty (the precision's default) when drawn next."""
    st.session_state["sb_tol"] = None
