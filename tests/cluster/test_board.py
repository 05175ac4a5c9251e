"""The board: what the cluster is busy with, as one submitter hears it and the scheduler says."""

from core.cluster.board import Board
from core.cluster.worker_setup import resource


class _Client:
    """The two calls a board makes of its client: the scheduler's tasks are set by the test."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, str, tuple[str, ...]]] = []

    def subscribe_topic(self, topic, handler) -> None:
        self.handler = handler

    def run_on_scheduler(self, function):
        return list(self.tasks)


def test_a_task_heard_to_end_leaves_the_board_though_the_scheduler_still_lists_it(monkeypatch):
    monkeypatch.setattr("core.cluster.board.TASKS_TTL_S", 0.0)  # every look asks the scheduler
    client = _Client()
    board = Board(client)
    key = "plnlab-fit-note"
    client.tasks = [(key, "processing", (resource("cpu"),))]
    client.handler((0.0, {"key": key, "kind": "queued", "label": "scan · oaks x1 · float32", "run": "note"}))
    client.handler((0.0, {"key": key, "token": "note", "kind": "started", "worker": "tls://w:1"}))
    (entry,) = board.entries("cpu")
    assert entry.started_at is not None and entry.run == "note"
    client.handler((0.0, {"key": key, "token": "note", "kind": "ended"}))
    # The scheduler lists a finished task as processing until its result has gone back: it read
    # "busy: starting; 1 waiting" after the run, until the page was opened again.
    assert board.entries("cpu") == []
    client.tasks = [(key, "memory", (resource("cpu"),))]
    assert board.entries("cpu") == []
