"""How fast the dashboard answers: first paint after `streamlit run`, and re-showing a stored run.

Prints figures (median of --repeats); not a test. Needs Debian's chromium.

    .venv/bin/python benchmarks/dashboard_timing.py --repeats 3

1. First paint: from starting `streamlit run app.py` to the Run page's title painted in
   chromium (a new server process each time, so imports are paid every time).
2. Stored run: with the default spec already in the store, from opening the Run page in a
   new browser session to its result charts rendered (no fit runs: the page shows the
   stored runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from served_app import launch_browser, served_app, wait_painted  # noqa: E402

CHARTS_RENDERED = "() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3"


def _seed_store(env: dict[str, str]) -> None:
    """Store the Run page's default spec by running it once through the page."""
    from playwright.sync_api import sync_playwright

    with served_app(env) as (base, _), sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(base)
        wait_painted(page)
        page.get_by_role("button", name="Run 5 strategies").click()
        page.wait_for_function(CHARTS_RENDERED, timeout=600_000)
        browser.close()


def first_paint(env: dict[str, str]) -> float:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        start = time.perf_counter()
        with served_app(env) as (base, _):
            page.goto(base)
            page.wait_for_selector("[data-testid='stMainBlockContainer'] h1", timeout=60_000)
            elapsed = time.perf_counter() - start
        browser.close()
    return elapsed


def stored_run(base: str, playwright) -> float:
    browser = launch_browser(playwright)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    page.goto(base)
    page.wait_for_function(CHARTS_RENDERED, timeout=60_000)
    elapsed = time.perf_counter() - start
    browser.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    scratch = tempfile.mkdtemp(prefix="plnlab-dashboard-timing-")
    env = {"PLNLAB_DB": os.path.join(scratch, "runs.sqlite3"), "PLNLAB_JAX_CACHE": os.path.join(scratch, "jax")}
    paints = [first_paint(env) for _ in range(args.repeats)]
    print(f"first paint after `streamlit run` (s): median {statistics.median(paints):.2f}  "
          f"all {', '.join(f'{t:.2f}' for t in paints)}")
    _seed_store(env)
    with served_app(env) as (base, _), sync_playwright() as playwright:
        stored_run(base, playwright)  # the server's first visit pays the page imports
        shows = [stored_run(base, playwright) for _ in range(args.repeats)]
    print(f"re-show a stored run, new browser session (s): median {statistics.median(shows):.2f}  "
          f"all {', '.join(f'{t:.2f}' for t in shows)}")


if __name__ == "__main__":
    main()
