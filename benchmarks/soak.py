"""Soak: mixed work from several sessions against one served dashboard, for a long time; it fails
when the server dies, stops answering or grows without bound.

Prints figures and exits 1 on a failure; not a test (it runs for --minutes, 30 by default).
Needs Debian's chromium.

    .venv/bin/python benchmarks/soak.py --minutes 30 --browsers 3 --cli 1 --kill-every 300

Starts `streamlit run app.py` on a loopback port with a fresh store (the dashboard starts its
embedded cluster of workers), then, until time is up, keeps busy:
- `--browsers` chromium sessions. Each round is one of: a click on Run after quick changes
  (iterations typed, a precision picked, a strategy toggled among all of them, eager
  included, now and then "Compile from scratch" on), then the wait until its runs are stored
  and drawn; a visit to Compare (the newest stored runs, charts drawn); a visit to Under the
  hood (Inspect, then one pitfall run live); an upload of a small counts CSV fitted on the
  Run page; a link opened with the tutorial's optimizer and two runnables drawn from all of
  them (the strategies that run only gradient steps, `sharded` and the PyTorch and
  pyPLNmodels peers included), then Run. After a visit the session starts again from a
  fresh page load;
- `--cli` command-line loops, each running `python -m core run` with a random strategy
  and small dataset into the same store, queueing for the same device;
- every `--kill-every` seconds, a worker of the server's cluster killed with SIGKILL (as
  the kernel's out-of-memory killer or a segfault would): the run it held is an expected
  interruption, counted apart; its nanny starts a fresh worker.
Before the sessions start, a run whose text fields are markdown (a link, an image, HTML)
is imported, as a careless or hostile colleague could: every page a session draws must
show it as text (no link or image from it), or it counts as an error.

Every `--sample-s` seconds it checks that the server's process lives and answers its health
check within `--health-timeout` seconds, and samples its resident memory (VmRSS), its memory
mappings and its workers. It stops at once, and fails, when the server died or stopped
answering, when its memory passes `--max-rss-mb`, or when it has mapped JAX's, jaxlib's or
torch's native libraries (the server must never fit anything itself). At the end it reports the runs, the
errors (exception or error boxes in a page, markup from the store, a typed value lost, a
click that started nothing, failed commands), the interruptions (expected after a kill, or
not), worker restarts, runs left in flight, overlapping timed windows, the store's size and
integrity, and the server's memory and mappings over time with their growth per minute once
warmed up; it fails when there were unexpected errors, a run diverged (every run here is a
front door's defaults or the tutorial's optimizer, each from its default start), a kill cost
more than the run its worker held, or the memory kept growing (`--max-growth-mb-per-min`) or
its mappings did (`--max-maps-growth-per-min`). A browser session that meets an error keeps a
screenshot and the page's text in the scratch folder (the server's log is there too), then
goes on from a fresh page load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from core import catalog  # noqa: E402
from core.machine.machine_state import resident_mb  # noqa: E402
from core.spec import DEFAULTS as FRONT_DOOR  # noqa: E402

from served_app import launch_browser, served_app, wait_painted  # noqa: E402

CHARTS_RENDERED = "() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3"
PROBLEMS = "[data-testid='stException'], [data-testid='stAlertContentError']"
IDLE = "() => !document.querySelector(\"[data-testid='stStatusWidget']\")"  # no script running
# The settings line under the Run button: precision, iterations and tolerance.
RUN_LINE_SETTLE_S = 15.0
RUN_LINE = re.compile(r"(float32|float64) · \w+ · (?:up to )?([\d,]+) iterations(?:, stopping at a change of (\S+))?")
CLI_STRATEGIES = ("scan", "jit_step", "scan_analytic", "fori_loop", "while_loop", "jit_per_function", "eager")
# Strategies a session toggles on the Run page: every one that runs the sidebar's default
# optimizer (the others are skipped with a note, which is no run).
PAGE_STRATEGIES = tuple(name for name in catalog.strategy_names()
                        if catalog.runnable(name).refusal("preconditioned_lbfgs") is None and name != "sharded")
# Markup a stored run may carry; a page that renders any of it as a link or image fails.
POISON = {"error": "[sign in again here](https://example.com/login)",
          "host": "![pixel](https://example.com/pixel.png)",
          "device_kind": "<b>bold</b> :red[alarm] www.example.com"}
MARKUP_FROM_STORE = "a[href*='example.com'], img[src*='example.com']"
# A run that fails within this long after a worker was killed is an expected interruption.
KILL_GRACE_S = 90.0
# Native libraries the server's process must never map: it only queues, draws and stores.
NATIVE_FIT_LIBRARIES = re.compile(r"/(jaxlib|jax_plugins|torch)/[^ ]*\.so")


class Tally:
    """Counts shared by the session threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.actions = {"run": 0, "link": 0, "compare": 0, "inspect": 0, "upload": 0}
        self.commands = 0
        self.errors: list[str] = []
        self.expected: list[str] = []
        self.kills: list[float] = []

    def error(self, message: str) -> None:
        """An error, or an expected interruption when a worker was killed just before."""
        with self.lock:
            recent = any(0 <= time.time() - at <= KILL_GRACE_S for at in self.kills)
            kept = self.expected if recent and "interrupted" in message else self.errors
            kept.append(f"{time.strftime('%H:%M:%S')} {message}")
        print(f"  {'expected' if kept is self.expected else 'ERROR'}: {kept[-1]}", flush=True)


