"""One key for a run under way: its in-flight note's, carried by its device-queue ticket and
its cluster task, so that a page lists each run once."""

import threading

from core.coordination import under_way
from core.coordination.device_queue import DeviceQueue, Ticket, one_per_run


def test_a_ticket_names_the_run_its_thread_serves_and_an_outer_run_stays(tmp_path):
    queue = DeviceQueue(tmp_path)
    with queue.hold("cpu", "measuring", "test"):
        assert [t.run for t in queue.entries("cpu")] == [""]  # work of no run
    with under_way.serving("note-a") as key, queue.hold("cpu", "scan", "test"):
        assert key == "note-a" and [t.run for t in queue.entries("cpu")] == ["note-a"]
        # A task's own stored runs (a benchmark's, in a scratch store) wait in its name.
        with under_way.serving("note-b") as inner:
            assert inner == "note-a" and under_way.current() == "note-a"
    assert under_way.current() == ""


def test_each_thread_serves_its_own_run():
    seen = {}

    def other():
        seen["other"] = under_way.current()

    with under_way.serving("note-a"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        seen["mine"] = under_way.current()
    assert seen == {"other": "", "mine": "note-a"}


def _ticket(name: str, run: str, started: float | None = None) -> Ticket:
    return Ticket(name, "cpu", name, "test", "h", 1, 1.0, started, run=run)


def test_a_run_on_the_board_and_in_the_host_queue_is_listed_once():
    board = [_ticket("plnlab-fit-note-a", "note-a", 2.0), _ticket("plnlab-fit-note-b", "note-b")]
    host = [_ticket("worker's", "note-a", 2.5), _ticket("command line", "note-c", 3.0), _ticket("measuring", "")]
    listed = one_per_run(board, host)
    assert [t.ticket for t in listed] == ["plnlab-fit-note-a", "plnlab-fit-note-b", "command line", "measuring"]


def test_notes_timed_together_are_served_under_their_batchs_key():
    batch, keys = under_way.note_keys(3)
    assert len(set(keys)) == 3 and {under_way.batch_of(key) for key in keys} == {batch}
    assert under_way.batch_of("0123abcd") == "0123abcd"  # a note written before batches: its own
