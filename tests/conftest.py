"""Shared test setup: tests import the NumPy reference as `reference_pln`, and every
test process gets its own run store and JAX compilation cache."""

import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Set before any test imports core, so nothing touches the user's own store or cache.
_scratch = tempfile.mkdtemp(prefix="plnlab-tests-")
os.environ["PLNLAB_DB"] = os.path.join(_scratch, "runs.sqlite3")
os.environ["PLNLAB_JAX_CACHE"] = os.path.join(_scratch, "jax-cache")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # see core.runtime.native_settings
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.fixture
def routed_like_the_server(monkeypatch):
    """Makes AppTest route every run through app.py, as the server does.

    AppTest re-detects the pages/ folder on every run and then runs the last page's file
    directly, skipping app.py (Streamlit's legacy multipage mode); a page's
    `ensure_router` then reruns, which drops a button click. The server leaves that mode
    for good once st.navigation has run; make AppTest do the same.
    """
    from streamlit.runtime.pages_manager import PagesManager

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)
