"""Running specs from a page on the cluster's workers: a status box, a progress bar per spec, a
live ELBO chart; each result stored as it comes back (`core.cluster.stored`). The run is waited
for in a thread of its own (`core.run.watched`), so that it outlives a page whose browser goes:
a click elsewhere stops it, a closed tab does not."""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

import pandas as pd
import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException, StopException

from core.charts import lines
from core.cluster import stored
from core.cluster.errors import RunInterrupted
from core.coordination import budget, under_way
from core.results.result import RunResult
from core.run import batches, lifecycle, time_estimate, watched
from core.run.progress import PHASES, Cancelled, Progress
from core.spec import FitSpec, SpecError
from core.store.run_store import StoreError
from pages.ui import display, resources, sign_in
from pages.ui.run_notices import RunNotices
from pages.ui.sidebar import queue_caption_is_stale, refresh_queue_caption, refresh_store_caption
from pages.ui.text import md, public

log = logging.getLogger(__name__)

# The ids of the runs this browser session made, on any page (`ran_here`).
_SESSION_RUNS = "session_run_ids"


# How often a run's progress bar is redrawn within a phase, at most (`_Reporter`).
BAR_REDRAWS_PER_S = 4


class _Reporter:
    """Feeds engine Progress reports to one progress bar and the shared live ELBO chart.

    Reports arrive inside the timed first call, so the chart (about 30 ms to build and
    send) is redrawn at most once a second and only once the call has lasted a second:
    a short first call is never slowed by it, a long one (eager) by about 3%. `finish`
    draws the final curve after the timed call.
    """

    def __init__(self, bar, live, label: str, live_points: list[dict], run_index: int, strategy: str,
                 repeats: int, stops_early: bool = False) -> None:
        self.bar, self.live, self.label, self.strategy, self.repeats = bar, live, label, strategy, repeats
        self.stops_early = stops_early
        self.shown_label = md(label)
        self.points, self.run_index = live_points, run_index
        self.started = self.last_draw = None
        self.queue_shown = 0.0
        self.bar_shown, self.bar_phase = 0.0, ""

    def __call__(self, progress) -> None:
        refresh_queue_caption()
        phase = progress.phase
        if phase == "queued":
            self._queued(progress)
            return
        text = PHASES[phase].text
        if phase == "first_call" and progress.total and progress.done:
            # A fit with a tolerance stops when it converges, often far under its cap: "41/500"
            # read as a tenth done, and the bar then jumped.
            text += (f": iteration {progress.done:,} of at most {progress.total:,}" if self.stops_early
                     else f": iteration {progress.done:,}/{progress.total:,}")
        elif phase == "repeat":
            text += f": repeat {progress.done + 1}/{progress.total}"
            if progress.total > self.repeats:
                # Said where the counts differ (5/6 beside 5/9) from the settings' "at least 3".
                text += f" (over {self.repeats}: a quick fit is timed more often)"
        if progress.elbo is not None:
            text += f", ELBO {progress.elbo:,.1f}"
            # The strategy's own name, so the line takes its colour (a label such as
            # "scan · n = 1,160" is no strategy the palette knows).
            self.points.append({"run_id": self.run_index, "strategy": self.strategy, "label": self.label,
                                "iteration": progress.done, "elbo": progress.elbo})
            now = time.perf_counter()
            self.started = self.started or now
            if now - self.started > 1.0 and now - (self.last_draw or self.started) > 1.0:
                self.last_draw = now
                self._draw_live()
        # At most BAR_REDRAWS_PER_S a second within a phase (its first and last report always):
        # a quick fit's repeats report dozens a second, each a message to the browser and a
        # redraw there, on the machine that times the runs; four a second read as smoothly.
        now = time.perf_counter()
        last = bool(progress.total) and progress.done + (phase == "repeat") >= progress.total
        if phase == self.bar_phase and not last and now - self.bar_shown < 1 / BAR_REDRAWS_PER_S:
            return
        self.bar_shown, self.bar_phase = now, phase
        self.bar.progress(progress.fraction, text=f"**{self.shown_label}**: {text}")

    def _queued(self, progress) -> None:
        # The queue reports every 50 ms; redrawing twice a second is enough to read, and
        # each redraw is where a Cancel click stops the wait.
        now = time.perf_counter()
        if now - self.queue_shown < 0.5:
            return
        self.queue_shown = now
        ahead = progress.ahead
        who = "; ".join(md(ticket.describe()) for ticket in ahead[:3]) + (" …" if len(ahead) > 3 else "")
        text = (f"waiting for a worker and the device: {len(ahead)} ahead in the queue, "
                f"{progress.waited_s:.0f} s so far. Ahead: {who or 'a worker is being started or released'}")
        self.bar.progress(0.0, text=f"**{self.shown_label}**: {text}")

    def finish(self) -> None:
        """Draws the final live curve, if this run reported any ELBO."""
        if any(point["run_id"] == self.run_index for point in self.points):
            self._draw_live()

    def _draw_live(self) -> None:
        points = pd.DataFrame(self.points)
        # Named as the progress bars above name them where that is not the strategy (a story
        # step, "1 · No JIT"; a sweep's "scan · n = 1,160"), each line in its strategy's colour.
        chart = lines.elbo_curves(points, name_runs=bool((points["label"] != points["strategy"]).any())).properties(
            title="Live: log(-ELBO) during the first call (the fits that report as they go)", height=220)
        display.chart(chart, slot=self.live, legend="right")


