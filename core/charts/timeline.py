"""The iteration timeline: for each strategy, one iteration's worth of its traced run, its
host launches above its XLA ops, the gaps where no XLA program runs drawn as such.

Values in (`core.inspect.trace_findings.Timeline`), a Vega-Lite chart out; no Streamlit,
so it is tested without a browser. Strategies keep their palette colour for their ops;
launches are dark and gaps a light grey, the same in every row, so that a row reads as
"dense colour: XLA working; grey: waiting on the host".
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.charts.style import REFERENCE_COLOR, STRATEGY_COLORS, UNKNOWN_COLOR
from core.inspect.trace_findings import GAP, LAUNCH_LANE, XLA_LANE, Timeline

LAUNCH_COLOR = "#333333"
GAP_COLOR = "#D0D0D0"
ROW_PX = 26
TITLE = "One iteration, traced: host launches and XLA's ops"


def frame(timeline: Timeline) -> pd.DataFrame:
    """A row per bar: its strategy's row ("scan · XLA: ops"), what it is, where it lies (ms
    from the start of its strategy's window) and its colour."""
    rows = []
    for trace in timeline.traces:
        colour = STRATEGY_COLORS.get(trace.strategy, UNKNOWN_COLOR)
        for span in trace.spans:
            kind = "launch" if span.lane == LAUNCH_LANE else ("gap" if span.name == GAP else "XLA op")
            rows.append({"row": f"{trace.strategy} · {span.lane}", "strategy": trace.strategy, "what": span.name,
                         "kind": kind, "start_ms": span.start_us / 1e3,
                         "end_ms": (span.start_us + span.duration_us) / 1e3, "duration_us": span.duration_us,
                         "colour": {"launch": LAUNCH_COLOR, "gap": GAP_COLOR}.get(kind, colour)})
    return pd.DataFrame(rows, columns=["row", "strategy", "what", "kind", "start_ms", "end_ms", "duration_us",
                                       "colour"])


def row_order(timeline: Timeline) -> list[str]:
    return [f"{trace.strategy} · {lane}" for trace in timeline.traces for lane in (LAUNCH_LANE, XLA_LANE)]


def timeline_chart(timeline: Timeline) -> alt.Chart:
    """Bars on a shared axis of milliseconds: each strategy's window starts at 0 and is as
    long as one of its iterations, so the rows' lengths compare the strategies."""
    data = frame(timeline)
    if data.empty:
        return alt.Chart(pd.DataFrame({"note": ["Nothing was traced."]})).mark_text().encode(text="note")
    order = row_order(timeline)
    longest = max(trace.window_us for trace in timeline.traces) / 1e3
    bars = alt.Chart(data).mark_bar(height={"band": 0.8}).encode(
        x=alt.X("start_ms:Q", title="ms from the start of the window (one iteration long)",
                scale=alt.Scale(domain=[0, longest], nice=False)),
        x2="end_ms:Q",
        # Every lane drawn, even one with nothing in its window (scan launches once per run).
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320), scale=alt.Scale(domain=order)),
        color=alt.Color("colour:N", scale=None, legend=None),
        tooltip=[alt.Tooltip("strategy:N"), alt.Tooltip("kind:N"), alt.Tooltip("what:N"),
                 alt.Tooltip("start_ms:Q", format=".3f", title="start (ms)"),
                 alt.Tooltip("duration_us:Q", format=",.1f", title="duration (µs)")],
    )
    ends = pd.DataFrame([{"row": f"{trace.strategy} · {XLA_LANE}", "end_ms": trace.window_us / 1e3}
                         for trace in timeline.traces])
    # Where each strategy's iteration ends: the rows' lengths are the comparison.
    marks = alt.Chart(ends).mark_tick(color=REFERENCE_COLOR, thickness=2, size=ROW_PX).encode(
        x="end_ms:Q", y=alt.Y("row:N", sort=order, scale=alt.Scale(domain=order)))
    return (bars + marks).properties(title=TITLE, height=ROW_PX * len(order))
