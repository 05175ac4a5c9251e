"""Bar charts of runs: where the time went, and speed-ups over a baseline strategy.

Input and output as in `core.charts.style` (a DataFrame of runs in, a Vega-Lite chart out, a
note instead of a traceback). Diverged runs stop early, so their timings are not
comparable: they never enter a median or a ratio, and the bars mark them ("(diverged)",
lighter, dashed outline) instead of dropping them silently. Steady-state timings carry the
range of their repeats (a whisker from the fastest to the slowest), and a speed-up that is
not significant, or between runs of one program, is labelled as noise
(`core.results.spread`). Ratios to a pinned run and group summaries are in
`core.charts.comparisons`.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.charts import colour_vision, theme
from core.charts.style import (
    CHART_CHAR_PX,
    PHASE_COLORS,
    PROJECTOR_CHART_PX,
    REFERENCE_COLOR,
    color_by_strategy,
    log_axis,
    log_axis_reaching,
    log_grid_above,
    log_grid_below,
    not_diverged,
    note_chart,
    row_spread,
    strategy_rank,
    with_spread,
)
from core.results import headline, spread

# Chronological, which is also the stack order; the colours are `style.PHASE_COLORS`.
PHASES = {"trace_lower_s": "trace+lower", "compile_s": "compile or load",
          "first_call_s": "first call", "run_s": "steady state"}
# Each phase's name written in its segment where the segment has room: the phases' greys are
# close in lightness (`style.PHASE_COLORS`), and a legend alone left a viewer matching shades.
# The legend's own name or none: a short form ("compile" for "compile or load") read as
# another phase. Room is judged on the narrowest plot the pages draw (the main column at 1024
# px with the sidebar open, less the bars' labels) at about TAG_CHAR_PX a character of the
# theme's label font, and TAG_MARGIN_PX to spare.
NARROWEST_PLOT_PX = 420
TAG_CHAR_PX = 8.0
TAG_MARGIN_PX = 10
# Where the bars' totals, longest first, fall by more than this factor from one to the next
# (eager's beside compiled loops), the longer ones are cut at the time axis's end, each total
# written after it, so that the others keep their width. The axis stays linear, a segment's
# length its seconds: stacked on a log axis, a run's first phase took most of its bar (0.39 s
# of trace+lower drawn longer than 1.65 s of compile) and its steady state none.
CUT_SPREAD = 3.0
# Only where the longest bar is over this many times the shortest, which drawn whole would keep
# under a tenth of the axis (a compile of 2.2 s beside a cached load of 0.25 s is drawn whole).
# Totals that fall evenly over decades (runs of several sizes) have no one wide fall: where the
# longest is also over this many times the median, the bars past CUT_SPREAD times it are cut.
SPREAD_CUT = 10.0
# The axis ends this far past the longest bar it draws whole (or its slowest repeat's whisker).
AXIS_PAD = 1.2
# Room after a cut bar for its total ("31.2 s, cut"), as a share of the cut.
CUT_TEXT_ROOM = 0.45
# How a run's y label says its executable was not compiled for it.
CACHE_NOTES = {"memory": "cached", "disk": "cached"}
# How a dashed row says whose compile it draws: the stored run that made the cached program
# ("cold compile #16" left a visitor asking what #16 counted).
COLD_NOTE = "compiled by run"


def run_labels(runs: pd.DataFrame) -> pd.DataFrame:
    """Copy sorted by strategy, with `run` (one axis label per run) and `diverged`."""
    df = runs.assign(strategy=runs["strategy"].astype(str), diverged=~not_diverged(runs))
    ids = df["id"] if "id" in df else pd.Series(df.index, index=df.index)
    if "label" in df:
        run = df["label"].astype(str)
    else:  # "#id" only where a strategy repeats: "scan #12" is noise otherwise
        run = df["strategy"].where(~df["strategy"].duplicated(keep=False),
                                   df["strategy"] + " #" + ids.astype(str))
    if "cache" in df:
        note = df["cache"].map(CACHE_NOTES)
        run = run.where(note.isna(), run + " (" + note.fillna("") + ")")
    df["run"] = run.where(~df["diverged"], run + " (diverged)")
    df = df.assign(_r=strategy_rank(df["strategy"]), _i=ids).sort_values(["_r", "_i"])
    return df.drop(columns=["_r", "_i"])


# Each whisker's marks are named, so that the stylesheet (pages/ui/projector.css) paints the
# line and its caps in the page's text colour and the halo under them in that colour's
# inverse, the page's background: a white halo read as "=" on the dark theme, its two edges
# brighter than the line.
WHISKER_LAYERS = ("whisker_halo", "whisker_line", "whisker_caps")
# A cap's length across the bar, in px.
CAP_PX = 12


def whiskers(data: pd.DataFrame, x: str, x2: str, y: alt.Y) -> alt.LayerChart:
    """A range from `x` to `x2`, capped at both ends so that a short one reads as a range
    and not as a dash at a bar's end: a line in the text's colour over a halo in the
    background's, so that it reads on any bar (strategy colours reach 2.2:1 against either
    theme's text) and on either theme (as drawn here, light; the stylesheet follows the page's)."""
    halo_colour, ink = theme.LIGHT["background"], theme.LIGHT["text"]
    base = alt.Chart(data).encode(x=f"{x}:Q", x2=f"{x2}:Q", y=y)
    ends = data.melt(id_vars=[c for c in data.columns if c not in (x, x2)], value_vars=[x, x2], var_name="_which",
                     value_name="_end")
    return alt.layer(
        base.mark_rule(color=halo_colour, strokeWidth=4, opacity=0.85).properties(name=WHISKER_LAYERS[0]),
        base.mark_rule(color=ink, strokeWidth=2).properties(name=WHISKER_LAYERS[1]),
        alt.Chart(ends, name=WHISKER_LAYERS[2]).mark_tick(
            color=ink, thickness=2, size=CAP_PX, opacity=1, stroke=halo_colour, strokeWidth=1).encode(x="_end:Q", y=y))


# Where a long label breaks onto a second line: a run's name before its optimizer, a
# ratio before its range.
AXIS_LABEL_BREAK, TEXT_BREAK = " · ", " ("
# The most of a log axis's width the labels right of the bars may take.
MOST_TEXT_SHARE = 0.6
# Lines of chart text, 16 px, this far apart: a label on several lines is moved up by half
# its extra lines, so that it is centred on its row as a one-line label is.
LINE_PX = 18


# Run names on a bar chart's band axis wrap at their separators to this many characters a
# line (about half a projector's chart): "#11 scan_pytree_class · preconditioned_lbfgs ·
# simulated 1000x50 d=1 (seed 0) · float32" on one line left the bars no plot to be drawn in.
RUN_NAME_CHARS = 32


def wrapped_names(names: pd.Series, most_chars: int = RUN_NAME_CHARS) -> tuple[pd.Series, int]:
    """`names` wrapped at their separators (`wrapped`) to `most_chars` a line, and the most
    lines one takes."""
    rows = names.astype(str).map(lambda name: wrapped(name, most_chars))
    return rows, (int(rows.str.count("\n").max()) + 1 if len(rows) else 1)


def row_step(lines: int, least: int) -> int:
    """A band's height for labels of `lines` lines, at least `least` px."""
    return max(least, LINE_PX * lines + 12)