def _set_number(page, name: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=name)
    box.fill(str(value))
    box.press("Enter")


def _check_page(page) -> None:
    problems = page.locator(PROBLEMS)
    if problems.count():
        raise RuntimeError(problems.first.inner_text()[:300])
    if page.locator(MARKUP_FROM_STORE).count():
        raise RuntimeError("text from the store was rendered as a link or an image")


def browser_session(base: str, db: str, scratch: str, deadline: float, tally: Tally, index: int) -> None:
    """Rounds of work until `deadline`; an error is counted, kept (screenshot and page text in
    `scratch`), and the session goes on from a fresh page load."""
    from playwright.sync_api import sync_playwright

    from core.store.run_store import RunStore

    store = RunStore(db)
    rng = random.Random(index)
    csv_path = _counts_csv(scratch, index)
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        fresh = True
        while time.time() < deadline:
            action = rng.choices(["run", "link", "compare", "inspect", "upload"], [0.45, 0.15, 0.15, 0.1, 0.15])[0]
            if action == "compare" and store.count() == 0:  # an empty store has no charts
                action = "run"
            try:
                if fresh or action != "run":
                    page.goto(base)
                    wait_painted(page, 120_000)
                    _check_page(page)
                    _set_number(page, "Repeats", 1)
                    fresh = False
                if action == "run":
                    _one_click(page, store, rng, index)
                elif action == "link":
                    _run_from_link(page, base, store, rng, index)
                elif action == "compare":
                    _visit_compare(page, base)
                elif action == "inspect":
                    _visit_under_the_hood(page, base)
                else:
                    _upload_and_run(page, store, csv_path)
                fresh = action != "run"
                _check_page(page)
                with tally.lock:
                    tally.actions[action] += 1
            except Exception as exc:  # noqa: BLE001 - counted, kept for diagnosis, then carry on
                stamp = time.strftime("%H%M%S")
                shot = os.path.join(scratch, f"error-browser{index}-{stamp}.png")
                with contextlib.suppress(Exception):
                    page.screenshot(path=shot, full_page=True)
                    with open(shot.replace(".png", ".txt"), "w") as text:
                        text.write(page.inner_text("body"))
                tally.error(f"browser {index} ({action}): {type(exc).__name__}: {str(exc)[:300]} (see {shot})")
                fresh = True
        browser.close()


def _counts_csv(scratch: str, index: int) -> str:
    """A small counts table (60 x 6) as people write them, one per session."""
    rng = random.Random(1000 + index)
    path = os.path.join(scratch, f"counts-{index}.csv")
    with open(path, "w") as handle:
        handle.write(",".join(f"taxon{j}" for j in range(6)) + "\n")
        for _ in range(60):
            handle.write(",".join(str(rng.randint(0, 40)) for _ in range(6)) + "\n")
    return path


def _toggle_strategy(page, rng) -> None:
    """Opens the Run page's strategies popover and toggles one of them."""
    name = rng.choice(PAGE_STRATEGIES)
    page.get_by_role("button", name=re.compile("^Strategies")).click()
    pill = page.locator("[data-testid='stPopoverBody'] [data-testid='stButtonGroup'] button",
                        has_text=re.compile(f"^{re.escape(name)}$"))
    pill.first.click(timeout=30_000)  # a soak that cannot choose a strategy must fail, not skip it
    wait_painted(page, 120_000)
    page.keyboard.press("Escape")


