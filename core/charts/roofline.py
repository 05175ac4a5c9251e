"""The roofline chart: a machine's two ceilings and where one strategy's iteration sits.

Values in (peaks, XLA's work per iteration, a measured time), a Vega-Lite chart out;
no Streamlit, so it is tested without a browser.

The floor of `core.inspect.roofline` charges transcendentals at the exp rate, not at matmul
speed. To draw that floor on a roofline, each `exp` counts here as the matmul flops the
same time would have bought (peak FLOP/s / exp rate): the work is in "matmul-equivalent
FLOP", so that the roof above a point is the floor's rate exactly, and the gap between
roof and point (on the log axis) is the measured time as a multiple of the floor.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from core.charts.style import log_axis

ROOF_COLORS = {"memory side: bandwidth × intensity": "#0072B2", "compute side: matmul peak": "#D55E00"}
# The GFLOP/s axis runs this factor past the roof and the points on either side.
Y_PAD = 1.5
POINT_SHAPES = {"floor (the roof at this intensity)": "circle", "measured": "diamond"}
TITLE = "Roofline: attainable rate against arithmetic intensity"


def equivalent_flops(flops: float, transcendentals: float, matmul_flops_per_s: float,
                     exp_per_s: float) -> float:
    """Flops plus each transcendental at the matmul flops its time would buy."""
    return flops + transcendentals * matmul_flops_per_s / exp_per_s


def roof_frame(matmul_flops_per_s: float, bytes_per_s: float, low: float, high: float) -> pd.DataFrame:
    """The roof between intensities `low` and `high` (FLOP/byte, 0 < low < high).

    Returns:
        Columns intensity, gflops_per_s, side: the bandwidth slope up to the ridge
        (peak / bandwidth), the flat compute ceiling after it; both sides share the
        ridge row so the lines meet.
    """
    ridge = matmul_flops_per_s / bytes_per_s
    ridge_clipped = min(max(ridge, low), high)
    sides = list(ROOF_COLORS)
    rows = [(low, min(low * bytes_per_s, matmul_flops_per_s), sides[0]),
            (ridge_clipped, min(ridge_clipped * bytes_per_s, matmul_flops_per_s), sides[0]),
            (ridge_clipped, min(ridge_clipped * bytes_per_s, matmul_flops_per_s), sides[1]),
            (high, min(high * bytes_per_s, matmul_flops_per_s), sides[1])]
    frame = pd.DataFrame(rows, columns=["intensity", "gflops_per_s", "side"])
    return frame.assign(gflops_per_s=frame["gflops_per_s"] / 1e9)


def point_frame(work: float, compulsory_bytes: float, matmul_flops_per_s: float, bytes_per_s: float,
                measured_s: float | None = None, measured_label: str = "measured") -> pd.DataFrame:
    """Where one iteration sits: at the floor, and at its measured time if there is one.

    Args:
        work: matmul-equivalent flops of one iteration (`equivalent_flops`).
        compulsory_bytes: bytes one iteration must move.
        measured_s: a measured per-iteration time in seconds, or None.
        measured_label: the measured point's tooltip name (e.g. "run #12").

    Returns:
        Columns intensity, gflops_per_s, point, label, seconds, x_floor, note (the text
        beside the point); one row for the floor, a second for the measurement.
    """
    intensity = work / compulsory_bytes
    attainable = min(matmul_flops_per_s, intensity * bytes_per_s)
    floor_s = work / attainable
    rows = [{"intensity": intensity, "gflops_per_s": attainable / 1e9, "point": list(POINT_SHAPES)[0],
             "label": "floor", "seconds": floor_s, "x_floor": 1.0, "note": "floor"}]
    if measured_s:
        rows.append({"intensity": intensity, "gflops_per_s": work / measured_s / 1e9,
                     "point": list(POINT_SHAPES)[1], "label": measured_label, "seconds": measured_s,
                     "x_floor": measured_s / floor_s, "note": f"{measured_s / floor_s:,.1f} × floor"})
    return pd.DataFrame(rows)


def roofline_chart(matmul_flops_per_s: float, bytes_per_s: float, exp_per_s: float, flops: float,
                   transcendentals: float, compulsory_bytes: float, measured_s: float | None = None,
                   measured_label: str = "measured") -> alt.LayerChart:
    """The roof on log-log axes with the floor and (if given) the measured point.

    Args:
        matmul_flops_per_s, bytes_per_s, exp_per_s: the machine's peaks (`roofline.Peaks`).
        flops, transcendentals, compulsory_bytes: one iteration's work (XLA's cost analysis
            and `roofline.Analysis.compulsory_bytes`); flops and bytes > 0.
        measured_s, measured_label: as `point_frame`.

    Returns:
        Roof lines coloured by side; the points shaped by kind, the measured one labelled
        with its multiple of the floor.
    """
    work = equivalent_flops(flops, transcendentals, matmul_flops_per_s, exp_per_s)
    points = point_frame(work, compulsory_bytes, matmul_flops_per_s, bytes_per_s, measured_s, measured_label)
    ridge = matmul_flops_per_s / bytes_per_s
    intensity = float(points["intensity"].iloc[0])
    # Whole decades around both the ridge and the point, so the bend is always in view.
    low = 10 ** math.floor(math.log10(min(ridge, intensity)) - 1)
    high = 10 ** math.ceil(math.log10(max(ridge, intensity)) + 1)
    roof = roof_frame(matmul_flops_per_s, bytes_per_s, low, high)
    # Ticks at 1, 2 and 5 times the powers of ten (`log_axis`): Vega's own read 1, 3, 20, 100, 300.
    x = alt.X("intensity:Q", scale=alt.Scale(type="log", domain=[low, high], nice=False),
              axis=log_axis(low, high, "arithmetic intensity (matmul-equivalent FLOP / compulsory byte, log scale)"))
    shown = pd.concat([roof["gflops_per_s"], points["gflops_per_s"]])
    bottom, top = float(shown[shown > 0].min()) / Y_PAD, float(shown.max()) * Y_PAD
    y = alt.Y("gflops_per_s:Q", scale=alt.Scale(type="log", domain=[bottom, top], nice=False),
              axis=log_axis(bottom, top, "GFLOP/s (matmul-equivalent, log scale)"))
    lines = alt.Chart(roof).mark_line(strokeWidth=3).encode(
        x=x, y=y, detail="side:N",
        color=alt.Color("side:N", title="roof", sort=list(ROOF_COLORS),
                        scale=alt.Scale(domain=list(ROOF_COLORS), range=list(ROOF_COLORS.values()))),
        tooltip=["side:N", alt.Tooltip("intensity:Q", format=".3g"),
                 alt.Tooltip("gflops_per_s:Q", format=".3g", title="GFLOP/s")])
    dots = alt.Chart(points).mark_point(size=160, filled=True, color="#000000").encode(
        x=x, y=y,
        shape=alt.Shape("point:N", title="this iteration", sort=list(POINT_SHAPES),
                        scale=alt.Scale(domain=list(POINT_SHAPES), range=list(POINT_SHAPES.values()))),
        tooltip=["label:N", alt.Tooltip("intensity:Q", format=".3g", title="intensity"),
                 alt.Tooltip("gflops_per_s:Q", format=".3g", title="GFLOP/s"),
                 alt.Tooltip("seconds:Q", format=".3g", title="s / iteration"),
                 alt.Tooltip("x_floor:Q", format=".1f", title="× floor")])
    # The floor's note above and to the left, the measurement's to the right: near 1x they would
    # overlap. The floor sits on the roof, which rises to its right or runs flat, so the space
    # above-left of it is clear (level with it, on the left, the note crossed the roof).
    floor_note = alt.Chart(points.iloc[:1]).mark_text(align="right", dx=-8, dy=-14, fontSize=14)
    measured_note = alt.Chart(points.iloc[1:]).mark_text(align="left", dx=12, fontSize=14)
    notes = [note.encode(x=x, y=y, text="note:N") for note in (floor_note, measured_note) if len(note.data)]
    return alt.layer(lines, dots, *notes, title=TITLE).properties(height=320)
