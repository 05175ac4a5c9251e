"""How fast the dashboard answers: first paint after `streamlit run`, and re-showing a stored run.

Prints figures (median of --repeats); not a test. Needs Debian's chromium.

    .venv/bin/python benchmarks/dashboard_timing.py --repeats 3

1. First paint: from starting `streamlit run app.py` to the Run page's title painted in
   chromium (a new server process each time, so imports are paid every time).
2. Stored run: with the default spec already in the store, the time until its result
   charts are rendered (no fit runs: the page shows the stored runs), measured three ways:
   in a brand-new browser (cold HTTP cache), in a new tab of a browser that has the app
   cached (a new Streamlit session), and within one session, going back to the stored
   settings after changing them.
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


def _open_until_charts(page, base: str) -> float:
    start = time.perf_counter()
    page.goto(base)
    page.wait_for_function(CHARTS_RENDERED, timeout=60_000)
    return time.perf_counter() - start


def stored_run_new_browser(base: str, playwright) -> float:
    browser = launch_browser(playwright)
    elapsed = _open_until_charts(browser.new_page(viewport={"width": 1400, "height": 1000}), base)
    browser.close()
    return elapsed


def stored_run_new_tab(base: str, context) -> float:
    page = context.new_page()
    elapsed = _open_until_charts(page, base)
    page.close()
    return elapsed


def stored_run_in_session(page) -> float:
    """Change the iterations away from the stored spec, then back; time the way back."""
    iterations = page.get_by_role("spinbutton", name="Iterations")
    stored_value = iterations.input_value()
    iterations.fill(str(int(stored_value) + 1))
    iterations.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('.vega-embed').length == 0", timeout=60_000)
    start = time.perf_counter()
    iterations.fill(stored_value)
    iterations.press("Enter")
    page.wait_for_function(CHARTS_RENDERED, timeout=60_000)
    return time.perf_counter() - start


def _report(label: str, seconds: list[float]) -> None:
    print(f"{label} (s): median {statistics.median(seconds):.2f}  all {', '.join(f'{t:.2f}' for t in seconds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    scratch = tempfile.mkdtemp(prefix="plnlab-dashboard-timing-")
    env = {"PLNLAB_DB": os.path.join(scratch, "runs.sqlite3"), "PLNLAB_JAX_CACHE": os.path.join(scratch, "jax")}
    _report("first paint after `streamlit run`", [first_paint(env) for _ in range(args.repeats)])
    _seed_store(env)
    with served_app(env) as (base, _), sync_playwright() as playwright:
        stored_run_new_browser(base, playwright)  # the server's first visit pays the page imports
        _report("stored run, new browser", [stored_run_new_browser(base, playwright) for _ in range(args.repeats)])
        browser = launch_browser(playwright)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        _report("stored run, new tab", [stored_run_new_tab(base, context) for _ in range(args.repeats)])
        page = context.new_page()
        page.goto(base)
        page.wait_for_function(CHARTS_RENDERED, timeout=60_000)
        _report("stored run, same session", [stored_run_in_session(page) for _ in range(args.repeats)])
        browser.close()


if __name__ == "__main__":
    main()
