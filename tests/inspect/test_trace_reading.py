"""Reading a profiler trace: launches, ops and gaps per strategy, from events made up here
with the names jaxlib 0.10.1 gives them on a CPU (the real trace is tested in
test_timeline.py)."""

import pytest

from core.inspect import trace_reading
from core.inspect.trace_findings import DIRECTION, GAP, LAUNCH_LANE, LINE_SEARCH, P_BY_P, REST, XLA_LANE
from core.inspect.trace_reading import ANNOTATION, Event

HOST = "/host:CPU"
LAUNCH = "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"


def host(line, name, start_us, duration_us):
    return Event(HOST, line, name, start_us * 1e3, duration_us * 1e3)


def two_iterations():
    """A Python loop of two iterations in 1,000 µs: per iteration a jit call that launches
    one program on XLA's thread, which runs two ops; the rest of the time is Python."""
    events = [host("python", ANNOTATION + "jit_step", 0, 1000)]
    for start in (100, 600):
        events += [
            host("python", "PjitFunction(jit(fit_step))", start, 50),
            host("python", "PjitFunction(jit(fit_step))", start + 1, 48),  # jaxlib records each call twice, nested
            host("python", LAUNCH, start + 10, 30),
            host("python", "shard_args", start + 2, 5),  # lower case, but the host's own work, before the launch
            host("tf_XLAEigen/1", "ThunkExecutor::Execute", start + 50, 200),
            host("tf_XLAEigen/1", "convert_dot_fusion.1", start + 60, 120),
            host("tf_XLAEigen/1", "end: convert_dot_fusion.1", start + 180, 0),
            host("tf_XLAEigen/1", "copy.73", start + 190, 40),
            host("tf_XLAEigen/1", "ThreadpoolListener::StartRegion", start + 50, 1),
        ]
    return events


def test_launches_jit_calls_and_ops_are_counted_per_run_and_host_work_is_not_an_op():
    (trace,) = trace_reading.read(two_iterations(), iterations=2, untraced_us={"jit_step": 800.0})
    assert (trace.strategy, trace.iterations, trace.launches, trace.jit_calls, trace.ops) == ("jit_step", 2, 2, 2, 4)
    assert trace.traced_us == pytest.approx(1000.0) and trace.untraced_us == 800.0
    assert trace.per_iteration(trace.launches) == 1.0
    assert [op.name for op in trace.top_ops] == ["convert_dot_fusion.1", "copy.73"]
    assert trace.top_ops[0].us_per_iteration == pytest.approx(120.0) and trace.top_ops[0].calls_per_iteration == 1.0


def test_gaps_are_the_time_no_xla_program_runs():
    (trace,) = trace_reading.read(two_iterations(), iterations=2, untraced_us={})
    assert trace.busy_us == pytest.approx(400.0)  # two programs of 200 µs
    assert trace.gap_share == pytest.approx(0.6)


def test_the_window_is_one_iteration_centred_where_half_of_xlas_ops_time_is_done_with_its_gaps_drawn():
    (trace,) = trace_reading.read(two_iterations(), iterations=2, untraced_us={})
    # The ops run over [160, 280), [290, 330), [660, 780) and [790, 830): half their time is
    # done at 330, so the window of 500 µs is [80, 580), holding the first iteration's launch
    # (at 110), its ops, and its program's [150, 350).
    assert trace.window_us == pytest.approx(500.0)
    spans = trace.spans
    assert [s.start_us for s in spans] == sorted(s.start_us for s in spans)
    launches = [(s.start_us, s.duration_us) for s in spans if s.lane == LAUNCH_LANE]
    assert launches == [pytest.approx((30.0, 30.0))]
    ops = [(s.name, s.start_us) for s in spans if s.lane == XLA_LANE and s.name != GAP]
    assert ops == [("convert_dot_fusion.1", pytest.approx(80.0)), ("copy.73", pytest.approx(210.0))]
    gaps = [(s.start_us, s.duration_us) for s in spans if s.name == GAP]
    assert gaps == [pytest.approx((0.0, 70.0)), pytest.approx((270.0, 230.0))]


def test_the_window_holds_ops_when_a_program_mostly_waits():
    # A compiled loop whose program spends [100, 600) waiting on its threads and runs its ops
    # in [600, 700): centred on XLA's running, the window of 200 µs was [400, 600), no op in it.
    events = [host("python", ANNOTATION + "scan", 0, 1000), host("python", LAUNCH, 90, 820),
              host("tf_XLAEigen/1", "ThunkExecutor::Execute", 100, 800), host("tf_XLAEigen/1", "while.1", 100, 800)]
    events += [host("tf_XLAEigen/1", "wrapped_add.1", 600 + 10 * k, 8) for k in range(10)]
    (trace,) = trace_reading.read(events, iterations=5, untraced_us={})
    assert trace.window_us == pytest.approx(200.0)
    assert sum(1 for s in trace.spans if s.name == "wrapped_add.1") == 10


