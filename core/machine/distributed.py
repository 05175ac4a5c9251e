"""Several processes, one fit: `jax.distributed` set-up for the sharded strategy.

JAX is multi-controller: every process runs the same program, owns its local devices and
sees every process's devices in `jax.devices()`. Once `initialize` has run, the sharded
strategy's mesh spans all of them and XLA's collectives cross process boundaries: NCCL
between GPUs, gloo over TCP between CPU processes (how the loopback tests run).

`initialize` must run before anything touches a JAX backend (no `jax.devices()`, no
array), hence the command line calls it first. With no coordinator given, JAX detects
the cluster itself (Slurm, Open MPI, Kubernetes, Cloud TPU).
"""

from __future__ import annotations

import jax

from core.spec import SpecError

# How long a process waits for the others to reach the coordinator. JAX's default is
# 5 minutes; a process that never comes is more often a typo than a slow scheduler.
DEFAULT_TIMEOUT_S = 120


def check_options(coordinator: str | None, num_processes: int | None, process_id: int | None) -> None:
    """SpecError unless the options are all absent (auto-detect) or all valid.

    Args:
        coordinator: "HOST:PORT" of process 0's coordinator service.
        num_processes: how many processes take part, >= 1.
        process_id: this process's index, 0 <= process_id < num_processes.
    """
    given = [value is not None for value in (coordinator, num_processes, process_id)]
    if not any(given):
        return
    if not all(given):
        raise SpecError("--distributed needs --coordinator, --num-processes and --process-id together "
                        "(or none of them, to detect a Slurm / Open MPI cluster)")
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(f"--coordinator must be HOST:PORT with a port in 1-65535; got {coordinator!r}")
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise SpecError(f"--num-processes must be a whole number >= 1; got {num_processes!r}")
    if isinstance(process_id, bool) or not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise SpecError(f"--process-id must be between 0 and {num_processes - 1}; got {process_id!r}")


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout_s: int = DEFAULT_TIMEOUT_S,
) -> None:
    """Join (or, as process 0, host) the JAX distributed runtime.

    CPU processes exchange collectives over gloo (TCP); GPU processes use NCCL, whatever
    this setting. Every process must call this with the same coordinator and count.

    Raises:
        SpecError: bad options (see `check_options`).
    """
    check_options(coordinator, num_processes, process_id)
    # gloo is jax 0.10's default for CPU; set it so an older default cannot leave CPU
    # processes without cross-process collectives.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=num_processes,
            process_id=process_id,
            initialization_timeout=timeout_s,
        )
    except ValueError as error:  # e.g. no coordinator given and no cluster detected
        raise SpecError(f"--distributed: {error} (give --coordinator, --num-processes and --process-id, "
                        "or run under Slurm / Open MPI)") from None


def process_index() -> int:
    """This process's index (0 when not distributed)."""
    return jax.process_index()


def process_count() -> int:
    """How many processes take part (1 when not distributed)."""
    return jax.process_count()


def is_primary() -> bool:
    """Whether this process writes results (process 0, as in JAX's own checkpointing)."""
    return process_index() == 0
