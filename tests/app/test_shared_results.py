"""Slow work kept for every session (`pages.ui.shared_results`), and the rule that made it:
nothing that draws its wait in the queue is cached by Streamlit, which would replay the
drawing on a hit into a slot that no longer exists (CacheReplayClosureError)."""

import ast
import pathlib
import threading
import time

import pytest

from pages.ui import shared_results

from project import ROOT


def test_a_value_is_made_once_and_kept_per_key():
    made = []
    for key in ("a", "b", "a"):
        assert shared_results.kept("t-once", key, lambda k=key: made.append(k) or k.upper(), max_entries=4) \
            == key.upper()
    assert made == ["a", "b"]
    shared_results.forget("t-once")
    shared_results.kept("t-once", "a", lambda: made.append("again"), max_entries=4)
    assert made[-1] == "again"


def test_the_least_recently_used_goes_beyond_the_bound():
    made = []
    for key in ("a", "b", "a", "c", "a", "b"):  # "b" was dropped for "c"; "a" was kept by its use
        shared_results.kept("t-bound", key, lambda k=key: made.append(k), max_entries=2)
    assert made == ["a", "b", "c", "b"]


def test_a_failure_keeps_nothing():
    with pytest.raises(RuntimeError):
        shared_results.kept("t-fail", "k", lambda: (_ for _ in ()).throw(RuntimeError("worker died")), 4)
    assert shared_results.kept("t-fail", "k", lambda: 7, 4) == 7


def test_two_sessions_asking_at_once_share_one_piece_of_work():
    made, results = [], []

    def slow():
        made.append(1)
        time.sleep(0.3)
        return "inspection"

    sessions = [threading.Thread(target=lambda: results.append(shared_results.kept("t-race", "k", slow, 4)))
                for _ in range(3)]
    for session in sessions:
        session.start()
    for session in sessions:
        session.join()
    assert made == [1] and results == ["inspection"] * 3


def _streamlit_cached(decorator) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr in ("cache_data", "cache_resource")


def test_no_streamlit_cached_function_takes_a_progress_callback():
    offending = []
    for path in sorted(pathlib.Path(ROOT, "pages").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(_streamlit_cached(d) for d in node.decorator_list):
                names = [a.arg for a in node.args.args + node.args.kwonlyargs]
                if any("progress" in name for name in names):
                    offending.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not offending, offending
