"""Altair chart builders: a DataFrame of runs in, a Vega-Lite chart out.

Column names are `RunResult` field names (`core.run.result`); `runs` has one row per run and
a missing `status` column reads as "ok". Input a page can reasonably produce (no runs
yet, baseline not run) gives a chart holding a short note, never a traceback on a projector.

Diverged runs stop early, so their timings and ELBOs are not comparable: they never enter
a median, and the line charts show them apart (crosses) or cut their non-finite tails.

Here: the strategy palette and the helpers every chart shares. The line charts (ELBO
curves, scaling with n and with the device count) are in `core.charts.lines`, the bar
charts in `core.charts.bars`, the roofline in `core.charts.roofline`.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

STRATEGY_ORDER = (
    "eager", "jit_per_function", "jit_step", "scan", "scan_namedtuple",
    "scan_pytree_class", "fori_loop", "while_loop", "sharded", "fastest",
    "pyplnmodels", "torch_eager", "torch_compile",
)
# Okabe-Ito (2008) extended with Paul Tol's "muted" scheme: hues that stay apart under the
# common colour-vision deficiencies. Okabe-Ito yellow is left out: it vanishes on white
# under a projector. Families share hues (Python-loop jits warm, scans blue, lax loops green).
STRATEGY_COLORS = {
    "eager": "#000000", "jit_per_function": "#E69F00", "jit_step": "#D55E00",
    "scan": "#0072B2", "scan_namedtuple": "#56B4E9", "scan_pytree_class": "#332288",
    "fori_loop": "#009E73", "while_loop": "#117733", "sharded": "#CC79A7",
    "fastest": "#882255", "pyplnmodels": "#999933", "torch_eager": "#CC6677",
    "torch_compile": "#44AA99",
}
UNKNOWN_COLOR = "#9E9E9E"
UNITS = {"per_iter_ms": "time per iteration (ms)", "run_s": "steady-state run (s)",
         "compile_s": "compile (s)"}


def strategy_color_scale(present: list[str]) -> alt.Scale:
    """A colour scale giving each strategy the same colour in every chart.

    Args:
        present: strategy names in the chart, any order, duplicates allowed.

    Returns:
        Ordinal scale: domain = known names in `STRATEGY_ORDER` order, then unknown names
        (sorted, grey); range = their colours.
    """
    names = set(present)
    domain = [s for s in STRATEGY_ORDER if s in names] + sorted(names - set(STRATEGY_ORDER))
    return alt.Scale(domain=domain, range=[STRATEGY_COLORS.get(s, UNKNOWN_COLOR) for s in domain])


def color_by_strategy(df: pd.DataFrame, legend: bool = True) -> alt.Color:
    """The colour channel for `df`'s `strategy` column, on `strategy_color_scale`."""
    return alt.Color("strategy:N", title="strategy", sort=None,
                     legend=alt.Legend() if legend else None,
                     scale=strategy_color_scale(list(df["strategy"].astype(str))))


def not_diverged(df: pd.DataFrame) -> pd.Series:
    """True per row of `df` whose status is not "diverged" (no status column: all True)."""
    if "status" not in df:
        return pd.Series(True, index=df.index)
    return df["status"].fillna("ok") != "diverged"


def strategy_rank(strategy: pd.Series) -> pd.Series:
    """Each strategy's position in `STRATEGY_ORDER`, unknown ones last: a sort key."""
    order = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    return strategy.map(lambda s: order.get(s, len(order)))


def note_chart(text: str, title: str) -> alt.Chart:
    """A chart holding only a message, for input that cannot be plotted."""
    return alt.Chart(pd.DataFrame({"note": [text]}), title=title).mark_text(
        size=16, color="#555555").encode(text="note:N").properties(height=60)


def median_by(runs: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """Median of `cols` over non-diverged runs per `keys`, with a `runs` count."""
    grouped = runs[not_diverged(runs)].groupby(keys)
    return grouped[cols].median().join(grouped.size().rename("runs")).reset_index()
