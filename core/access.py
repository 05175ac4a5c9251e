"""The optional shared password: where it is configured and how a guess is checked.

Off by default (local use). On a shared server, put it in a file only its operator reads and
name the file in $PLNLAB_PASSWORD_FILE (a password on a command line shows in `ps` and the
shell's history), or set $PLNLAB_PASSWORD, or `password` in Streamlit's secrets
(.streamlit/secrets.toml); the dashboard then asks for it before showing anything, and again
before deleting runs or cancelling someone else's. Wrong guesses slow the next ones down
(`Throttle`).
"""

from __future__ import annotations

import collections
import hmac
import ipaddress
import math
import threading
import time
from typing import Callable

from core import config

PASSWORD_ENV = "PLNLAB_PASSWORD"
PASSWORD_FILE_ENV = "PLNLAB_PASSWORD_FILE"
# $PLNLAB_PASSWORD once `hold_secrets` took it out of the environment.
_held: dict[str, str] = {}


class AccessError(ValueError):
    """The password is configured in a way that cannot be read: the server must not open
    without it (it fails closed, saying why)."""


def configured(secrets_password: str | None = None) -> str | None:
    """The password in force: $PLNLAB_PASSWORD, else the first line of $PLNLAB_PASSWORD_FILE,
    else `secrets_password`; None (or empty) means no password.

    Raises:
        AccessError: $PLNLAB_PASSWORD_FILE names a file that cannot be read or is empty.
    """
    return config.raw(PASSWORD_ENV) or _held.get(PASSWORD_ENV) or _from_file() or secrets_password or None


def _from_file() -> str | None:
    path = config.raw(PASSWORD_FILE_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessError(f"{PASSWORD_FILE_ENV} names {path}, which cannot be read ({type(exc).__name__}); "
                          "the server stays closed until it can") from None
    if not first:
        raise AccessError(f"{PASSWORD_FILE_ENV} names {path}, whose first line is empty; the server stays closed "
                          "until it holds the password")
    return first


def hold_secrets() -> None:
    """Moves $PLNLAB_PASSWORD out of this process's environment into its memory, before it
    starts processes of its own: a worker of the embedded cluster (started again by its
    nanny at any time) would inherit it, and whatever runs there could read it."""
    value = config.take(PASSWORD_ENV)
    if value:
        _held[PASSWORD_ENV] = value


def matches(guess: str | None, password: str) -> bool:
    """Whether `guess` is `password`, compared in constant time (no timing hints)."""
    return hmac.compare_digest((guess or "").encode(), password.encode())


def loopback_only(server_address: str | None) -> bool:
    """Whether a server bound to `server_address` (Streamlit's server.address; empty means
    every interface) is reached from this machine alone."""
    host = (server_address or "").strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # empty (every interface) or a name: reached from elsewhere
        return False


def sharing_refusal(server_address: str | None, password: str | None, sso: bool) -> str | None:
    """Why a server that others can reach may not open, or None: shared beyond this machine
    (`--server.address`), it needs a password or the team's SSO, or anyone on the network
    could run fits on this machine and delete everyone's runs."""
    if loopback_only(server_address) or password or sso:
        return None
    host = (server_address or "").strip()
    where = "every network interface" if host in ("", "0.0.0.0", "::", "[::]") else f"server.address {host}"
    return (f"This server listens on {where}, so others can reach it, and it has neither a password nor the "
            f"team's single sign-on. Set {PASSWORD_FILE_ENV} (a file holding the password) or an [auth] "
            "section in .streamlit/secrets.toml and start it again, or serve this machine alone "
            "(--server.address 127.0.0.1, the default).")


def sso_owner(claims: dict) -> str:
    """The owner of a signed-in user's runs: "user:<issuer> <subject>", the provider's own
    lasting name for them. An e-mail address can change hands or be unverified, so it never
    decides whose a run is."""
    return f"user:{claims.get('iss') or ''} {claims['sub']}"


def sso_name(claims: dict) -> str:
    """How a signed-in user is shown: their e-mail when the provider verified it, else their
    subject."""
    if claims.get("email") and claims.get("email_verified") in (True, "true", "True"):
        return str(claims["email"])
    return str(claims.get("sub"))


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
# behind one proxy shares its address; IPv6 by /64, what one machine is given) gets more
# before it slows down; past them, a session there that guessed wrong waits as the address
# does, and a fresh session's first guess waits for the address's next slot, one every
# `FIRST_GUESS_GAP_S`. The slots are the address's own: a flood from one address gets about
# one guess in `FIRST_GUESS_GAP_S` seconds however many sessions it opens, and costs a
# colleague at another address nothing (at the same one, a wait of seconds).
ADDRESS_FREE_GUESSES = 30
FIRST_GUESS_GAP_S = 5.0
# The whole server's ceiling, against guesses spread over many addresses: past it, a session
# that has itself used its free guesses waits as the server does too.
GLOBAL_FREE_GUESSES = 300
# Wrong guesses are forgotten this long after the last one (a typo this morning does not slow
# this afternoon's colleagues).
FORGET_AFTER_S = 900.0
# Sessions and addresses remembered at once; the oldest are forgotten first (a bound on the
# server's memory).
MAX_CLIENTS = 10_000


def _schedule_wait(count: int, free: int) -> float:
    return 0.0 if count < free else min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (count - free))


