"""How much uploaded data the server holds, and from whom.

Streamlit keeps every uploaded file in the server's memory until its session ends, and its
upload endpoint takes a file for any open session, before the page has asked for one. So,
for each file offered (`refusal`):

- a session that has not signed in (a password or SSO is configured and not yet given) may
  upload nothing: there is no uploader on its page, only a script would try;
- a session holds at most `MAX_FILES_PER_SESSION` files and `MAX_SESSION_MB` megabytes;
- the whole server holds at most $PLNLAB_MAX_UPLOADS_MB megabytes (default
  `DEFAULT_SERVER_MB`) of uploads, whoever sent them.

`pages.ui.upload_guard` applies it to Streamlit's upload manager.
"""

from __future__ import annotations

from core import config

SERVER_MB_ENV = "PLNLAB_MAX_UPLOADS_MB"
# The sidebar's three CSV uploaders and Compare's runs import, with room to replace one.
MAX_FILES_PER_SESSION = 6
MAX_SESSION_MB = 100
DEFAULT_SERVER_MB = config.variable(SERVER_MB_ENV).default
MB = 1024 * 1024


def server_cap_bytes() -> int:
    """$PLNLAB_MAX_UPLOADS_MB in bytes, else `DEFAULT_SERVER_MB`.

    Raises:
        ValueError: the variable is not a whole number of megabytes >= 1.
    """
    if not config.raw(SERVER_MB_ENV):
        return DEFAULT_SERVER_MB * MB
    try:
        return config.whole(SERVER_MB_ENV) * MB
    except config.ConfigError:
        raise ValueError(f"{SERVER_MB_ENV} must be a whole number of megabytes >= 1; "
                         f"got {config.raw(SERVER_MB_ENV)!r}") from None


def refusal(size: int, signed_in: bool, session_sizes: list[int], server_bytes: int) -> str | None:
    """Why a file of `size` bytes may not be held, or None.

    Args:
        size: the offered file's bytes.
        signed_in: whether the session may use the dashboard (signed in, or nothing to sign in to).
        session_sizes: the sizes of the files the session holds now (a file it replaces excluded).
        server_bytes: the bytes every session holds now.
    """
    if not signed_in:
        return "sign in first: uploads are refused before it"
    if len(session_sizes) + 1 > MAX_FILES_PER_SESSION:
        return f"a session holds at most {MAX_FILES_PER_SESSION} uploaded files; remove one first"
    if sum(session_sizes) + size > MAX_SESSION_MB * MB:
        return f"a session holds at most {MAX_SESSION_MB} MB of uploads; remove one first"
    if server_bytes + size > server_cap_bytes():
        return (f"this server holds {server_cap_bytes() // MB} MB of uploads at most ({SERVER_MB_ENV}) and is full; "
                "try again when other sessions have ended")
    return None
