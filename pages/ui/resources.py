"""Resources shared by every session of the server: the run store, the cluster that runs the
fits and the devices its workers have, and the catalog of runnables.

Nothing heavy happens at import. The cluster (`core.cluster.connection.shared`: the
embedded one, or the team's at $PLNLAB_SCHEDULER) is started or joined once per server
process, when a page first asks; the server never imports JAX: the devices are what the
workers report.
"""

from __future__ import annotations

import sys
import time
from typing import Iterable

import streamlit as st

from core import catalog, config
from core.cluster import connection
from core.cluster import devices as devices_offered
from core.coordination.device_queue import Ticket, default_queue, one_per_run
from core.spec import SpecError
from core.store.run_store import RunStore, StoreError, default_db_path
from pages.ui.text import public

# How long the workers' device list is reused: the sidebar draws it on every rerun.
DEVICES_TTL_S = 5.0


@st.cache_resource(show_spinner=False)
def _open_store(path: str) -> RunStore:
    return RunStore(path)


def run_store() -> RunStore:
    """The run store at $PLNLAB_DB (or the per-user default), shared with the CLI.

    Raises:
        StoreError: the file is not a usable run store.
    """
    return _open_store(str(default_db_path()))


def store_or_stop() -> RunStore:
    """`run_store()`, or an error message and the end of this page's run."""
    try:
        return run_store()
    except StoreError as exc:
        st.error(f"The run store cannot be used: {public(exc)}")
        st.stop()


@st.cache_resource(show_spinner=False)
def unknown_settings_told() -> int:
    """Tell the server's log, once a process, of each `PLNLAB_*` variable it was started
    with that is no setting (a mistyped store variable put the runs in the per-user store
    without a word); how many there were."""
    lines = config.unknown()
    for line in lines:
        print(f"PLN JIT Lab: warning: {line}", file=sys.stderr, flush=True)
    return len(lines)


def cluster() -> connection.Cluster:
    """This server's cluster, started (or joined) the first time a page asks.

    Raises:
        SpecError: the scheduler named by $PLNLAB_SCHEDULER does not answer.
    """
    if connection.started() is None:
        with st.spinner("Starting the workers that run the fits (once per server)…"):
            return connection.shared()
    return connection.shared()


def cluster_or_stop() -> connection.Cluster:
    """`cluster()`, or an error message and the end of this page's run."""
    try:
        return cluster()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is told, in one line
        st.error(f"The cluster that runs the fits cannot be reached: {public(exc)}", icon=":material/lan:")
        st.stop()


_devices_seen: tuple[float, devices_offered.Offered] | None = None
# Every platform a worker of this server's cluster has offered: while its worker restarts (a
# crash, a recycle), a run for it waits for the fresh one instead of being refused.
_platforms_served: set[str] = set()


def devices() -> devices_offered.Offered:
    """The device platforms the cluster's workers offer, what they are and where, and why
    the absent ones are absent (`core.cluster.devices.offered`), read at most every
    `DEVICES_TTL_S` seconds."""
    global _devices_seen
    now = time.monotonic()
    if _devices_seen is not None and now - _devices_seen[0] < DEVICES_TTL_S:
        return _devices_seen[1]
    found = devices_offered.offered(cluster().workers())
    _platforms_served.update(found.available)
    _devices_seen = (now, found)
    return found


def check_device(platform: str) -> None:
    """SpecError when no worker offers `platform`, nor ever did (before anything runs): a
    run for a platform whose worker is restarting waits in the cluster's queue for it."""
    available = devices().available
    if platform not in available and platform not in _platforms_served:
        raise SpecError(f"device {platform!r} is not available on this cluster's workers; available: "
                        f"{', '.join(available) or 'none yet'}")


def runnables() -> list[catalog.Runnable]:
    """Every runnable in teaching order: the JAX strategies, then the peers."""
    return list(catalog.RUNNABLES.values())


def tutorial_levels() -> tuple[str, ...]:
    """The seed tutorial's five levels."""
    return catalog.tutorial_levels()


def strategy_help(names: Iterable[str] | None = None) -> str:
    """Markdown list of runnables and their one-line summaries (for `help=`)."""
    wanted = None if names is None else set(names)
    return "\n".join(f"- **{r.name}**: {r.summary}" for r in runnables() if wanted is None or r.name in wanted)


def tickets(platform: str) -> list[Ticket]:
    """What holds and waits for `platform`: the cluster's tasks and, when the workers run on
    this host (the embedded cluster), the host's device queue, each run once
    (`device_queue.one_per_run`: a worker's ticket names its run as its board entry does).

    Raises whatever the cluster or the queue folder raise when they do not answer."""
    serving = cluster()
    found = [entry.ticket() for entry in serving.board.entries(platform)]
    if serving.embedded:
        found = one_per_run(found, default_queue().entries(platform))
    return found
