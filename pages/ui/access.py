"""The dashboard's password gate and the password check before deleting runs."""

from __future__ import annotations

import streamlit as st

from core import access


def password() -> str | None:
    """The configured password (environment first, then Streamlit's secrets), or None."""
    try:
        from_secrets = st.secrets.get("password")
    except Exception:  # noqa: BLE001 - no secrets file, or one that does not parse: no password from it
        from_secrets = None
    return access.configured(str(from_secrets) if from_secrets else None)


def gate() -> None:
    """With a password configured, stop every page until this session has given it."""
    expected = password()
    if expected is None or st.session_state.get("access_granted"):
        return
    st.title("PLN JIT Lab", anchor=False)
    with st.form("access_form"):
        guess = st.text_input("Password", type="password", key="access_guess",
                              help="this server is shared; ask whoever runs it")
        entered = st.form_submit_button("Enter", type="primary", icon=":material/login:")
    if entered:
        if access.matches(guess, expected):
            st.session_state["access_granted"] = True
            st.rerun()
        st.error("Wrong password.", icon=":material/lock:")
    st.stop()


def delete_allowed(key: str) -> bool:
    """Before a delete: True without a password; with one, a field that must hold it."""
    expected = password()
    if expected is None:
        return True
    guess = st.text_input("Password to delete", type="password", key=key,
                          help="deleting runs from the shared store needs the server's password")
    return access.matches(guess, expected)
