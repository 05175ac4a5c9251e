"""The notice of a cancelled or stopped run, whichever order its two threads write it in.

A click that stops a run starts the next script at once in another thread, while the stopped
script is still unwinding: the stopped run's own note (`note_stopped`) may come before or
after the click's (`note_cancelled`), or after the new script has begun the same work again.
"""

from pages.ui.running import note_cancelled, note_redone, note_stopped

STOPPED = "(stopped by leaving the page or changing a setting while it ran)"


def test_a_cancel_click_is_said_whether_the_stopped_run_unwinds_before_or_after_it():
    before = {"run": "a"}
    note_stopped(before, "a", "Running 2 strategies")
    note_cancelled(before, "Running 2 strategies")
    late = {"run": "a"}  # under load: the click's script runs first
    note_cancelled(late, "Running 2 strategies")
    note_stopped(late, "a", "Running 2 strategies")
    assert before["title"] == late["title"] == "Running 2 strategies"


def test_a_run_stopped_by_another_click_is_said_once():
    notes = {"run": "a"}
    note_stopped(notes, "a", "Running 2 strategies")
    assert notes["title"] == f"Running 2 strategies {STOPPED}"
    notes.pop("title")  # shown
    note_stopped(notes, "a", "Running 2 strategies")  # the same stop, seen again
    assert "title" not in notes


def test_a_later_run_stopped_in_turn_is_said_again():
    notes = {"run": "a"}
    note_cancelled(notes, "Step 2")
    notes.pop("title")
    notes["run"] = "b"
    note_stopped(notes, "b", "Step 3")
    assert notes["title"] == f"Step 3 {STOPPED}"


def test_work_done_again_by_the_next_script_is_not_said_stopped():
    # Story's Next during a timing: the new script times the steps again before the stopped
    # one has unwound, or after.
    early = {"run": "a"}
    note_stopped(early, "a", "Timing steps 1 and 2")
    note_redone(early)
    assert "title" not in early
    notes = {"run": "a"}
    note_redone(notes)
    note_stopped(notes, "a", "Timing steps 1 and 2")
    assert "title" not in notes
