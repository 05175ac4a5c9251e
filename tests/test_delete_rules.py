"""Who may delete which runs on a shared server (`core.access.deletion`)."""

import pytest

from core import access


def test_own_runs_need_a_confirmation_only(monkeypatch):
    monkeypatch.setenv(access.ALLOW_DELETE_ENV, "0")
    assert access.deletion([1, 2], own_ids={1, 2, 3}, password="s3cret") == "confirm"
    assert access.deletion([1, 2], own_ids={1, 2, 3}, password=None) == "confirm"


def test_runs_of_others_need_the_password_when_one_is_set(monkeypatch):
    monkeypatch.delenv(access.ALLOW_DELETE_ENV, raising=False)
    assert access.deletion([1, 9], own_ids={1}, password="s3cret") == "password"
    assert access.deletion([9], own_ids=set(), password=None) == "confirm others"


@pytest.mark.parametrize("value,allowed", [("0", False), ("off", False), (" No ", False), ("1", True), ("yes", True)])
def test_the_owner_can_turn_deleting_others_runs_off(monkeypatch, value, allowed):
    monkeypatch.setenv(access.ALLOW_DELETE_ENV, value)
    assert access.deletion([9], own_ids=set(), password=None) == ("confirm others" if allowed else "off")


def test_a_mistyped_setting_is_refused_with_what_is_accepted(monkeypatch):
    monkeypatch.setenv(access.ALLOW_DELETE_ENV, "maybe")
    with pytest.raises(ValueError, match="must be 1 or 0"):
        access.deletion([9], own_ids=set(), password=None)


def test_with_the_teams_sso_a_run_is_its_owners_to_delete_unless_the_server_says_otherwise(monkeypatch):
    monkeypatch.delenv(access.ALLOW_DELETE_ENV, raising=False)
    assert access.deletion([9], own_ids=set(), password=None, signed_in=True) == "off"
    assert access.deletion([9], own_ids={9}, password=None, signed_in=True) == "confirm"
    assert access.deletion([9], own_ids=set(), password="s3cret", signed_in=True) == "password"
    monkeypatch.setenv(access.ALLOW_DELETE_ENV, "1")
    assert access.deletion([9], own_ids=set(), password=None, signed_in=True) == "confirm others"