def lines_axis(lines: int, split_at: str) -> alt.Axis:
    """A band axis whose labels are split at `split_at` into at most `lines` lines, centred on their rows.
    `labelLimit` 0: a line is drawn whole (Vega cuts one past 180 px with an ellipsis)."""
    return alt.Axis(labelExpr=f"split(datum.label, '{split_at}')", labelLineHeight=LINE_PX,
                    labelOffset=-(lines - 1) * LINE_PX / 2, labelLimit=0)


def wrapped(text: str, most_chars: int, split_at: str = AXIS_LABEL_BREAK) -> str:
    """`text` with its parts (split at `split_at`) joined on lines of at most `most_chars`
    characters where they allow it, the lines separated by a newline. A broken line ends with
    the separator's mark, past `most_chars` ("oaks x1 · scan ·"): without it, on an axis, the
    next line ("preconditioned_lbfgs") read as a row of its own."""
    lines: list[str] = []
    for part in str(text).split(split_at):
        if lines and len(lines[-1]) + len(split_at) + len(part) <= most_chars:
            lines[-1] += split_at + part
        else:
            lines.append(part)
    return (split_at.rstrip() + "\n").join(lines)


def longest_line_px(texts, breaks: str | None = None) -> int:
    """About how wide the longest line of `texts` is drawn, each split at `breaks` if given."""
    lines = [line for t in texts for line in (str(t).split(breaks) if breaks else [str(t)])]
    return CHART_CHAR_PX * max((len(line) + 1 for line in lines), default=0)