def say_planned_time(store, specs: list[FitSpec], counts=None, sweep: bool = False, cold: bool = False) -> None:
    """Say how long `specs`, timed together (`sweep`: each size's batch in turn), compiled
    from scratch where `cold`, will hold the device where this server's stored runs tell and
    it is long: a warning where it, or a sweep's batch, passes the run's time budget
    (`core.run.time_estimate`)."""
    try:
        seconds = budget.max_run_seconds()
    except SpecError:
        return  # the run itself says what is wrong with the setting
    planned = (time_estimate.sweep_note(specs, store, seconds, cold) if sweep
               else time_estimate.plan_note(specs, counts, store, seconds, cold))
    if planned:
        text, over = planned
        if over:
            st.warning(text, icon=":material/schedule:")
        else:
            st.caption(text)


def places(running: bool):
    """(the run's place, the page's place under it), for a page that runs work in a status box
    above what it shows.

    During a run the page's place holds an empty element: Streamlit keeps the last script's
    elements until the new one replaces them, and a container drawn there, even a new one,
    kept the last results under the status box, faded, until the run ended (Story: step 1's
    text under "Step 2" for 25 s; Run: the last results under Run again's). Other scripts
    draw the page in a container, which replaces the last one's elements in place, with no
    blank between them. A run that ends in an error draws the page after all: `.container()`
    of its place.
    """
    return st.empty(), (st.empty() if running else st.container())


def queue_notice(slot):
    """A `Progress` callback for work that is not a fit (an inspection, a demonstration, a
    measurement of peaks): while it waits for a worker and the device, `slot` (an `st.empty`)
    says so and what is ahead, at most twice a second; once it runs, the notice goes."""
    shown = [0.0]

    def report(progress) -> None:
        refresh_queue_caption()
        if progress.phase != "queued":
            slot.empty()
            return
        now = time.perf_counter()
        if now - shown[0] < 0.5:
            return
        shown[0] = now
        ahead = progress.ahead
        who = "; ".join(md(ticket.describe()) for ticket in ahead[:3]) + (" …" if len(ahead) > 3 else "")
        slot.caption(f":material/hourglass_top: Waiting for a worker and the device: {len(ahead)} ahead in the "
                     f"queue, {progress.waited_s:.0f} s so far. Ahead: "
                     + (who or "a worker is being started or released"))

    return report


# The session-state key of this session's `run_notices.RunNotices`.
_NOTICES = "run_notices"


