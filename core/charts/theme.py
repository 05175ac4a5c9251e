"""The app's Altair theme: projector-sized chart text in colours that pass WCAG AAA.

Registered once, at start-up (`register()`; nothing happens at import). Streamlit merges
its own chart theme under a chart's config, so what is set here wins: text at least 16 px
(Streamlit's default is 13.5 px ticks, 15.75 px titles) in near-black, 18:1 on white,
where Streamlit's grey axis text (#808495) is about 3.8:1. A dark room gets the same
sizes with light text: the pages draw charts as SVG and their stylesheet
(pages/ui/projector.css) paints chart text in the page's text colour, so a chart follows
a switch of theme at once; `colours(dark=True)` is that colour scheme, for checks and
for charts drawn elsewhere (a PNG export).
"""

from __future__ import annotations

from typing import Any

import altair as alt

NAME = "plnlab"
# Chart text sizes in px: ticks and legend labels at the body text's 16 px, titles larger.
LABEL_PX, TITLE_PX, CHART_TITLE_PX = 16, 17, 20
# Backgrounds as set in .streamlit/config.toml, and the text drawn on them.
LIGHT = {"background": "#FFFFFF", "text": "#111111", "grid": "#D9D9D9"}
DARK = {"background": "#121212", "text": "#EDEDED", "grid": "#3A3A3A"}


def colours(dark: bool = False) -> dict[str, Any]:
    """The colour part of the theme's config for a light or a dark page."""
    scheme = DARK if dark else LIGHT
    text, grid = scheme["text"], scheme["grid"]
    return {
        "axis": {"labelColor": text, "titleColor": text, "tickColor": text, "domainColor": text,
                 "gridColor": grid},
        "legend": {"labelColor": text, "titleColor": text},
        "title": {"color": text, "subtitleColor": text},
        "header": {"labelColor": text, "titleColor": text},
        "text": {"color": text},
        "rule": {"color": text},
    }


def config(dark: bool = False) -> dict[str, Any]:
    """The whole Vega-Lite config: sizes, and `colours(dark)`."""
    sizes = {
        "axis": {"labelFontSize": LABEL_PX, "titleFontSize": TITLE_PX, "titleFontWeight": 600},
        # symbolLimit 0: every entry; Vega's default drops those past 30 with a console warning.
        "legend": {"labelFontSize": LABEL_PX, "titleFontSize": TITLE_PX, "titleFontWeight": 600,
                   "symbolSize": 160, "symbolStrokeWidth": 3, "symbolLimit": 0},
        "title": {"fontSize": CHART_TITLE_PX, "anchor": "start", "fontWeight": 600},
        "header": {"labelFontSize": LABEL_PX, "titleFontSize": TITLE_PX},
        "text": {"fontSize": LABEL_PX},
    }
    merged = {}
    for part in sizes.keys() | colours(dark).keys():
        merged[part] = {**sizes.get(part, {}), **colours(dark).get(part, {})}
    return merged


def _theme() -> alt.theme.ThemeConfig:
    return alt.theme.ThemeConfig({"config": config()})


def register() -> None:
    """Register the theme with Altair and enable it for this process (idempotent)."""
    if NAME not in alt.theme.names():
        alt.theme.register(NAME, enable=False)(_theme)
    alt.theme.enable(NAME)


def configured(figure: alt.TopLevelMixin, axis: dict[str, Any] | None = None,
               legend: dict[str, Any] | None = None) -> alt.TopLevelMixin:
    """`figure` with a page's own `axis` and `legend` settings, each set in one call:
    Altair's `configure_axis` replaces whatever a chart's axis config held before."""
    if axis:
        figure = figure.configure_axis(**axis)
    if legend:
        figure = figure.configure_legend(**legend)
    return figure