def _one_click(page, store, rng, index: int) -> None:
    """New settings, one click on Run, and the wait until this session's runs are stored
    and drawn. Each session's iterations end in its own digit, so the runs it waits for
    are its own whatever the others store meanwhile."""
    iterations = rng.choice([20, 30, 40, 50, 60]) + index
    precision = rng.choice(["float32", "float64"])
    _set_number(page, "Iterations", iterations)
    page.get_by_text(precision, exact=True).click()  # at once, as a quick hand would
    wait_painted(page, 120_000)
    if rng.random() < 0.5:
        _toggle_strategy(page, rng)
    cold = page.get_by_role("switch", name="Compile from scratch")
    if cold.count() and cold.is_checked() != (rng.random() < 0.15):
        page.get_by_text("Compile from scratch", exact=True).click()  # the switch's input is drawn over
        wait_painted(page, 120_000)
    for name, typed in (("Iterations", iterations), ("Repeats", 1)):
        shown = page.get_by_role("spinbutton", name=name).input_value()
        if shown != str(typed):
            raise RuntimeError(f"{name} shows {shown} after {typed} was typed")
    _check_run_line(page, precision, iterations)
    button = page.get_by_role("button", name=re.compile(r"^(Run \d+ strateg|Run again)"))
    if not button.count():  # every strategy toggled off: choose one again
        _toggle_strategy(page, rng)
        button = page.get_by_role("button", name=re.compile(r"^(Run \d+ strateg|Run again)"))
    clicked_at = time.time()
    button.click()
    _wait_for_runs(page, store, clicked_at, iterations=iterations, precision=precision, repeats=1)


def _check_run_line(page, precision: str, iterations: int) -> None:
    """The line under the Run button (what a click runs, as the server reads the sidebar) names
    what was chosen: the precision clicked, the iterations typed and that precision's default
    tolerance (a session never types one). A box that shows one value while the server runs
    another is a lost setting, told here rather than as a run stored with other settings."""
    wanted = (precision, f"{iterations:,}", f"{FRONT_DOOR.tol_for(precision):g}")
    # The page may still be drawing the last change (Streamlit shows its running mark only after
    # a moment): a setting is lost only if the line still disagrees once the page has settled.
    deadline = time.time() + RUN_LINE_SETTLE_S
    while True:
        line = RUN_LINE.search(page.inner_text("[data-testid='stMain']"))
        if line is not None and line.groups() == wanted:
            return
        if time.time() > deadline:
            raise RuntimeError(f"the Run button's line reads {line.group(0) if line else 'nothing'!r} "
                               f"{RUN_LINE_SETTLE_S:.0f} s after {precision}, {iterations} iterations (tolerance "
                               f"{wanted[2]}) were chosen")
        page.wait_for_timeout(250)


def _run_from_link(page, base: str, store, rng, index: int) -> None:
    """A link with the tutorial's optimizer (which every runnable takes) and two runnables
    drawn from all of them, run for a fixed number of iterations."""
    iterations = rng.choice([20, 30, 40]) + index
    precision = rng.choice(["float32", "float64"])
    names = rng.sample(sorted(catalog.RUNNABLES), 2)
    page.goto(f"{base}/?optimizer=seed&tol=0&iterations={iterations}&precision={precision}&repeats=1"
              f"&strategies={','.join(names)}")
    wait_painted(page, 120_000)
    _check_page(page)
    clicked_at = time.time()
    page.get_by_role("button", name=re.compile(r"^(Run \d+ strateg|Run again)")).click()
    _wait_for_runs(page, store, clicked_at, iterations=iterations, precision=precision, repeats=1)


def _wait_for_runs(page, store, clicked_at: float, **settings) -> None:
    # Any other click would stop the run (that is how Cancel works): wait until this
    # session's runs are stored and the page offers "Run again" (every strategy of these
    # settings stored), or an error shows.
    at = time.strftime("%H:%M:%S", time.localtime(clicked_at))
    while not page.locator(PROBLEMS).count():
        stored = [r for r in store.find(**settings) if r.created_at >= clicked_at]
        if stored and page.evaluate(IDLE) and page.get_by_role("button", name="Run again").count():
            break
        if time.time() > clicked_at + 900:
            raise TimeoutError(f"the runs clicked at {at} were not all stored within 900 s")
        if not stored and time.time() > clicked_at + 60 and page.evaluate(IDLE):
            raise RuntimeError(f"the click on Run at {at} started nothing: after 60 s no run of it is stored "
                               "and the page is idle")
        if stored and time.time() > clicked_at + 60 and page.evaluate(IDLE):
            # Stored, idle, and no "Run again" for the sidebar's settings: the runs were made with others.
            differ = re.search(r"Your last runs, with settings that differ[^\n]*", page.inner_text("body"))
            raise RuntimeError(f"the runs clicked at {at} were stored with settings other than the sidebar's: "
                               f"{differ.group(0) if differ else 'the page offers no Run again'}")
        page.wait_for_timeout(500)
    wait_painted(page, 600_000)
    if not page.locator(PROBLEMS).count():
        page.wait_for_function(CHARTS_RENDERED, timeout=120_000)


