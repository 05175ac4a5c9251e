"""Work that goes on without its watcher: a thread does it and posts what happens; a watcher
reads the posts and draws them, and either stops the work or lets it go.

A page's script is stopped by a click elsewhere and by its browser going away (a closed tab,
a lost connection) alike. Work waited for in the script stopped with it, so a closed tab lost
a run of minutes without a trace. Done in a thread of the server's instead, the work outlives
the script where its watcher lets it go (`let_go`): it stores its results as it would have,
and a click elsewhere still stops it (`stop`: the work's cancel event, which the run's task
hears). Free of Streamlit: the page decides which of the two a stop of its script is
(`pages.ui.running`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

# How often a watcher waiting for posts wakes with none (`posts`): each wake is a point where
# the caller may draw, and so where its own stop can reach it.
WAKE_S = 0.25


class Watched:
    """`work(post, cancel)` in a thread of its own, started at once. `post(item)` hands an item
    to the watcher; `cancel` is set by `stop`. What `work` returns is `outcome`, what it raised
    `error` (then raised again by `result`).

    Args:
        work: the work; it should return soon after `cancel` is set.
        name: the thread's name (seen in the server's log and thread dumps).
    """

    def __init__(self, work: Callable[[Callable[[Any], None], threading.Event], Any], name: str) -> None:
        self.cancel = threading.Event()
        self.outcome: Any = None
        self.error: BaseException | None = None
        self._posts: queue.Queue = queue.Queue()
        self._done = threading.Event()
        self._let_go = threading.Event()
        self._work = work
        self.thread = threading.Thread(target=self._body, name=name, daemon=True)
        self.thread.start()

    def _body(self) -> None:
        try:
            self.outcome = self._work(self._post, self.cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the watcher, who raises it
            self.error = exc
        finally:
            self._done.set()
            self._posts.put(_END)

    def _post(self, item: Any) -> None:
        if not self._let_go.is_set():  # nobody reads them any more: not kept
            self._posts.put(item)

    def posts(self, wake_s: float = WAKE_S) -> Iterator[Any]:
        """The work's posts in order, as they come, until it ends; None where `wake_s` passed
        without one."""
        while True:
            try:
                item = self._posts.get(timeout=wake_s)
            except queue.Empty:
                yield None
                continue
            if item is _END:
                return
            yield item

    def result(self) -> Any:
        """What the work returned, once it has ended (after `posts`); what it raised, raised."""
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.outcome

    def stop(self) -> None:
        """Asks the work to stop (its `cancel` event) and lets go of its posts."""
        self.cancel.set()
        self._let_go.set()

    def let_go(self) -> None:
        """Leaves the work to finish on its own; its posts are no longer kept."""
        self._let_go.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()


_END = object()
