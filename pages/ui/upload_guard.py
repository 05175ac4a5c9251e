"""Bounds on what Streamlit's upload endpoint holds (`core.upload_bounds`), applied where the
endpoint hands each file to the server's upload manager.

`install()` wraps the manager's `add_file` once per server process: a refused file is
answered 403 (before sign-in) or 413 (over a bound) and never stored. The first page run
installs it, so a file PUT between the server's start and that run (by a script that opened
a session and raced its first run) is taken unguarded; installing drops every file of a
session not admitted, so such a file is held for those milliseconds, not for its session's
life. `admit()` marks this session as one that may upload (it has signed in, or there is
nothing to sign in to); the marks are kept for open sessions only.
"""

from __future__ import annotations

import logging
import threading

from core import upload_bounds

log = logging.getLogger(__name__)

_lock = threading.Lock()
_admitted: set[str] = set()
# Sessions remembered before the closed ones are dropped (a bound on the server's memory).
_PRUNE_AT = 1_000


def _runtime():
    # Deferred: the runtime exists only in a served process (AppTest has none).
    from streamlit.runtime import Runtime

    return Runtime.instance() if Runtime.exists() else None


def _session_id() -> str | None:
    # Deferred, as in _runtime.
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx()
    return context.session_id if context is not None else None


def admit() -> None:
    """Lets this session upload (call once it may use the dashboard)."""
    session, runtime = _session_id(), _runtime()
    if session is None:
        return
    with _lock:
        if session in _admitted:
            return
        _admitted.add(session)
        if runtime is not None and len(_admitted) > _PRUNE_AT:
            _admitted.intersection_update({s for s in _admitted if runtime.is_active_session(s)})


def admitted(session_id: str) -> bool:
    with _lock:
        return session_id in _admitted


def install() -> None:
    """Wraps the server's upload manager once (no server, as under AppTest: nothing to do)."""
    runtime = _runtime()
    if runtime is None:
        return
    guard(runtime.uploaded_file_mgr)


def guard(manager) -> None:
    """Makes `manager` (Streamlit's `MemoryUploadedFileManager`) refuse files past the bounds."""
    with _lock:
        if getattr(manager, "_plnlab_bounded", False):
            return
        original = manager.add_file
        adding = threading.Lock()  # counted and added as one step: two uploads cannot both take the last room

        def add_file(session_id: str, file) -> None:
            # Deferred: Streamlit's server brings starlette; the answer to a refused upload is its exception.
            from starlette.exceptions import HTTPException

            signed_in = admitted(session_id)
            with adding:
                with manager._lock:  # the manager's own: what it holds cannot change while we count
                    held = manager.file_storage.get(session_id, {})
                    mine = [len(rec.data) for file_id, rec in held.items() if file_id != file.file_id]
                    everyone = sum(len(rec.data) for files in manager.file_storage.values()
                                   for rec in files.values())
                why = upload_bounds.refusal(len(file.data), signed_in, mine, everyone)
                if why is None:
                    original(session_id=session_id, file=file)
            if why is not None:
                log.warning("upload of %d bytes refused for session %s: %s", len(file.data), session_id, why)
                raise HTTPException(status_code=403 if not signed_in else 413, detail=why)

        manager.add_file = add_file
        manager._plnlab_bounded = True
        # Files taken before the guard existed: no session had been admitted yet, so none
        # of them was uploaded through the dashboard.
        for session_id in [s for s in list(manager.file_storage) if s not in _admitted]:
            manager.remove_session_files(session_id)
            log.warning("dropped the files session %s uploaded before the upload guard was installed", session_id)