def _notices() -> RunNotices:
    """This session's `RunNotices`, made on first use. A run reads it before it starts: once a
    script is being stopped every read of session state raises the stop again, and Streamlit
    drops what a stopped run assigned there."""
    notices = st.session_state.get(_NOTICES)
    if not isinstance(notices, RunNotices):
        st.session_state[_NOTICES] = notices = RunNotices()
    return notices


def _note_cancelled(title: str) -> None:
    """A Cancel button's callback: the work titled `title` was cancelled, for `show_cancelled`."""
    _notices().cancelled(md(title))


def forget_cancelled() -> None:
    """Drops the notice of a run stopped or cancelled before this script, for a page whose new
    run redoes its work (Story, which times again every step the stopped run left unstored):
    said after the new run, "cancelled" read as that run's end."""
    _notices().redone()


def cancel_button(title: str):
    """A Cancel button for the work titled `title`; returns its slot, to empty when done.

    A click stops the page's script at its next progress update (Streamlit reruns the
    page), which tells the run's thread and the worker running it to stop (at its next
    iteration, call or repeat); the run's in-flight note goes when the worker has stopped.
    """
    slot = st.empty()
    slot.button("Cancel", key="run_cancel", icon=":material/stop_circle:", on_click=_note_cancelled,
                args=(title,), help="stop now: a compiled loop stops when its current call returns")
    return slot


def runs_under_way(store) -> None:
    """With a password configured, the runs under way in the shared store (any session,
    the command line) with a Cancel each, for whoever gives the password: the run's own
    process stops it within seconds (`RunStore.request_cancel`) and stores nothing.
    Without a password only the session that started a run can cancel it."""
    if sign_in.password() is None:
        return
    notes = store.in_flight()
    if not notes:
        return
    with st.expander(f"Runs under way on this server ({len(notes)})", icon=":material/stop_circle:"), \
            st.form("run_cancel_any_form", border=False):
        # A form: the password goes with the click however the button is reached.
        guess = sign_in.password_field("run_cancel_any_password", "cancel a run")
        where = _where(notes)
        for note in notes:
            spec = note["spec"]
            dataset = spec.get("dataset", {})
            what = (f"{spec.get('strategy', '?')} · {dataset.get('kind', '?')} · {spec.get('precision', '?')} · "
                    f"{spec.get('iterations', '?')} iterations, started {time.time() - note['started_at']:.0f} s ago "
                    f"on {note['host']}{where.get(under_way.batch_of(note['lease'] or ''), '')}")
            left, right = st.columns([3, 1], vertical_alignment="center")
            left.caption(md(what))
            if right.form_submit_button("Cancel", key=f"run_cancel_any_{note['id']}", icon=":material/stop_circle:"):
                refused = sign_in.refusal(guess)
                if refused:
                    sign_in.say_refused(refused, "Nothing was cancelled.")
                elif store.request_cancel(note["id"]):
                    st.toast("Cancel asked: the run stops within seconds and stores nothing.",
                             icon=":material/stop_circle:")


def _where(notes: list[dict]) -> dict[str, str]:
    """"; running for 4 s" or "; waiting for 2 s" by the key runs are served under, from the
    device queues' tickets, which carry it (`core.coordination.under_way`: a note's batch's
    key). {} when the queues do not answer."""
    found = {}
    try:
        for platform in {note["spec"].get("device", "cpu") for note in notes}:
            for ticket in resources.tickets(platform):
                if ticket.run:
                    found[ticket.run] = f"; {ticket.state()}"
    except Exception:  # noqa: BLE001 - the sidebar says the queue cannot be read
        log.debug("the device queues did not answer", exc_info=True)
        return {}
    return found


def show_cancelled() -> None:
    """After a Cancel click, or a run stopped by a click elsewhere: say what happened (once)."""
    if notice := _notices().take():
        st.info(notice, icon=":material/stop_circle:")