def _visit_compare(page, base: str) -> None:
    """The Compare page: its table of the newest stored runs, then its charts drawn."""
    page.goto(f"{base}/compare")
    wait_painted(page, 120_000)
    page.get_by_text(re.compile(r"\d[\d,]* of [\d,]+ (matching )?runs")).wait_for(timeout=120_000)
    page.wait_for_function(CHARTS_RENDERED, timeout=120_000)


def _visit_under_the_hood(page, base: str) -> None:
    """Under the hood: Inspect (a compile on a worker), then one pitfall run live."""
    page.goto(f"{base}/under_the_hood")
    wait_painted(page, 120_000)
    page.get_by_role("button", name="Inspect").click()
    # Its figures, or an error box at once (a failed inspection shows no figures).
    page.wait_for_function(f"() => document.body.innerText.includes('FLOP / iteration') || "
                           f"document.querySelector({json.dumps(PROBLEMS)})", timeout=600_000)
    wait_painted(page, 600_000)
    _check_page(page)
    page.get_by_role("button", name="Run it live").first.click()
    died = "the worker process running it died"
    page.get_by_text(re.compile(f"Bug reproduced here|Not reproduced on this installation|{died}")).first.wait_for(
        timeout=300_000)
    if page.get_by_text(died).count():  # a kill landed on the demonstration: the page said so
        raise RuntimeError(f"pitfall interrupted: {died}")


def _upload_and_run(page, store, csv_path: str) -> None:
    """The sidebar's CSV data, a counts file uploaded, then Run on the Run page."""
    page.get_by_text("CSV", exact=True).click()
    wait_painted(page, 120_000)
    page.locator("[data-testid='stSidebar'] input[type='file']").first.set_input_files(csv_path)
    page.get_by_text(re.compile(r"Using .*n = 60 rows")).wait_for(timeout=120_000)
    wait_painted(page, 120_000)
    clicked_at = time.time()
    page.get_by_role("button", name=re.compile(r"^(Run \d+ strateg|Run again)")).click()
    _wait_for_runs(page, store, clicked_at, n=60, p=6)


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


def worker_pids(server_pid: int) -> list[int]:
    """The server's worker processes (spawned by its cluster's nannies)."""
    import psutil

    try:
        children = psutil.Process(server_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child.pid)
    return found


def killer(server_pid: int, every_s: float, deadline: float, tally: Tally, stop: threading.Event) -> None:
    """SIGKILL one of the server's workers every `every_s` seconds."""
    rng = random.Random(7)
    while not stop.wait(every_s) and time.time() < deadline - 60:
        pids = worker_pids(server_pid)
        if pids:
            victim = rng.choice(pids)
            with tally.lock:
                tally.kills.append(time.time())
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
            print(f"  killed worker pid {victim}", flush=True)


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


def map_count(pid: int) -> int:
    with open(f"/proc/{pid}/maps", "rb") as maps:
        return sum(1 for _ in maps)


def native_fit_libraries(pid: int) -> set[str]:
    """JAX's, jaxlib's and torch's shared libraries that process `pid` has mapped."""
    with open(f"/proc/{pid}/maps") as maps:
        return {found.group(0) for found in map(NATIVE_FIT_LIBRARIES.search, maps) if found}


def healthy(base: str, process, timeout_s: float) -> str | None:
    """None when the server lives and answers its health check in time, else why not."""
    if process.poll() is not None:
        return f"the server exited with status {process.returncode}"
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=timeout_s) as answer:
            return None if answer.status == 200 else f"the health check answered {answer.status}"
    except OSError as exc:
        return f"the server did not answer its health check within {timeout_s:.0f} s ({exc})"


def slope_per_min(samples: list[dict], key: str, after_s: float) -> float:
    """Least-squares slope of `key` once warmed up (start-up loads the pages and the first
    runs; what matters on a shared server is the creep after that)."""
    points = [(sample["t"] / 60, sample[key]) for sample in samples if sample["t"] >= after_s]
    if len(points) < 2:
        return float("nan")
    minutes, values = zip(*points)
    return statistics.linear_regression(minutes, values).slope


