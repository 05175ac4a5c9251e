"""What makes every page fit a projector: the app's Altair theme, its stylesheet and a favicon
served from here (a Material icon as page_icon makes the browser fetch it from Google's
font servers, which fails offline and tells them who is watching)."""

from __future__ import annotations

import pathlib

import streamlit as st

from core.charts import theme

ICON = pathlib.Path(__file__).resolve().parents[2] / "assets" / "icon.png"
STYLESHEET = pathlib.Path(__file__).with_name("projector.css")


def set_up() -> None:
    """Register the chart theme (once per process) and load the stylesheet (every page run:
    Streamlit drops what the last run did not draw)."""
    theme.register()
    st.html(STYLESHEET)
