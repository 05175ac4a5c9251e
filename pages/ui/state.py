"""Session-state helper: widget defaults.

Widgets that must outlive their page or a run that hides them say so themselves, with
`persist_state="session"`: Streamlit then keeps their values and gives them back to the
browser when they are drawn again. Re-assigning their keys on every run would do the
same but make the browser take the script's value on each run, and a run still drawing
an old value would undo what was just typed or clicked.
"""

from __future__ import annotations

from typing import Any

import streamlit as st


def default(key: str, value: Any) -> None:
    """Set a widget's initial value through session state (so no `value=` is needed)."""
    if key not in st.session_state:
        st.session_state[key] = value
