"""Work that goes on without its watcher (`core.run.watched`): the posts in order, the outcome
or the error, a stop that reaches the work, and work let go that finishes on its own."""

import threading

import pytest

from core.run.watched import Watched


def _posts(work: Watched) -> list:
    return [post for post in work.posts(wake_s=0.01) if post is not None]


def test_the_posts_come_in_order_and_then_the_outcome():
    def work(post, cancel):
        for step in range(5):
            post(step)
        return "done"

    watched = Watched(work, name="test")
    assert _posts(watched) == [0, 1, 2, 3, 4]
    assert watched.result() == "done" and watched.done


def test_what_the_work_raised_is_raised_to_its_watcher():
    def work(post, cancel):
        post("before")
        raise ValueError("broken")

    watched = Watched(work, name="test")
    assert _posts(watched) == ["before"]
    with pytest.raises(ValueError, match="broken"):
        watched.result()


def test_a_watcher_that_waits_with_no_post_wakes():
    release = threading.Event()
    watched = Watched(lambda post, cancel: release.wait(5), name="test")
    wakes = watched.posts(wake_s=0.01)
    assert next(wakes) is None  # no post yet: woken, to draw or be stopped
    release.set()
    assert list(wakes) in ([], [None])
    assert watched.result() is True


def test_stop_reaches_the_work_through_its_cancel_event():
    started = threading.Event()

    def work(post, cancel):
        started.set()
        if not cancel.wait(5):
            return "ran to its end"
        post("after the stop")  # nobody reads it now
        return "stopped"

    watched = Watched(work, name="test")
    started.wait(5)
    watched.stop()
    assert watched.result() == "stopped"
    assert _posts(watched) == []


def test_work_let_go_finishes_on_its_own_without_keeping_its_posts():
    go_on = threading.Event()
    stored = []

    def work(post, cancel):
        post("seen")
        go_on.wait(5)
        for step in range(1000):
            post(step)
        stored.append("result")  # what the work does at its end (a run: store its results)
        return len(stored)

    watched = Watched(work, name="test")
    assert next(post for post in watched.posts(wake_s=0.01) if post is not None) == "seen"
    watched.let_go()
    go_on.set()
    assert watched.result() == 1 and stored == ["result"]
    assert not watched.cancel.is_set()
    assert _posts(watched) == []  # the thousand posts after letting go were not kept
