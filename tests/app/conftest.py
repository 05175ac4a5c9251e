"""Fixtures of the app tests."""

from __future__ import annotations

import pytest
import streamlit as st

from core.store.run_store import RunStore


@pytest.fixture
def store(tmp_path, monkeypatch, cluster) -> RunStore:
    """An empty store at $PLNLAB_DB, and an AppTest that routes like the server (its fits on
    the test process's cluster)."""
    monkeypatch.setenv("PLNLAB_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.setenv("PLNLAB_JAX_CACHE", str(tmp_path / "jax"))
    st.cache_resource.clear()
    yield RunStore(tmp_path / "runs.sqlite3")
    st.cache_resource.clear()
