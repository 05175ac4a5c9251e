"""End to end: the real app served over HTTP, driven in a real headless chromium.

Visits every page, starts a run from the Run page, waits for the Vega charts to render and
fails on any Streamlit exception box. Skipped where chromium is absent, except under CI.
"""

import re
import time

import pytest

from served_app import PAGES, launch_browser, require_chromium, served_app, wait_painted

pytestmark = pytest.mark.browser

sync_api = require_chromium()

RUN_TIMEOUT_MS = 240_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("served")
    env = {"PLNLAB_DB": str(scratch / "runs.sqlite3"), "PLNLAB_JAX_CACHE": str(scratch / "jax"),
           "PLNLAB_QUEUE_DIR": str(scratch / "queue")}
    with served_app(env, log_path=str(scratch / "server.log")) as (base, _):
        yield base, env


@pytest.fixture(scope="module")
def app(served):
    return served[0]


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
    run_button = page.get_by_role("button", name=re.compile(r"^Run \d+ strateg"))
    strategies = int(re.search(r"\d+", run_button.inner_text()).group())
    run_button.click()
    # One chart per result view: timings, speed-up and the two ELBO plots.
    page.wait_for_function("() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3",
                           timeout=RUN_TIMEOUT_MS)
    wait_painted(page, timeout_ms=RUN_TIMEOUT_MS)
    _no_exception(page)
    assert page.get_by_text(re.compile("agree", re.IGNORECASE)).count() >= 1

    page.goto(f"{app}/compare")
    wait_painted(page)
    _no_exception(page)
    # The table is drawn on a canvas; its caption counts the rows (waited for: under load the
    # page may still be drawing when the status widget first reads idle).
    page.get_by_text(re.compile(rf"\b{strategies} of {strategies} runs shown")).wait_for(timeout=60_000)


def test_a_run_left_for_another_page_is_said_stopped_on_return(served, page):
    """Leaving the Run page mid-run stops the run (Streamlit stops the page's script, and the
    run with it): the page says so on return, rather than offering Run as if nothing had run."""
    from core.store.run_store import RunStore

    base, env = served
    store = RunStore(env["PLNLAB_DB"])
    before = len(store.list())
    page.goto(f"{base}/?strategies=eager,scan&tol=0&iterations=50000")
    wait_painted(page)
    page.get_by_role("button", name=re.compile(r"^Run \d+ strateg")).click()
    page.get_by_text(re.compile(r"first call: iteration")).first.wait_for(timeout=RUN_TIMEOUT_MS)
    for title in ("Compare", "Run"):
        page.locator("[data-testid='stSidebarNav'] a", has_text=title).first.click()
        page.wait_for_url(re.compile(rf"/{PAGES[title]}(\?|$)"))
        wait_painted(page)
    page.get_by_text(re.compile(r"^Running 2 strategies: stopped by another click while it ran, before any run "
                                r"finished; nothing was stored\.")).wait_for(timeout=30_000)
    _no_exception(page)
    stopped = time.perf_counter()
    while store.in_flight() and time.perf_counter() - stopped < 30:
        time.sleep(0.1)
    assert len(store.list()) == before and store.in_flight() == []


def test_cancel_stops_a_long_run_within_seconds_and_stores_nothing(served, page):
    from core.store.run_store import RunStore

    base, env = served
    store = RunStore(env["PLNLAB_DB"])
    before = len(store.list())
    # Eager is not ticked by default; tol=0 runs every iteration (the default fit converges in
    # about 60, under a second, whatever the iteration count).
    page.goto(f"{base}/?strategies=eager,scan&tol=0")
    wait_painted(page)
    iterations = page.get_by_role("spinbutton", name="Iterations")
    iterations.fill("50000")  # eager first: minutes of work
    iterations.press("Enter")
    wait_painted(page)
    page.get_by_role("button", name=re.compile(r"^Run \d+ strateg")).click()
    page.get_by_text(re.compile(r"first call: iteration")).first.wait_for(timeout=RUN_TIMEOUT_MS)
    assert store.in_flight(), "the run is under way"
    # The session that started it sees the device busy with it (its sidebar was drawn before it began).
    page.locator("[data-testid='stSidebar']").get_by_text(
        re.compile(r"busy: 2 strategies timed together · oaks x1 · float32 \(dashboard\), running for")
    ).wait_for(timeout=10_000)
    # Another browser on the Run page meanwhile, which will not be clicked.
    watcher = page.context.browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
    watcher.goto(base)
    wait_painted(watcher)
    watcher_line = watcher.locator("[data-testid='stSidebar']")
    watcher_line.get_by_text(re.compile(r"cpu\W+busy: 2 strategies timed together")).wait_for(timeout=10_000)
    page.get_by_role("button", name="Cancel").click()
    clicked = time.perf_counter()
    notice = page.get_by_text(re.compile(r"^Running 2 strategies: cancelled, before any run finished; nothing was "
                                         r"stored\."))
    try:  # the click's own notice, not the one of a run stopped by a click elsewhere
        notice.wait_for(timeout=30_000)
    except sync_api.TimeoutError:
        raise AssertionError("no Cancel notice; the page's main part read:\n"
                             + page.locator("[data-testid='stMain']").inner_text()) from None
    wait_painted(page)
    _no_exception(page)
    # The page redraws at once; the stopped run's thread ends at its next progress report
    # (at least one a second), releasing the device and removing its in-flight note.
    while store.in_flight() and time.perf_counter() - clicked < 30:
        time.sleep(0.1)
    assert time.perf_counter() - clicked < 10
    assert len(store.list()) == before and store.in_flight() == []
    # The other browser's sidebar, drawn while the run held the device, catches up by itself:
    # it said "busy" until its next click.
    watcher_line.get_by_text(re.compile(r"cpu\W+is free")).wait_for(timeout=15_000)
    _no_exception(watcher)
    watcher.context.close()


def test_a_run_whose_tab_is_closed_goes_on_and_is_stored(served, page):
    """A closed tab (or a lost connection) stops the page's script, as a click elsewhere does,
    but not the run: it finishes in the server's thread and stores its runs, as it would have
    with the tab open."""
    from core.store.run_store import RunStore

    base, env = served
    store = RunStore(env["PLNLAB_DB"])
    before = len(store.list())
    tab = page.context.browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
    # Eager first: about 10 s in all here, under way when the tab closes, short enough to wait for.
    tab.goto(f"{base}/?strategies=eager,scan&tol=0&iterations=150&repeats=1")
    wait_painted(tab)
    tab.get_by_role("button", name=re.compile(r"^Run 2 strateg")).click()
    tab.get_by_text(re.compile(r"first call: iteration")).first.wait_for(timeout=RUN_TIMEOUT_MS)
    assert store.in_flight(), "the run is under way"
    tab.context.close()
    closed = time.perf_counter()
    while (store.in_flight() or len(store.list()) < before + 2) and time.perf_counter() - closed < 120:
        time.sleep(0.2)
    runs = store.list()[:2]
    assert len(store.list()) == before + 2, f"{len(store.list()) - before} of 2 runs stored after the tab closed"
    assert sorted(run.strategy for run in runs) == ["eager", "scan"]
    assert all(run.status == "ok" and run.iterations_run == 150 for run in runs), [
        (run.strategy, run.status, run.iterations_run) for run in runs]
    assert store.in_flight() == []
