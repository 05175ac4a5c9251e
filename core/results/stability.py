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
    return unstable_together([versions])


def unstable_together(versions: list[dict[str, Any] | None]) -> str:
    """Why runs with these `versions` (timed together, said in one sentence) are unstable, by
    the busiest share among them, or "" where none is."""
    busy = [v for v in versions if isinstance(share := (v or {}).get("others_cpu_share"), (int, float))
            and share > BUSY_SHARE]
    if not busy:
        return ""
    busiest = max(busy, key=lambda v: v["others_cpu_share"])
    cores = busiest.get("usable_cores")
    of = f"of the {cores} usable cores" if cores else "of the usable cores"
    share = busiest["others_cpu_share"]
    if len(versions) == 1:
        return (f"unstable: other processes used {share:.0%} {of} while this run was timed, so its timings "
                "carry their load; time it again on a quiet machine")
    return (f"unstable: other processes used up to {share:.0%} {of} while these runs were timed, so their "
            "timings carry their load; time them again on a quiet machine")