def _ready(specs: list[FitSpec]):
    """(the run store, the cluster) once every spec's device is served; SpecError or
    StoreError saying what is missing."""
    for platform in {spec.device for spec in specs}:
        resources.check_device(platform)
    return resources.run_store(), resources.cluster()


def _progress_slots(title: str, labels: list[str]):
    """In a status box: (its Cancel button's slot, a progress bar per label, the live chart's slot)."""
    cancel_slot = cancel_button(title)
    bars = [st.progress(0.0, text=f"**{md(label)}**: waiting") for label in labels]
    return cancel_slot, bars, st.empty()


def run(specs: list[FitSpec], labels: list[str] | None = None, title: str = "Running", counts=None,
        cold: bool = False, together: bool = True) -> tuple[list[RunResult], str | None]:
    """Runs and stores `specs` in one status box, with a progress bar per spec: the JAX
    strategies of one problem timed together, their repeats in turn, so that their ratios are
    free of the machine's load at one moment; the peers (whose timing is their own) and fits
    without a partner one by one (`core.run.batches`). Once per script run: its Cancel button
    has one key, so a page hands it all it runs at once (a second call raises
    StreamlitDuplicateElementKey).

    Args:
        specs: what to run; checked for device availability before anything runs.
        labels: progress-bar label per spec (default: the strategy).
        title: the status box's label while running.
        counts: uploaded CountData for csv specs, else None.
        cold: compile every spec from scratch (`core.run.engine.run(cold=True)`).
        together: False runs every spec alone.

    Returns:
        (the stored results, an error message or None). Each batch's results are stored as
        soon as it has finished; a failure stops the batches after it and stores nothing of
        its own, a dead worker stores its batch as interrupted. The message is markdown with
        every user- or store-supplied part escaped (`pages.ui.text`).
    """
    labels = labels or [spec.strategy for spec in specs]
    try:
        store, cluster = _ready(specs)
    except (SpecError, StoreError) as exc:
        return [], public(exc)
    # The sidebar's device line was read as this script began, before the run was queued: the
    # first progress report redraws it (throttled, it said "free" for a second more).
    queue_caption_is_stale()
    notices = _notices()
    token = notices.started(md(title))
    owner_id = sign_in.identity()  # read here: the run's thread has no session to read it from
    try:
        results, error = _run_in_status(store, cluster, specs, labels, title, counts, cold, together, owner_id,
                                        lambda stored: notices.progressed(token, stored))
    except _WentOn:
        # The browser went (a closed tab, a lost connection): the run goes on in its thread and
        # stores what it finishes. Said on this session's next script, should its browser
        # reconnect; a new session finds the runs on Compare.
        notices.went_on(token, md(title))
        raise
    except ScriptControlException:
        # A click elsewhere (Previous, another page, a new setting) stops this script, and the run
        # with it: nothing of the unfinished batch is stored. Said where Cancel's notice is said,
        # or the run vanished without a word; unless the click's script, already running, said
        # it (`RunNotices.stopped`).
        notices.stopped(token, md(title))
        raise
    finally:
        notices.ended(token)
    st.session_state[_SESSION_RUNS] = [*st.session_state.get(_SESSION_RUNS, []), *(r.id for r in results)]
    refresh_store_caption()
    refresh_queue_caption(now=True)
    return results, error


class _WentOn(StopException):
    """This script was stopped because its browser went, and its run was left to finish."""


# How long a stopped script waits for Streamlit to drop its session when its browser goes: the
# stop is asked first, the session dropped a moment later (`disconnect_session`). A Stop click
# in the browser stops the script as well, and its session stays.
_GONE_WITHIN_S = 2.0