def address_key(address: str) -> str:
    """The bucket an address's guesses are counted in: an IPv4 address itself, an IPv6 one by
    its /64 (a machine is given a whole /64 and picks any address in it)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if parsed.version == 4:
        return str(parsed)
    if parsed.ipv4_mapped is not None:  # ::ffff:10.0.0.7 is 10.0.0.7
        return str(parsed.ipv4_mapped)
    return str(ipaddress.ip_network(f"{parsed}/64", strict=False))


class Throttle:
    """Slows password guesses after a few wrong ones: per session, per address and for the
    whole server (see the constants above); thread-safe, and one guess is waited for, checked
    and counted under one lock, so simultaneous guesses cannot slip past the count.

    Args:
        clock: monotonic seconds (a test passes its own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._wrong: collections.OrderedDict[str, tuple[int, float]] = collections.OrderedDict()
        self._next_slot: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._lock = threading.Lock()

    def _bucket(self, key: str, now: float) -> tuple[int, float]:
        count, last = self._wrong.get(key, (0, 0.0))
        return (count, last) if count and now - last < FORGET_AFTER_S else (0, 0.0)

    def _wait(self, session: str, address: str, now: float) -> float:
        mine, my_last = self._bucket("session:" + session, now)
        theirs, their_last = self._bucket("address:" + address, now)
        everyone, last = self._bucket("server", now)
        waits = [my_last + _schedule_wait(mine, FREE_GUESSES) - now if mine else 0.0]
        if mine and theirs >= ADDRESS_FREE_GUESSES:  # a session that guessed wrong waits as its address does
            waits.append(their_last + _schedule_wait(theirs, ADDRESS_FREE_GUESSES) - now)
        elif not mine and theirs >= ADDRESS_FREE_GUESSES:  # a fresh session's first guess takes the next slot
            waits.append(self._next_slot.get(address, -math.inf) - now)
        if mine >= FREE_GUESSES and everyone >= GLOBAL_FREE_GUESSES:
            waits.append(last + _schedule_wait(everyone, GLOBAL_FREE_GUESSES) - now)
        return max(0.0, *waits)

    def wait_s(self, session: str, address: str = THIS_MACHINE) -> float:
        """Seconds before `session`, connected from `address`, may guess again (0: now)."""
        with self._lock:
            return self._wait(session, address_key(address), self._clock())

    def check(self, session: str, guess: str | None, password: str, address: str = THIS_MACHINE) -> tuple[bool, float]:
        """(whether `guess` is `password`, seconds to wait before the next guess). A guess
        made while it must wait is not checked at all: it is refused."""
        address = address_key(address)
        with self._lock:
            now = self._clock()
            wait = self._wait(session, address, now)
            if wait > 0:
                return False, wait
            if not self._bucket("session:" + session, now)[0]:  # a fresh session's guess takes its address's slot
                self._next_slot.pop(address, None)
                self._next_slot[address] = now + FIRST_GUESS_GAP_S
                while len(self._next_slot) > MAX_CLIENTS:
                    self._next_slot.popitem(last=False)
            if matches(guess, password):
                self._wrong.pop("session:" + session, None)
                return True, 0.0
            for key in ("session:" + session, "address:" + address, "server"):
                count, _ = self._bucket(key, now)
                self._wrong.pop(key, None)
                self._wrong[key] = (count + 1, now)
            while len(self._wrong) > MAX_CLIENTS:
                self._wrong.popitem(last=False)
            return False, self._wait(session, address, now)


ALLOW_DELETE_ENV = "PLNLAB_ALLOW_DELETE"


def others_may_be_deleted(signed_in: bool = False) -> bool:
    """$PLNLAB_ALLOW_DELETE: whether a session may delete runs it did not make when no
    password is set ("0", "false", "no" or "off" turn it off; "1", "true", "yes" or "on"
    turn it on). Unset, yes for a session known only by its token (a local lab), no for a
    user signed in with the team's SSO: on a team's server a run is its owner's to delete.

    Raises:
        ValueError: the variable holds something else (the message says what is accepted).
    """
    chosen = config.switch(ALLOW_DELETE_ENV)  # a ConfigError is a ValueError
    return not signed_in if chosen is None else chosen


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
