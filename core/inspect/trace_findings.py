"""What a profiler trace of a few iterations finds, as plain data: per strategy, where one
iteration's time goes (executable launches from the host, XLA's ops, and the gaps where no
XLA program runs), the heaviest ops, and one iteration's worth of the timeline to draw.

The trace is taken on a worker (`core.inspect.timeline`, which has JAX) and read there
(`core.inspect.trace_reading`); these types are what comes back to the dashboard's server,
which has not, so this module imports nothing that does.
"""

from __future__ import annotations

import dataclasses

# The strategies a speaker compares: nothing compiled, each function, one step, the loop.
STRATEGIES = ("eager", "jit_per_function", "jit_step", "scan")
# The lanes of a strategy's row in the timeline.
LAUNCH_LANE = "host: launches"
XLA_LANE = "XLA: ops"
# What a span on the XLA lane with no op in it is: time with no XLA program running.
GAP = "gap (no XLA program running)"
# The parts of an iteration its ops are told apart by (`core.inspect.iteration_parts`), in
# the order an iteration runs them, the rest last.
DIRECTION = "direction"
LINE_SEARCH = "line search"
P_BY_P = "p x p (factor, inverse, log-det)"
REST = "rest of the step"
PARTS = (DIRECTION, LINE_SEARCH, P_BY_P, REST)


@dataclasses.dataclass(frozen=True)
class Span:
    """One bar of the timeline.

    Attributes:
        lane: LAUNCH_LANE or XLA_LANE.
        name: the op (an HLO instruction), "launch" or GAP.
        start_us: microseconds from the start of the drawn window.
        duration_us: its length, clipped to the window.
    """

    lane: str
    name: str
    start_us: float
    duration_us: float


@dataclasses.dataclass(frozen=True)
class OpTime:
    """One XLA op's share of an iteration.

    Attributes:
        name: the HLO instruction's name (e.g. "convert_dot_fusion.1").
        us_per_iteration: its summed duration over the traced run, per iteration.
        calls_per_iteration: how often it ran, per iteration.
        part: the part of the algorithm it belongs to (`PartTime`), or "" where not told.
    """

    name: str
    us_per_iteration: float
    calls_per_iteration: float
    part: str = ""


@dataclasses.dataclass(frozen=True)
class PartTime:
    """One part of the algorithm's share of an iteration (`core.inspect.iteration_parts`).

    Attributes:
        name: the part ("direction", "line search", "p x p (factor, inverse, log-det)", "rest
            of the step").
        us_per_iteration: the summed duration of its ops over the traced run, per iteration.
    """

    name: str
    us_per_iteration: float


@dataclasses.dataclass(frozen=True)
class StrategyTrace:
    """One strategy's traced run.

    Attributes:
        strategy: its name.
        iterations: iterations in the traced run.
        traced_us: the traced run's wall time (the profiler adds its own cost).
        untraced_us: the same run's wall time without the profiler, just before.
        launches: executables launched from the host in the run (one per jitted call
            that reached XLA; a compiled loop is one).
        jit_calls: calls of jitted functions from Python (an eager op is one).
        ops: XLA op executions (thunks) in the run.
        busy_us: time during which some XLA program ran (the union over threads).
        top_ops: the heaviest ops, by time per iteration.
        window_us: the drawn window's length: one iteration's share of the traced run,
            taken from its middle.
        spans: the bars inside that window, in time order.
        spans_left_out: bars in the window not drawn (past `trace_reading.MAX_SPANS`).
        parts: XLA's time per iteration by part of the algorithm, in the order an iteration
            runs them; empty where the strategy's ops are not of one compiled program whose
            metadata names a part (eager runs each op as a program of its own).
    """

    strategy: str
    iterations: int
    traced_us: float
    untraced_us: float
    launches: int
    jit_calls: int
    ops: int
    busy_us: float
    top_ops: tuple[OpTime, ...]
    window_us: float
    spans: tuple[Span, ...]
    spans_left_out: int = 0
    parts: tuple[PartTime, ...] = ()

    def per_iteration(self, count: float) -> float:
        return count / self.iterations

    @property
    def gap_share(self) -> float:
        """The share of the traced run during which no XLA program ran: launching,
        Python, waiting."""
        return max(0.0, 1.0 - self.busy_us / self.traced_us) if self.traced_us > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class Timeline:
    """The traced strategies of one problem, and the trace file.

    Attributes:
        dataset, n, p, precision, device, optimizer: what was traced.
        traces: one per strategy, in the order traced.
        perfetto: the trace as Chrome/Perfetto JSON, gzipped (opens in ui.perfetto.dev),
            or b"" when it was over `timeline.MAX_TRACE_BYTES`.
        versions: the jax and jaxlib that ran it.
        skipped: (strategy, why) for those asked for that cannot run this problem.
    """

    dataset: str
    n: int
    p: int
    precision: str
    device: str
    optimizer: str
    traces: tuple[StrategyTrace, ...]
    perfetto: bytes
    versions: dict[str, str]
    skipped: tuple[tuple[str, str], ...] = ()


def drawn_without_launch(timeline: Timeline) -> list[str]:
    """The strategies whose drawn iteration holds no launch: their programs were launched
    before it (the host dispatches ahead of the device; a compiled loop launches once a run)."""
    return [trace.strategy for trace in timeline.traces if not any(span.lane == LAUNCH_LANE for span in trace.spans)]


def summary_rows(timeline: Timeline) -> list[dict]:
    """A row per strategy for a table: what one iteration costs and is made of."""
    rows = []
    for trace in timeline.traces:
        each = trace.per_iteration
        # Short names: the table fits a projector's 1024 px with the sidebar open.
        rows.append({
            "strategy": trace.strategy,
            "gaps": trace.gap_share,
            "launches/it": each(trace.launches),
            "XLA ops/it": each(trace.ops),
            "ms/it": each(trace.untraced_us) / 1e3,
            "ms/it traced": each(trace.traced_us) / 1e3,
        })
    return rows


def top_op_rows(timeline: Timeline) -> list[dict]:
    """The heaviest ops of each strategy, a row each, with the part each belongs to where
    any strategy's parts are told."""
    told = any(trace.parts for trace in timeline.traces)
    return [{"strategy": trace.strategy, "op": op.name, **({"part": op.part} if told else {}),
             "µs / iteration": op.us_per_iteration, "calls / iteration": op.calls_per_iteration,
             "share of the iteration": op.us_per_iteration / trace.per_iteration(trace.traced_us)
             if trace.traced_us else 0.0}
            for trace in timeline.traces for op in trace.top_ops]


def part_rows(timeline: Timeline) -> list[dict]:
    """A row per part of the algorithm of each strategy whose parts are told: its XLA time
    per iteration and its share of the parts' sum (the ops' time, gaps left out)."""
    rows = []
    for trace in timeline.traces:
        total = sum(part.us_per_iteration for part in trace.parts)
        rows += [{"strategy": trace.strategy, "part": part.name, "µs / iteration": part.us_per_iteration,
                  "share of XLA's time": part.us_per_iteration / total if total else 0.0}
                 for part in trace.parts]
    return rows