def _browser_gone() -> bool:
    """Whether this script's session has lost its browser (a closed tab, a lost connection),
    rather than been stopped by a click in it."""
    context = get_script_run_ctx()
    if context is None or not Runtime.exists():  # a script run without a server (tests): never gone
        return False
    runtime = Runtime.instance()
    deadline = time.monotonic() + _GONE_WITHIN_S
    while runtime.is_active_session(context.session_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _run_in_status(store, cluster, specs: list[FitSpec], labels: list[str], title: str, counts, cold: bool,
                   together: bool, owner_id: str, on_stored) -> tuple[list[RunResult], str | None]:
    """`run`'s status box, drawing what its batches, fitted in a thread of their own
    (`core.run.watched`), post. `on_stored(count)` hears how many runs are stored after each
    batch. A click elsewhere stops the batches (nothing of the unfinished one is stored); a
    browser that goes leaves them to finish and store their runs, and raises `_WentOn`."""
    results: list[RunResult] = []
    error = None
    live_points: list[dict] = []
    with st.status(f"{title}…", expanded=True) as status:
        cancel_slot, bars, live = _progress_slots(title, labels)
        reporters = [_Reporter(bar, live, label, live_points, index, spec.strategy, spec.repeats, spec.tol > 0)
                     for index, (spec, label, bar) in enumerate(zip(specs, labels, bars))]
        work = watched.Watched(
            lambda post, cancel: _fit_batches(cluster, store, specs, labels, together, counts, cold, owner_id, post,
                                              cancel),
            name=f"run: {lifecycle.label(specs)}")

        def draw(post) -> None:
            nonlocal error
            if isinstance(post, _Progress):
                reporters[post.member](post.progress)
            elif isinstance(post, _BatchStarted):
                status.update(label=_batch_label(title, specs, post.members, post.together, len(results), reporters),
                              expanded=True)
            else:
                _show_batch(post, reporters)
                results.extend(post.results)
                on_stored(len(results))
                error = post.error

        follow(work, draw, title)
        close_status(status, cancel_slot, len(results), error)
    return results, error


def follow(work: watched.Watched, draw, title: str) -> None:
    """Draws each of `work`'s posts with `draw` until the work ends, and raises what it raised.
    When this script is stopped: where its browser went, leaves the work to finish and raises
    `_WentOn`; else (a click elsewhere, Cancel, Stop) stops the work."""
    try:
        for post in work.posts():
            if post is not None:
                draw(post)
    except ScriptControlException as stop:
        if isinstance(stop, StopException) and _browser_gone():
            work.let_go()
            log.info("the browser watching %s went; the work goes on and stores what it finishes", title)
            raise _WentOn() from stop
        work.stop()
        raise
    work.result()  # what the thread raised past its own handling (a bug: said as one)


def _batch_label(title: str, specs: list[FitSpec], members: list[int], together: bool, done: int,
                 reporters: list[_Reporter]) -> str:
    """The status box's label while the batch of `specs` at `members` runs, `done` stored before it."""
    first = specs[members[0]]
    if together and len(members) == len(specs):
        return f"{md(title)}, timed together · {md(first.dataset.label)}…"
    if together:
        # The count first: on a page whose box starts low (Scaling at 1024 x 768) the label may
        # be all that shows of the sweep's progress.
        return (f"{md(title)}: {done} of {len(specs)} done · {len(members)} timed together "
                f"· {md(first.dataset.label)}…")
    # Short: "Running 3 strategies: 3 timed together · oaks x1…" was cut at 1024 px.
    return f"{md(title)}: {reporters[members[0]].shown_label} ({members[0] + 1} of {len(specs)})…"


class _BatchStarted(NamedTuple):
    members: list[int]  # indexes into the run's specs
    together: bool


class _Progress(NamedTuple):
    member: int  # index into the run's specs
    progress: Progress


class _BatchEnded(NamedTuple):
    members: list[int]
    results: list[RunResult]  # stored
    error: str | None  # markdown, every user- or store-supplied part escaped


def _fit_batches(cluster, store, specs: list[FitSpec], labels: list[str], together: bool, counts, cold: bool,
                 owner_id: str, post, cancel) -> None:
    """In the run's thread: fits and stores the batches of `specs` in turn (`core.run.batches`),
    posting each batch's start, its progress reports and its end; a batch's error ends them."""
    for batch in batches.plan(specs, together):
        members = list(batch.members)
        post(_BatchStarted(members, batch.together))
        results, error = _fit_batch(cluster, store, specs, labels, members, batch.together, counts, cold, owner_id,
                                    post, cancel)
        post(_BatchEnded(members, results, error))
        if error:
            return


def _fit_batch(cluster, store, specs: list[FitSpec], labels: list[str], members: list[int], together: bool, counts,
               cold: bool, owner_id: str, post, cancel) -> tuple[list[RunResult], str | None]:
    """One batch of `run`, in the run's thread: (its stored results, an error message or None)."""
    chosen = [specs[index] for index in members]
    who = f"{len(chosen)} strategies" if together else md(labels[members[0]])
    results: list[RunResult] = []
    error = None
    try:
        if together:
            results = stored.run_together_and_store(
                cluster, store, chosen, counts, on_progress=lambda progress: post(
                    _Progress(members[progress.member], progress)),
                cancel=cancel, owner="dashboard", owner_id=owner_id, cold=cold)
        else:
            results = [stored.run_and_store(cluster, store, chosen[0], counts,
                                            on_progress=lambda progress: post(_Progress(members[0], progress)),
                                            cancel=cancel, owner="dashboard", cold=cold, owner_id=owner_id)]
    except (RunInterrupted, SpecError, StoreError, Cancelled) as exc:  # interrupted: stored, still this session's
        error = f"{who}: {public(exc)}"
    except Exception as exc:  # noqa: BLE001 - shown, not raised: a projector must not show a traceback
        log.exception("run of %s failed", chosen)
        error = f"{who} failed with an internal error ({type(exc).__name__}: {public(exc)}); see the server log"
    if not error and (timed_out := [result for result in results if result.status == "timed_out"]):
        # stored, but unfinished
        error = f"{who}: {md(timed_out[0].error)}; stored as timed out, with the curve{'s' * together} so far"
    return results, error


def _show_batch(ended: _BatchEnded, reporters: list[_Reporter]) -> None:
    """A batch's bars once it has ended: each run's speed and compile, or "failed"."""
    mine = [reporters[index] for index in ended.members]
    for reporter, result in zip(mine, ended.results):
        reporter.finish()
        reporter.bar.progress(1.0, text=f"**{reporter.shown_label}**: done: {result.per_iter_ms:,.3f} ms/iteration, "
                                        f"compile {result.trace_lower_s + result.compile_s:.2f} s ({result.cache})")
    if ended.error and not ended.results:
        for reporter in mine:
            reporter.bar.progress(0.0, text=f"**{reporter.shown_label}**: failed")


def stored_flash(results: list[RunResult]) -> tuple[str, str]:
    """(text, icon) of the toast after a Run: how many runs were stored, and how many of them
    finished (a diverged run is stored too, and "3 runs finished" over "No run finished"
    said two things at once)."""
    count = len(results)
    runs = f"{count} run{'s' * (count != 1)}"
    finished = sum(result.status == "ok" for result in results)
    if finished == count:
        return f"{runs} finished and stored.", ":material/check_circle:"
    return (f"{runs} stored; {finished or 'none'} finished: the page says why "
            f"{'not' if finished == 0 else 'the others did not'}.", ":material/warning:")


def ran_here(run_id: int) -> bool:
    """Whether this browser session made the run: the store is shared, and a page that shows
    the newest stored runs of its settings says when they are someone else's, or older."""
    return run_id in st.session_state.get(_SESSION_RUNS, [])


def close_status(status, cancel_slot, stored: int, error: str | None) -> None:
    """End a batch's status box: its cancel button gone, how many runs were stored, and
    stopped (left open) or done (folded). The error that stopped it is the page's to show,
    under the box: said in the box's title too, a refusal read twice."""
    cancel_slot.empty()
    done = f"{stored} run{'s' * (stored != 1)} stored"
    if error:
        status.update(label=f"Stopped: {done}; why is said below", state="error", expanded=True)
    else:
        status.update(label=f"Done: {done}", state="complete", expanded=False)
