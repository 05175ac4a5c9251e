"""Showing runs (frames, a compact table, an agreement badge, charts) and errors, the same on every page."""

from __future__ import annotations

import datetime
import logging
from typing import Collection

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from core.charts import decimate, theme
from core.cluster.errors import WorkerDied
from core.results import agreement, spread, stability
from core.results.ordering import listed
from core.results.outcome import finished_as, short_note, stall_note
from core.results.result import RunResult
from core.spec import SpecError
from pages.ui.text import md, public

log = logging.getLogger(__name__)
# What a table shows for a missing value (a fit with no time to solution, a run stored before a
# field existed): Streamlit's own placeholder reads "None", a word from the code.
MISSING = "—"
# Pinned: where a table does scroll sideways (a narrow window), each row keeps its name in view.
STRATEGY_COLUMN = st.column_config.TextColumn("strategy", pinned=True)
# Three tables of a few columns each, so that none scrolls sideways in a 640 px column (a
# projector with the sidebar open). No fixed widths: a header wider than its column is cut.
# Beyond this the table shows no final ELBO: a blow-up's -2.7e+31 came out unformatted, 31
# digits wide, and pushed the fit table past the page at 1024 px. The run's note gives the value.
SHOWN_ELBO_LIMIT = 1e15
TIMING_COLUMNS = {
    "strategy": STRATEGY_COLUMN,
    "time_to_solution_s": st.column_config.NumberColumn(
        "to solution (s)", format="%.4f",
        help=f"steady-state seconds from the first iteration to the stop at the tolerance; {MISSING} when the fit "
             "ran a fixed number of iterations or did not meet it"),
    "per_iter_ms": st.column_config.NumberColumn("ms / iter", format="%.3f",
                                                 help="steady-state time per iteration (ms)"),
    "run_s_min": st.column_config.NumberColumn("fastest (s)", format="%.4f", help="the fastest timed repeat"),
    "run_s_max": st.column_config.NumberColumn("slowest (s)", format="%.4f", help="the slowest timed repeat"),
    "timed_repeats": st.column_config.NumberColumn("repeats", help="timed repeats: the settings' count, or more for "
                                                                  "a short fit (calibrated to 0.25 s measured)"),
    "busy": st.column_config.CheckboxColumn("unstable", help="timed while other processes took more than a quarter "
                                                             "of the usable cores: its timings carry their load"),
}
COMPILE_COLUMNS = {
    "strategy": STRATEGY_COLUMN,
    # "or load": beside the Longest compile card (as it was paid, by the run that made the program),
    # a cached run's 0.19 s under "compile" read as a second, contradicting figure.
    "compile_total_s": st.column_config.NumberColumn("compile or load (s)", format="%.3f",
                                                     help="trace + lower + XLA compile: what a new shape costs once; "
                                                          "for a program from a cache (see cache), trace + lower + "
                                                          "load, and the Longest compile card above gives what "
                                                          "compiling it cost; eager compiles nothing ahead (0): "
                                                          "its operations compile one by one in its first call, "
                                                          "counted under compiles"),
    "first_call_s": st.column_config.NumberColumn("first call (s)", format="%.3f", help="the first execution"),
    "cache": st.column_config.TextColumn("cache", help="compiled now, reused from memory or loaded from disk, none "
                                                       "(eager), or how many executables from each, e.g. "
                                                       "'compiled 1, disk 3'"),
    "compile_count": st.column_config.NumberColumn("compiles", help="XLA compilations during the run"),
    "recompile_count": st.column_config.NumberColumn("recompiles", help="compilations during the steady-state repeats"),
}
FIT_COLUMNS = {
    "strategy": STRATEGY_COLUMN,
    # "run", not "iterations": beside the settings' Iterations (the cap) a bare name read as either.
    "iterations_run": st.column_config.NumberColumn("iterations run", help="iterations run: the cap, or fewer where "
                                                                          "the fit stopped at its tolerance"),
    # Two decimals: at one, float32's -17,831.117 and float64's -17,831.096 (1.2e-6 apart) read alike.
    "final_elbo": st.column_config.NumberColumn("final ELBO", format="%.2f",
                                                help="the ELBO itself, exact log Y! (gammaln); missing where it "
                                                     f"blew up past ±{SHOWN_ELBO_LIMIT:.0e} (the notes below say "
                                                     "to what)"),
    "final_change": st.column_config.NumberColumn("last change", format="%.1e",
                                                  help="relative ELBO change over the last iteration"),
    "status": st.column_config.TextColumn("status", help="how it ended: converged, not converged (its iterations "
                                                         "ran out first), stalled or short (see the notes below), ok "
                                                         "(no tolerance: a fixed number of iterations), diverged (not "
                                                         "finite, or ending orders of magnitude below its start), "
                                                         "interrupted or timed_out"),
    # Here, not beside the compile columns: there its 16 digits took that table to 1,074 px in a
    # 700 px column at 1024 px, and were cut.
    "program": st.column_config.TextColumn("program", help="fingerprint of the compiled program: strategies with one "
                                                           "fingerprint ran one program, at one speed"),
}
TABLE_COLUMNS = {**TIMING_COLUMNS, **COMPILE_COLUMNS, **FIT_COLUMNS,
                 "run_s": st.column_config.NumberColumn("run (s)", format="%.4f",
                                                       help="steady state: median of the timed repeats")}


