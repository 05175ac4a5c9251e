"""Why a function compiled (again), in JAX's own words, with the time of each stage.

Under `watch()`, JAX explains each tracing-cache miss (`jax.explain_cache_misses`: which
argument changed, a static value, a shape, a dtype, or a function object never seen) and
logs each compile's stages (`jax.log_compiles`: tracing, lowering to StableHLO, XLA's
compilation). `read(messages)` turns those log lines into one `Compile` per compile.

The types and the reading are plain Python: a pitfall's result carries them to the
dashboard's server, which never imports JAX; `watch` imports it when called, on a worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import threading
from collections.abc import Iterable, Iterator

_MISS = re.compile(r"TRACING CACHE MISS at (?P<where>\S+) \((?P<caller>[^)]*)\):\s*(?P<why>.*)", re.S)
_TRACED = re.compile(r"Finished tracing (?P<name>.+?) for jit in (?P<s>[\d.e+-]+) sec")
_LOWERED = re.compile(r"Finished jaxpr to MLIR module conversion jit\((?P<name>.+?)\) in (?P<s>[\d.e+-]+) sec")
_COMPILED = re.compile(r"Finished XLA compilation of jit\((?P<name>.+?)\) in (?P<s>[\d.e+-]+) sec")
# Messages longer than this are cut: an explanation lists every differing leaf of a pytree.
MAX_WHY_CHARS = 600


@dataclasses.dataclass(frozen=True)
class Compile:
    """One compile of a jitted function.

    Attributes:
        function: its name as JAX logs it ("<lambda>", "step").
        why: JAX's explanation of the cache miss that caused it, e.g. "never seen
            function" or "different input pytree: ... Static(val=2) and before
            Static(val=1)"; "" when JAX gave none.
        where: the call site, "file:line:column" (the file's name alone, as in `why`).
        trace_s, lower_s, compile_s: seconds spent tracing to a jaxpr, lowering to
            StableHLO and compiling with XLA (None where JAX logged no such stage: a
            compile served by a cache).
    """

    function: str
    why: str = ""
    where: str = ""
    trace_s: float | None = None
    lower_s: float | None = None
    compile_s: float | None = None


# An absolute path: shown as its file's name (a page must not show the server's folders).
_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:]+/)+([^\s/:]+)")


def _tidy(why: str) -> str:
    lines = [line.strip() for line in why.strip().splitlines() if line.strip()]
    text = _PATH.sub(r"\1", " ".join(lines))
    return text if len(text) <= MAX_WHY_CHARS else text[:MAX_WHY_CHARS - 1] + "…"


def read(messages: Iterable[str]) -> list[Compile]:
    """One `Compile` per traced function in JAX's log `messages`, in order: a cache miss's
    explanation opens one, the stages that follow for the same function fill it."""
    found: list[dict] = []
    pending_why: dict | None = None
    for message in messages:
        if miss := _MISS.search(message):
            pending_why = {"why": _tidy(miss["why"]), "where": _PATH.sub(r"\1", miss["where"])}
        elif traced := _TRACED.search(message):
            found.append({"function": traced["name"], "trace_s": float(traced["s"]), **(pending_why or {})})
            pending_why = None
        else:
            for pattern, field in ((_LOWERED, "lower_s"), (_COMPILED, "compile_s")):
                if (stage := pattern.search(message)) is not None:
                    latest = next((entry for entry in reversed(found) if entry["function"] == stage["name"]), None)
                    if latest is not None and field not in latest:
                        latest[field] = float(stage["s"])
    return [Compile(**entry) for entry in found]


class _Collected(logging.Handler):
    """JAX's messages, kept per thread: each watch reads those of its own thread (JAX logs a
    compile in the thread that asked for it), whatever other threads compile meanwhile."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: dict[int, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        kept = self.messages.get(record.thread)
        if kept is not None:
            kept.append(record.getMessage())


_lock = threading.Lock()
_handler = _Collected()
_saved: tuple[int, bool] | None = None  # the logger's level and propagation before the first watch


@contextlib.contextmanager
def watch() -> Iterator[list[Compile]]:
    """Collect the compiles of the block, explained; the list is filled when it ends.

    JAX's messages go to its own logger only while any watch is open: they are taken off
    before they reach the root logger (a worker's log would fill with one warning per
    compile), and the logger is put back as it was when the last watch ends."""
    # Deferred: the server imports this module for its types and never loads JAX.
    import jax

    global _saved
    logger = logging.getLogger("jax")
    me = threading.get_ident()
    compiles: list[Compile] = []
    with _lock:
        if not _handler.messages:
            _saved = (logger.level, logger.propagate)
            logger.addHandler(_handler)
            logger.setLevel(logging.WARNING)
            logger.propagate = False
        outer = _handler.messages.setdefault(me, [])  # a watch inside a watch shares the thread's list
        start = len(outer)
    try:
        with jax.explain_cache_misses(True), jax.log_compiles(True):
            yield compiles
    finally:
        with _lock:
            mine = _handler.messages[me][start:]
            if start == 0:
                del _handler.messages[me]
            if not _handler.messages and _saved is not None:
                logger.removeHandler(_handler)
                logger.setLevel(_saved[0])
                logger.propagate = _saved[1]
                _saved = None
        compiles.extend(read(mine))
