"""The command line: `python -m core strategies|run|solve|list|export|import|backup|delete|restore|bench|tls`.

Headless runs and sweeps go into the same store as the dashboard's (`--db`, else
$PLNLAB_DB, else the per-user default). Exit status: 0 for a stored run (diverged
included), 2 for bad input (one line on stderr, no traceback), 1 for an internal
failure, 3 for a run on a cluster (--scheduler) whose worker died (stored as interrupted), 4
when no worker of this project serves the device asked for there (nothing ran), 5 when `solve`
stored a run that is no certified solution (diverged, short, stalled, not converged, timed out).
Progress goes to stderr; with --json the last stdout line is one JSON object.

The commands live in `core.cli`; `main` sets the native libraries' environment before
anything loads numpy or JAX.
"""

from __future__ import annotations

import os
import sys
import traceback

from core import config
from core.cli import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_WORKER,
    cluster_commands,
    fitting,
    store_commands,
)
from core.cli.arguments import BadUsage, build_parser
from core.spec import SpecError

# As a process killed by SIGPIPE reports itself to a shell (128 + 13).
EXIT_BROKEN_PIPE = 141

COMMANDS = {
    "run": fitting.command_run, "solve": fitting.command_solve, "bench": fitting.command_bench,
    "strategies": store_commands.command_strategies, "list": store_commands.command_list,
    "export": store_commands.command_export, "import": store_commands.command_import,
    "backup": store_commands.command_backup, "delete": store_commands.command_delete,
    "restore": store_commands.command_restore, "tls": cluster_commands.command_tls,
}


def main(argv: list[str] | None = None) -> int:
    from core.machine.host import native_settings

    native_settings()  # before anything loads numpy, scipy or jax
    from core.cluster.errors import NoWorker, RunInterrupted
    from core.run.progress import Cancelled
    from core.store.run_store import StoreError

    for line in config.unknown():  # a mistyped variable changed nothing: say so before it matters
        sys.stderr.write(f"python -m core: warning: {line}\n")
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except NoWorker as missing:
        sys.stderr.write(f"python -m core: error: {missing}\n")
        return EXIT_NO_WORKER
    except (BadUsage, SpecError, StoreError, KeyError) as error:
        message = error.args[0] if error.args else str(error)
        sys.stderr.write(f"python -m core: error: {message}\n")
        return EXIT_BAD_INPUT
    except RunInterrupted as interrupted:
        sys.stderr.write(f"python -m core: {interrupted}\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader closed the pipe (`list | head`): what it wanted it has. Later writes to
        # stdout, at exit included, go nowhere rather than raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        sys.stderr.write("python -m core: interrupted; nothing was stored\n")
        return 130
    except Cancelled:  # asked through the run store, e.g. from the dashboard's Runs under way
        sys.stderr.write("python -m core: cancelled; nothing was stored\n")
        return 130
    except Exception as error:  # noqa: BLE001 - the last line of defence of a CLI
        if config.raw("PLNLAB_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(f"python -m core: internal error: {type(error).__name__}: {error} "
                         "(set PLNLAB_DEBUG=1 for a traceback)\n")
        return EXIT_INTERNAL


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown.

    Everything a command does is finished and stored when `main` returns (the store commits
    each write, JAX writes its compilation cache as it compiles). Tearing down a process that
    loaded JAX, jaxlib's native libraries and their thread pools took 0.2-0.3 s here, an
    eighth of a warm `solve`, for nothing anyone reads.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
