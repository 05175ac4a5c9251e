"""The story: its steps are data, each names a real runnable and pitfall, and speed-ups add up with their ranges."""

import dataclasses

import pandas as pd
import pytest
from specs import tutorial_spec

from core import catalog
from core.charts import bars
from core.inspect import pitfalls
from core.results import story
from core.spec import FitSpec, OptimizerSpec

from fake_runs import make_run


def test_steps_start_with_the_tutorial_levels_and_name_what_exists():
    assert [s.strategy for s in story.STEPS[:5]] == [
        "eager", "jit_per_function", "scan", "scan_namedtuple", "scan_pytree_class"]
    known_pitfalls = {p.key for p in pitfalls.catalogue()}
    for step in story.STEPS:
        catalog.runnable(step.strategy)
        assert set(step.pitfalls) <= known_pitfalls and step.fixes and step.title
    assert "pytree_class" in story.STEPS[4].pitfalls


def test_a_step_runs_the_problem_its_own_way():
    problem = tutorial_spec(iterations=77, precision="float64", repeats=story.STORY_REPEATS)
    step = story.Step("while_loop", "stop when converged", "added by this lab", "…", changes=(("tol", 1e-4),))
    spec = step.spec(problem)
    assert (spec.strategy, spec.iterations, spec.precision, spec.tol) == ("while_loop", 77, "float64", 1e-4)
    assert [s.strategy for s in story.specs(problem)] == [s.strategy for s in story.STEPS]
    # Appending a step is all it takes: the list is plain data.
    longer = [*story.STEPS, step]
    assert story.specs(problem, longer)[-1] == spec


def test_every_step_runs_one_algorithm_for_the_same_iterations_but_the_slow_first():
    # The sidebar's default converges with a profiled optimizer that jit_per_function and
    # scan_analytic cannot run: the story runs the tutorial's optimizer instead, to no tolerance.
    profiled = FitSpec()
    assert (profiled.optimizer.name, profiled.init, profiled.tol) == ("preconditioned_lbfgs", "log_rates_sd", 1e-7)
    specs = story.specs(profiled)
    assert {(s.optimizer.name, s.init, s.tol) for s in specs} == {("seed", "seed", 0.0)}
    # Eager's cost per iteration shows in a few iterations; the others run the problem's.
    assert [s.iterations for s in specs] == [story.SLOW_STEP_ITERATIONS] + [500] * (len(specs) - 1)
    assert story.specs(dataclasses.replace(profiled, iterations=20))[0].iterations == 20  # a cap, never more
    # At least STORY_REPEATS repeats, so that steps running one program time alike on a busy machine.
    assert {s.repeats for s in specs} == {story.STORY_REPEATS}
    assert {s.repeats for s in story.specs(dataclasses.replace(profiled, repeats=9))} == {9}
    adam = story.specs(tutorial_spec(optimizer=OptimizerSpec("adam", 0.05), tol=1e-6))
    assert {(s.optimizer, s.tol) for s in adam} == {(OptimizerSpec("adam", 0.05), 0.0)}


def test_speedups_are_per_iteration_so_a_step_may_run_fewer_iterations():
    eager = make_run("eager", iterations=40, run_s=2.0, run_s_min=1.9, run_s_max=2.1)  # 50 ms per iteration
    scan = make_run("scan", iterations=500, run_s=0.5, run_s_min=0.49, run_s_max=0.51)  # 1 ms per iteration
    found = story.outcomes([eager, scan])
    assert found[1].since_start.value == pytest.approx(50.0)
    assert found[1].since_start.low == pytest.approx((1.9 / 40) / (0.51 / 500))


def test_speedups_accumulate_from_the_first_step_with_their_ranges():
    eager = make_run("eager", run_s=2.0, run_s_min=1.9, run_s_max=2.1)
    jitted = make_run("jit_per_function", run_s=0.2, run_s_min=0.19, run_s_max=0.21)
    scan = make_run("scan", run_s=0.1, run_s_min=0.095, run_s_max=0.105)
    named = make_run("scan_namedtuple", run_s=0.101, run_s_min=0.096, run_s_max=0.106)
    found = story.outcomes([eager, jitted, scan, named, None])
    assert found[0].over_previous is None and found[0].since_start.significant is False  # itself
    assert found[2].since_start.value == pytest.approx(20.0)
    assert found[2].since_start.low == pytest.approx(1.9 / 0.105)
    assert found[2].over_previous.value == pytest.approx(2.0)
    # A NamedTuple compiles to the same program: the step is noise, not a speed-up.
    assert found[3].over_previous.significant is False
    assert found[4] == story.Outcome(None, None)


def test_a_diverged_step_counts_as_not_run():
    found = story.outcomes([make_run("eager", run_s=2.0), make_run("scan", status="diverged")])
    assert found[1].since_start is None