def test_a_compiled_loops_window_lies_inside_its_loop_not_its_set_up():
    events = [host("python", ANNOTATION + "scan", 0, 1000), host("python", LAUNCH, 700, 250),
              host("tf_XLAEigen/1", "ThunkExecutor::Execute", 750, 200)]
    events += [host("tf_XLAEigen/1", "wrapped_add.1", 750 + 20 * k, 15) for k in range(10)]
    (trace,) = trace_reading.read(events, iterations=10, untraced_us={})
    # [800, 900), not around 500 (the run's middle, where only Python runs): the ops at 790
    # (its tail), 810, ..., 890, and no gap.
    assert sum(1 for s in trace.spans if s.name == "wrapped_add.1") == 6
    assert not any(s.name == GAP for s in trace.spans)
    assert trace.window_us == pytest.approx(100.0)


def test_ops_inside_a_program_on_the_calling_thread_count_and_loops_hold_ops_without_being_one():
    events = [host("python", ANNOTATION + "scan", 0, 1000), host("python", LAUNCH, 10, 900),
              host("python", "ThunkExecutor::Execute", 20, 880), host("python", "while.76", 30, 860),
              host("python", "wrapped_add.1", 40, 100), host("python", "cholesky.104", 500, 300)]
    (trace,) = trace_reading.read(events, iterations=4, untraced_us={})
    assert trace.ops == 2 and {op.name for op in trace.top_ops} == {"wrapped_add.1", "cholesky.104"}
    assert trace.busy_us == pytest.approx(880.0)
    assert trace.per_iteration(trace.launches) == 0.25


def test_a_cond_holds_ops_without_being_one():
    # JAX names a lax.cond's instruction "cond.N"; its event spans its branch's ops.
    events = [host("python", ANNOTATION + "jit_step", 0, 1000), host("python", LAUNCH, 10, 900),
              host("python", "ThunkExecutor::Execute", 20, 880), host("python", "cond.2", 30, 300),
              host("python", "negate_fusion.3", 40, 100)]
    (trace,) = trace_reading.read(events, iterations=1, untraced_us={})
    assert trace.ops == 1 and [op.name for op in trace.top_ops] == ["negate_fusion.3"]


def test_a_compiled_programs_ops_add_up_by_part_and_the_unnamed_are_the_rest():
    events = [host("python", ANNOTATION + "scan", 0, 1000), host("python", LAUNCH, 10, 900),
              host("python", "ThunkExecutor::Execute", 20, 880), host("python", "while.76", 30, 860),
              host("python", "bitcast_add_fusion", 40, 100), host("python", "bitcast_add_fusion", 150, 100),
              host("python", "cholesky.104", 300, 300), host("python", "exponential_fusion", 620, 200),
              host("python", "copy.9", 830, 20)]
    parts = {"scan": {"bitcast_add_fusion": DIRECTION, "cholesky.104": P_BY_P, "exponential_fusion": LINE_SEARCH}}
    (trace,) = trace_reading.read(events, iterations=2, untraced_us={}, parts=parts)
    # In the order an iteration runs them; copy.9, in no named part, is the rest.
    assert [(part.name, part.us_per_iteration) for part in trace.parts] == [
        (DIRECTION, pytest.approx(100.0)), (LINE_SEARCH, pytest.approx(100.0)), (P_BY_P, pytest.approx(150.0)),
        (REST, pytest.approx(10.0))]
    assert {op.name: op.part for op in trace.top_ops}["cholesky.104"] == P_BY_P
    # A strategy whose parts are not told has none, and its ops no part.
    (untold,) = trace_reading.read(events, iterations=2, untraced_us={})
    assert untold.parts == () and {op.part for op in untold.top_ops} == {""}


def test_an_op_after_a_nested_program_ended_is_still_inside_its_launch():
    events = [host("python", ANNOTATION + "eager", 0, 1000), host("python", LAUNCH, 10, 900),
              host("python", "ThunkExecutor::Execute", 20, 30), host("python", "wrapped_add.1", 60, 20)]
    (trace,) = trace_reading.read(events, iterations=1, untraced_us={})
    assert trace.ops == 1


def test_several_strategies_are_read_apart_in_the_order_they_ran():
    first = two_iterations()
    later = [e._replace(start_ns=e.start_ns + 5e6, name=e.name.replace("jit_step", "eager")) for e in first]
    traces = trace_reading.read(later + first, iterations=2, untraced_us={})
    assert [t.strategy for t in traces] == ["jit_step", "eager"]
    assert [t.ops for t in traces] == [4, 4]


def test_a_gpu_trace_counts_the_kernels_of_its_ops_line_only():
    device = "/device:GPU:0"
    events = [host("python", ANNOTATION + "scan", 0, 1000), host("python", LAUNCH, 10, 20),
              Event(device, "XLA Ops", "loop_add_fusion", 100e3, 200e3),
              Event(device, "Stream #13(Compute)", "loop_add_fusion", 100e3, 200e3),
              Event(device, "XLA Ops", "while.3", 90e3, 400e3)]
    (trace,) = trace_reading.read(events, iterations=1, untraced_us={})
    assert trace.ops == 1 and trace.busy_us == pytest.approx(400.0)


def test_union_and_uncovered():
    assert trace_reading.union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert trace_reading.uncovered([(1, 2), (1.5, 3)], 0, 5) == [(0, 1), (3, 5)]
    assert trace_reading.uncovered([], 0, 5) == [(0, 5)]
    assert trace_reading.uncovered([(-1, 9)], 0, 5) == []
