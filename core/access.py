"""The optional shared password: where it is configured and how a guess is checked.

Off by default (local use). On a shared server, set $PLNLAB_PASSWORD, or `password` in
Streamlit's secrets (.streamlit/secrets.toml); the dashboard then asks for it before
showing anything, and again before deleting runs or cancelling someone else's. Wrong
guesses slow the next ones down (`Throttle`).
"""

from __future__ import annotations

import collections
import hmac
import os
import threading
import time
from typing import Callable

PASSWORD_ENV = "PLNLAB_PASSWORD"


def configured(secrets_password: str | None = None) -> str | None:
    """The password in force: $PLNLAB_PASSWORD, else `secrets_password`; None (or empty)
    means no password."""
    return os.environ.get(PASSWORD_ENV) or secrets_password or None


def matches(guess: str | None, password: str) -> bool:
    """Whether `guess` is `password`, compared in constant time (no timing hints)."""
    return hmac.compare_digest((guess or "").encode(), password.encode())


# Guesses a client may get wrong before the next ones wait, the first wait, and the
# longest: 1, 2, 4, ... 60 s after each wrong guess. 25 guesses then take about 20 minutes
# instead of 2.5 s; a colleague with a typo waits a second or two.
FREE_GUESSES = 3
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 60.0
# Clients remembered at once; the oldest are forgotten first (a bound on the server's memory).
MAX_CLIENTS = 10_000


class Throttle:
    """Slows password guesses per client after a few wrong ones (thread-safe).

    Args:
        clock: monotonic seconds (a test passes its own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._wrong: collections.OrderedDict[str, tuple[int, float]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def wait_s(self, client: str) -> float:
        """Seconds before `client` may guess again (0: now)."""
        with self._lock:
            count, last = self._wrong.get(client, (0, 0.0))
        if count < FREE_GUESSES:
            return 0.0
        wait = min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (count - FREE_GUESSES))
        return max(0.0, last + wait - self._clock())

    def check(self, client: str, guess: str | None, password: str) -> tuple[bool, float]:
        """(whether `guess` is `password`, seconds to wait before the next guess). A guess
        made while `client` must wait is not checked at all: it is refused."""
        if self.wait_s(client) > 0:
            return False, self.wait_s(client)
        if matches(guess, password):
            with self._lock:
                self._wrong.pop(client, None)
            return True, 0.0
        with self._lock:
            count, _ = self._wrong.pop(client, (0, 0.0))
            self._wrong[client] = (count + 1, self._clock())
            while len(self._wrong) > MAX_CLIENTS:
                self._wrong.popitem(last=False)
        return False, self.wait_s(client)


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