def elbo_long(results: list, labels: list[str] | None = None, curves: dict[int, np.ndarray] | None = None,
              max_points: int = decimate.DISPLAY_POINTS,
              compiled_when_made: dict[int, float] | None = None) -> pd.DataFrame:
    """ELBO curves in long format for `core.charts.lines.elbo_curves`, each thinned to at
    most `max_points` points that keep its shape (`core.charts.decimate`).

    Args:
        results: runs (RunResults, or rows of the store's frame) with id, strategy,
            trace_lower_s, compile_s and per_iter_ms.
        labels: legend text per run (default: the strategy).
        curves: ELBO curves by run id (`RunStore.curves`); default: each result's `elbo`.
        compiled_when_made: by run id, for runs whose program was loaded from a cache, what
            compiling it cost when it was made (`core.store.cold_compiles`): they start there,
            as from a cold start, not at the load's fraction of a second.

    `wall_s` is an estimate, not a measurement: trace+lower and compile time, plus what the
    first call took beyond a steady-state fit (eager compiles its operations there, one by
    one, on first use: seconds that compile_s does not hold), plus `fit_s`, (iteration + 1)
    steady-state iterations, so that compilation shows as a late start (`pages.ui.clock`).
    """
    labels = labels or [r.strategy for r in results]
    parts = []
    for result, label in zip(results, labels):
        values = curves.get(int(result.id), np.zeros(0)) if curves is not None else np.asarray(result.elbo, float)
        iteration = decimate.envelope(values, max_points)
        compiled = (compiled_when_made or {}).get(int(result.id), result.trace_lower_s + result.compile_s)
        start = compiled + max(result.first_call_s - result.run_s, 0.0)
        fit = (iteration + 1) * result.per_iter_ms / 1e3
        parts.append(pd.DataFrame({
            "run_id": result.id, "strategy": result.strategy, "label": label, "iteration": iteration,
            "elbo": values[iteration].astype(float), "wall_s": start + fit, "fit_s": fit}))
    if not parts:
        return pd.DataFrame(columns=["run_id", "strategy", "label", "iteration", "elbo", "wall_s", "fit_s"])
    return pd.concat(parts, ignore_index=True)


def table(data, **options):
    """`st.dataframe` with the tables' placeholder for a missing value (`MISSING`); returns what
    it returns (a selection event, where `on_select` asks for one)."""
    return st.dataframe(data, placeholder=MISSING, **options)


