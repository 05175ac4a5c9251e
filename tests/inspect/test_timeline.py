"""A real profiler trace of the strategies a speaker compares, on a tiny fit: what each
iteration launches, runs and waits for, read from JAX's own trace."""

import dataclasses
import gzip
import json
import pickle

import pytest
from specs import tutorial_spec

from core.charts import timeline as timeline_chart
from core.inspect import timeline, trace_findings
from core.inspect.trace_findings import GAP, LAUNCH_LANE, XLA_LANE
from core.spec import DatasetSpec, FitSpec, OptimizerSpec

TINY = DatasetSpec(kind="simulated", n=30, p=4, d=1, seed=0)


def _spec(optimizer: str, init: str) -> FitSpec:
    return tutorial_spec(dataset=TINY, strategy="scan", iterations=5, precision="float32", device="cpu",
                         optimizer=OptimizerSpec(optimizer), init=init, repeats=1)


# (strategy, microseconds) of every run made outside the profiler, in order (`traced`).
UNTRACED_CALLS: list[tuple[str, float]] = []


@pytest.fixture(scope="module")
def traced():
    real = timeline._run

    def recording(prep, annotation=None):
        took = real(prep, annotation)
        if annotation is None:
            UNTRACED_CALLS.append((prep.strategy.name, took))
        return took

    # The tutorial's optimizer: every strategy runs it, jit_per_function included.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timeline, "_run", recording)
        return timeline.trace_strategies(_spec("seed", "seed"))


def test_the_untraced_time_is_the_fastest_run_after_the_first(traced):
    for trace in traced.traces:
        runs = [took for name, took in UNTRACED_CALLS if name == trace.strategy]
        assert len(runs) == 1 + timeline.UNTRACED_RUNS, trace.strategy
        assert trace.untraced_us == min(runs[1:])  # the first call's compiles left out


def test_each_strategy_is_traced_in_turn_and_fewer_launches_come_with_more_compiled(traced):
    assert [t.strategy for t in traced.traces] == list(trace_findings.STRATEGIES)
    launches = {t.strategy: t.per_iteration(t.launches) for t in traced.traces}
    # eager launches each operation, jit_per_function its five functions, jit_step one step,
    # scan one program for the whole run.
    assert launches["eager"] > launches["jit_per_function"] >= 5
    assert launches["jit_per_function"] > launches["jit_step"] >= 1
    assert launches["scan"] <= 1
    assert traced.traces[0].jit_calls >= traced.traces[0].launches > 0


def test_every_trace_has_ops_gaps_and_a_window_of_one_iteration(traced):
    for trace in traced.traces:
        assert trace.iterations == 5 and trace.ops > 0 and trace.top_ops, trace.strategy
        assert 0 < trace.busy_us <= trace.traced_us and 0 <= trace.gap_share < 1
        assert trace.untraced_us > 0
        assert trace.window_us == pytest.approx(trace.traced_us / 5)
        for span in trace.spans:
            assert span.lane in (LAUNCH_LANE, XLA_LANE) and span.duration_us > 0
            assert -1e-6 <= span.start_us and span.start_us + span.duration_us <= trace.window_us + 1e-6
        assert any(span.lane == XLA_LANE and span.name != GAP for span in trace.spans), trace.strategy
    eager = traced.traces[0]
    # Op by op from Python: most of eager's iteration is spent outside XLA.
    assert eager.gap_share > 0.3 and any(span.name == GAP for span in eager.spans)


def test_the_rows_drawn_without_a_launch_are_named(traced):
    assert "eager" not in trace_findings.drawn_without_launch(traced)  # it launches every op, every iteration
    assert trace_findings.drawn_without_launch(
        dataclasses.replace(traced, traces=tuple(dataclasses.replace(t, spans=()) for t in traced.traces))
    ) == list(trace_findings.STRATEGIES)


def test_the_trace_file_opens_as_perfetto_json_and_the_findings_are_plain_data(traced):
    events = json.loads(gzip.decompress(traced.perfetto))
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any("ThunkExecutor" in event.get("name", "") for event in events)
    assert pickle.loads(pickle.dumps(traced)) == traced
    assert (traced.n, traced.p, traced.precision, traced.device) == (30, 4, "float32", "cpu")


def test_a_strategy_that_cannot_run_the_optimizer_is_named_with_why_and_the_rest_are_traced():
    traced = timeline.trace_strategies(_spec("preconditioned_lbfgs", "log_rates"), names=("jit_per_function", "scan"))
    assert [t.strategy for t in traced.traces] == ["scan"]
    (name, why), = traced.skipped
    assert name == "jit_per_function" and "preconditioned_lbfgs" in why


def test_a_compiled_iteration_is_told_apart_by_part_of_the_algorithm():
    # The default optimizer's direction, line search and p x p work, read from the compiled
    # programs' metadata; eager's ops are programs of their own and are not told apart.
    traced = timeline.trace_strategies(_spec("preconditioned_lbfgs", "log_rates"), names=("eager", "jit_step", "scan"))
    by_strategy = {trace.strategy: trace for trace in traced.traces}
    assert by_strategy["eager"].parts == ()
    for name in ("jit_step", "scan"):
        trace = by_strategy[name]
        assert [part.name for part in trace.parts][:3] == list(trace_findings.PARTS[:3]), name
        assert all(part.us_per_iteration > 0 for part in trace.parts)
        # Every op is in one part: the parts add up to the ops' time.
        assert {op.part for op in trace.top_ops} <= set(trace_findings.PARTS)
    rows = trace_findings.part_rows(traced)
    for name in ("jit_step", "scan"):
        assert sum(row["share of XLA's time"] for row in rows if row["strategy"] == name) == pytest.approx(1.0)
    assert "part" in trace_findings.top_op_rows(traced)[0]


def test_an_optimizer_with_no_named_part_is_not_told_apart(traced):
    # The tutorial's optimizer: its ops are in none of the parts, so no breakdown.
    assert all(trace.parts == () for trace in traced.traces)
    assert trace_findings.part_rows(traced) == [] and "part" not in trace_findings.top_op_rows(traced)[0]


def test_the_chart_draws_a_row_per_lane_and_marks_each_iterations_end(traced):
    frame = timeline_chart.frame(traced)
    assert set(frame["kind"]) == {"launch", "XLA op", "gap"}
    assert timeline_chart.row_order(traced)[:2] == [f"eager · {LAUNCH_LANE}", f"eager · {XLA_LANE}"]
    spec = timeline_chart.timeline_chart(traced).to_dict()
    assert spec["layer"][0]["mark"]["type"] == "bar" and spec["layer"][1]["mark"]["type"] == "tick"
