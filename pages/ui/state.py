"""Session-state helpers: widget defaults, and widget values that outlive their page."""

from __future__ import annotations

from typing import Any

import streamlit as st

# Under the sidebar's prefix: the sidebar, drawn on every page, is what re-keeps them.
_PERSISTED = "sb_persist"


def keep(*keys: str) -> None:
    """Keep widget values across pages and hidden widgets.

    Streamlit forgets a widget's value when a run does not draw it; re-assigning the key
    turns it into plain session state that survives until the widget is drawn again.
    """
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def persist(*keys: str) -> None:
    """Keep these page widgets' values while other pages are shown (see `keep`).

    The sidebar, drawn on every page, re-keeps every key registered here on each run.
    """
    st.session_state.setdefault(_PERSISTED, set()).update(keys)
    keep(*keys)


def keep_persisted() -> None:
    """Re-keeps every key registered through `persist`; the sidebar calls it on each run."""
    keep(*st.session_state.get(_PERSISTED, ()))


def default(key: str, value: Any) -> None:
    """Set a widget's initial value through session state (so no `value=` is needed)."""
    if key not in st.session_state:
        st.session_state[key] = value
