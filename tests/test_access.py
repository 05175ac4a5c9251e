"""The shared password: compared in constant time, guesses slowed after a few wrong ones per
session, per address and for the whole server, from an address a header cannot choose."""

import os

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


def test_a_client_polling_every_50_ms_for_10_minutes_never_delays_a_colleague_at_another_address():
    """The probe that locked a colleague out 119 times in 10 minutes: a fresh session every 50 ms
    from one address, and a colleague at another address signing in every 5 s, with a typo first
    once a minute, after the server has counted enough wrong guesses from many addresses to
    be under attack. The colleague never waits; the flood gets one guess per slot."""
    clock = Clock()
    throttle = access.Throttle(clock)
    for spread in range(access.GLOBAL_FREE_GUESSES):
        throttle.check(f"spread{spread}", "guess", "s3cret", f"198.51.100.{spread % 250}")
    started, delays = clock.now, []
    for tick in range(int(600 / 0.05)):
        clock.now = started + tick * 0.05
        throttle.check(f"flood{tick}", "guess", "s3cret", "203.0.113.9")
        if tick % 100 == 0:  # every 5 s, a colleague at 10.0.0.9 signs in
            colleague = f"colleague{tick}"
            if tick % 1200 == 0:
                throttle.check(colleague, "typo", "s3cret", "10.0.0.9")
            delays.append(throttle.wait_s(colleague, "10.0.0.9"))
            assert throttle.check(colleague, "s3cret", "s3cret", "10.0.0.9") == (True, 0.0)
    assert max(delays) == 0.0 and len(delays) == 120
    flood_guesses = sum(1 for key in throttle._wrong if key.startswith("session:flood"))
    # Its free guesses, then one per FIRST_GUESS_GAP_S: about 150 in 10 minutes, not 12,000.
    assert flood_guesses <= access.ADDRESS_FREE_GUESSES + 600 / access.FIRST_GUESS_GAP_S + 1


def test_simultaneous_guesses_cannot_slip_past_the_count(monkeypatch):
    """Waiting, checking and counting are one step: 40 threads guessing at once for one session
    get FREE_GUESSES checked guesses, not 40, however long a comparison takes."""
    import threading
    import time

    compare = access.matches

    def slow_matches(guess, password):
        time.sleep(0.01)  # where a thread switch lets the others in, if anything is left outside the lock
        return compare(guess, password)

    monkeypatch.setattr(access, "matches", slow_matches)
    throttle = access.Throttle()
    barrier = threading.Barrier(40)
    outcomes = []

    def guess():
        barrier.wait()
        outcomes.append(throttle.check("s1", "guess", "s3cret", "10.0.0.7"))

    threads = [threading.Thread(target=guess) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert throttle._wrong["session:s1"][0] == access.FREE_GUESSES


def test_ipv6_addresses_count_by_their_64():
    assert access.address_key("2001:db8:1:2::5") == access.address_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert access.address_key("2001:db8:1:3::5") != access.address_key("2001:db8:1:2::5")
    assert access.address_key("::ffff:10.0.0.7") == "10.0.0.7"
    assert access.address_key(access.THIS_MACHINE) == access.THIS_MACHINE


@pytest.mark.parametrize("address, password, sso, refused", [
    ("127.0.0.1", None, False, False),  # the default: this machine alone
    ("localhost", None, False, False),
    ("::1", None, False, False),
    ("0.0.0.0", None, False, True),  # every interface, nothing asked: refused
    ("", None, False, True),  # unset: Streamlit binds every interface
    ("10.0.0.5", None, False, True),
    ("0.0.0.0", "s3cret", False, False),
    ("0.0.0.0", None, True, False),
])
def test_a_server_others_can_reach_needs_a_password_or_sso(address, password, sso, refused):
    why = access.sharing_refusal(address, password, sso)
    assert (why is not None) == refused
    if refused:
        assert access.PASSWORD_FILE_ENV in why and "--server.address 127.0.0.1" in why


def test_the_password_comes_from_a_file_and_an_unreadable_file_keeps_the_server_closed(tmp_path, monkeypatch):
    monkeypatch.delenv(access.PASSWORD_ENV, raising=False)
    monkeypatch.setattr(access, "_held", {})
    secret = tmp_path / "password"
    secret.write_text("s3cret with spaces\nsecond line ignored\n")
    monkeypatch.setenv(access.PASSWORD_FILE_ENV, str(secret))
    assert access.configured() == "s3cret with spaces"
    secret.write_text("\n")
    with pytest.raises(access.AccessError, match="first line is empty"):
        access.configured()
    monkeypatch.setenv(access.PASSWORD_FILE_ENV, str(tmp_path / "missing"))
    with pytest.raises(access.AccessError, match="cannot be read"):
        access.configured()


def test_the_password_is_held_out_of_the_environment_that_workers_inherit(monkeypatch):
    monkeypatch.setattr(access, "_held", {})
    monkeypatch.setenv(access.PASSWORD_ENV, "s3cret")
    access.hold_secrets()
    assert access.PASSWORD_ENV not in os.environ and access.configured() == "s3cret"


def test_an_sso_user_is_their_issuer_and_subject_and_shown_by_a_verified_email_only():
    alice = {"iss": "https://idp.example", "sub": "0042", "email": "alice@example.org", "email_verified": True}
    assert access.sso_owner(alice) == "user:https://idp.example 0042"
    # The same e-mail from another issuer, or unverified, is someone else.
    mallory = {**alice, "iss": "https://other.example", "sub": "7", "email_verified": False}
    assert access.sso_owner(mallory) != access.sso_owner(alice)
    assert access.sso_name(alice) == "alice@example.org" and access.sso_name(mallory) == "7"
