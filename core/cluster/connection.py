"""Starting or joining the cluster that runs fits.

- **Embedded** (the default): a Dask `LocalCluster` on 127.0.0.1, over TLS with certificates
  made at start-up (`security.embedded()`: no other account here can connect), whose scheduler runs in
  this process and whose workers are processes of their own, one thread each, one per
  local device platform (the CPU, plus a GPU or TPU where a JAX plugin and a device are
  present), each with a memory limit (PLNLAB_WORKER_MEMORY, e.g. "8GiB"; default: an even
  share of this machine's memory). Their nannies restart a worker that dies, and a nanny the
  cluster gave up on is replaced (`_keep_workers`). No timed run is retried
  (`allowed-failures` 0): a worker's death costs its own run.
- **A team's cluster**: with PLNLAB_SCHEDULER=tls://host:8786 (or `--scheduler` on the
  command line) the same code joins that scheduler over mutual TLS (`security.for_address`),
  whose workers were started with `dask worker tls://host:8786 --nthreads 1 --preload
  core.cluster.worker_setup` and the team's certificates (docs/team-cluster.md).

`shared()` gives the process one connection, made when first asked (never at import), and
closes it when the process exits; a connection that broke is made again.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import pathlib
import threading
from importlib import metadata
from typing import Any

import dask
import yaml
from distributed import Client, LocalCluster
from distributed.core import Status
from tornado.ioloop import PeriodicCallback

from core import access, config
from core.cluster import SCHEDULER_ENV, security, worker_setup
from core.cluster.board import Board
from core.spec import DEVICES, SpecError

log = logging.getLogger(__name__)

WORKER_MEMORY_ENV = "PLNLAB_WORKER_MEMORY"
START_TIMEOUT_S = 120.0
# How often the embedded cluster looks for a worker it gave up on (`_keep_workers`).
KEEP_WORKERS_EVERY_S = 2.0
# What this process's client builds from what workers and the scheduler send it: msgpack
# only, never a pickle. Tasks return plain data (`core.cluster.plain`); a worker that sends an
# object to unpickle is refused before any of it is built.
DESERIALIZERS = ["msgpack"]
# Where a worker's JAX finds an accelerator: a plugin installed and a device node present.
_DEVICE_NODES = {"gpu": ("/dev/nvidia0", "/dev/kfd"), "tpu": ("/dev/accel0", "/dev/vfio/0")}
_PLUGINS = {"gpu": ("jax-cuda", "jax-rocm"), "tpu": ("libtpu",)}


CONFIG_FILE = pathlib.Path(__file__).with_name("dask.yaml")


def cluster_config() -> dict[str, Any]:
    """Dask settings of this project's clusters (`dask.yaml` beside this module, which a team's
    scheduler and workers read through DASK_CONFIG), as `dask.config.set` takes them: one
    dotted key per setting, so that the others keep Dask's defaults (a nested dict would
    replace whole sections). The nanny's environment is one setting, replaced whole."""
    with CONFIG_FILE.open() as handle:
        nested = yaml.safe_load(handle)

    def flat(tree: dict, prefix: str) -> dict[str, Any]:
        found = {}
        for name, value in tree.items():
            key = f"{prefix}.{name}" if prefix else name
            found.update(flat(value, key) if isinstance(value, dict) and name != "pre-spawn-environ"
                         else {key: value})
        return found

    return flat(nested, "")


@dataclasses.dataclass
class Cluster:
    """A connection to the cluster: its client, the embedded cluster it started (if it did)
    and the board of what runs on it.

    `Client` is awaitable, so `st.cache_resource` refuses to return one: pages hold this
    plain object instead (`shared()`).
    """

    client: Client
    local: LocalCluster | None
    board: Board

    @property
    def address(self) -> str:
        return self.client.scheduler.address

    @property
    def embedded(self) -> bool:
        return self.local is not None

    @property
    def alive(self) -> bool:
        return self.client.status == "running"

    def workers(self, timeout_s: float = 10.0) -> dict[str, dict[str, Any]]:
        """What each worker is (`core.cluster.worker_setup.facts`), by address; {} while none
        has joined."""
        if not self.client.scheduler_info(n_workers=-1).get("workers"):
            return {}
        return self.client.run(worker_setup.facts, on_error="return", wait=True)

    def close(self) -> None:
        self.board.close()
        self.client.close()
        if self.local is not None:
            self.local.close()


def local_platforms() -> list[str]:
    """The device platforms of this machine that get a worker each, found without JAX (the
    server never imports it): the CPU, and a GPU or TPU where JAX's plugin for it is
    installed and a device node is present."""
    names = {(dist.metadata["Name"] or "").lower().replace("_", "-") for dist in metadata.distributions()}
    found = ["cpu"]
    for platform in DEVICES:
        if platform == "cpu":
            continue
        plugin = any(name.startswith(_PLUGINS[platform]) for name in names)
        if plugin and any(pathlib.Path(node).exists() for node in _DEVICE_NODES[platform]):
            found.append(platform)
    return found


