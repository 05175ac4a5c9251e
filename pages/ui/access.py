"""The dashboard's password gate, and the password asked again before deleting runs or
cancelling someone else's; wrong guesses slow the next ones from the same address."""

from __future__ import annotations

import math

import streamlit as st

from core import access


def password() -> str | None:
    """The configured password (environment first, then Streamlit's secrets), or None."""
    try:
        from_secrets = st.secrets.get("password")
    except Exception:  # noqa: BLE001 - no secrets file, or one that does not parse: no password from it
        from_secrets = None
    return access.configured(str(from_secrets) if from_secrets else None)


@st.cache_resource(show_spinner=False)
def _throttle() -> access.Throttle:
    """One throttle for every session of this server: a new session is no fresh start."""
    return access.Throttle()


def _client() -> str:
    """The address the guess came from; "unknown" (one client for all) where none is told."""
    try:
        address = st.context.ip_address
    except Exception:  # noqa: BLE001 - no request context (bare mode): one client
        address = None
    return address if isinstance(address, str) and address else "unknown"


def refusal(guess: str | None) -> str | None:
    """None when `guess` is the password (or none is configured); else why not, saying how
    long to wait when wrong guesses from this address have been too many."""
    expected = password()
    if expected is None:
        return None
    granted, wait = _throttle().check(_client(), guess, expected)
    if granted:
        return None
    if wait > 0:
        return f"Wrong password, or too many of them: the next try is possible in {math.ceil(wait)} s."
    return "Wrong password."


def gate() -> None:
    """With a password configured, stop every page until this session has given it."""
    if password() is None or st.session_state.get("access_granted"):
        return
    st.title("PLN JIT Lab", anchor=False)
    with st.form("access_form"):
        guess = st.text_input("Password", type="password", key="access_guess",
                              help="this server is shared; ask whoever runs it")
        entered = st.form_submit_button("Enter", type="primary", icon=":material/login:")
    if entered:
        refused = refusal(guess)
        if refused is None:
            st.session_state["access_granted"] = True
            st.rerun()
        st.error(refused, icon=":material/lock:")
    st.stop()


def password_field(key: str, action: str) -> str | None:
    """Before acting for everyone (deleting, cancelling another's run): with a password
    configured, a field for it (check what it holds with `refusal` when the user acts);
    None without a password."""
    if password() is None:
        return None
    return st.text_input(f"Password to {action}", type="password", key=key,
                         help=f"to {action} on the shared server needs its password")
