"""Soak: mixed runs from several sessions against one served dashboard, for a long time.

Prints figures; not a test (it runs for --minutes, 30 by default). Needs Debian's chromium.

    .venv/bin/python benchmarks/soak.py --minutes 30 --browsers 3 --cli 1

Starts `streamlit run app.py` on a loopback port with a fresh store, then, until time is
up, keeps busy:
- `--browsers` chromium sessions, each typing random iterations, picking a precision and
  clicking Run (or Run again) on the Run page at once, as a quick hand would, then checking
  that the typed values held and waiting for its own runs to be stored and drawn; about
  one click in five is instead a visit to the Compare page (the newest stored runs),
  waiting for its charts, after which the session starts again from a fresh page load;
- `--cli` command-line loops, each running `python -m core run` with a random strategy
  and small dataset into the same store, queueing for the same device.
Before the sessions start, a run whose text fields are markdown (a link, an image, HTML)
is imported, as a careless or hostile colleague could: every page a session draws must
show it as text (no link or image from it), or it counts as an error.
Every 30 s it samples the server's resident memory (VmRSS). At the end it reports the
runs completed, the errors (exception or error boxes in a page, markup from the store, a
typed value lost, a click that started nothing, failed commands), runs that did not
finish (interrupted, timed out) or were left in flight, overlapping timed windows, the
store's size and integrity, and the server's memory over time with its growth per minute
once warmed up. A browser session that meets an error keeps a screenshot and the page's
text in the scratch folder (the server's log is there too), then goes on from a fresh
page load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from served_app import launch_browser, served_app, wait_painted  # noqa: E402

CHARTS_RENDERED = "() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3"
PROBLEMS = "[data-testid='stException'], [data-testid='stAlertContentError']"
IDLE = "() => !document.querySelector(\"[data-testid='stStatusWidget']\")"  # no script running
CLI_STRATEGIES = ("scan", "jit_step", "scan_analytic", "fori_loop", "while_loop", "jit_per_function")
# Markup a stored run may carry; a page that renders any of it as a link or image fails.
POISON = {"error": "[sign in again here](https://example.com/login)",
          "host": "![pixel](https://example.com/pixel.png)",
          "device_kind": "<b>bold</b> :red[alarm] www.example.com"}
MARKUP_FROM_STORE = "a[href*='example.com'], img[src*='example.com']"


class Tally:
    """Counts shared by the session threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clicks = 0
        self.compare_visits = 0
        self.commands = 0
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(f"{time.strftime('%H:%M:%S')} {message}")


def _set_number(page, name: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=name)
    box.fill(str(value))
    box.press("Enter")


def browser_session(base: str, db: str, scratch: str, deadline: float, tally: Tally, index: int) -> None:
    """Click runs until `deadline`; an error is counted, kept (screenshot and page text in
    `scratch`), and the session goes on from a fresh page load."""
    from playwright.sync_api import sync_playwright

    from core.store.run_store import RunStore

    store = RunStore(db)
    rng = random.Random(index)
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        fresh = True
        while time.time() < deadline:
            try:
                if fresh:
                    page.goto(base)
                    wait_painted(page, 120_000)
                    if page.locator(MARKUP_FROM_STORE).count():  # the default settings show the poisoned run
                        raise RuntimeError("text from the store was rendered as a link or an image")
                    _set_number(page, "Repeats", 1)
                    fresh = False
                comparing = rng.random() < 0.2 and store.count() > 0  # an empty store has no charts
                if comparing:
                    _visit_compare(page, base)
                    fresh = True  # back to the Run page next, with its settings made again
                else:
                    _one_click(page, store, rng, index)
                problems = page.locator(PROBLEMS)
                if problems.count():
                    raise RuntimeError(problems.first.inner_text()[:300])
                if page.locator(MARKUP_FROM_STORE).count():
                    raise RuntimeError("text from the store was rendered as a link or an image")
                with tally.lock:
                    if comparing:
                        tally.compare_visits += 1
                    else:
                        tally.clicks += 1
            except Exception as exc:  # noqa: BLE001 - counted, kept for diagnosis, then carry on
                stamp = time.strftime("%H%M%S")
                shot = os.path.join(scratch, f"error-browser{index}-{stamp}.png")
                with contextlib.suppress(Exception):
                    page.screenshot(path=shot, full_page=True)
                    with open(shot.replace(".png", ".txt"), "w") as text:
                        text.write(page.inner_text("body"))
                tally.error(f"browser {index}: {type(exc).__name__}: {str(exc)[:300]} (see {shot})")
                fresh = True
        browser.close()


