"""Running specs from a page: a status box, a progress bar per spec, a live ELBO chart.

JAX is imported only here, when a run is actually requested (through `core.engine`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import streamlit as st

from core.spec import FitSpec, SpecError
from core.store import StoreError
from pages.ui import resources
from pages.ui.sidebar import refresh_store_caption

if TYPE_CHECKING:
    from core.result import RunResult

log = logging.getLogger(__name__)

PHASE_TEXT = {"data": "loading data", "transfer": "copying data to the device",
              "compile": "tracing, lowering and compiling", "first_call": "first call",
              "repeat": "timing steady state", "done": "done"}


class _Reporter:
    """Feeds engine Progress reports to one progress bar and the shared live ELBO chart.

    Reports arrive inside the timed first call, so the chart (about 30 ms to build and
    send) is redrawn at most once a second and only once the call has lasted a second:
    a short first call is never slowed by it, a long one (eager) by about 3%. `finish`
    draws the final curve after the timed call.
    """

    def __init__(self, bar, live, label: str, live_points: list[dict], run_index: int) -> None:
        self.bar, self.live, self.label = bar, live, label
        self.points, self.run_index = live_points, run_index
        self.started = self.last_draw = None

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
            now = time.perf_counter()
            self.started = self.started or now
            if now - self.started > 1.0 and now - (self.last_draw or self.started) > 1.0:
                self.last_draw = now
                self._draw_live()
        self.bar.progress(min(1.0, fraction), text=f"**{self.label}**: {text}")

    def finish(self) -> None:
        """Draws the final live curve, if this run reported any ELBO."""
        if any(point["run_id"] == self.run_index for point in self.points):
            self._draw_live()

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
            resources.check_device(platform)
        store = resources.run_store()
    except (SpecError, StoreError) as exc:
        return [], str(exc)
    results: list[RunResult] = []
    error = None
    live_points: list[dict] = []
    with st.status(f"{title}…", expanded=True) as status:
        bars = [st.progress(0.0, text=f"**{label}**: waiting") for label in labels]
        live = st.empty()
        for index, (spec, label, bar) in enumerate(zip(specs, labels, bars)):
            # expanded must be repeated: an update without it can collapse the box.
            status.update(label=f"{title}: {label} ({index + 1} of {len(specs)})…", expanded=True)
            try:
                reporter = _Reporter(bar, live, label, live_points, index)
                result = engine.run(spec, counts=counts, cache=resources.executable_cache(), on_progress=reporter)
                reporter.finish()
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
