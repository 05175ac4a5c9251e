"""How fast the dashboard answers: first paint, re-showing a stored run, and click to chart.

Prints figures (median of --repeats); not a test. Needs Debian's chromium. Timings on a
shared machine are indicative: rerun where it matters.

    .venv/bin/python benchmarks/dashboard_timing.py --repeats 3

1. First paint: from starting `streamlit run app.py` to the Run page's title painted in
   chromium (a new server process each time, so imports are paid every time).
2. Stored run: with the default spec already in the store, the time until its result
   charts are rendered (no fit runs: the page shows the stored runs), measured three ways:
   in a brand-new browser (cold HTTP cache), in a new tab of a browser that has the app
   cached (a new Streamlit session), and within one session, going back to the stored
   settings after changing them.
3. From a fresh store and an empty compilation cache, at the defaults (oaks x1): the Run
   page's first click on its default selection until its charts are drawn (goal: under
   10 s), then the story's Warm up until every step is timed (goal: under 60 s). Once each.
4. Click to chart, at 1024x768 with the sidebar open, as in a talk: a click on the story's
   Next once every step is warmed up (until the new step's bar is drawn), a Compare filter
   (until its charts are redrawn), and a Run click on a problem not yet stored (scan only,
   oaks x1, 50 iterations: until its charts are drawn, the fit and its compile included).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from served_app import CHARTS_DRAWN, launch_browser, served_app, wait_painted  # noqa: E402

CHARTS_RENDERED = "() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3"
PROJECTOR = {"width": 1024, "height": 768}


RUN_GOAL_S = 10.0
WARM_UP_GOAL_S = 60.0


def _seed_store(env: dict[str, str]) -> tuple[float, float]:
    """Store the Run page's default spec and warm the story up, through the pages, on a
    fresh store and cache -> (seconds from the Run click to its charts, from the Warm up
    click to every step timed)."""
    from playwright.sync_api import sync_playwright

    with served_app(env) as (base, _), sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(base)
        wait_painted(page)
        start = time.perf_counter()
        page.get_by_role("button", name=re.compile(r"^Run \d+ strateg")).click()  # the default selection
        page.wait_for_function(CHARTS_RENDERED, timeout=600_000)
        run_s = time.perf_counter() - start
        wait_painted(page, timeout_ms=600_000)
        page.locator("[data-testid='stSidebarNav'] a", has_text="Story").click()
        wait_painted(page)
        start = time.perf_counter()
        page.get_by_role("button", name=re.compile("^Warm up")).click()
        page.get_by_role("button", name=re.compile("^Warmed up")).wait_for(timeout=600_000)
        warm_s = time.perf_counter() - start
        if page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").count():
            raise SystemExit("the story's warm-up showed an error: " + page.locator("[data-testid='stMain']")
                             .inner_text()[:2000])
        browser.close()
    return run_s, warm_s


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


def _bars_drawn(page) -> int:
    return page.evaluate("() => document.querySelectorAll('.vega-embed svg .role-mark path').length")


def story_next(page, base: str) -> float:
    """From step 1 of a warmed-up story, Next (the → key): until step 2's bar is drawn."""
    page.goto(f"{base}/story")
    wait_painted(page)
    page.get_by_text(re.compile(r"Step 1 of")).wait_for()
    page.wait_for_function(CHARTS_DRAWN, arg=1, timeout=60_000)
    before = _bars_drawn(page)
    start = time.perf_counter()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => document.querySelectorAll('.vega-embed svg .role-mark path').length > {before}",
                           timeout=60_000)
    return time.perf_counter() - start


def compare_filter(page, base: str) -> float:
    """Compare, Precision filter set to float32: until the page has run and its charts are back."""
    page.goto(f"{base}/compare")
    wait_painted(page)
    page.wait_for_function(CHARTS_DRAWN, arg=3, timeout=60_000)
    start = time.perf_counter()
    page.get_by_role("combobox", name=re.compile("Precision")).click()
    page.get_by_role("option", name="float32", exact=True).click()
    page.wait_for_url(re.compile("precision=float32"), timeout=60_000)
    wait_painted(page)
    page.wait_for_function(CHARTS_DRAWN, arg=3, timeout=60_000)
    return time.perf_counter() - start


def run_click(page, base: str, iterations: int) -> float:
    """Run on a spec not yet stored (scan, oaks x1): until its result charts are drawn."""
    page.goto(f"{base}/?strategies=scan&iterations={iterations}")
    wait_painted(page)
    start = time.perf_counter()
    page.get_by_role("button", name=re.compile(r"^Run 1 strategy")).click()
    page.get_by_text("Where the time goes (s)").wait_for(timeout=300_000)
    page.wait_for_function(CHARTS_DRAWN, arg=4, timeout=300_000)
    return time.perf_counter() - start


def _report(label: str, seconds: list[float]) -> None:
    print(f"{label} (s): median {statistics.median(seconds):.2f}  all {', '.join(f'{t:.2f}' for t in seconds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fresh-only", action="store_true", help="only the fresh store's Run click and warm-up (3)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    scratch = tempfile.mkdtemp(prefix="plnlab-dashboard-timing-")
    env = {"PLNLAB_DB": os.path.join(scratch, "runs.sqlite3"), "PLNLAB_JAX_CACHE": os.path.join(scratch, "jax"),
           "PLNLAB_QUEUE_DIR": os.path.join(scratch, "queue")}
    if not args.fresh_only:
        _report("first paint after `streamlit run`", [first_paint(env) for _ in range(args.repeats)])
    run_s, warm_s = _seed_store(env)
    print(f"fresh store and cache, defaults: Run click to charts {run_s:.2f} s (goal < {RUN_GOAL_S:.0f} s: "
          f"{'met' if run_s < RUN_GOAL_S else 'MISSED'}); story warm-up {warm_s:.2f} s "
          f"(goal < {WARM_UP_GOAL_S:.0f} s: {'met' if warm_s < WARM_UP_GOAL_S else 'MISSED'})")
    if args.fresh_only:
        return
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
        projector = browser.new_context(viewport=PROJECTOR).new_page()
        _report("click to chart: story Next, warmed up", [story_next(projector, base) for _ in range(args.repeats)])
        _report("click to chart: Compare filter", [compare_filter(projector, base) for _ in range(args.repeats)])
        _report("click to chart: Run, new spec (fit and compile included)",
                [run_click(projector, base, 50 + i) for i in range(args.repeats)])
        browser.close()


if __name__ == "__main__":
    main()