def show_runs_table(frame: pd.DataFrame, **kwargs) -> None:
    """The results as three compact tables: the timings, the compilation, the fit."""
    frame = table_view(frame)
    for config in (TIMING_COLUMNS, COMPILE_COLUMNS, FIT_COLUMNS):
        columns = [c for c in config if c in frame]
        table(frame[columns], hide_index=True, column_config=config, **kwargs)


# Digits of a program's fingerprint shown: all 16 took the fit table past its 640 px column at
# 1024 px, the last one cut, and 12 still did with five strategies; 10 (40 bits) still tell any
# two programs of a store apart.
PROGRAM_DIGITS = 10


def short_program(fingerprint: str | None) -> str | None:
    """A compiled program's fingerprint as the pages show it: its first `PROGRAM_DIGITS` digits."""
    return fingerprint[:PROGRAM_DIGITS] if isinstance(fingerprint, str) else fingerprint


def table_view(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs frame as `show_runs_table` shows it: no empty fingerprint, no blown-up ELBO,
    a finished run's status in words (`finished_as`)."""
    if "program" in frame:  # eager compiles no program: its empty fingerprint is a missing value
        frame = frame.assign(program=frame["program"].map(short_program).replace("", None))
    if "final_elbo" in frame:
        elbo = pd.to_numeric(frame["final_elbo"], errors="coerce")
        frame = frame.assign(final_elbo=elbo.where(elbo.abs() < SHOWN_ELBO_LIMIT))
    if {"status", "converged", "stalled", "short"} <= set(frame.columns):
        frame = frame.assign(status=[finished_as(*row) for row in
                                     frame[["status", "converged", "stalled", "short"]].itertuples(index=False)])
    return frame


def still_moving(results: list[RunResult]) -> list[RunResult]:
    """The runs that ran out of iterations with their ELBO still changing by more than their
    tolerance: neither converged, nor stalled at their precision, nor stopped short."""
    return [r for r in results if r.converged is False and not r.stalled and not r.short]


def show_run_notes(results: list[RunResult], told: Collection[str] = ()) -> None:
    """What a reader of these runs' numbers must know: divergence, warnings (but those `told`
    higher up the page: a dropped column was said there and twice more), convergence, a busy
    machine."""
    # A warning or an error the runs share (columns dropped from one CSV; three strategies of
    # one program diverging at one iteration) once, naming them all: one per strategy said the
    # same words three times.
    shared: dict[str, list[str]] = {}
    for result in results:
        for said in [*result.warnings, *([result.error] if result.error else [])]:
            shared.setdefault(said, []).append(result.strategy)
    for said, strategies in shared.items():
        if said not in told:
            st.warning(f"{md(listed(strategies))}: {md(said)}", icon=":material/warning:")
    for result in results:
        if result.stalled:
            st.warning(f"{md(result.strategy)}: {md(stall_note(result.final_change, result.precision))}",
                       icon=":material/warning:")
        if result.short:
            st.warning(f"{md(result.strategy)}: {md(short_note(result.estimated_gap))}", icon=":material/warning:")
    # One box for runs timed together on one busy machine, not one per strategy.
    busy = [r for r in results if r.unstable]
    if busy:
        st.warning(f"{', '.join(md(r.strategy) for r in busy)}: "
                   f"{md(stability.unstable_together([r.versions for r in busy]))}", icon=":material/speed:")
    unsettled = still_moving(results)
    if unsettled:
        st.info("Not converged: the last relative ELBO change is above the tolerance for "
                + ", ".join(f"{md(r.strategy)} ({r.final_change:.1e} > {r.tol:g})" for r in unsettled)
                + ". More iterations would move the ELBO further.", icon=":material/trending_up:")
    # Converged fits too get their float64 check's distance: the stopping test reads the ELBO's
    # change, the check where it ended. A column for it took the fit table past 1024 px.
    checked = [r for r in results if r.converged and r.estimated_gap is not None]
    if checked:
        worst = max(r.estimated_gap for r in checked)
        st.caption(f"Checked in float64 where {'it' if len(checked) == 1 else 'they'} stopped: "
                   f"{listed(md(r.strategy) for r in checked)} {'lies' if len(checked) == 1 else 'lie'} "
                   f"{'' if len(checked) == 1 else 'at most '}about {worst:.0e} (relative) below the optimum, "
                   "to within a few times.")
    # Beside runs that stop at a tolerance, a run of a fixed number of iterations (a PyTorch twin
    # has no stopping test) is neither converged nor not: say so, or its absence above reads as one.
    fixed = [r for r in results if r.status == "ok" and not r.tol] if any(r.tol for r in results) else []
    if fixed:
        st.caption(f"{', '.join(md(r.strategy) for r in fixed)} ran every one of "
                   f"{'its' if len(fixed) == 1 else 'their'} iterations, with no stopping test: "
                   "not judged converged or not.")


def _timing_groups(results: list[RunResult]) -> dict[str, list[RunResult]]:
    """`results` by the group they were timed in (`timed_with`; a run timed alone is its own)."""
    groups: dict[str, list[RunResult]] = {}
    for run in results:
        groups.setdefault(run.timed_with or f"#{run.id}", []).append(run)
    return groups


def timed_apart(results: list[RunResult], missing: list) -> str:
    """Where these runs were timed in separate groups (stored runs of several clicks), a
    sentence naming each group and when it finished, for the speed-up chart whose ratios then
    span them; "" where they were timed together. `missing`: strategies the next Run fits
    (Run again, with none missing, times them all together)."""
    groups = _timing_groups(results)
    if len(groups) < 2:
        return ""
    finished = [max(run.created_at for run in members) for members in groups.values()]
    day = len({when(moment)[:10] for moment in finished}) == 1  # the hour alone where one day holds them
    told = [f"{listed(run.strategy for run in members)} at {when(moment)[11:] if day else when(moment)}"
            for members, moment in sorted(zip(groups.values(), finished), key=lambda item: item[1])]
    return (f"Timed apart: {'; '.join(told)}. A ratio across them carries each moment's load"
            + ("." if missing else "; Run again times them together."))


def timing_caveat_badge(results: list[RunResult], missing: list) -> None:
    """One badge when these runs' timings carry a caveat: taken on a busy machine (others used
    more than a quarter of the cores), in separate groups (a page opened on stored runs of
    several clicks), the machine's load then differing between them, or with repeats that
    ranged over more than `WIDE_SPREAD` times. Its label names timings (it stands under the
    final ELBOs' heading, where "busy machine" read as a caveat on them), short enough for one
    line of that column at 1024 px; its help says which."""
    busy = [r for r in results if r.unstable]
    groups = _timing_groups(results)
    wide = _widest_spread(results)
    why = []
    if busy:
        share = max(r.versions.get("others_cpu_share", 0.0) for r in busy)
        why.append(f"Timed on a busy machine: other processes used {share:.0%} of the cores, so these timings may "
                   "be off (the note at the foot of the page says more).")
    if len(groups) > 1:
        why.append(f"Timed in {len(groups)} separate groups, so the machine's load may differ between them"
                   + ("." if missing else ": Run again times them together."))
    if wide is not None:
        run, ranged = wide
        why.append(f"{run.strategy}'s repeats ranged from {duration(ranged.low)} to {duration(ranged.high)} "
                   f"({ranged.high / ranged.low:,.0f} times): a moment of the machine's load can land on one repeat "
                   "whole. The figures shown are medians, which one slow repeat does not move; Run again, "
                   "or more repeats, to see whether it holds.")
    if why:
        label, color, icon = (("timings: busy", "orange", ":material/speed:") if busy else
                              ("timed apart", "gray", ":material/call_split:") if len(groups) > 1 else
                              ("timings vary", "gray", ":material/expand:"))
        st.badge(label, color=color, icon=icon, help=" ".join(why))


# Repeats of one run whose slowest took more than this many times its fastest carry a caveat
# (`timing_caveat_badge`): a 0.6 ms fit whose repeats ranged 0.03 to 0.43 ms showed no sign of it.
WIDE_SPREAD = 3.0


def _widest_spread(results: list[RunResult]):
    """(the run, its repeats' Spread) whose slowest repeat is furthest over its fastest, if that
    is more than `WIDE_SPREAD` times; else None."""
    found = [(run, spread.Spread.of_run(run)) for run in results if run.status == "ok"]
    found = [(run, each) for run, each in found if each.known and each.low > 0 and each.high > WIDE_SPREAD * each.low]
    return max(found, key=lambda pair: pair[1].high / pair[1].low, default=None)


def agreement_badge(frame: pd.DataFrame) -> agreement.Verdict:
    """A badge with the largest relative difference of the final ELBOs, judged by the
    criterion that fits the runs' optimizer (`core.results.agreement.verdict`); returns the verdict."""
    found = agreement.verdict(frame)
    if found.state == "unknown":
        st.badge("needs two finished runs", color="gray", icon=":material/help:")
    elif found.state == "agree":
        # Short: the metric's column is narrow at 1024 px; the help gives the difference. Equal
        # to the last bit, "to 1e-5" would undersell them.
        said = "agree exactly" if found.spread == 0 else f"agree to {found.limit:.0e}".replace("e-0", "e-")
        st.badge(said, color="green", icon=":material/check_circle:",
                 help=f"largest relative difference between final ELBOs {found.spread:.1e}: {found.reason}")
    elif found.state == "drift":
        # Short: the metric's column is narrow at 1024 px; the help says the rest.
        st.badge(f"drift {found.spread:.0e}", color="blue", icon=":material/moving:",
                 help=f"Largest relative difference between final ELBOs {found.spread:.1e}, within "
                      f"{found.limit:.0e}: {found.reason}. See About.")
    elif found.state == "mixed":
        st.badge(f"mixed {found.spread:.0e}", color="gray", icon=":material/compare_arrows:",
                 help=f"Largest relative difference between final ELBOs {found.spread:.1e}: {found.reason}.")
    else:
        st.badge(f"differ: {found.spread:.1e} > {found.limit:.0e}", color="orange", icon=":material/warning:",
                 help=f"largest relative difference between final ELBOs: {found.reason}")
    return found


def same_curve_caption(found: agreement.Verdict) -> str:
    """The ELBO-by-iteration chart's caption: what the curves should do, and where the final
    ELBOs say they did not (the badge's verdict `found`), so that the caption does not promise
    identical curves beside a "differ" badge."""
    expected = "Every strategy should trace the same curve: only the compilation differs."
    if found.state == "differ":
        return (f"{expected} Here they end {found.spread:.1e} apart (relative), more than the {found.limit:.0e} "
                "that rounding explains for this optimizer: see the Final ELBOs badge above.")
    if found.state == "drift":
        return (f"{expected} Here they drift apart by {found.spread:.0e} (relative), within what this optimizer's "
                "rounding explains before it converges: see the Final ELBOs badge above.")
    return expected


def when(created_at: float) -> str:
    """Epoch seconds as local 'YYYY-MM-DD HH:MM'."""
    return datetime.datetime.fromtimestamp(created_at).strftime("%Y-%m-%d %H:%M")


def chart(figure, caption: str | None = None, legend: str | None = "bottom", slot=None,
          caption_help: str | None = None) -> None:
    """An Altair chart across its column, its title above it and a one-line caption under it.

    The title is drawn as page text rather than by Vega, which cuts a title at the chart's
    width: page text wraps, at 1024 px with the sidebar open as on a wide screen. Charts
    are SVG, crisp on a projector, and the stylesheet (projector.css) paints their text
    in the page's colour, light or dark theme alike.

    Args:
        figure: a chart from `core.charts`.
        caption: one line saying what the chart shows.
        legend: "bottom" (half-width charts keep their plotting area), "top" (a few short
            names, in two columns above the plot), "right", or None
            (no legend, where the axis already names every colour).
        slot: where to draw (e.g. an `st.empty()` redrawn live); default: here.
        caption_help: the caption's tooltip, for what a reader looks up rather than reads.
    """
    where = slot.container() if slot is not None else st.container()
    title = figure.title
    if title is not alt.Undefined and title:
        text = title if isinstance(title, str) else getattr(title, "text", "")
        where.markdown(f"**{md(text)}**")
        figure = figure.copy(deep=False)
        figure.title = alt.Undefined
    if legend is None:
        legend_config = {"disable": True}
    elif legend == "bottom":
        # One column: a row of labels wider than a half-width chart would be cut.
        legend_config = {"orient": "bottom", "columns": 1, "labelLimit": 0, "titleLimit": 0}
    elif legend == "top":
        # Two columns above the plot, for a few short names read before the bars (a chart's
        # phases: below it, the legend fell past a projector's first screen).
        legend_config = {"orient": "top", "columns": 2, "labelLimit": 0, "titleLimit": 0, "direction": "horizontal"}
    else:
        legend_config = {"orient": legend, "labelLimit": 0, "titleLimit": 0}
    # fit-x: the width follows the column, the height is the plot's own (Streamlit's
    # default "fit" squeezes the plot to leave room for a legend below it). The padding
    # keeps text that Vega sizes by estimate (the last tick label, a bar's label) inside
    # the chart rather than a pixel or two past its edge.
    figure = figure.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"),
                               padding={"left": 8, "right": 16, "top": 6, "bottom": 6},
                               usermeta={"embedOptions": {"renderer": "svg"}})
    figure = theme.configured(figure, axis={"labelLimit": 0}, legend=legend_config)
    where.altair_chart(figure, width="stretch")
    if caption:
        where.caption(caption, help=caption_help)


