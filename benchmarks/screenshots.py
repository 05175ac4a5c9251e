"""Every page as a projector shows it: screenshots at 1024x768 with the sidebar open and at
1400x900, after the tutorial's five levels have run, with any text the page cuts.

Not a test (tests/app/test_projector.py checks the same at 1024x768); it leaves PNGs to
look at. Needs Debian's chromium.

    .venv/bin/python benchmarks/screenshots.py --out artifacts/screenshots [--dark]

For each size and page: NAME_WIDTH.png (what the screen shows) and NAME_WIDTH_full.png
(the page laid out at the same width, 3200 px tall), then a line per cut text, if any; and
under_the_hood_timeline_WIDTH.png, Under the hood's traced iteration once traced.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from served_app import CHARTS_DRAWN, PAGES, TRUNCATED_TEXT_JS, launch_browser, served_app, wait_painted  # noqa: E402

SIZES = ((1024, 768), (1400, 900))
TALL = 3200


def timeline(page, out: str, suffix: str) -> None:
    """Under the hood's traced iteration: the Trace button pressed, the timeline scrolled to."""
    page.locator("[data-testid='stSidebarNav'] a", has_text="Under the hood").first.click()
    wait_painted(page, timeout_ms=600_000)
    button = page.get_by_role("button", name=re.compile(r"^Trace "))
    button.scroll_into_view_if_needed()
    button.click()
    page.get_by_role("button", name=re.compile("Download the trace")).wait_for(timeout=600_000)
    wait_painted(page, timeout_ms=600_000)
    time.sleep(2)  # charts draw after the script has run
    page.get_by_text("Traced: ").first.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.screenshot(path=os.path.join(out, f"under_the_hood_timeline_{suffix}.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="artifacts/screenshots")
    parser.add_argument("--dark", action="store_true", help="the dark theme (the browser asks for it)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    os.makedirs(args.out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="plnlab-screenshots-")
    env = {"PLNLAB_DB": os.path.join(scratch, "runs.sqlite3"), "PLNLAB_JAX_CACHE": os.path.join(scratch, "jax"),
           "PLNLAB_QUEUE_DIR": os.path.join(scratch, "queue")}
    print(f"server log: {os.path.join(scratch, 'server.log')}")
    with served_app(env, log_path=os.path.join(scratch, "server.log")) as (base, _), \
            sync_playwright() as playwright:
        browser = launch_browser(playwright)
        for width, height in SIZES:
            context = browser.new_context(viewport={"width": width, "height": height},
                                          color_scheme="dark" if args.dark else "light")
            page = context.new_page()
            page.goto(f"{base}/?iterations=50")
            wait_painted(page)
            # Either button, once drawn: the page may still be drawing when the title shows.
            button = page.get_by_role("button", name=re.compile(r"^(Run \d+ strateg|Run again)"))
            button.wait_for(timeout=120_000)
            if "again" not in button.inner_text():
                button.click()
            page.wait_for_function(CHARTS_DRAWN, arg=4, timeout=600_000)
            wait_painted(page, timeout_ms=600_000)
            for title, path in PAGES.items():
                page.locator("[data-testid='stSidebarNav'] a", has_text=title).first.click()
                wait_painted(page, timeout_ms=600_000)
                if title == "Story":  # the run's levels are the story's first steps
                    for _ in range(2):
                        page.keyboard.press("ArrowRight")
                        time.sleep(0.5)
                        wait_painted(page, timeout_ms=600_000)
                time.sleep(2)  # charts draw after the script has run
                name = f"{path or 'run'}_{width}{'_dark' if args.dark else ''}"
                page.screenshot(path=os.path.join(args.out, f"{name}.png"))
                for cut in page.evaluate(TRUNCATED_TEXT_JS):
                    print(f"{title} at {width}x{height}: {cut}")
                page.set_viewport_size({"width": width, "height": TALL})
                time.sleep(1.5)
                page.screenshot(path=os.path.join(args.out, f"{name}_full.png"))
                page.set_viewport_size({"width": width, "height": height})
            timeline(page, args.out, f"{width}{'_dark' if args.dark else ''}")
            context.close()
        browser.close()
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