def text_share(texts, axis_labels, broken: bool = False) -> float:
    """The share of a plot's width that the longest of `texts` takes, the plot being a
    projector's column (`style.PROJECTOR_CHART_PX`) less the axis's labels
    (`style.CHART_CHAR_PX` a character); `broken`: both on two lines (`AXIS_LABEL_BREAK`,
    `TEXT_BREAK`)."""
    text_px = longest_line_px(texts, TEXT_BREAK if broken else None) + 12
    plot_px = PROJECTOR_CHART_PX - longest_line_px(axis_labels, AXIS_LABEL_BREAK if broken else None) - 40
    return text_px / max(plot_px, 1)


def log_domain_with_room(values: pd.Series, text_ends: pd.Series, share: float,
                         from_one: bool = True) -> list[float]:
    """A log axis's [low, high] over `values` (and 1, for bars `from_one`), stretched on
    the right so that text drawn from `text_ends` onwards, taking `share` of the plot's
    width, ends inside it."""
    finite = pd.concat([values, text_ends, pd.Series([1.0] if from_one else [], dtype=float)]).astype(float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.empty:
        return [0.1, 10.0]
    starts = text_ends[np.isfinite(text_ends) & (text_ends > 0)]
    # In decades from here on; the start is a labelled tick a little below the smallest value.
    low = np.log10(log_grid_below(0.9 * finite.min()))
    start = np.log10(starts.max()) if not starts.empty else np.log10(finite.max())
    share = min(share, MOST_TEXT_SHARE)
    # The text, from `start` to the axis's end, takes `share` of the axis: (high - start) = share (high - low).
    # At least from a labelled start to 4 times it (0.5 to 2, say): no wider than the data and
    # the text need, so that bars near 1 are not squeezed into a corner.
    high = max((start - share * low) / (1 - share), np.log10(finite.max()), low + np.log10(4.0))
    return [float(10.0 ** low), float(10.0 ** high)]


def bars_from_one(df: pd.DataFrame, x: str, y: alt.Y, x_title: str, title: str,
                   tips: list) -> alt.LayerChart:
    """Bars from 1 to `x` on a log axis (faster and slower point opposite ways), a whisker
    from `low` to `high`, a dashed rule at 1, and the `text` column right of each bar,
    inside the plot: the axis stretches to the right for it, and where a projector's column
    cannot hold the text on one line, axis labels and texts take two."""
    df = df.assign(one=1.0)
    df["text_x"] = df[["high", x]].max(axis=1).where(lambda v: v > 1, 1.0).fillna(1.0)
    field = y.shorthand.split(":")[0]
    names = df[field].astype(str)
    broken = text_share(df["text"], names) > MOST_TEXT_SHARE
    # Names wrap where they are long, and where the texts need the room (to about half the
    # longest, e.g. "scan ·" over "preconditioned_lbfgs #3").
    most_chars = min(RUN_NAME_CHARS, names.str.len().max() // 2 + 2) if broken else RUN_NAME_CHARS
    rows, lines = wrapped_names(names, most_chars)
    row_lines = pd.Series([line for row in rows for line in row.split("\n")])
    domain = log_domain_with_room(pd.concat([df[x], df["low"], df["high"]]), df["text_x"],
                                  text_share(df["text"], row_lines, broken))
    if lines > 1:
        order = dict(zip(names, rows))
        df[field] = rows
        encoding = y.to_dict()
        if isinstance(encoding.get("sort"), list):
            encoding["sort"] = [order.get(str(name), name) for name in encoding["sort"]]
        y = alt.Y(**{**encoding, "axis": lines_axis(lines, "\\n")})
    if broken:
        df["text"] = df["text"].str.replace(TEXT_BREAK, "\n" + TEXT_BREAK.strip(), n=1, regex=False)
    # Ticked to just past the bars and whiskers: the room on the right is the labels', and ticks
    # running on to 1000 beside ratios of 2 read as a scale the data reach.
    axis, end = log_axis_reaching(*domain, pd.concat([df[x], df["low"], df["high"], pd.Series([1.0])]), x_title)
    domain = [domain[0], end]
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X(f"{x}:Q", scale=alt.Scale(type="log", domain=domain, nice=False), axis=axis),
        x2="one:Q", y=y,
        color=color_by_strategy(df, legend=False), tooltip=tips)
    ranged = df[df["high"] > df["low"]]
    # Vega draws a text's first line on its row: one on two lines moves up half a line.
    two_lines = df["text"].str.contains("\n", regex=False)
    texts = [alt.Chart(df[two_lines == several]).mark_text(
        align="left", dx=6, lineBreak="\n", lineHeight=LINE_PX, dy=-LINE_PX / 2 if several else 0).encode(
        x="text_x:Q", y=y, text="text:N", tooltip=tips) for several in (False, True) if (two_lines == several).any()]
    # Named, so the stylesheet can give it the page's text colour (its marks' class is "reference_marks").
    rule = alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(x="one:Q").properties(
        name="reference")
    return alt.layer(bars, whiskers(ranged, "low", "high", y), rule, *texts, title=title).properties(
        height=alt.Step(row_step(lines, 44 if broken else 30)))


def cold_compile_rows(cold_compiles: pd.DataFrame | None, shown: pd.DataFrame) -> pd.DataFrame:
    """One row per cold compile stored for a strategy shown with a cached executable: the
    dashed bars `timing_bars` draws (a page says what they are only where there are some)."""
    if cold_compiles is None or cold_compiles.empty or "cache" not in shown:
        return shown.iloc[:0]
    cached = set(shown.loc[shown["cache"].isin(list(CACHE_NOTES)), "strategy"])
    rows = cold_compiles[cold_compiles["strategy"].astype(str).isin(cached)].drop_duplicates("strategy")
    rows = rows.assign(strategy=rows["strategy"].astype(str), diverged=False, first_call_s=0.0, run_s=0.0,
                       cold=True)
    rows["run"] = rows["strategy"] + f": {COLD_NOTE} #" + rows["id"].astype(int).astype(str)
    return rows


def _whole_rows(runs: pd.DataFrame, cold_compiles: pd.DataFrame | None) -> pd.DataFrame:
    """The rows `timing_bars` draws (runs, and the dashed cold compiles with `cold` True), with
    `total` (the phases' seconds) and `reach` (to the slowest repeat's whisker end; a cold
    compile has no whisker: its run's repeats are not drawn)."""
    rows = pd.concat([runs.assign(cold=False), cold_compile_rows(cold_compiles, runs)], ignore_index=True)
    rows["cold"] = rows["cold"].astype(bool)
    total = rows[list(PHASES)].fillna(0.0).sum(axis=1)
    slowest = rows["run_s_max"].fillna(rows["run_s"]) if "run_s_max" in rows else rows["run_s"]
    reach = (total - rows["run_s"].fillna(0.0) + slowest.fillna(0.0)).where(~rows["cold"], total)
    return rows.assign(total=total, reach=reach.where(reach > total, total))


def timing_cut(runs: pd.DataFrame, cold_compiles: pd.DataFrame | None = None) -> float | None:
    """Where `timing_bars` cuts the bars that dwarf the rest, in seconds; None when every bar
    is drawn whole. A page says which were cut (`cut_runs`).

    Only where the longest is over `SPREAD_CUT` times the shortest: then past the bars below
    the widest fall (over `CUT_SPREAD`) from one total to the next shorter, where no more bars
    are above it than below (three compiles of 2 to 4 s over one cached load of 0.25 s are
    drawn whole); else, where the longest is `SPREAD_CUT` times the median, past those within
    `CUT_SPREAD` of the median."""
    drawn = _whole_rows(runs, cold_compiles)
    # Judged on the runs alone: a dashed cold compile is a reference for one phase, and a run cut
    # at its length lost the steady state it was drawn beside.
    rows = drawn[~drawn["cold"] & (drawn["total"] > 0)]
    totals = np.sort(rows["total"].to_numpy())[::-1]
    if totals.size < 2 or totals[0] <= SPREAD_CUT * totals[-1]:  # the shortest keeps a tenth of the axis
        return None
    falls = totals[:-1] / totals[1:]
    widest = int(np.argmax(falls))
    if falls[widest] > CUT_SPREAD and widest + 1 <= totals.size - widest - 1:  # a few over many
        longest_whole = totals[widest + 1]
    elif totals[0] > SPREAD_CUT * np.median(totals):  # decades, evenly: cut well above the median
        longest_whole = totals[totals <= CUT_SPREAD * np.median(totals)].max()
    else:
        return None
    cut = AXIS_PAD * max(rows.loc[rows["total"] <= longest_whole, "reach"].max(),
                         drawn.loc[drawn["cold"], "reach"].max() if drawn["cold"].any() else 0.0)
    return float(cut) if totals[0] > cut else None


def cut_runs(runs: pd.DataFrame, cold_compiles: pd.DataFrame | None = None) -> list[tuple[str, float]]:
    """(strategy, total seconds) of each bar `timing_bars` cuts, in the runs' order."""
    cut = timing_cut(runs, cold_compiles)
    if cut is None:
        return []
    rows = _whole_rows(runs, cold_compiles)
    return [(str(row["strategy"]), float(row["total"])) for _, row in rows[rows["total"] > cut].iterrows()]


def _phase_tags(long: pd.DataFrame, top: float) -> pd.DataFrame:
    """The segments of `long` (a row per run and phase: start, end, column) with room for
    their phase's name, with the name (`tag`), where it goes (`middle`) and the colour that
    reads best on the segment's grey (`ink`). Hollow segments (a diverged run's, a cold
    compile's outline) are not written in: the page's background shows through them."""
    solid = long[~long["diverged"] & ~long["cold"]]
    pixels = (solid["end"] - solid["start"]) / top * NARROWEST_PLOT_PX
    room = pixels >= solid["phase"].str.len() * TAG_CHAR_PX + TAG_MARGIN_PX
    # The segment's own phase: assigned from `solid`, a frame of no segments took solid's
    # rows back, each a tag with no run, which drew a row named "null".
    tags = solid[room]
    tags = tags.assign(tag=tags["phase"])
    inks = {column: max(("#111111", "#FFFFFF"), key=lambda ink, grey=grey: colour_vision.contrast(ink, grey))
            for column, grey in zip(PHASES, PHASE_COLORS)}
    # Columns of their own (`named`, not `phase`): the segments' data is read by its phase column.
    return pd.DataFrame({"run": tags["run"], "seconds": tags["seconds"], "named": tags["phase"], "tag": tags["tag"],
                         "middle": (tags["start"] + tags["end"]) / 2, "ink": tags["column"].map(inks)})


def _ticks_to(end: float) -> list[float]:
    """Round ticks from 0 up to `end` (1, 2 or 5 times a power of ten apart, five or so)."""
    raw = end / 5
    power = 10 ** np.floor(np.log10(raw))
    step = next(f * power for f in (1, 2, 5, 10) if f * power >= raw)
    return [round(k * step, 12) for k in range(int(end // step) + 1)]


def timing_bars(runs: pd.DataFrame, cold_compiles: pd.DataFrame | None = None) -> alt.LayerChart | alt.Chart:
    """Stacked horizontal bars of where each run's time went.

    Args:
        runs: columns strategy, trace_lower_s, compile_s, first_call_s, run_s; optional
            id, label, status, n, cache, run_s_min, run_s_max, repeats.
        cold_compiles: stored runs that compiled from scratch (columns strategy, id,
            trace_lower_s, compile_s): for each strategy of `runs` whose executable came from
            a cache, its cold compile is drawn under it, hollow, so that the compile part
            never silently disappears.

    Returns:
        One bar per run: trace+lower | compile | first call | steady state, in seconds, with
        a whisker over the steady state's range; runs that loaded a cached executable say
        "(cached)"; cold compiles are dashed outlines labelled "strategy: compiled by run #id".
        The time axis is linear. Bars that dwarf the rest (eager beside compiled loops) are cut
        at the axis's end (`timing_cut`), each with its total after it: drawn whole, they left
        the compiled bars a few pixels wide.
    """
    title = "Where the time goes (s)"
    if runs.empty:
        return note_chart("No runs to show yet.", title)
    df = run_labels(runs).assign(cold=False)
    cold = cold_compile_rows(cold_compiles, df)
    if not cold.empty:  # each cold compile right under the runs of its strategy
        df = pd.concat([df, cold[[c for c in df.columns if c in cold]]], ignore_index=True)
        df = df.assign(_r=strategy_rank(df["strategy"])).sort_values(["_r", "cold"], kind="stable").drop(columns="_r")
    extra = [c for c in ("n", "cache") if c in df]
    long = df.melt(id_vars=["run", "strategy", "diverged", "cold", *extra], value_vars=list(PHASES),
                   var_name="column", value_name="seconds")
    long = long[~(long["cold"] & long["column"].isin(["first_call_s", "run_s"]))]
    long["phase"] = long["column"].map(PHASES)
    long["phase_rank"] = long["column"].map({c: i for i, c in enumerate(PHASES)})
    long = long.sort_values(["run", "phase_rank"], kind="stable")
    long["end"] = long.groupby("run", sort=False)["seconds"].cumsum()
    long["start"] = long["end"] - long["seconds"]
    totals = long.groupby("run", sort=False)["end"].max()
    cut = timing_cut(runs, cold_compiles)  # the one rule, which pages read too
    if cut is not None:
        long["start"], long["end"] = long["start"].clip(upper=cut), long["end"].clip(upper=cut)
        top = cut * (1 + CUT_TEXT_ROOM)
        # No tick past the cut: there the room holds the totals, and a tick read as the bar's length.
        axis = alt.Axis(title="time (s)", values=_ticks_to(cut))
    else:
        top = AXIS_PAD * _whole_rows(runs, cold_compiles)["reach"].max() or 1.0  # 1 s where nothing took time
        axis = alt.Axis(title="time (s)")
    x = dict(x=alt.X("start:Q", axis=axis, scale=alt.Scale(domain=[0, top], nice=False)), x2="end:Q")
    hollow = alt.datum.diverged | alt.datum.cold
    # Every run's label, even where a page sets a height of under 24 px a bar: Vega's default
    # drops every other one that touches its neighbour, and a bar without its name says nothing.
    y = alt.Y("run:N", sort=list(df["run"]), title=None, axis=alt.Axis(labelOverlap=False))
    stacked = alt.Chart(long).mark_bar().encode(
        **x,
        y=y,
        color=alt.Color("phase:N", title="phase", sort=None, scale=alt.Scale(
            domain=list(PHASES.values()), range=list(PHASE_COLORS))),
        order=alt.Order("phase_rank:Q"),
        opacity=alt.condition(hollow, alt.value(0.4), alt.value(1.0)),
        # A hairline between phases: their colours are close in lightness (see PHASE_COLORS).
        stroke=alt.condition(hollow, alt.value("#111111"), alt.value("#FFFFFF")),
        strokeWidth=alt.condition(hollow, alt.value(2), alt.value(1)),
        strokeDash=alt.condition(hollow, alt.value([5, 3]), alt.value([1, 0])),
        tooltip=["run:N", "phase:N", alt.Tooltip("seconds:Q", format=".4f", title="seconds (s)"),
                 *[f"{c}:N" for c in extra]],
    )
    layers = [stacked]
    tagged = _phase_tags(long, top)
    if not tagged.empty:
        # Named, so that the stylesheet leaves their ink alone (their marks' class is
        # "phase_tags_marks"): it paints chart text in the page's colour, dark on these greys.
        layers.append(alt.Chart(tagged, name="phase_tags").mark_text(baseline="middle").encode(
            # The bars' own axis: layers share one, and a layer without (axis=None) took it from the chart.
            x=alt.X("middle:Q", axis=axis, scale=alt.Scale(domain=[0, top], nice=False)), y=y,
            text="tag:N", color=alt.Color("ink:N", scale=None),
            tooltip=["run:N", alt.Tooltip("named:N", title="phase"),
                     alt.Tooltip("seconds:Q", format=".4f", title="seconds (s)")]))
    if cut is not None:  # the axis's end, dashed, and each cut bar's total after it: its length is not its time
        over = totals[totals > cut]
        said = pd.DataFrame({"run": over.index, "x": cut, "text": [f"{t:.3g} s, cut" for t in over]})
        layers.append(alt.Chart(pd.DataFrame({"x": [cut]})).mark_rule(strokeDash=[4, 3], color=REFERENCE_COLOR)
                      .encode(x="x:Q"))
        layers.append(alt.Chart(said).mark_text(align="left", dx=4).encode(x="x:Q", y=y, text="text:N"))
    ranged = with_spread(df[~df["cold"] & ~df["diverged"]], "run_s")
    ranged = ranged[ranged["spread_known"] & (ranged["high"] > ranged["low"])]
    before = ranged["trace_lower_s"] + ranged["compile_s"] + ranged["first_call_s"]
    ranged = ranged.assign(range_low=before + ranged["low"], range_high=before + ranged["high"])
    if cut is not None:  # a cut bar's whisker is past the axis's end
        ranged = ranged[ranged["range_high"] <= cut]
    if not ranged.empty:
        layers.append(whiskers(ranged, "range_low", "range_high", y))
    if len(layers) == 1:
        return stacked.properties(title=title, height=alt.Step(30))
    return alt.layer(*layers, title=title).properties(height=alt.Step(30))


def speedup_bars(runs: pd.DataFrame, baseline: str = "eager") -> alt.Chart | alt.LayerChart:
    """Steady-state speed-up of each strategy over a baseline strategy, with its range.

    Args:
        runs: columns strategy, run_s; optional run_s_min, run_s_max, repeats, status.
        baseline: the strategy whose runs are the reference.

    Returns:
        Bars of median run_s(baseline) / median run_s(strategy) (log x), a whisker over the
        range the repeats allow, labelled "×23.5 (×21–×26)", "within noise" when the
        difference is not significant (`core.results.significance`), or "same program" (no
        bar, no whisker) for one compiled program; all-diverged strategies are listed as
        "diverged". A note if the baseline is absent.
    """
    title = f"Speed-up over {baseline} (steady state)"
    df = with_spread(runs.assign(strategy=runs["strategy"].astype(str), ok=not_diverged(runs)), "run_s")
    finished = df[df["ok"]]

    def pooled(rows: pd.DataFrame) -> spread.Spread:
        return spread.Spread.pooled(row_spread(row, "run_s") for _, row in rows.iterrows())

    base_rows = finished[finished["strategy"] == baseline]
    if base_rows.empty and (df["strategy"] == baseline).any():
        # It ran: asking for it again is a dead end.
        return note_chart(f"Every {baseline} run diverged: no speed-up against it (the runs' notes say why).", title)
    if base_rows.empty or not base_rows["run_s"].median() > 0:
        return note_chart(f"Run the {baseline} strategy to see speed-ups against it.", title)
    # No bar to draw (every one ×1): said in the chart, whose axis and "same program" labels
    # over an empty plot read as a chart that failed to draw.
    groups = headline.one_program_groups(finished)
    if df["ok"].all() and (df["strategy"].nunique() == 1
                           or (len(groups) == 1 and set(groups[0].strategies) == set(df["strategy"]))):
        return note_chart(f"×1: {baseline} alone" if df["strategy"].nunique() == 1 else
                          "×1: one compiled program, one speed", title)
    base = pooled(base_rows)
    # Strategies that ran one compiled program are one speed: each shows the speed-up of their
    # pooled repeats, so that one program never reads as three different speed-ups.
    spreads = {name: pooled(group[group["ok"]]) for name, group in df.groupby("strategy", sort=False)
               if group["ok"].any()}
    for group in groups:
        together = spread.Spread.pooled([spreads[name] for name in group.strategies])
        spreads.update((name, together) for name in group.strategies)
    rows = []
    for name, group in df.groupby("strategy", sort=False):
        done = group[group["ok"]]
        found = spread.speedup(base, spreads[name]) if name in spreads else None
        diverged = int((~group["ok"]).sum())
        text = found.brief if found is not None else "diverged"
        if found is not None and name == baseline:
            text = "baseline"
        elif found is not None and diverged:
            text += f" ({diverged} diverged)"
        # One program is one speed: no bar (x1) and no whisker, whatever its repeats say.
        one = found is not None and found.same_program
        rows.append({"strategy": name, "runs": len(group), "diverged": diverged,
                     "run_s": done["run_s"].median() if not done.empty else np.nan,
                     "speedup": 1.0 if one else found.value if found else np.nan,
                     "low": np.nan if one or not found else found.low,
                     "high": np.nan if one or not found else found.high, "text": text,
                     "verdict": found.label if found else "diverged",
                     "test": found.why if found is not None and name != baseline else ""})
    per = pd.DataFrame(rows)
    tips = ["strategy:N", alt.Tooltip("speedup:Q", format=".2f", title="speed-up (×)"),
            alt.Tooltip("verdict:N", title="with range"), alt.Tooltip("test:N", title="decided by"),
            alt.Tooltip("run_s:Q", format=".4f", title="median run (s)"), "runs:Q", "diverged:Q"]
    order = list(per.sort_values("strategy", key=strategy_rank)["strategy"])
    return bars_from_one(per, "speedup", alt.Y("strategy:N", sort=order, title=None),
                          f"speed-up over {baseline} (×, log scale)", title, tips)


def story_bars(rows: pd.DataFrame, steps: list[str],
               milliseconds: tuple[float, float] | None = None, height: int = 300) -> alt.Chart | alt.LayerChart:
    """The story's growing chart: one bar per step shown so far, in its strategy's colour.

    Args:
        rows: `core.results.story.chart_rows` (step, strategy, per_iter_ms, run_s, run_s_min,
            run_s_max, repeats, speedup: the label of the speed-up since the first step).
        steps: every step's label, in order: the axis lists them all from the start, so that
            each new bar appears in its place and nothing moves.
        milliseconds: the x axis's (low, high) in ms per iteration, fixed for the same reason;
            default: the range of `rows`.
        height: the chart's height in pixels, the same at every step, so that the page
            below it does not move either.

    Returns:
        Bars of milliseconds per iteration (log x) with a whisker over the repeats' range,
        labelled with the speed-up since the first step.
    """
    title = "Milliseconds per iteration, step by step"
    if rows.empty:
        return note_chart("No step timed yet: Warm up, or Next.", title).properties(height=height)
    df = with_spread(rows, "per_iter_ms")
    low, high = milliseconds or (float(df["low"].min()), float(df["high"].max()))
    floor = log_grid_below(low / 2)  # a log axis has no zero: bars start at its left end
    end = log_grid_above(high * 8)  # room for the speed-up's label beside the longest bar
    df["floor"] = floor
    y = alt.Y("step:N", sort=steps, scale=alt.Scale(domain=steps), title=None)
    x = alt.X("per_iter_ms:Q", axis=log_axis(floor, end, "ms per iteration, steady state (log scale)"),
              scale=alt.Scale(type="log", domain=[floor, end], nice=False))
    tips = ["step:N", "strategy:N", alt.Tooltip("per_iter_ms:Q", format=".4g", title="median (ms/iteration)"),
            alt.Tooltip("low:Q", format=".4g", title="fastest repeat (ms/iteration)"),
            alt.Tooltip("high:Q", format=".4g", title="slowest repeat (ms/iteration)"),
            alt.Tooltip("iterations_run:Q", format=",", title="iterations per fit"),
            alt.Tooltip("speedup:N", title="since step 1")]
    bars = alt.Chart(df).mark_bar().encode(x=x, x2="floor:Q", y=y, color=color_by_strategy(df, legend=False),
                                           tooltip=tips)
    ranged = df[df["spread_known"] & (df["high"] > df["low"])]
    text = alt.Chart(df.assign(text_x=df["high"])).mark_text(align="left", dx=8, fontWeight=600).encode(
        x="text_x:Q", y=y, text="speedup:N")
    return alt.layer(bars, whiskers(ranged, "low", "high", y), text, title=title).properties(height=height)
