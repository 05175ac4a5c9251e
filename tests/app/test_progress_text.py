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
