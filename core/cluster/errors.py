"""What can go wrong on the cluster that a submitter must tell apart: the worker running a task
died, a fit lost that way (stored as interrupted), and no worker to run it at all. Light on purpose: the command line
catches them without loading Dask."""

from __future__ import annotations

from core.run.lifecycle import Died, RunInterrupted  # noqa: F401 - RunInterrupted: where callers catch it
from core.spec import SpecError


class WorkerDied(Died):
    """The worker process running the task died before it finished (see `Died`: reason,
    worker, host, pid, started_at)."""


class NoWorker(SpecError):
    """No worker of this project serves the platform a task asks for: none joined the
    scheduler, or those there were started without `--preload core.cluster.worker_setup`
    (they offer no resource of ours). Named after `core.cluster.submit.NO_WORKER_S`, never
    waited on for ever."""
