"""Who a visitor is: the dashboard's password gate, the password asked again before deleting
runs or cancelling someone else's (wrong guesses slow the next ones: per session, per
address and for the whole server, `core.access.Throttle`), and the identity that owns the
runs a session starts."""

from __future__ import annotations

import math
import uuid

import streamlit as st

from core import access, config
from pages.ui import upload_guard
from pages.ui.text import md


def identity() -> str:
    """Who this session is, as the runs it starts are owned (`RunResult.owner`): the signed-in
    user with the team's SSO, by the provider's issuer and subject (`access.sso_owner`), else
    this session alone, by a random token never reused."""
    user = _signed_in_user()
    if user:
        return access.sso_owner(user)
    if "session_owner" not in st.session_state:
        st.session_state["session_owner"] = f"session:{uuid.uuid4().hex}"
    return st.session_state["session_owner"]


def not_yours(one: bool) -> str:
    """What runs not owned by this session are called (`identity`): with SSO, someone else's;
    without it, another session's, which a reload of this tab is too (said so: a presenter's
    own runs, after a reload, read as made by someone else)."""
    if sso_configured():
        return "made by someone else" if one else "runs made by others too"
    return ("made in another session: without sign-in, a reload starts a new one" if one else
            "runs made in other sessions too: without sign-in, a reload starts a new one")


def _signed_in_user() -> dict | None:
    """The signed-in user's claims with the team's SSO (those that name them: `iss`, `sub`,
    `email`, `email_verified`), else None."""
    if not sso_configured():
        return None
    try:
        if st.user.is_logged_in and st.user.get("sub"):
            return {name: st.user.get(name) for name in ("iss", "sub", "email", "email_verified")}
    except Exception:  # noqa: BLE001 - a provider that answered without an identity: nobody
        return None
    return None


def password() -> str | None:
    """The configured password (environment first, then Streamlit's secrets), or None. A
    password file that cannot be read stops the page with the reason: closed, never open."""
    try:
        from_secrets = st.secrets.get("password")
    except Exception:  # noqa: BLE001 - no secrets file, or one that does not parse: no password from it
        from_secrets = None
    try:
        return access.configured(str(from_secrets) if from_secrets else None)
    except access.AccessError as exc:
        st.error(md(str(exc)), icon=":material/lock:")
        st.stop()


@st.cache_resource(show_spinner=False)
def _throttle() -> access.Throttle:
    """One throttle for every session of this server: a new session is no fresh start."""
    return access.Throttle()


def _address() -> str:
    """The address the guess came from, one a request cannot choose (`core.access.client_address`)."""
    try:
        peer = st.context.ip_address  # None from this machine
        forwarded = st.context.headers.get("X-Forwarded-For")
    except Exception:  # noqa: BLE001 - no request context (bare mode): this machine
        return access.THIS_MACHINE
    return access.client_address(peer, forwarded, config.raw(access.TRUSTED_PROXY_ENV) or None)


def refusal(guess: str | None) -> str | None:
    """None when `guess` is the password (or none is configured); else why not, saying how
    long to wait when wrong guesses from this address have been too many."""
    expected = password()
    if expected is None:
        return None
    session, address = identity(), _address()
    waiting = _throttle().wait_s(session, address)  # a guess sooner is refused unchecked
    granted, wait = _throttle().check(session, guess, expected, address)
    if granted:
        return None
    if waiting > 0:  # refused unchecked: "wrong password" read as a verdict on the right one
        return (f"Too many wrong passwords: this one was not checked; the next try is possible in "
                f"{math.ceil(wait)} s.")
    if wait > 0:
        return f"Wrong password; the next try is possible in {math.ceil(wait)} s."
    return "Wrong password."


def say_refused(refused: str, outcome: str) -> None:
    """A refused password where it was typed and, as a toast, at the top of the screen: below
    a form near the bottom of the window the message alone sat past the fold at 1024x768."""
    st.error(f"{refused} {outcome}", icon=":material/lock:")
    st.toast(f"{refused} {outcome}", icon=":material/lock:")


def sso_configured() -> bool:
    """Whether the team's SSO is configured: an [auth] section in Streamlit's secrets
    (.streamlit/secrets.toml), for `st.login` (OpenID Connect)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file, or one that does not parse: no SSO
        return False


def admitted() -> bool:
    """Whether `gate` lets this session through now (nothing drawn, nothing stopped)."""
    if access.sharing_refusal(st.get_option("server.address"), password(), sso_configured()):
        return False
    if sso_configured():
        return _signed_in_user() is not None
    return password() is None or bool(st.session_state.get("access_granted"))


def gate() -> None:
    """With the team's SSO configured, stop every page until the visitor has signed in with
    it; else, with a password configured, until this session has given it. A server that
    others can reach with neither stops every page, saying how to secure it. Uploads are
    refused until the session may use the dashboard (`upload_guard`)."""
    upload_guard.install()
    refused = access.sharing_refusal(st.get_option("server.address"), password(), sso_configured())
    if refused:
        st.title("PLN JIT Lab", anchor=False)
        st.error(md(refused), icon=":material/lock:")
        st.stop()
    if sso_configured():
        _sso_gate()
        return
    if password() is None or st.session_state.get("access_granted"):
        upload_guard.admit()
        return
    st.title("PLN JIT Lab", anchor=False)
    with st.form("access_form"):
        guess = st.text_input("Password", type="password", key="access_guess",
                              help="this server is shared; ask whoever runs it")
        entered = st.form_submit_button("Enter", type="primary", icon=":material/login:")
    # Said, since a reload mid-talk asks again: the password is kept by the session, not the browser.
    st.caption("Asked once a session: a reload or a new tab asks again, then opens the page its address names.")
    if entered:
        refused = refusal(guess)
        if refused is None:
            st.session_state["access_granted"] = True
            st.rerun()
        st.error(refused, icon=":material/lock:")
    st.stop()


def _sso_gate() -> None:
    user = _signed_in_user()
    if user:
        upload_guard.admit()
        with st.sidebar:
            left, right = st.columns([3, 2], vertical_alignment="center")
            left.caption(f":material/person: {md(access.sso_name(user))}")
            right.button("Sign out", key="sign_out", on_click=st.logout, icon=":material/logout:", width="stretch")
        return
    st.title("PLN JIT Lab", anchor=False)
    st.markdown("This server is shared by a team: sign in with its single sign-on to run fits and keep "
                "your runs yours.")
    st.button("Sign in", key="sign_in", type="primary", on_click=st.login, icon=":material/login:")
    st.stop()


def password_field(key: str, action: str) -> str | None:
    """Before acting for everyone (deleting, cancelling another's run): with a password
    configured, a field for it (check what it holds with `refusal` when the user acts);
    None without a password."""
    if password() is None:
        return None
    return st.text_input(f"Password to {action}", type="password", key=key,
                         help=f"to {action} on the shared server needs its password")
