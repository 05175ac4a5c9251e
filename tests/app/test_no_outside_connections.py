"""Started with the README's command, the server reaches no other machine: no name looked up,
no connection made off this machine, while it starts, while the first page opens (and the
embedded cluster's workers start) and while a fit runs. Every Python process it starts
records what it tries (tests/app/netguard/sitecustomize.py), and a real browser opens it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from served_app import launch_browser, require_chromium, served_app, wait_painted

pytestmark = pytest.mark.browser

sync_api = require_chromium()
GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netguard")


def test_the_server_reaches_no_other_machine(tmp_path):
    log = tmp_path / "net.log"
    log.write_text("")
    env = {"PLNLAB_DB": str(tmp_path / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(tmp_path / "jax"),
           "PLNLAB_NET_LOG": str(log),
           "PYTHONPATH": os.pathsep.join(filter(None, [GUARD, os.environ.get("PYTHONPATH")]))}
    # The guard sees what it must: a process that does reach out is recorded.
    subprocess.run([sys.executable, "-c", "import socket\ntry: socket.getaddrinfo('example.invalid', 80)\n"
                                          "except OSError: pass"], env={**os.environ, **env}, check=True)
    assert "look up 'example.invalid'" in log.read_text()
    log.write_text("")
    with served_app(env, log_path=str(tmp_path / "server.log"), as_readme=True) as (base, _):
        with sync_api.sync_playwright() as playwright:
            browser = launch_browser(playwright)
            page = browser.new_page(viewport={"width": 1024, "height": 768})
            page.goto(base)
            wait_painted(page, 180_000)
            assert page.get_by_text("cpu is free").count()  # the first page opened, with its workers
            browser.close()
    attempts = log.read_text().splitlines()
    assert attempts == [], attempts
    assert "import sitecustomize" not in (tmp_path / "server.log").read_text()  # the guard itself loaded fine
