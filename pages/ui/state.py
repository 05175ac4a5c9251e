"""Session-state helpers: widget defaults, and the values a session must not lose.

Widgets that must outlive their page or a run that hides them say so themselves, with
`persist_state="session"`: Streamlit then keeps their values and gives them back to the
browser when they are drawn again. Re-assigning their keys on every run would do the
same but make the browser take the script's value on each run, and a run still drawing
an old value would undo what was just typed or clicked.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

import streamlit as st

log = logging.getLogger(__name__)


def default(key: str, value: Any) -> None:
    """Set a widget's initial value through session state (so no `value=` is needed)."""
    if key not in st.session_state:
        st.session_state[key] = value


def kept_or_default(defaults: dict[str, Any], kept: str) -> list[str]:
    """Give each widget key of `defaults` that the session lacks a value before its widget is
    drawn: the one it held at the session's last `keep(..., kept)`, else its default. Returns
    the keys given back a kept value (logged: Streamlit lost them).

    `persist_state="session"` is meant to make a lost value impossible, yet a session's
    sidebar once came back at every default between two pages on a loaded machine while its
    plain keys (its last runs' ids) stayed, and Run then showed those runs as another
    problem's. A plain key holds what the widgets held, so such a loss costs nothing.
    """
    held = st.session_state.get(kept) or {}
    restored = []
    for name, value in defaults.items():
        if name in st.session_state:
            continue
        if name in held:
            restored.append(name)
        st.session_state[name] = held.get(name, value)
    if restored:
        log.warning("session state had lost %s: given back the values kept in %s", ", ".join(restored), kept)
    return restored


def keep(names: Iterable[str], kept: str) -> None:
    """Note the values the widget keys `names` hold now under the plain key `kept`, for
    `kept_or_default`."""
    st.session_state[kept] = {name: st.session_state[name] for name in names if name in st.session_state}
