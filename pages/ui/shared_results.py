"""Results of slow work that is not a run (an inspection, a roofline analysis, a machine's
peaks), kept once per server process for every session, by key, a bounded number per kind.

Not `st.cache_data`: it records every element a cached function draws and replays them on a
hit, and this work draws its wait in the queue into a slot of the calling page
(`running.queue_notice`). After a wait, every later hit, the very next rerun of the same
page included, failed with CacheReplayClosureError (the slot the recorded notice was drawn
on belongs to a run that has ended), so Under the hood broke on a busy server. Here nothing
is recorded: a hit returns the value, and the page draws what it draws.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_kinds: dict[str, collections.OrderedDict] = {}
# One lock per (kind, key) while its value is made: a second session asking for the same
# inspection waits for the first's instead of queueing the same work again.
_making: dict[tuple[str, Hashable], threading.Lock] = {}


def kept(kind: str, key: Hashable, make: Callable[[], T], max_entries: int) -> T:
    """The value kept for `key` among `kind`'s, else `make()`'s, kept (the least recently
    used of `kind` dropped beyond `max_entries`). An exception from `make` keeps nothing."""
    with _lock:
        found = _kinds.setdefault(kind, collections.OrderedDict())
        if key in found:
            found.move_to_end(key)
            return found[key]
        making = _making.setdefault((kind, key), threading.Lock())
    with making:
        with _lock:
            if key in found:  # made by another session while this one waited
                found.move_to_end(key)
                return found[key]
        try:
            value = make()
            with _lock:
                found[key] = value
                while len(found) > max_entries:
                    found.popitem(last=False)
            return value
        finally:
            with _lock:
                _making.pop((kind, key), None)


def peek(kind: str, key: Hashable) -> object | None:
    """The value kept for `key` among `kind`'s, or None: nothing is made."""
    with _lock:
        return _kinds.get(kind, {}).get(key)


def forget(kind: str) -> None:
    """Drops every value kept of `kind` (e.g. after the peaks were measured again)."""
    with _lock:
        _kinds.pop(kind, None)
