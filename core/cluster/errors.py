"""What can go wrong on the cluster that a submitter must tell apart: the worker running a task
died, a fit lost that way (stored as interrupted), and no worker to run it at all. Light on purpose: the command line
catches them without loading Dask."""

from __future__ import annotations

from core.spec import SpecError


class WorkerDied(RuntimeError):
    """The worker process running the task died before it finished.

    Attributes:
        reason: one line saying so, naming the worker, its host and what it was doing.
        worker, host, pid: the worker that died ("" / 0 where unknown).
        started_at: epoch seconds the task started there (0 if unknown).
    """

    def __init__(self, reason: str, worker: str = "", host: str = "", pid: int = 0, started_at: float = 0.0) -> None:
        super().__init__(reason)
        self.reason, self.worker, self.host, self.pid, self.started_at = reason, worker, host, pid, started_at


class RunInterrupted(RuntimeError):
    """The worker running the fit died; the run is stored as interrupted (`result`, a
    `core.results.result.RunResult`)."""

    def __init__(self, result) -> None:
        super().__init__(f"interrupted: {result.error}; stored as run #{result.id}")
        self.result = result


class NoWorker(SpecError):
    """No worker of this project serves the platform a task asks for: none joined the
    scheduler, or those there were started without `--preload core.cluster.worker_setup`
    (they offer no resource of ours). Named after `core.cluster.submit.NO_WORKER_S`, never
    waited on for ever."""
