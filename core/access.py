"""The optional shared password: where it is configured and how a guess is checked.

Off by default (local use). On a shared server, set $PLNLAB_PASSWORD, or `password` in
Streamlit's secrets (.streamlit/secrets.toml); the dashboard then asks for it before
showing anything, and again before deleting runs.
"""

from __future__ import annotations

import hmac
import os

PASSWORD_ENV = "PLNLAB_PASSWORD"


def configured(secrets_password: str | None = None) -> str | None:
    """The password in force: $PLNLAB_PASSWORD, else `secrets_password`; None (or empty)
    means no password."""
    return os.environ.get(PASSWORD_ENV) or secrets_password or None


def matches(guess: str | None, password: str) -> bool:
    """Whether `guess` is `password`, compared in constant time (no timing hints)."""
    return hmac.compare_digest((guess or "").encode(), password.encode())


ALLOW_DELETE_ENV = "PLNLAB_ALLOW_DELETE"
_YES, _NO = ("", "1", "true", "yes", "on"), ("0", "false", "no", "off")


def others_may_be_deleted() -> bool:
    """$PLNLAB_ALLOW_DELETE: whether a session may delete runs it did not make when no
    password is set (default yes; "0", "false", "no" or "off" turn it off).

    Raises:
        ValueError: the variable holds something else (the message says what is accepted).
    """
    text = os.environ.get(ALLOW_DELETE_ENV, "").strip().lower()
    if text in _YES:
        return True
    if text in _NO:
        return False
    raise ValueError(f"{ALLOW_DELETE_ENV} must be 1 or 0 (or yes/no, true/false, on/off); got {text!r}")


def deletion(run_ids, own_ids, password: str | None) -> str:
    """What deleting `run_ids` takes, for a session that made the runs `own_ids`.

    Returns:
        "confirm": only this session's own runs: a confirmation is enough.
        "password": runs of others, and a password is set: it must be given again.
        "confirm others": runs of others, no password, deletion allowed: a confirmation
            that says whose runs they are.
        "off": runs of others, no password, and $PLNLAB_ALLOW_DELETE turned it off.
    """
    if set(run_ids) <= set(own_ids):
        return "confirm"
    if password:
        return "password"
    return "confirm others" if others_may_be_deleted() else "off"
