"""The shared password: compared in constant time, guesses slowed after a few wrong ones per
session, per address and for the whole server, from an address a header cannot choose."""

import pytest

from core import access


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_wrong_guesses_slow_the_next_ones_and_a_waiting_guess_is_not_even_checked():
    clock = Clock()
    throttle = access.Throttle(clock)
    for _ in range(access.FREE_GUESSES - 1):
        assert throttle.check("s1", "guess", "s3cret") == (False, 0.0)
    assert throttle.check("s1", "guess", "s3cret") == (False, access.FIRST_WAIT_S)
    assert throttle.check("s1", "s3cret", "s3cret") == (False, access.FIRST_WAIT_S)  # too soon: refused
    assert throttle.check("s2", "s3cret", "s3cret") == (True, 0.0)  # another session is not slowed
    clock.now += access.FIRST_WAIT_S
    assert throttle.check("s1", "again", "s3cret") == (False, 2 * access.FIRST_WAIT_S)  # doubled
    waits = []
    for _ in range(20):
        clock.now += throttle.wait_s("s1")
        waits.append(throttle.check("s1", "brute", "s3cret")[1])
    assert waits[-1] == access.MAX_WAIT_S and sum(waits) > 15 * 60  # 22 guesses: well over a quarter of an hour
    clock.now += throttle.wait_s("s1")
    assert throttle.check("s1", "s3cret", "s3cret") == (True, 0.0)
    assert throttle.check("s1", "typo", "s3cret") == (False, 0.0)  # a right guess starts afresh


def test_a_flood_from_one_address_never_locks_a_colleague_out():
    """Every local client shares one address: 100 wrong guesses from new sessions there cost a
    colleague typing the right password a wait of seconds at most, and the flood itself gets
    about one guess in FIRST_GUESS_GAP_S seconds once past the address's allowance."""
    clock = Clock()
    throttle = access.Throttle(clock)
    checked = 0
    started = clock.now
    for flood in range(100):
        session = f"flood{flood}"
        clock.now += throttle.wait_s(session)
        granted, _ = throttle.check(session, "guess", "s3cret")
        checked += not granted
    assert checked == 100
    # Past the allowance, one checked guess every FIRST_GUESS_GAP_S seconds: not 100 in 38 s.
    assert clock.now - started >= (100 - access.ADDRESS_FREE_GUESSES - 1) * access.FIRST_GUESS_GAP_S
    wait = throttle.wait_s("colleague")
    assert wait <= access.FIRST_GUESS_GAP_S
    clock.now += wait
    assert throttle.check("colleague", "s3cret", "s3cret") == (True, 0.0)
    # The flood's sessions that guessed wrong wait as the address does (up to a minute).
    assert throttle.wait_s("flood99") > access.FIRST_GUESS_GAP_S


def test_another_address_is_not_slowed_by_a_flood_and_wrong_guesses_are_forgotten():
    clock = Clock()
    throttle = access.Throttle(clock)
    for flood in range(access.ADDRESS_FREE_GUESSES + 5):
        clock.now += throttle.wait_s(f"f{flood}", "10.0.0.7")
        throttle.check(f"f{flood}", "guess", "s3cret", "10.0.0.7")
    assert throttle.wait_s("new", "10.0.0.9") == 0.0  # another address (under the server's ceiling)
    assert throttle.wait_s("new", "10.0.0.7") > 0  # a fresh session there waits its turn
    clock.now += access.FORGET_AFTER_S
    assert throttle.wait_s("f3", "10.0.0.7") == 0.0


def test_the_throttle_forgets_the_oldest_first(monkeypatch):
    monkeypatch.setattr(access, "MAX_CLIENTS", 5)
    throttle = access.Throttle(Clock())
    for session in ("a", "b", "c", "d"):
        for _ in range(access.FREE_GUESSES):
            throttle.check(session, "x", "y")
    assert throttle.wait_s("a") == 0.0 and throttle.wait_s("d") == pytest.approx(access.FIRST_WAIT_S)


@pytest.mark.parametrize("peer, forwarded, proxy, expected", [
    (None, None, None, access.THIS_MACHINE),  # a browser on this machine
    ("10.0.0.7", None, None, "10.0.0.7"),  # a colleague's browser
    ("203.0.113.9", "203.0.113.9", None, access.THIS_MACHINE),  # a local client writing the header itself
    ("198.51.100.1", "198.51.100.1", None, access.THIS_MACHINE),  # ... a new one per websocket: the same bucket
    ("10.0.0.7", "203.0.113.9", None, "10.0.0.7"),  # the header from elsewhere was not used: the peer counts
    ("10.0.0.8", "6.6.6.6, 10.0.0.8", "127.0.0.1", "10.0.0.8"),  # our proxy appended the client's address
])
def test_the_address_is_one_a_request_cannot_choose(peer, forwarded, proxy, expected):
    assert access.client_address(peer, forwarded, proxy) == expected
