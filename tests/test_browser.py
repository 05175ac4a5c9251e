"""End to end: the real app served over HTTP, driven in a real headless chromium.

Visits every page, starts a run from the Run page, waits for the Vega charts to render and
fails on any Streamlit exception box. Skipped where chromium is absent, except under CI.
"""

import os
import re

import pytest

from served_app import CHROMIUM, PAGES, launch_browser, served_app, wait_painted

pytestmark = pytest.mark.browser

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")

RUN_TIMEOUT_MS = 240_000


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("served")
    env = {"PLNLAB_DB": str(scratch / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(scratch / "jax")}
    with served_app(env) as (base, _):
        yield base


@pytest.fixture(scope="module")
def page():
    with sync_api.sync_playwright() as playwright:
        browser = launch_browser(playwright)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        yield context.new_page()
        browser.close()


def _no_exception(page):
    boxes = page.locator("[data-testid='stException']")
    assert boxes.count() == 0, boxes.first.inner_text()


@pytest.mark.parametrize("title,path", PAGES.items())
def test_every_page_renders(app, page, title, path):
    page.goto(f"{app}/{path}")
    wait_painted(page)
    _no_exception(page)


def test_a_run_renders_its_charts_and_appears_on_compare(app, page):
    page.goto(app)
    wait_painted(page)
    iterations = page.get_by_role("spinbutton", name="Iterations")
    iterations.fill("20")
    iterations.press("Enter")
    repeats = page.get_by_role("spinbutton", name="Repeats")
    repeats.fill("1")
    repeats.press("Enter")
    wait_painted(page)
    page.get_by_role("button", name=re.compile(r"^Run \d+ strateg")).click()
    # One chart per result view: timings, speed-up and the two ELBO plots.
    page.wait_for_function("() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3",
                           timeout=RUN_TIMEOUT_MS)
    wait_painted(page, timeout_ms=RUN_TIMEOUT_MS)
    _no_exception(page)
    assert page.get_by_text(re.compile("agree", re.IGNORECASE)).count() >= 1

    page.goto(f"{app}/compare")
    wait_painted(page)
    _no_exception(page)
    # The table is drawn on a canvas; its caption counts the rows.
    assert page.get_by_text(re.compile(r"\b5 of 5 runs shown")).count() == 1
