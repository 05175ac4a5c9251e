"""Shared test setup: tests import their helpers (`reference_pln`, `served_app`, `project`)
from this folder, and every test process gets its own run store and JAX compilation cache."""

import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Set before any test imports core, so nothing touches the user's own store or cache.
_scratch = tempfile.mkdtemp(prefix="plnlab-tests-")
os.environ["PLNLAB_DB"] = os.path.join(_scratch, "runs.sqlite3")
os.environ["PLNLAB_JAX_CACHE"] = os.path.join(_scratch, "jax-cache")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # see core.machine.host.native_settings
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Each fit takes exactly its spec's repeats: calibration (core.run.repeats) would add up to a
# quarter of a second to each of the suite's hundreds of small fits. Its own tests turn it on.
os.environ.setdefault("PLNLAB_MIN_MEASURED_S", "0")


@pytest.fixture(scope="session")
def cluster():
    """This test process's embedded cluster (`core.cluster.connection.shared`), started once with
    the session's environment (compilation cache, device queue) whatever a test sets later,
    as a server's workers keep the server's."""
    from core.cluster import connection

    yield connection.shared()
    connection.close_shared()
