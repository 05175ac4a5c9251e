"""A link opened on a server with a password: after the password, the page and the settings
the link carries, not the Run page at its defaults (the gate once ran before the pages were
known, and the rerun after sign-in forgot where the visitor was going). The link is the fresh
server's first session, which Streamlit's legacy multipage mode routes (pages/__init__.py):
no "Page not found" over it, as there was on any page's address."""

from __future__ import annotations

import re

import pytest

from served_app import launch_browser, require_chromium, served_app, wait_painted

pytestmark = pytest.mark.browser

sync_api = require_chromium()


def test_a_link_opens_its_page_and_settings_after_the_password(tmp_path):
    env = {"PLNLAB_DB": str(tmp_path / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(tmp_path / "jax"),
           "PLNLAB_QUEUE_DIR": str(tmp_path / "queue"), "PLNLAB_PASSWORD": "s3cret"}
    with served_app(env, log_path=str(tmp_path / "server.log")) as (base, _), \
            sync_api.sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1024, "height": 768})
        # As the menu spells it: a capitalised address was the one left to "Page not found".
        page.goto(f"{base}/Story?step=3")
        wait_painted(page, 120_000)
        # Before the password: no menu of pages, nothing but the form, and no dialog over it.
        assert not page.get_by_text("Page not found").count()
        assert not page.locator("[data-testid='stSidebarNav']").count()
        box = page.get_by_label("Password", exact=True)
        box.fill("s3cret")
        page.get_by_role("button", name="Enter").click()
        page.get_by_text(re.compile(r"Step 3 of \d+")).wait_for(timeout=120_000)
        wait_painted(page, 120_000)
        assert "/story" in page.url and "step=3" in page.url
        assert page.locator("[data-testid='stSidebarNav']").count()
        assert not page.get_by_text("Page not found").count()
        browser.close()
