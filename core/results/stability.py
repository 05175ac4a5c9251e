"""Whether a run was timed on a busy machine: "unstable", as pyperf calls a benchmark whose
system was not quiet.

The run's state (`core.machine.machine_state`, kept in `RunResult.versions`) says how much
of the usable cores other processes took while it was timed; above `BUSY_SHARE` its timings
carry someone else's load, and every page that shows the run says so.
"""

from __future__ import annotations

from typing import Any

# Other processes' share of the usable cores above which a run's timings are "unstable".
BUSY_SHARE = 0.25


def unstable(versions: dict[str, Any] | None) -> str:
    """Why a run with these `versions` is unstable, as one sentence, or "" (a quiet machine, or
    a run stored before its machine's state was kept)."""
    share = (versions or {}).get("others_cpu_share")
    if not isinstance(share, (int, float)) or share <= BUSY_SHARE:
        return ""
    cores = (versions or {}).get("usable_cores")
    of = f"of the {cores} usable cores" if cores else "of the usable cores"
    return (f"unstable: other processes used {share:.0%} {of} while this run was timed, so its timings carry "
            "their load; time it again on a quiet machine")
