"""Serve the real app with `streamlit run` on a free loopback port, and drive Debian's chromium.

Shared by the end-to-end test and the first-paint benchmark.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from project import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PAGES = {"Run": "", "Story": "story", "Compare": "compare", "Scaling": "scaling", "Under the hood": "under_the_hood",
         "About": "about"}
# Addresses app.py serves beside the root, and the page title each must open (None: the page's
# own, unchecked): its pages' own paths and those a speaker types or says aloud.
ADDRESSES = {"run": "Which JIT strategy is fastest?", "home": "Which JIT strategy is fastest?",
             "story": None, "compare": "Compare stored runs", "scaling": None, "about": None,
             "under_the_hood": "Under the hood", "under-the-hood": "Under the hood", "hood": "Under the hood",
             # As the menu spells them, and the word for what About is.
             "Story": None, "Compare": "Compare stored runs", "Hood": "Under the hood",
             "Under_the_hood": "Under the hood", "help": None}


def require_chromium():
    """For a real-browser test module, at import: skip the module without Debian's chromium
    (fail under CI, whose .ci/run installs it); return playwright's sync API."""
    import pytest

    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            raise RuntimeError(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)", allow_module_level=True)
    return pytest.importorskip("playwright.sync_api")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def served_app(env: dict[str, str], timeout_s: float = 60.0, log_path: str | None = None,
               as_readme: bool = False, port: int | None = None, options: tuple[str, ...] = ()):
    """Yield (base_url, process) of `streamlit run app.py`, stopped on exit.

    The server's output goes to `log_path` when given, else to a temporary file: never to a
    pipe, which nobody reads while the tests run and which blocks the server (and its
    workers, which share its output) once its buffer is full. With
    `as_readme` the server is started as the README's command starts it (the project's own
    settings alone: 127.0.0.1), on a free port (or `port`); `options` are more of
    Streamlit's command-line options.
    """
    port = port or free_port()
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), *options]
    if not as_readme:
        command += ["--server.address", "127.0.0.1", "--server.headless", "true",
                    "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(open(log_path, "w+") if log_path else tempfile.TemporaryFile("w+"))
        process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env},
                                   stdout=output, stderr=subprocess.STDOUT, text=True)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base, process, timeout_s, output)
            yield base, process
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_healthy(base: str, process: subprocess.Popen, timeout_s: float, output=None) -> float:
    """Seconds until the server answers its health check; `output`, the file its output
    goes to, is shown if it exits first."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if process.poll() is not None:
            said = "(its output was not kept)"
            if output is not None:
                output.seek(0)
                said = output.read()
            raise RuntimeError(f"streamlit exited early:\n{said}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as answer:
                if answer.status == 200:
                    return time.perf_counter() - start
        time.sleep(0.05)
    raise TimeoutError(f"streamlit did not answer within {timeout_s} s")


# Text a reader cannot read whole at the current size, as found in the DOM: an element that
# clips (overflow hidden or an ellipsis) and whose content is wider than its box, content
# wider than its box (equations), and Vega text cut with an ellipsis or past its SVG's edge.
TRUNCATED_TEXT_JS = """
() => {
  const found = [];
  const shown = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  for (const root of document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')) {
    for (const el of root.querySelectorAll('*')) {
      const elsewhere = el.closest('.vega-embed, [data-testid="stDataFrame"], .katex-mathml');
      if (!shown(el) || !el.innerText || elsewhere) continue;
      const style = getComputedStyle(el);
      const clips = ['hidden', 'clip'].includes(style.overflowX) || style.textOverflow === 'ellipsis';
      if (clips && el.scrollWidth > el.clientWidth + 1)
        found.push(`${el.closest('[data-testid]')?.dataset.testid}: "${el.innerText.slice(0, 50)}" cut by `
                   + `${el.scrollWidth - el.clientWidth} px`);
    }
  }
  for (const el of document.querySelectorAll('[data-testid="stMarkdownContainer"]')) {
    if (shown(el) && !el.querySelector('.katex-display') && el.scrollWidth > el.clientWidth + 1)
      found.push(`overflow: "${el.innerText.slice(0, 50)}" by ${el.scrollWidth - el.clientWidth} px`);
  }
  // A displayed equation is as wide as it is drawn (its glyphs may overhang by a pixel or
  // two): it must fit its column.
  for (const el of document.querySelectorAll('.katex-display')) {
    const column = el.closest('[data-testid="stVerticalBlock"]');
    if (shown(el) && column && el.scrollWidth > column.clientWidth + 1)
      found.push(`equation wider than its column by ${el.scrollWidth - column.clientWidth} px`);
  }
  for (const svg of document.querySelectorAll('.vega-embed svg')) {
    const box = svg.getBoundingClientRect();
    for (const text of svg.querySelectorAll('text')) {
      const r = text.getBoundingClientRect();
      if (text.textContent && (text.textContent.includes('…') || r.right > box.right + 1 || r.left < box.left - 1))
        found.push(`chart text "${text.textContent.slice(0, 50)}" cut`);
    }
  }
  return found;
}
"""
CHARTS_DRAWN = "(n) => document.querySelectorAll('.vega-embed svg').length >= n"


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def wait_painted(page, timeout_ms: float = 30_000) -> None:
    """Wait until the page's script has run: a title is shown and nothing is running."""
    page.wait_for_selector("[data-testid='stMainBlockContainer'] h1", timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stStatusWidget']\")", timeout=timeout_ms)
