"""Whether a process of this host still exists, by its pid: kept only to judge in-flight notes
written before leases (`core.coordination.lease`), which need no pid."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while process `pid` exists on this host (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
