"""Shared test setup: tests import their helpers (`reference_pln`, `served_app`, `project`)
from this folder, every test process gets its own run store and JAX compilation cache, and
every compile is quick unless a test asks for the lab's own (`xla_settings`)."""

import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import xla_settings  # noqa: E402 - a module of this folder, found through the line above

# Set before any test imports core, so nothing touches the user's own store or cache.
_scratch = tempfile.mkdtemp(prefix="plnlab-tests-")
os.environ["PLNLAB_DB"] = os.path.join(_scratch, "runs.sqlite3")
os.environ["PLNLAB_JAX_CACHE"] = os.path.join(_scratch, "jax-cache")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # see core.machine.host.native_settings
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# XLA's quick CPU settings for every compile of the session, here and in the processes tests
# start (see xla_settings), beside any XLA_FLAGS already set. A test that gives a process it
# starts an XLA_FLAGS of its own (simulated devices) replaces them there.
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_settings.QUICK_FLAGS}".strip()
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


# The suite's heaviest files, heaviest first (205 s down to 39 s each, two processes on 2 cores). Under
# pytest-xdist (`-n 2 --dist loadfile`, the README's command) the workers take whole files in
# collection order, so these are handed out first and the lighter files fill in behind them:
# in collection order the last heavy file ran alone for minutes. Out of date, it only balances worse.
HEAVIEST_FIRST = (
    "fit/test_corpus.py", "app/test_projector.py", "app/test_app.py", "app/test_shared_server.py",
    "app/test_app_talk.py", "test_cli.py", "fit/test_reductions.py", "run/test_repeated_runs.py",
    "fit/test_convergence.py", "cluster/test_team_cluster.py", "fit/test_agreement.py", "fit/test_strategies.py",
    "fit/test_stopping.py", "fit/test_sharded.py", "app/test_browser.py", "app/test_server_process.py",
    "machine/test_distributed.py", "coordination/test_concurrency.py", "fit/test_peers.py", "run/test_engine.py",
    "fit/test_production_compile.py",
)


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order
    rank = {f"tests/{path}": place for place, path in enumerate(HEAVIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: a file stays in order