def _one_click(page, store, rng, index: int) -> None:
    """New settings, one click on Run, and the wait until this session's runs are stored
    and drawn. Each session's iterations end in its own digit, so the runs it waits for
    are its own whatever the others store meanwhile."""
    iterations = rng.choice([20, 30, 40, 50, 60]) + index
    precision = rng.choice(["float32", "float64"])
    _set_number(page, "Iterations", iterations)
    page.get_by_text(precision, exact=True).click()  # at once, as a quick hand would
    wait_painted(page, 120_000)
    for name, typed in (("Iterations", iterations), ("Repeats", 1)):
        shown = page.get_by_role("spinbutton", name=name).input_value()
        if shown != str(typed):
            raise RuntimeError(f"{name} shows {shown} after {typed} was typed")
    clicked_at = time.time()
    page.get_by_role("button", name=re.compile(r"^(Run \d+ strateg|Run again)")).click()
    # Any other click would stop the run (that is how Cancel works): wait until this
    # session's runs are stored and the page offers "Run again" (every strategy of these
    # settings stored), or an error shows.
    at = time.strftime("%H:%M:%S", time.localtime(clicked_at))
    while not page.locator(PROBLEMS).count():
        stored = [r for r in store.find(iterations=iterations, precision=precision, repeats=1)
                  if r.created_at >= clicked_at]
        if stored and page.evaluate(IDLE) and page.get_by_role("button", name="Run again").count():
            break
        if time.time() > clicked_at + 600:
            raise TimeoutError(f"the runs clicked at {at} were not all stored within 600 s")
        if not stored and time.time() > clicked_at + 30 and page.evaluate(IDLE):
            raise RuntimeError(f"the click on Run at {at} started nothing: after 30 s no run of it is stored "
                               "and the page is idle")
        page.wait_for_timeout(500)
    wait_painted(page, 600_000)
    page.wait_for_function(CHARTS_RENDERED, timeout=120_000)


def _visit_compare(page, base: str) -> None:
    """The Compare page: its table of the newest stored runs, then its charts drawn."""
    page.goto(f"{base}/compare")
    wait_painted(page, 120_000)
    page.get_by_text(re.compile(r"\d[\d,]* of [\d,]+ (matching )?runs")).wait_for(timeout=120_000)
    page.wait_for_function(CHARTS_RENDERED, timeout=120_000)


def cli_session(env: dict, deadline: float, tally: Tally, index: int) -> None:
    rng = random.Random(100 + index)
    while time.time() < deadline:
        args = ["run", "--strategy", rng.choice(CLI_STRATEGIES), "--iterations", str(rng.choice([20, 50, 100])),
                "--repeats", "2", "--precision", rng.choice(["float32", "float64"])]
        if rng.random() < 0.5:
            args += ["--dataset", "oaks", "--replicate", str(rng.choice([1, 10]))]
        else:
            args += ["--dataset", "simulated", "--n", str(rng.choice([200, 1000])), "--p", "20"]
        done = subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            tally.error(f"cli {index}: {' '.join(args)}: {done.stderr.strip()[-200:]}")
        with tally.lock:
            tally.commands += 1