def timed_windows(runs) -> list[tuple[float, float]]:
    """When each unit of the device queue held the device, in order: a run alone, or runs
    timed together (one `timed_with` mark), which share one window by design."""
    spans: dict[str, tuple[float, float]] = {}
    for run in runs:
        if run.timed_end:
            key = run.timed_with or f"run {run.id}"
            start, end = spans.get(key, (run.timed_start, run.timed_end))
            spans[key] = (min(start, run.timed_start), max(end, run.timed_end))
    return sorted(spans.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--browsers", type=int, default=3, help="concurrent browser sessions")
    parser.add_argument("--cli", type=int, default=1, help="concurrent command-line loops")
    parser.add_argument("--kill-every", type=float, default=300.0, help="seconds between worker kills (0: none)")
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between health checks and samples")
    parser.add_argument("--health-timeout", type=float, default=30.0)
    parser.add_argument("--max-rss-mb", type=float, default=1500.0, help="the server's memory may not pass this")
    parser.add_argument("--max-growth-mb-per-min", type=float, default=5.0,
                        help="the server's memory may not keep growing faster than this after 5 minutes")
    parser.add_argument("--max-maps-growth-per-min", type=float, default=50.0,
                        help="nor its memory mappings (a leak of executables shows here first)")
    args = parser.parse_args(argv)
    # Stopped with SIGTERM (kill, a CI timeout), unwind like Ctrl-C: the served dashboard and
    # its workers are stopped on the way out instead of left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from core.store.run_store import RunStore

    scratch = tempfile.mkdtemp(prefix="plnlab-soak-")
    env = {"PLNLAB_DB": os.path.join(scratch, "runs.sqlite3"), "PLNLAB_JAX_CACHE": os.path.join(scratch, "jax"),
           "PLNLAB_QUEUE_DIR": os.path.join(scratch, "queue")}
    full_env = {**os.environ, **env}
    tally = Tally()
    samples: list[dict] = []
    failure = None
    import_poisoned_run(env["PLNLAB_DB"], scratch)
    workers_seen: set[int] = set()
    stop = threading.Event()
    with served_app(env, log_path=os.path.join(scratch, "server.log")) as (base, server):
        start = time.time()
        deadline = start + 60 * args.minutes
        threads = [threading.Thread(target=browser_session, args=(base, env["PLNLAB_DB"], scratch, deadline, tally, i),
                                    daemon=True) for i in range(args.browsers)]
        threads += [threading.Thread(target=cli_session, args=(full_env, deadline, tally, i), daemon=True)
                    for i in range(args.cli)]
        if args.kill_every > 0:
            threads.append(threading.Thread(target=killer, args=(server.pid, args.kill_every, deadline, tally, stop),
                                            daemon=True))
        for thread in threads:
            thread.start()
        store = RunStore(env["PLNLAB_DB"])
        first_workers = None
        sessions = threads[:args.browsers + args.cli]
        while any(thread.is_alive() for thread in sessions) and time.time() < deadline + 900:
            failure = healthy(base, server, args.health_timeout)
            if failure:
                break
            pids = worker_pids(server.pid)
            first_workers = first_workers or len(pids)  # the cluster starts as the first page opens
            workers_seen.update(pids)
            samples.append({"t": time.time() - start, "rss": resident_mb(server.pid), "maps": map_count(server.pid),
                            "runs": store.count(), "workers": len(pids)})
            last = samples[-1]
            print(f"{last['t'] / 60:6.1f} min  server RSS {last['rss']:7.1f} MB  mappings {last['maps']:6,}  "
                  f"workers {last['workers']} ({len(workers_seen)} seen)  runs stored {last['runs']:5d}  "
                  f"errors {len(tally.errors)}  expected interruptions {len(tally.expected)}", flush=True)
            if last["rss"] > args.max_rss_mb:
                failure = f"the server's memory reached {last['rss']:.0f} MB, past {args.max_rss_mb:.0f} MB"
                break
            if native := native_fit_libraries(server.pid):
                failure = f"the server mapped the fits' native libraries: {sorted(native)[:3]}"
                break
            time.sleep(args.sample_s)
        stop.set()
    db_bytes = sum(os.path.getsize(p) for p in (env["PLNLAB_DB"], env["PLNLAB_DB"] + "-wal") if os.path.exists(p))
    final = RunStore(env["PLNLAB_DB"])
    runs = [r for r in final.list() if r.error != POISON["error"]]
    left_in_flight = len(final.in_flight())
    statuses = {status: sum(r.status == status for r in runs) for status in {r.status for r in runs}}
    diverged = [f"#{r.id} {r.strategy} {r.optimizer} from {r.init}, {r.precision}, on {r.dataset}"
                for r in runs if r.status == "diverged"]
    windows = timed_windows(runs)
    overlaps = sum(end > next_start for (_, end), (next_start, _) in zip(windows, windows[1:]))
    rss_growth = slope_per_min(samples, "rss", after_s=300)
    maps_growth = slope_per_min(samples, "maps", after_s=300)
    restarts = max(0, len(workers_seen) - (first_workers or 0))
    print("\nsoak summary")
    print(f"  duration               {(samples[-1]['t'] if samples else 0) / 60:.1f} min, {args.browsers} browser "
          f"sessions, {args.cli} CLI loops, a worker killed every {args.kill_every:.0f} s")
    print(f"  runs stored            {len(runs)} ({statuses}); page actions {tally.actions}, commands {tally.commands}")
    print(f"  errors                 {len(tally.errors)}")
    print(f"  diverged               {len(diverged)}" + "".join(f"\n    {line}" for line in diverged[:10]))
    for error in tally.errors[:20]:
        print(f"    {error}")
    print(f"  worker kills           {len(tally.kills)}; expected interruptions {len(tally.expected)}; "
          f"worker restarts {restarts} ({len(workers_seen)} worker processes seen)")
    print(f"  timed windows overlap  {overlaps} (of {len(windows)} windows; runs timed together are one)")
    print(f"  left in flight         {left_in_flight}")
    print(f"  scratch                {scratch}")
    print(f"  store                  {db_bytes / 1e6:.2f} MB, integrity "
          f"{'ok' if final.integrity_ok() else 'FAILED'}")
    if samples:
        settled = [s for s in samples if s["t"] >= 300]
        # Too short a soak has no samples past the warm-up: its growth is not measured, and it
        # says so (only --max-rss-mb held it) rather than print "nan" as if it were a figure.
        unmeasured = "not measured (a soak of 6 minutes or more measures it; only --max-rss-mb held this one)"
        after_warm_up = f"{settled[0]['rss']:.0f} MB" if settled else "-"
        print(f"  server RSS             first {samples[0]['rss']:.0f} MB, after 5 min {after_warm_up}, "
              f"last {samples[-1]['rss']:.0f} MB, max {max(s['rss'] for s in samples):.0f} MB; growth after 5 min "
              + (unmeasured if math.isnan(rss_growth) else f"{rss_growth:.2f} MB/min"))
        print(f"  server mappings        first {samples[0]['maps']:,}, last {samples[-1]['maps']:,}, "
              f"max {max(s['maps'] for s in samples):,}; growth after 5 min "
              + ("not measured" if math.isnan(maps_growth) else f"{maps_growth:.1f}/min"))
        every = max(1, len(samples) // 12)  # about a dozen points whatever the duration
        print("  over time (min: RSS MB / mappings / workers): " + "; ".join(
            f"{s['t'] / 60:.0f}: {s['rss']:.0f} / {s['maps']:,} / {s['workers']}" for s in samples[::every]))
    if failure is None and tally.errors:
        failure = f"{len(tally.errors)} unexpected errors"
    if failure is None and diverged:
        # Every run here is a front door's defaults, or the tutorial's optimizer by a link: each
        # must run where its optimizer converges (a start the optimizer cannot take is a defect).
        failure = f"{len(diverged)} runs diverged, e.g. {diverged[0]}"
    if failure is None and rss_growth > args.max_growth_mb_per_min:
        failure = f"the server's memory kept growing: {rss_growth:.2f} MB/min after 5 minutes"
    if failure is None and maps_growth > args.max_maps_growth_per_min:
        failure = f"the server's memory mappings kept growing: {maps_growth:.1f}/min after 5 minutes"
    if failure is None and len(tally.expected) > len(tally.kills):
        failure = (f"{len(tally.expected)} runs interrupted by {len(tally.kills)} worker kills: a kill must cost "
                   "only the run its worker was running")
    if failure is None and (overlaps or left_in_flight):
        failure = f"{overlaps} overlapping timed windows, {left_in_flight} runs left in flight"
    print(f"\nsoak {'FAILED: ' + failure if failure else 'passed'}")
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