def duration(seconds: float) -> str:
    """Seconds for a metric, short enough not to wrap in a quarter of a projector's column:
    "1.23 s", "45.6 ms", "894 µs"."""
    factor, unit = _unit(seconds)
    return f"{_figure(seconds * factor)} {unit}"


def duration_range(spread, scale: float = 1.0, like: float | None = None) -> str:
    """The fastest to the slowest repeat of `spread` (seconds, times `scale`), in one unit, that
    of `like` (seconds: the figure above the range) or else of the slowest: "39.1–41.2 ms",
    "527–1,030 µs" under "581 µs" (not "0.527–1.03 ms"), or "1 repeat"."""
    if not spread.known:
        return "1 repeat"
    low, high = spread.low * scale, spread.high * scale
    factor, unit = _unit(high if like is None else like)
    return f"{_figure(low * factor)}–{_figure(high * factor)} {unit}"


def _unit(seconds: float) -> tuple[float, str]:
    return (1, "s") if seconds >= 1 else (1e3, "ms") if seconds >= 1e-3 else (1e6, "µs")


def _figure(value: float) -> str:
    """Three significant digits, and whole numbers from 1,000 on ("1.03e+03" read as code)."""
    return f"{value:,.0f}" if value >= 999.5 else f"{value:.3g}"


def si(value: float | None, unit: str = "") -> str:
    """13039107072 -> "13.0 G" + unit: small problems are MFLOP, big ones GFLOP."""
    if value is None:
        return "n/a"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:,.1f} {prefix}{unit}"
    return f"{value:,.0f} {unit}".strip()


def guarded(work, what: str):
    """`work()`, or None after an error message: a projector must not show a traceback."""
    try:
        return work()
    except SpecError as exc:  # data or device not available here
        st.error(f"{what}: {public(exc)}", icon=":material/error:")
    except WorkerDied as exc:  # the worker doing it died (and was restarted): nothing else is lost
        st.error(f"{what}: {public(exc)}", icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - logged in full, shown in one line
        log.exception("%s failed", what)
        st.error(f"{what} failed with an internal error ({type(exc).__name__}: {public(exc)}); see the server log",
                 icon=":material/error:")
    return None
