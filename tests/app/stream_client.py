"""A script, not a browser, talking to a served dashboard as a probe would: it opens a session
over Streamlit's websocket (the server runs the page for it) and PUTs files to the upload
endpoint with an XSRF token of its own making, in both the header and the cookie."""

from __future__ import annotations

import asyncio
import contextlib

import requests
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string


@contextlib.asynccontextmanager
async def open_session(base: str, timeout_s: float = 60.0):
    """Yields the id of a session whose first run of the page has finished."""
    async with websockets.connect(base.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                                  additional_headers={"Origin": base}, max_size=None) as socket:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        await socket.send(rerun.SerializeToString())
        session = None
        while True:
            message = ForwardMsg()
            message.ParseFromString(await asyncio.wait_for(socket.recv(), timeout_s))
            kind = message.WhichOneof("type")
            if kind == "new_session":
                session = message.new_session.initialize.session_id
            elif kind == "script_finished" and session:
                break
        yield session


def put_file(base: str, session: str, file_id: str, data: bytes) -> int:
    """The upload endpoint's answer (HTTP status) to `data` offered for `session`."""
    token = generate_xsrf_token_string()
    answer = requests.put(f"{base}/_stcore/upload_file/{session}/{file_id}", timeout=120,
                          files={"file": ("counts.csv", data, "text/csv")},
                          headers={"X-Xsrftoken": token, "Cookie": f"_streamlit_xsrf={token}"})
    return answer.status_code
