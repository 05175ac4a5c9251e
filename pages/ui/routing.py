"""The routing guard every page calls first: pages run through app.py's router."""

from __future__ import annotations

import streamlit as st


def ensure_router() -> None:
    """Reruns through app.py when Streamlit ran this page on its own; call first thing.

    With a folder named pages/ beside app.py, Streamlit's legacy multipage mode is on until
    `st.navigation` first runs in the process: a server's first request for a page's URL
    (a bookmark, a link in slides) then runs the page file directly, without the router
    or the sidebar, and lists every file of pages/ as a page. Switching the mode off and
    rerunning sends the request through app.py, which keeps the page (same URL path).
    The same happens under AppTest, which re-detects the folder on every run.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - a Streamlit without the legacy mode
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()
