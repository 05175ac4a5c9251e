"""Nothing anonymous can fill the server with uploads (`core.upload_bounds`, applied by
`pages.ui.upload_guard`): a real served dashboard, probed by a script over Streamlit's own
websocket and upload endpoint, and the bounds on Streamlit's real upload manager."""

from __future__ import annotations

import asyncio

import psutil
import pytest
from starlette.exceptions import HTTPException
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from core import upload_bounds
from pages.ui import upload_guard

from served_app import served_app
from stream_client import open_session, put_file

MiB = 2**20


def _server_rss_mb(process) -> float:
    return psutil.Process(process.pid).memory_info().rss / MiB


def test_before_sign_in_a_script_can_upload_nothing(tmp_path):
    """The probe: 46 MiB files (under Streamlit's 47 MiB limit) PUT to a password-protected
    server's upload endpoint before sign-in. Each is refused (403) and the server does not
    grow by what it was sent."""
    with served_app({"PLNLAB_PASSWORD": "s3cret", "PLNLAB_DB": str(tmp_path / "runs.sqlite3")}) as (base, process):
        async def probe() -> tuple[list[int], float, float]:
            async with open_session(base) as session:
                before = _server_rss_mb(process)
                answers = [put_file(base, session, f"f{index}", b"1," * (46 * MiB // 2)) for index in range(6)]
                return answers, before, _server_rss_mb(process)

        answers, before, after = asyncio.run(probe())
    assert answers == [403] * 6
    assert after - before < 2 * 47  # six files sent (276 MiB); at most the request in flight is ever held


def test_a_signed_in_session_and_the_server_hold_bounded_uploads(tmp_path):
    """With nothing to sign in to (this machine alone), a session holds at most
    MAX_FILES_PER_SESSION files, and the server at most $PLNLAB_MAX_UPLOADS_MB."""
    env = {"PLNLAB_DB": str(tmp_path / "runs.sqlite3"), upload_bounds.SERVER_MB_ENV: "1"}
    with served_app(env) as (base, _):
        async def probe() -> tuple[list[int], list[int]]:
            async with open_session(base) as first, open_session(base) as second:
                small = [put_file(base, first, f"f{index}", b"1,2\n" * 100) for index in range(7)]
                # A file replaced under its own id takes no more room.
                small.append(put_file(base, first, "f0", b"3,4\n" * 100))
                big = [put_file(base, second, "big", b"1,2\n" * (150 * 1024)),  # 600 KiB
                       put_file(base, second, "bigger", b"1,2\n" * (150 * 1024))]  # the server's 1 MB is full
                return small, big

        small, big = asyncio.run(probe())
    assert small == [204] * upload_bounds.MAX_FILES_PER_SESSION + [413] + [204]
    assert big == [204, 413]


def test_the_bounds_on_streamlits_upload_manager(monkeypatch):
    monkeypatch.setattr(upload_guard, "_admitted", {"in"})
    monkeypatch.delenv(upload_bounds.SERVER_MB_ENV, raising=False)
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    upload_guard.guard(manager)
    upload_guard.guard(manager)  # once only: not wrapped twice

    def offer(session: str, file_id: str, mb: int) -> None:
        manager.add_file(session, UploadedFileRec(file_id, "a.csv", "text/csv", b"0" * (mb * MiB)))

    with pytest.raises(HTTPException) as refused:
        offer("out", "a", 1)
    assert refused.value.status_code == 403 and manager.file_storage.get("out") is None
    offer("in", "a", 47)
    offer("in", "b", 47)
    with pytest.raises(HTTPException, match="at most 100 MB") as refused:
        offer("in", "c", 47)
    assert refused.value.status_code == 413
    offer("in", "b", 40)  # replacing a file counts its new size only
    assert sorted(manager.file_storage["in"]) == ["a", "b"]
    monkeypatch.setenv(upload_bounds.SERVER_MB_ENV, "90")
    with pytest.raises(HTTPException, match="is full"):
        offer("in", "c", 5)


def test_files_taken_before_the_guard_are_dropped_when_it_is_installed(monkeypatch):
    # The first page run installs the guard: a script that opened a session and raced that
    # run may have put a file in the unguarded manager.
    monkeypatch.setattr(upload_guard, "_admitted", {"in"})
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    for session in ("raced", "in"):
        manager.add_file(session, UploadedFileRec("a", "a.csv", "text/csv", b"0" * MiB))
    upload_guard.guard(manager)
    assert list(manager.file_storage) == ["in"]
    assert manager._total_bytes == MiB and manager._file_count == 1


def test_a_bad_server_cap_is_named(monkeypatch):
    monkeypatch.setenv(upload_bounds.SERVER_MB_ENV, "lots")
    with pytest.raises(ValueError, match="PLNLAB_MAX_UPLOADS_MB must be a whole number"):
        upload_bounds.server_cap_bytes()