def import_poisoned_run(db: str, scratch: str) -> None:
    """A diverged run of the sidebar's default scan whose text fields are markdown, imported
    from a file as a colleague could; the Run page shows it at once."""
    from core.store.run_store import RunStore
    from pages.ui.settings import DEFAULTS

    spec = DEFAULTS.fit_spec("scan")
    now = time.time()
    record = {
        "spec": spec.to_dict(), "spec_key": spec.key, "strategy": "scan", "dataset": spec.dataset.label,
        "n": 116, "p": 114, "d": 1, "precision": spec.precision, "device": "cpu", "iterations": spec.iterations,
        "optimizer": spec.optimizer.name, "lr": spec.optimizer.lr, "init": spec.init, "repeats": spec.repeats,
        "tol": spec.tol, "status": "diverged",
        "error": POISON["error"], "diverged_at": 2, "iterations_run": 2, "transfer_s": 0.001,
        "trace_lower_s": 0.05, "compile_s": 0.3, "first_call_s": 0.2, "run_s": 0.1, "run_s_min": 0.1,
        "run_s_max": 0.1, "per_iter_ms": 0.7, "compile_count": 1, "disk_cache_hits": 0, "recompile_count": 0,
        "cache": "compiled", "final_elbo": -1.9e5, "elbo": [-2.0e5, -1.9e5], "devices": 1,
        "device_kind": POISON["device_kind"], "versions": {"platform": "cpu", "host": POISON["host"]},
        "created_at": now - 3600, "timed_start": now - 3601, "timed_end": now - 3600.5,
        "warnings": [POISON["error"]],
    }
    path = os.path.join(scratch, "poisoned.json")
    with open(path, "w") as handle:
        json.dump([record], handle)
    done = RunStore(db).import_file(path)
    if done.added != 1:
        raise RuntimeError(f"the poisoned run was not imported: {done.refusals()}")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_slope_mb_per_min(samples: list[tuple[float, float, int]], after_s: float) -> float:
    """Least-squares slope of the server's memory once warmed up (start-up loads jax, pages
    and the first compiled fits; what matters on a shared server is the creep after that)."""
    points = [(t / 60, rss) for t, rss, _ in samples if t >= after_s]
    if len(points) < 2:
        return float("nan")
    minutes, rss = zip(*points)
    return statistics.linear_regression(minutes, rss).slope


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--browsers", type=int, default=3, help="concurrent browser sessions")
    parser.add_argument("--cli", type=int, default=1, help="concurrent command-line loops")
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between memory samples")
    args = parser.parse_args(argv)

    from core.store.run_store import RunStore

    scratch = tempfile.mkdtemp(prefix="plnlab-soak-")
    env = {"PLNLAB_DB": os.path.join(scratch, "runs.sqlite3"), "PLNLAB_JAX_CACHE": os.path.join(scratch, "jax"),
           "PLNLAB_QUEUE_DIR": os.path.join(scratch, "queue")}
    full_env = {**os.environ, **env}
    tally = Tally()
    samples: list[tuple[float, float, int]] = []
    import_poisoned_run(env["PLNLAB_DB"], scratch)
    with served_app(env, log_path=os.path.join(scratch, "server.log")) as (base, server):
        start = time.time()
        deadline = start + 60 * args.minutes
        threads = [threading.Thread(target=browser_session, args=(base, env["PLNLAB_DB"], scratch, deadline, tally, i))
                   for i in range(args.browsers)]
        threads += [threading.Thread(target=cli_session, args=(full_env, deadline, tally, i)) for i in range(args.cli)]
        for thread in threads:
            thread.start()
        store = RunStore(env["PLNLAB_DB"])
        while any(thread.is_alive() for thread in threads):
            samples.append((time.time() - start, rss_mb(server.pid), store.count()))
            print(f"{samples[-1][0] / 60:6.1f} min  server RSS {samples[-1][1]:8.1f} MB  runs stored "
                  f"{samples[-1][2]:5d}  errors {len(tally.errors)}", flush=True)
            for thread in threads:
                thread.join(timeout=args.sample_s / max(1, len(threads)))
        samples.append((time.time() - start, rss_mb(server.pid), store.count()))
    db_bytes = sum(os.path.getsize(p) for p in (env["PLNLAB_DB"], env["PLNLAB_DB"] + "-wal")
                   if os.path.exists(p))
    final = RunStore(env["PLNLAB_DB"])
    runs = [r for r in final.list() if r.error != POISON["error"]]
    left_in_flight = len(final.in_flight())
    statuses = {status: sum(r.status == status for r in runs) for status in {r.status for r in runs}}
    unfinished = statuses.get("interrupted", 0) + statuses.get("timed_out", 0)
    windows = sorted((r.timed_start, r.timed_end) for r in runs if r.timed_end)
    overlaps = sum(end > next_start for (_, end), (next_start, _) in zip(windows, windows[1:]))
    settled = [rss for t, rss, _ in samples if t >= 300] or [float("nan")]
    print("\nsoak summary")
    print(f"  duration               {samples[-1][0] / 60:.1f} min, {args.browsers} browser sessions, {args.cli} CLI loops")
    print(f"  runs stored            {len(runs)} ({statuses}); page clicks {tally.clicks}, "
          f"Compare visits {tally.compare_visits}, commands {tally.commands}")
    print(f"  errors                 {len(tally.errors)}")
    for error in tally.errors[:20]:
        print(f"    {error}")
    print(f"  timed windows overlap  {overlaps}")
    print(f"  unfinished runs        {unfinished} interrupted or timed out, {left_in_flight} left in flight")
    print(f"  scratch                {scratch}")
    print(f"  store                  {db_bytes / 1e6:.2f} MB, integrity {'ok' if RunStore(env['PLNLAB_DB']).integrity_ok() else 'FAILED'}")
    print(f"  server RSS             first {samples[0][1]:.0f} MB, after 5 min {settled[0]:.0f} MB, "
          f"last {samples[-1][1]:.0f} MB, max {max(s[1] for s in samples):.0f} MB")
    print(f"  RSS growth after 5 min {rss_slope_mb_per_min(samples, after_s=300):.2f} MB/min (least squares)")


if __name__ == "__main__":
    main()
