"""The shared password: compared in constant time, guesses slowed after a few wrong ones."""

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
        assert throttle.check("10.0.0.7", "guess", "s3cret") == (False, 0.0)
    assert throttle.check("10.0.0.7", "guess", "s3cret") == (False, access.FIRST_WAIT_S)
    assert throttle.check("10.0.0.7", "s3cret", "s3cret") == (False, access.FIRST_WAIT_S)  # too soon: refused
    assert throttle.check("10.0.0.9", "s3cret", "s3cret") == (True, 0.0)  # another client is not slowed
    clock.now += access.FIRST_WAIT_S
    assert throttle.check("10.0.0.7", "again", "s3cret") == (False, 2 * access.FIRST_WAIT_S)  # doubled
    waits = []
    for _ in range(20):
        clock.now += throttle.wait_s("10.0.0.7")
        waits.append(throttle.check("10.0.0.7", "brute", "s3cret")[1])
    assert waits[-1] == access.MAX_WAIT_S and sum(waits) > 15 * 60  # 22 guesses: well over a quarter of an hour
    clock.now += throttle.wait_s("10.0.0.7")
    assert throttle.check("10.0.0.7", "s3cret", "s3cret") == (True, 0.0)
    assert throttle.check("10.0.0.7", "typo", "s3cret") == (False, 0.0)  # a right guess starts afresh


def test_the_throttle_forgets_the_oldest_clients_first(monkeypatch):
    monkeypatch.setattr(access, "MAX_CLIENTS", 3)
    throttle = access.Throttle(Clock())
    for client in ("a", "b", "c", "d"):
        for _ in range(access.FREE_GUESSES):
            throttle.check(client, "x", "y")
    assert throttle.wait_s("a") == 0.0 and throttle.wait_s("d") == pytest.approx(access.FIRST_WAIT_S)