def start_local(platforms: list[str] | None = None, memory_limit: str | None = None) -> Cluster:
    """Starts the embedded cluster (see the module docstring) and waits for its workers."""
    platforms = platforms or local_platforms()
    access.hold_secrets()  # no password in the workers' environment
    memory_limit = memory_limit or config.raw(WORKER_MEMORY_ENV) or "auto"
    with dask.config.set(cluster_config()):
        local = LocalCluster(
            n_workers=len(platforms), threads_per_worker=1, processes=True, host="127.0.0.1",
            # Its HTTP routes (health, metrics) on a free loopback port: nothing listens beyond this
            # machine, and two servers here do not fight over Dask's usual 8787.
            scheduler_port=0, dashboard_address="127.0.0.1:0", memory_limit=memory_limit,
            preload=["core.cluster.worker_setup"], security=security.embedded(),
            env={worker_setup.LOCAL_PLATFORMS_ENV: ",".join(platforms)})
        try:
            client = Client(local, security=local.security, set_as_default=False, deserializers=DESERIALIZERS)
            client.wait_for_workers(len(platforms), timeout=START_TIMEOUT_S)
        except BaseException:
            local.close()
            raise
    _keep_workers(local)
    _ignore_unknown_removals(local)
    return Cluster(client, local, Board(client))


def _ignore_unknown_removals(local: LocalCluster) -> None:
    """Lets the cluster's watch of its workers survive the removal of a worker it never saw
    added.

    A worker replaced while its old nanny restarts one of its own (`_keep_workers`) can join
    and leave the scheduler before the cluster hears of it; distributed 2026.8 then looks its
    name up in `scheduler_info`, raises KeyError, and the watch ends with it: `close()` raised
    that KeyError after a worker was killed twice in a row. Such a worker has nothing to undo.
    """
    update = local._update_worker_status

    def update_known(op, msg):
        if op == "remove" and msg not in local.scheduler_info.get("workers", {}):
            return
        update(op, msg)

    local._update_worker_status = update_known


def _keep_workers(local: LocalCluster) -> None:
    """Replaces any worker the embedded cluster gave up on, checking every few seconds.

    A nanny restarts its dead worker, but a LocalCluster whose worker has not come back
    within `distributed.deploy.lost-worker-timeout` (15 s; a restart that imports JAX on a
    busy machine takes longer) closes that nanny for good and starts no other: without this,
    the dashboard would serve no fit until restarted. The cluster's own `_correct_state` opens
    what its spec names and it lacks; it runs under this project's Dask settings, as at
    start-up, since a nanny reads its workers' environment from them when it is made. The
    callback stops with the cluster (`Cluster._close` stops its periodic callbacks).
    """
    reported: set = set()

    async def replace_lost() -> None:
        lost = set(local.worker_spec) - set(local.workers)
        if not lost or local.status != Status.running:
            reported.clear()
            return
        if lost - reported:
            log.warning("the embedded cluster gave up on worker(s) %s; starting new ones", sorted(lost))
            reported.update(lost)
        with dask.config.set(cluster_config()):
            await local._correct_state()

    watch = PeriodicCallback(replace_lost, KEEP_WORKERS_EVERY_S * 1000)
    local.periodic_callbacks["plnlab-keep-workers"] = watch
    local.loop.add_callback(watch.start)


def join(address: str, timeout_s: float = 10.0) -> Cluster:
    """Joins a running scheduler at `address` (e.g. tls://host:8786).

    Raises:
        SpecError: no scheduler answered there in `timeout_s`, or the address is refused
            (`security.for_address`).
    """
    tls = security.for_address(address)
    try:
        client = Client(address, timeout=timeout_s, security=tls, set_as_default=False, deserializers=DESERIALIZERS)
    except (OSError, TimeoutError) as exc:
        raise SpecError(f"no Dask scheduler answered at {address} ({SCHEDULER_ENV} or --scheduler): {exc}") from None
    return Cluster(client, None, Board(client))


def connect(address: str | None = None) -> Cluster:
    """`join(address or $PLNLAB_SCHEDULER)`, else `start_local()`."""
    address = address or config.raw(SCHEDULER_ENV)
    return join(address) if address else start_local()


_lock = threading.Lock()
_shared: Cluster | None = None


def shared() -> Cluster:
    """This process's connection (`connect()` the first time, or again once it broke)."""
    global _shared
    with _lock:
        if _shared is not None and not _shared.alive:
            log.warning("the connection to the cluster at %s broke; connecting again", _shared.address)
            _close_quietly(_shared)
            _shared = None
        if _shared is None:
            _shared = connect()
            atexit.register(close_shared)
        return _shared


def started() -> Cluster | None:
    """This process's connection if one was made, without making one."""
    return _shared


def close_shared() -> None:
    """Closes this process's connection (and the embedded cluster with it)."""
    global _shared
    with _lock:
        if _shared is not None:
            _close_quietly(_shared)
            _shared = None


def _close_quietly(cluster: Cluster) -> None:
    try:
        cluster.close()
    except Exception:  # noqa: BLE001 - closing what already broke
        log.debug("closing the cluster connection failed", exc_info=True)
