"""The notice of a cancelled or stopped run, whichever order its two threads say it in.

A click that stops a run starts the next script at once in another thread, while the stopped
script is still unwinding: the stopped run's own note (`RunNotices.stopped`) may come before
or after the click's (`cancelled`), after the new script has shown the page, or after it has
begun the same work again.
"""

from pages.ui.run_notices import RunNotices

NOTHING = "before any run finished; nothing was stored."


def test_a_cancel_click_is_said_whether_the_stopped_run_unwinds_before_or_after_it():
    said = []
    for stopped_first in (True, False):
        notices = RunNotices()
        token = notices.started("Running 2 strategies")
        if stopped_first:
            notices.stopped(token, "Running 2 strategies")
            notices.ended(token)
        notices.cancelled("Running 2 strategies")  # the click's callback, in the next script
        said.append(notices.take())
        notices.stopped(token, "Running 2 strategies")  # late, under load
        notices.ended(token)
        assert notices.take() is None
    assert said == [f"Running 2 strategies: cancelled, {NOTHING}"] * 2


def test_a_run_stopped_by_another_click_is_said_by_the_next_script_once():
    notices = RunNotices()
    token = notices.started("Timing steps 1 and 2")
    # Previous clicked: the next script shows the page before the stopped run has unwound.
    assert notices.take() == f"Timing steps 1 and 2: stopped by another click while it ran, {NOTHING}"
    notices.stopped(token, "Timing steps 1 and 2")
    notices.ended(token)
    assert notices.take() is None  # not again, on whatever page comes next


def test_a_stopped_run_that_unwound_first_is_said_once():
    notices = RunNotices()
    token = notices.started("Running 2 strategies")
    notices.stopped(token, "Running 2 strategies")
    notices.ended(token)
    assert notices.take().startswith("Running 2 strategies: stopped by another click")
    assert notices.take() is None


def test_a_stopped_run_counts_what_it_had_stored():
    notices = RunNotices()
    token = notices.started("Sweeping 4 sizes")
    notices.progressed(token, 2)
    notices.stopped(token, "Sweeping 4 sizes")
    assert notices.take() == ("Sweeping 4 sizes: stopped by another click while it ran; the 2 runs that had "
                              "finished are stored, what was under way was not.")


def test_work_done_again_by_the_next_script_is_not_said_stopped():
    # Story's Next during a timing: the new script times the steps again, before the stopped
    # one has unwound or after.
    for stopped_first in (True, False):
        notices = RunNotices()
        token = notices.started("Timing steps 1 and 2")
        if stopped_first:
            notices.stopped(token, "Timing steps 1 and 2")
        notices.redone()
        again = notices.started("Timing steps 1, 2 and 3")
        notices.stopped(token, "Timing steps 1 and 2")
        notices.ended(token)
        notices.progressed(token, 5)  # the old run's count does not reach the new one's
        notices.progressed(again, 3)
        notices.ended(again)
        assert notices.take() is None and notices.stored == 3


def test_a_run_that_finished_leaves_nothing_to_say():
    notices = RunNotices()
    token = notices.started("Running 3 strategies")
    notices.progressed(token, 3)
    notices.ended(token)
    assert notices.take() is None


def test_a_run_that_went_on_without_its_browser_is_said_so_not_stopped():
    """A browser that reconnects to its session is told the run went on, even where the
    reconnect's script read the run as stopped before the stopped script had unwound."""
    for said_stopped_first in (True, False):
        notices = RunNotices()
        token = notices.started("Running 2 strategies")
        if said_stopped_first:
            notices.pending_stop()
        notices.went_on(token, "Running 2 strategies")
        notices.ended(token)
        notice = notices.take()
        assert notice.startswith("Running 2 strategies: went on after this page lost its connection"), notice
        assert "stored as they finish" in notice
        assert notices.take() is None
