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
