"""Plausible stored runs for tests that need runs without fitting anything: the store
tests' own `make_run`, for the tests of other wings (tests/ is on sys.path, so its
folders import as namespace packages)."""

from store.test_store import make_run

__all__ = ["make_run"]
