"""The optional shared password: where it is configured and how a guess is checked.

Off by default (local use). On a shared server, set $PLNLAB_PASSWORD, or `password` in
Streamlit's secrets (.streamlit/secrets.toml); the dashboard then asks for it before
showing anything, and again before deleting runs or cancelling someone else's. Wrong
guesses slow the next ones down (`Throttle`).
"""

from __future__ import annotations

import collections
import hmac
import math
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


TRUSTED_PROXY_ENV = "PLNLAB_TRUSTED_PROXY"
THIS_MACHINE = "this machine"


def client_address(peer: str | None, forwarded_for: str | None, trusted_proxy: str | None = None) -> str:
    """The address a password guess is counted against, one a request cannot choose.

    Streamlit's server (uvicorn) replaces the connection's address by the last hop of an
    X-Forwarded-For header when the connection comes from this machine, so a local client
    that writes the header picks its own address. The header is believed only when a proxy of
    our own is named ($PLNLAB_TRUSTED_PROXY, the address it connects from): then its last hop,
    which that proxy appended, is the client. Otherwise whatever the header says is the
    machine itself, one address for everyone who reaches the server through it.

    Args:
        peer: the connection's address as the server reports it (maybe from the header).
        forwarded_for: the X-Forwarded-For header, or None.
        trusted_proxy: the address of the proxy in front of the server, or None.
    """
    hops = [hop.strip() for hop in (forwarded_for or "").split(",") if hop.strip()]
    if hops and peer in hops:  # the server took the address from the header: it came from here
        return peer if trusted_proxy else THIS_MACHINE
    if not peer or peer in ("127.0.0.1", "::1"):
        return THIS_MACHINE
    return peer


# Wrong guesses a session may make before its next ones wait, the first wait and the
# longest: 1, 2, 4, ... 60 s after each wrong guess. 25 guesses then take about 20 minutes
# instead of 2.5 s; a colleague with a typo waits a second or two.
FREE_GUESSES = 3
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 60.0
# One address (many sessions: a flood opens a new session per guess, and every colleague
# behind one proxy shares its address) and the whole server get more before they slow down,
# and then slow only the sessions that have guessed wrong themselves; a session's first
# guess waits at most `FIRST_GUESS_GAP_S` for its turn. So a flood from one address costs a
# colleague there a wait of seconds, never a lock-out, and gets about one guess in
# `FIRST_GUESS_GAP_S` seconds however many sessions it opens.
ADDRESS_FREE_GUESSES = 30
GLOBAL_FREE_GUESSES = 300
FIRST_GUESS_GAP_S = 5.0
# Wrong guesses are forgotten this long after the last one (a typo this morning does not slow
# this afternoon's colleagues).
FORGET_AFTER_S = 900.0
# Sessions and addresses remembered at once; the oldest are forgotten first (a bound on the
# server's memory).
MAX_CLIENTS = 10_000


def _schedule_wait(count: int, free: int) -> float:
    return 0.0 if count < free else min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (count - free))


class Throttle:
    """Slows password guesses after a few wrong ones: per session, per address and for the
    whole server (see the constants above); thread-safe.

    Args:
        clock: monotonic seconds (a test passes its own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._wrong: collections.OrderedDict[str, tuple[int, float]] = collections.OrderedDict()
        self._first_guess_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def _bucket(self, key: str) -> tuple[int, float]:
        count, last = self._wrong.get(key, (0, 0.0))
        return (count, last) if count and self._clock() - last < FORGET_AFTER_S else (0, 0.0)

    def wait_s(self, session: str, address: str = THIS_MACHINE) -> float:
        """Seconds before `session`, connected from `address`, may guess again (0: now)."""
        now = self._clock()
        with self._lock:
            (mine, my_last) = self._bucket("session:" + session)
            (theirs, their_last) = self._bucket("address:" + address)
            (everyone, last) = self._bucket("server")
            waits = [my_last + _schedule_wait(mine, FREE_GUESSES) - now if mine else 0.0]
            crowded = theirs >= ADDRESS_FREE_GUESSES or everyone >= GLOBAL_FREE_GUESSES
            if mine and crowded:  # a session that guessed wrong waits as its address and the server do
                waits.append(their_last + _schedule_wait(theirs, ADDRESS_FREE_GUESSES) - now)
                waits.append(last + _schedule_wait(everyone, GLOBAL_FREE_GUESSES) - now)
            elif crowded:  # a fresh session's first guess waits for its turn, seconds at most
                for key in ("address:" + address, "server"):
                    waits.append(self._first_guess_at.get(key, -math.inf) + FIRST_GUESS_GAP_S - now)
        return max(0.0, *waits)

    def check(self, session: str, guess: str | None, password: str, address: str = THIS_MACHINE) -> tuple[bool, float]:
        """(whether `guess` is `password`, seconds to wait before the next guess). A guess
        made while it must wait is not checked at all: it is refused."""
        wait = self.wait_s(session, address)
        if wait > 0:
            return False, wait
        now = self._clock()
        with self._lock:
            if not self._bucket("session:" + session)[0]:
                for key in ("address:" + address, "server"):
                    self._first_guess_at[key] = now
        if matches(guess, password):
            with self._lock:
                self._wrong.pop("session:" + session, None)
            return True, 0.0
        with self._lock:
            for key in ("session:" + session, "address:" + address, "server"):
                count, _ = self._bucket(key)
                self._wrong.pop(key, None)
                self._wrong[key] = (count + 1, now)
            while len(self._wrong) > MAX_CLIENTS:
                self._wrong.popitem(last=False)
            if len(self._first_guess_at) > MAX_CLIENTS:
                self._first_guess_at.clear()
        return False, self.wait_s(session, address)


ALLOW_DELETE_ENV = "PLNLAB_ALLOW_DELETE"
_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def others_may_be_deleted(signed_in: bool = False) -> bool:
    """$PLNLAB_ALLOW_DELETE: whether a session may delete runs it did not make when no
    password is set ("0", "false", "no" or "off" turn it off; "1", "true", "yes" or "on"
    turn it on). Unset, yes for a session known only by its token (a local lab), no for a
    user signed in with the team's SSO: on a team's server a run is its owner's to delete.

    Raises:
        ValueError: the variable holds something else (the message says what is accepted).
    """
    text = os.environ.get(ALLOW_DELETE_ENV, "").strip().lower()
    if not text:
        return not signed_in
    if text in _YES:
        return True
    if text in _NO:
        return False
    raise ValueError(f"{ALLOW_DELETE_ENV} must be 1 or 0 (or yes/no, true/false, on/off); got {text!r}")


def deletion(run_ids, own_ids, password: str | None, signed_in: bool = False) -> str:
    """What deleting `run_ids` takes, for a session that made the runs `own_ids` (its
    signed-in user's, with `signed_in`, in any of their sessions).

    Returns:
        "confirm": only this session's own runs: a confirmation is enough.
        "password": runs of others, and a password is set: it must be given again.
        "confirm others": runs of others, no password, deletion allowed: a confirmation
            that says whose runs they are.
        "off": runs of others, no password, and $PLNLAB_ALLOW_DELETE turned it off (or left
            it unset for a signed-in user).
    """
    if set(run_ids) <= set(own_ids):
        return "confirm"
    if password:
        return "password"
    return "confirm others" if others_may_be_deleted(signed_in) else "off"
