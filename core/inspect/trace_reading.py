"""Reading a profiler trace into what one iteration of each strategy is made of.

The trace is a list of events (plane, line, name, start, duration), as `jax.profiler`'s
`ProfileData` gives them; each strategy's run is marked by an annotation event named
`ANNOTATION + strategy`. What the names mean (jaxlib 0.10.1, checked on CPU):

- a launch: `...LoadedExecutable::ExecuteHelper...` on the calling thread, one per
  executable run from the host (a jitted call that reaches XLA; a compiled loop is one);
- a jit call: `PjitFunction(name)`, a call of a jitted function from Python (eager's ops
  are each one);
- an XLA program running: `ThunkExecutor::Execute` (CPU), and the ops inside it, named as
  HLO instructions (`convert_dot_fusion.1`, `copy.73`); a small program runs on the
  calling thread, its ops inside its launch (eager's, at oaks x1); on a GPU, the kernels of the
  device planes (`/device:GPU:0`), their line "XLA Ops" where there is one;
- loops and branches (`while.76`, `conditional.3`) hold other ops: they count as XLA
  running, not as ops of their own, so that an op's time is not counted twice.

Pure Python: the worker reads the trace, the tests feed it events.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from core.inspect.trace_findings import GAP, LAUNCH_LANE, PARTS, REST, XLA_LANE, OpTime, PartTime, Span, StrategyTrace

ANNOTATION = "plnlab strategy: "
# Bars drawn per strategy: eager's iteration at oaks x1 has a few hundred.
MAX_SPANS = 1500
TOP_OPS = 6

_LAUNCH = re.compile(r"LoadedExecutable::Execute(Helper\w*)?$")
_JIT_CALL = re.compile(r"^PjitFunction\(")
_PROGRAM = "ThunkExecutor::Execute"
# An HLO instruction's name: lower case, digits, "_" and "-", an optional ".N".
_HLO_NAME = re.compile(r"^[a-z][a-z0-9_\-]*(\.\d+)?$")
# Control flow, whose event on a CPU spans the ops of its body: JAX names a `lax.cond`'s
# instruction "cond.N" (counted as an op, a jit_step's choice of direction read as 10% of its
# iteration on top of the ops it ran).
_CONTAINER = re.compile(r"^(while|conditional|cond|call)(\.\d+)?$")


class Event(NamedTuple):
    plane: str
    line: str
    name: str
    start_ns: float
    duration_ns: float

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.duration_ns


def _on_device(event: Event) -> bool:
    return event.plane.startswith("/device:")


class _Ops:
    """Which events are XLA ops. On a host, an op is an HLO-named event on one of XLA's
    threads (`tf_XLA...`) or inside a program or a launch on the calling thread (small
    programs run there, inside their launch): the calling thread's own work has lower-case
    names too (`shard_args`)."""

    def __init__(self, events: list[Event]):
        # The device lines named "XLA Ops", where a GPU's trace has them (the others
        # repeat the same kernels by stream or by module).
        self.device_lines = frozenset((e.plane, e.line) for e in events if _on_device(e) and e.line == "XLA Ops")
        self.programs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for e in events:
            # A small program runs inside its launch, on the calling thread.
            if e.name == _PROGRAM or (not _on_device(e) and _LAUNCH.search(e.name)):
                self.programs.setdefault((e.plane, e.line), []).append((e.start_ns, e.end_ns))
        # Merged per line (a launch holds its program): one bisection then finds the span
        # that holds an event, if any does.
        self.programs = {where: merged(spans) for where, spans in self.programs.items()}

    def _in_program(self, event: Event) -> bool:
        spans = self.programs.get((event.plane, event.line), [])
        at = bisect.bisect_right(spans, (event.start_ns, float("inf"))) - 1
        return at >= 0 and spans[at][1] >= event.end_ns

    def held(self, event: Event) -> bool:
        """An op or a loop: XLA code, on XLA's side."""
        if _on_device(event):
            return not self.device_lines or (event.plane, event.line) in self.device_lines
        return bool(_HLO_NAME.match(event.name)) and (event.line.startswith("tf_XLA") or self._in_program(event))

    def op(self, event: Event) -> bool:
        """One XLA op (not a loop holding others)."""
        return self.held(event) and not _CONTAINER.match(event.name)

    def running(self, event: Event) -> bool:
        """Whether XLA is running during `event`: an op, a loop, or a whole program."""
        return event.name == _PROGRAM or self.held(event)


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of [start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def merged(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of [start, end) intervals as disjoint intervals, in order."""
    union: list[list[float]] = []
    for start, end in sorted(intervals):
        if union and start <= union[-1][1]:
            union[-1][1] = max(union[-1][1], end)
        else:
            union.append([start, end])
    return [(start, end) for start, end in union]


def halfway(intervals: Iterable[tuple[float, float]]) -> float:
    """The time by which half of the union of the intervals has passed."""
    union = merged(intervals)
    left = sum(end - start for start, end in union) / 2
    for start, end in union:
        if end - start >= left:
            return start + left
        left -= end - start
    return union[-1][1]


def uncovered(intervals: Iterable[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The parts of [start, end) that no interval covers."""
    holes, reach = [], start
    for left, right in sorted(intervals):
        if left > reach:
            holes.append((reach, min(left, end)))
        reach = max(reach, right)
        if reach >= end:
            break
    if reach < end:
        holes.append((reach, end))
    return [(a, b) for a, b in holes if b > a]


def read(events: Iterable[Event], iterations: int, untraced_us: dict[str, float],
         parts: dict[str, dict[str, str]] | None = None) -> tuple[StrategyTrace, ...]:
    """One `StrategyTrace` per annotated run in `events`, in the order they ran.

    Args:
        iterations: iterations of each traced run.
        untraced_us: each strategy's wall time for the same run without the profiler.
        parts: for the strategies whose iteration is told apart by part of the algorithm,
            {op name: part} (`core.inspect.iteration_parts`); an op it does not name is of
            the rest of the step.
    """
    events = list(events)
    ops = _Ops(events)
    runs = sorted((e for e in events if e.name.startswith(ANNOTATION)), key=lambda e: e.start_ns)
    traces = []
    for run in runs:
        strategy = run.name[len(ANNOTATION):]
        inside = [e for e in events if e.end_ns > run.start_ns and e.start_ns < run.end_ns and e is not run]
        traces.append(_one(strategy, run, inside, iterations, untraced_us.get(strategy, 0.0), ops,
                           (parts or {}).get(strategy, {})))
    return tuple(traces)


def _outermost(events: Iterable[Event]) -> int:
    """How many of `events` lie inside no other of them on their line: jaxlib 0.10.1 records
    each jitted call from Python as two nested `PjitFunction` events."""
    count, reach = 0, {}
    for event in sorted(events, key=lambda e: (e.start_ns, -e.duration_ns)):
        where = (event.plane, event.line)
        if event.end_ns > reach.get(where, float("-inf")):
            count += 1
            reach[where] = event.end_ns
    return count


def _clipped(event: Event, start: float, end: float) -> tuple[float, float]:
    return max(event.start_ns, start), min(event.end_ns, end)


def _one(strategy: str, run: Event, inside: list[Event], iterations: int, untraced_us: float,
         which: _Ops, part_of: dict[str, str]) -> StrategyTrace:
    ops = [e for e in inside if which.op(e)]
    running = [_clipped(e, run.start_ns, run.end_ns) for e in inside if which.running(e)]
    launches = [e for e in inside if not _on_device(e) and _LAUNCH.search(e.name)]
    time_by_op, calls_by_op = Counter(), Counter()
    for op in ops:
        time_by_op[op.name] += op.duration_ns
        calls_by_op[op.name] += 1
    top = tuple(OpTime(name, ns / 1e3 / iterations, calls_by_op[name] / iterations,
                       part_of.get(name, REST) if part_of else "")
                for name, ns in time_by_op.most_common(TOP_OPS))
    time_by_part = Counter()
    for name, ns in time_by_op.items():
        time_by_part[part_of.get(name, REST)] += ns
    parts = tuple(PartTime(part, time_by_part[part] / 1e3 / iterations) for part in PARTS
                  if part in time_by_part) if part_of else ()
    # One iteration's share of the run, centred where half of XLA's ops' time is done: past a
    # Python loop's first calls, and inside a compiled loop rather than its set-up (a tiny
    # scan's loop is a sliver of its run). The ops, not all of XLA's running: a program's
    # span also holds its threads' waits, and a window centred in one drew no op at all.
    window = run.duration_ns / iterations
    op_time = [_clipped(e, run.start_ns, run.end_ns) for e in ops]
    centred_on = op_time or running
    middle = halfway(centred_on) if centred_on else run.start_ns + run.duration_ns / 2
    start = min(max(middle - window / 2, run.start_ns), run.end_ns - window)
    end = start + window
    spans = []
    for lane, chosen in ((LAUNCH_LANE, launches), (XLA_LANE, ops)):
        for event in chosen:
            left, right = _clipped(event, start, end)
            if right > left:
                spans.append(Span(lane, "launch" if lane == LAUNCH_LANE else event.name, (left - start) / 1e3,
                                  (right - left) / 1e3))
    window_running = [(max(a, start), min(b, end)) for a, b in running if b > start and a < end]
    spans += [Span(XLA_LANE, GAP, (a - start) / 1e3, (b - a) / 1e3) for a, b in uncovered(window_running, start, end)]
    spans.sort(key=lambda span: span.start_us)
    return StrategyTrace(
        strategy=strategy, iterations=iterations, traced_us=run.duration_ns / 1e3, untraced_us=untraced_us,
        launches=len(launches), jit_calls=_outermost(e for e in inside if _JIT_CALL.match(e.name)), ops=len(ops),
        busy_us=union_length(running) / 1e3, top_ops=top, window_us=window / 1e3,
        spans=tuple(spans[:MAX_SPANS]), spans_left_out=max(0, len(spans) - MAX_SPANS), parts=parts)
