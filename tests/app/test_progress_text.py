"""What a run's progress bar on a page says (`pages.ui.running._Reporter`)."""


def test_a_fit_with_a_tolerance_reads_its_iteration_of_at_most_its_cap(monkeypatch):
    """"41/500" read as a tenth done for a fit that converges at 49; a fit with no tolerance,
    which runs every iteration, keeps "41/500"."""
    from core.run.progress import Progress
    from pages.ui import running

    monkeypatch.setattr(running, "refresh_queue_caption", lambda now=False: None)

    class Bar:
        def progress(self, fraction, text):
            self.text = text

    said = {}
    for stops_early in (True, False):
        bar = Bar()
        reporter = running._Reporter(bar, None, "scan", [], 0, "scan", 3, stops_early)
        reporter(Progress("first_call", 41, 500))
        said[stops_early] = bar.text
    assert said[True] == "**scan**: first call: iteration 41 of at most 500"
    assert said[False] == "**scan**: first call: iteration 41/500"


def test_a_quick_fits_reports_redraw_its_bar_a_few_times_a_second_its_last_always(monkeypatch):
    """A quick fit's repeats report dozens a second: each a message to the browser and a redraw
    there, on the machine that times the runs."""
    from core.run.progress import Progress
    from pages.ui import running

    monkeypatch.setattr(running, "refresh_queue_caption", lambda now=False: None)
    clock = iter(0.001 * k for k in range(1_000))  # a report a millisecond
    monkeypatch.setattr(running.time, "perf_counter", lambda: next(clock))

    class Bar:
        texts: list[str] = []

        def progress(self, fraction, text):
            self.texts.append(text)

    bar = Bar()
    reporter = running._Reporter(bar, None, "scan", [], 0, "scan", 3)
    for done in range(200):
        reporter(Progress("repeat", done, 200))
    assert "repeat 1/200 " in bar.texts[0] and "repeat 200/200 " in bar.texts[-1]
    assert len(bar.texts) <= 2 + 0.2 * running.BAR_REDRAWS_PER_S
    reporter(Progress("done", 1, 1))  # a new phase: drawn at once
    assert bar.texts[-1] == "**scan**: " + running.PHASES["done"].text
