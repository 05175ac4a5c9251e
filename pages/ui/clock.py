"""Which clock an ELBO-against-time chart reads: from a cold start, or the fit alone.

From a cold start a curve begins where its compile ended. Where compiling takes far longer
than the fit (oaks x1: 2 s of compile for 30 ms of fit), every curve on the log axis spans a
sliver of its start and stands upright, its shape lost; the fit's own clock shows it.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.ui.text import md

# By the control's label: the column of `display.elbo_long` the chart's x reads.
CLOCKS = {"from a cold start": "wall_s", "the fit alone": "fit_s"}
COLD, FIT = CLOCKS
# A curve from a cold start spans start .. start + fit: when the fit is under this fraction of its
# start for every run, the log axis shows each as an upright line (1.1 times its start at most).
UPRIGHT = 0.1

# What the chart shows, under it, on every page that draws one.
WALL_CLOCK_CAPTION = ("Wall-clock from a cold start, estimated: compile time (for a program loaded from a cache, what "
                      "compiling it cost when it was made), and what the first call took beyond a steady fit (eager "
                      "compiles its operations there), then iterations × steady-state time per iteration.")
FIT_CLOCK_CAPTION = ("Time into the fit, compile left out: iterations × steady-state time per iteration, as one "
                     "compiled fit runs once it is loaded.")


def compile_over_fit(curves: pd.DataFrame) -> float | None:
    """The least ratio over runs of what came before the fit (compile, first call's extra) to
    the fit's whole time, from `display.elbo_long`'s columns; None without curves."""
    if curves.empty:
        return None
    runs = curves.assign(before=curves["wall_s"] - curves["fit_s"]).groupby("run_id").agg(
        before=("before", "min"), fit=("fit_s", "max"))
    runs = runs[runs["fit"] > 0]
    return float((runs["before"] / runs["fit"]).min()) if not runs.empty else None


def upright(curves: pd.DataFrame) -> bool:
    """Whether every curve from a cold start would stand upright (`UPRIGHT`)."""
    ratio = compile_over_fit(curves)
    return ratio is not None and ratio * UPRIGHT > 1


def choose(curves: pd.DataFrame, key: str) -> str:
    """The clock control (two buttons, one always chosen), drawn here; returns the column it
    names. Until a visitor picks the other one, it follows the runs shown: the fit alone where
    the cold start's curves would stand upright, else the cold start (set once a session, it
    kept the fit alone for later runs whose compile was only 4 times their fit)."""
    suggested = FIT if upright(curves) else COLD
    followed, picked = f"{key}_suggested", f"{key}_picked"
    shown = st.session_state.get(key)
    if shown is not None and shown != st.session_state.get(followed):
        st.session_state[picked] = True  # the visitor's own choice, from now on
    if not st.session_state.get(picked):
        st.session_state[key] = suggested
    st.session_state[followed] = suggested
    label = st.segmented_control("Clock", list(CLOCKS), key=key, required=True, persist_state="session",
                                 help="from a cold start: compile and the first call's extra come first, as a user "
                                      "who starts a fit waits for them; the fit alone: the compiled fit's own time")
    return CLOCKS.get(label or COLD, "wall_s")


def caption(x: str, curves: pd.DataFrame, unpaid: list[str] = ()) -> str:
    """The chart's caption for the clock `x`: what it shows, and why the other clock may read
    better. `unpaid`: strategies that loaded a program from a cache no stored run made (no
    compile time is known for them, so from a cold start their curves start at the load)."""
    ratio = compile_over_fit(curves)
    if x == "fit_s":
        return FIT_CLOCK_CAPTION + (
            f" Compiling took at least {ratio:,.0f} times as long as a whole fit here: from a cold start the curves "
            "stand upright." if ratio is not None and ratio * UPRIGHT > 1 else "")
    text = WALL_CLOCK_CAPTION
    if unpaid:
        one = len(unpaid) == 1
        text += (f" {', '.join(md(name) for name in unpaid)} loaded {'its program' if one else 'their programs'} "
                 f"from a cache that no stored run made: no compile time is known, so "
                 f"{'its curve starts' if one else 'their curves start'} at the load (tick Compile from scratch to "
                 "measure it).")
    if ratio is not None and ratio * UPRIGHT > 1:
        text += (f" Compiling took at least {ratio:,.0f} times as long as a whole fit here, so the curves stand "
                 f"upright: **{FIT}** shows their shape.")
    return text