def test_the_chart_grows_one_bar_per_step_on_fixed_axes():
    runs = [make_run("eager", run_s=2.0, run_s_min=1.9, run_s_max=2.1, id=1),
            make_run("jit_per_function", run_s=0.2, run_s_min=0.19, run_s_max=0.21, id=2),
            make_run("scan", run_s=0.1, run_s_min=0.095, run_s_max=0.105, id=3)]
    labels = [story.step_label(i, s) for i, s in enumerate(story.STEPS)]
    first, second = (pd.DataFrame(story.chart_rows(runs, shown)) for shown in (0, 1))
    assert len(first) == 1 and len(second) == 2
    assert list(second["speedup"]) == ["start", "×10.0 (×9–×11)"]
    specs = [bars.story_bars(rows, labels, milliseconds=(19, 420)).to_dict() for rows in (first, second)]
    axes = [(s["layer"][0]["encoding"]["y"]["scale"]["domain"], s["layer"][0]["encoding"]["x"]["scale"]["domain"])
            for s in specs]
    assert axes[0] == axes[1] and axes[0][0] == labels  # nothing moves as bars are added
    assert specs[0]["height"] == specs[1]["height"]
    assert bars.story_bars(first.iloc[:0], labels).to_dict()["mark"]["type"] == "text"


def test_the_story_shows_the_runs_timed_together_over_newer_runs_timed_apart():
    group = [make_run(name, created_at=10.0, timed_with="aaa", id=i)
             for i, name in enumerate(["eager", "jit_per_function", "scan"])]
    later_alone = make_run("scan", created_at=20.0, id=9)
    smaller_group = [make_run(name, created_at=30.0, timed_with="bbb", id=10 + i)
                     for i, name in enumerate(["eager", "jit_per_function"])]
    candidates = [[smaller_group[0], group[0]], [smaller_group[1], group[1]], [later_alone, group[2]], []]
    chosen = story.stored_choice(candidates)
    assert chosen[:3] == group and chosen[3] is None
    assert story.all_timed_together(group) and not story.all_timed_together(chosen)
    assert [o.timed_with_start for o in story.outcomes(chosen)[:3]] == [True, True, True]
    # Without a group covering it, a step shows its newest run, and says it was timed apart.
    chosen = story.stored_choice([[group[0]], [group[1]], [later_alone]])
    assert chosen[2] is later_alone and not story.outcomes(chosen)[2].timed_with_start


def test_steps_are_frozen_records():
    with pytest.raises(dataclasses.FrozenInstanceError):
        story.STEPS[0].strategy = "scan"


def test_steps_that_ran_one_program_show_one_speed_up_and_say_so():
    def timed(strategy, median, program, seed):
        import numpy as np

        times = [float(t) for t in median * (1 + 0.05 * np.random.default_rng(seed).standard_normal(8))]
        return make_run(strategy, run_s=float(np.median(times)), run_s_min=min(times), run_s_max=max(times),
                        repeat_times=times, program=program)

    eager, scan, named = timed("eager", 2.0, "", 0), timed("scan", 0.10, "abc", 1), timed("scan_namedtuple", 0.12,
                                                                                           "abc", 2)
    found = story.outcomes([eager, scan, named])
    assert found[2].over_previous.same_program and found[2].over_previous.significant is False
    # Pooled: the two steps read one speed-up since step 1, not 20 and 16.7.
    assert found[1].since_start.value == found[2].since_start.value
    rows = story.chart_rows([eager, scan, named], shown=2)
    assert rows[1]["speedup"] == rows[2]["speedup"]
    # And their bars and whiskers are that one speed too: under one label, each run's own median
    # had drawn two lengths.
    from core.charts.style import with_spread

    drawn = with_spread(pd.DataFrame(rows), "per_iter_ms")
    assert drawn.loc[1, ["per_iter_ms", "low", "high"]].tolist() == pytest.approx(
        drawn.loc[2, ["per_iter_ms", "low", "high"]].tolist())
    assert drawn.loc[1, "low"] == pytest.approx(min(r.run_s_min for r in (scan, named)) * 1e3 / scan.iterations_run)
    assert drawn.loc[0, "per_iter_ms"] == pytest.approx(eager.per_iter_ms)  # a step of its own: its run's figures
    assert [o.one_program for o in found] == [(), (2, 3), (2, 3)]
    # Three steps of one program: the first of them reads the speed-up of all three, as the
    # others do (pooled pair by pair, it kept the first two's alone).
    pytree = timed("scan_pytree_class", 0.08, "abc", 3)
    found = story.outcomes([eager, scan, named, pytree])
    assert found[1].since_start.value == found[2].since_start.value == found[3].since_start.value
    assert found[1].one_program == (2, 3, 4)
