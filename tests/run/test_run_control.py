"""Controlling runs on a shared host: the queue's record in each result, cancel, memory
refusal, configurable caps, donated state buffers and in-flight notes."""

from __future__ import annotations

import threading
import time

import jax
import numpy as np
import pytest
from specs import tutorial_spec

from core.coordination.device_queue import DeviceQueue, default_queue, device_lock
from core.fit import strategies
from core.machine import memory_estimate
from core.run import engine, prepared, stored_run
from core.run.progress import Cancelled
from core.spec import DatasetSpec, SpecError
from core.store.run_store import RunStore

TINY = DatasetSpec(kind="simulated", n=44, p=6, d=2, seed=3)  # shapes no other test compiles


def _spec(**changes):
    values = dict(dataset=TINY, strategy="jit_step", iterations=30, precision="float64", repeats=2)
    values.update(changes)
    return tutorial_spec(**values)


def test_result_records_its_queue_wait_and_timed_window():
    before = time.time()
    result = engine.run(_spec())
    assert 0 <= result.queue_wait_s < 5
    assert before <= result.timed_start < result.timed_end <= time.time()
    assert result.to_dict()["timed_window"] == [result.timed_start, result.timed_end]
    # The timed window covers everything timed.
    timed = result.transfer_s + result.trace_lower_s + result.compile_s + result.first_call_s
    assert result.timed_end - result.timed_start >= timed + result.repeats * result.run_s_min


def test_cancel_stops_a_python_loop_between_iterations_and_frees_the_device():
    cancel = threading.Event()
    seen = []

    def on_progress(progress):
        seen.append(progress)
        if progress.phase == "first_call" and progress.done:
            cancel.set()

    with pytest.raises(Cancelled):
        engine.run(_spec(strategy="eager", iterations=5000), on_progress=on_progress, cancel=cancel)
    last = [p for p in seen if p.phase == "first_call"][-1]
    assert last.done < 5000  # stopped long before the end
    assert default_queue().entries("cpu") == []


def test_cancel_while_queued_gives_up_the_place():
    cancel = threading.Event()
    waits = []

    def on_progress(progress):
        if progress.phase == "queued":
            waits.append(progress)
            cancel.set()

    with device_lock("cpu", "someone else's run"):
        with pytest.raises(Cancelled, match="waiting"):
            engine.run(_spec(), on_progress=on_progress, cancel=cancel)
        assert [t.label for t in default_queue().entries("cpu")] == ["someone else's run"]
    assert waits[0].ahead[0].label == "someone else's run" and waits[0].done == 1


def test_a_run_waits_for_the_holder_and_records_the_wait(tmp_path):
    queue_holder_done = threading.Event()

    def hold():
        with device_lock("cpu", "holder"):
            time.sleep(1.0)
        queue_holder_done.set()

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.2)
    result = engine.run(_spec())
    holder.join()
    assert result.queue_wait_s >= 0.5 and queue_holder_done.is_set()


def test_a_spec_too_big_for_free_memory_is_refused_before_loading():
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=10_000_000, p=2000), precision="float64")
    found = memory_estimate.estimate(spec)
    # 18 n x p and 5 p x p float64 arrays on the device, X twice, B and its state; Y and O
    # on the host in float64 twice (the CPU is the host).
    device = 8 * (18 * 10_000_000 * 2000 + 5 * 2000**2 + 2 * 10_000_000 + 6 * 2000)
    assert found.needed_bytes == device + 32 * 10_000_000 * 2000 and not found.fits
    start = time.perf_counter()
    with pytest.raises(SpecError, match=r"not enough memory: this fit needs about 3,520 GB"):
        engine.run(spec)
    assert time.perf_counter() - start < 2  # refused without drawing 20 billion numbers


def test_fits_that_keep_their_old_state_are_estimated_to_hold_more():
    shape = (1000, 50, 1)
    assert (memory_estimate.needed_bytes(_spec(strategy="eager"), shape)
            > memory_estimate.needed_bytes(_spec(strategy="scan"), shape))


def test_caps_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PLNLAB_MAX_ITERATIONS", "100")
    tutorial_spec(iterations=100)
    with pytest.raises(SpecError, match="iterations must be between 1 and 100; got 101"):
        tutorial_spec(iterations=101)
    monkeypatch.setenv("PLNLAB_MAX_ROWS", "lots")
    with pytest.raises(SpecError, match="PLNLAB_MAX_ROWS must be a whole number"):
        DatasetSpec(kind="simulated", n=50, p=5)


@pytest.mark.parametrize("name,executable", [("scan", "fit"), ("scan_analytic", "fit"), ("while_loop", "fit"),
                                             ("jit_step", "step")])
def test_jitted_fits_donate_their_state_and_reruns_start_afresh(name, executable):
    prep = prepared.prepare(_spec(strategy=name), cache=prepared.ExecutableCache())
    strategy = prep.strategy
    assert strategy.donates_state
    memory = prep.executables[executable].memory_analysis()
    assert memory.alias_size_in_bytes > 0  # XLA writes the final state over the initial one
    runs = []
    for _ in range(2):
        start = strategy.fresh_state(prep.state)
        runs.append(np.asarray(strategy.run(prep.executables, prep.problem, start, prep.data, prep.tol).elbo))
        assert all(leaf.is_deleted() for leaf in jax.tree.leaves(start))  # consumed
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(prep.state))  # the original is kept
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not strategies.get("eager").donates_state


def test_a_cancelled_stored_run_leaves_no_note_and_no_run(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        stored_run.run_and_store(store, _spec(), cancel=cancel)
    assert store.in_flight() == [] and store.list() == []
    result = stored_run.run_and_store(store, _spec())
    assert store.in_flight() == [] and [r.id for r in store.list()] == [result.id]


def test_a_note_from_a_live_process_is_not_taken_for_interrupted(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    store.begin(_spec().to_dict())  # this very process: alive
    assert RunStore(store.path).list() == [] and len(store.in_flight()) == 1


def test_queue_directory_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PLNLAB_QUEUE_DIR", str(tmp_path / "q"))
    assert default_queue().directory == tmp_path / "q"
    assert isinstance(default_queue(), DeviceQueue)


def test_large_compiled_loops_are_split_into_equal_calls():
    assert prepared.chunk_iterations(116 * 114, 400) == 0  # oaks x1: one call
    assert prepared.chunk_iterations(116_000 * 114, 150) == 2  # oaks x1000: 75 calls of 2, 0.3 s each
    assert prepared.chunk_iterations(116_000 * 114, 150, prepared.chunk_work("gpu")) == 0  # a GPU: one call
    assert prepared.chunk_iterations(116_000 * 114, 151) == 1  # a prime count: calls of one
    assert prepared.chunk_iterations(10**9, 10) == 1


def test_a_count_with_few_divisors_is_not_cut_into_calls_of_one():
    x100 = 11_600 * 114  # 22 iterations within CHUNK_WORK
    assert prepared.chunk_iterations(x100, 31) == 0  # prime, within twice the work: one call
    assert prepared.chunk_iterations(x100, 62) == 31  # 2 calls of 31, not 31 calls of 2
    assert prepared.chunk_iterations(x100, 400) == 20  # a divisor near the work: as before
    assert prepared.chunk_iterations(x100, 47) == 1  # prime, beyond twice the work: calls of one
    for iterations in range(23, 400):
        chunk = prepared.chunk_iterations(x100, iterations)
        assert iterations % (chunk or iterations) == 0 and (chunk or iterations) <= 2 * 22


def test_a_split_loop_follows_the_same_trajectory_and_reports_per_call(monkeypatch):
    heard = []
    whole = engine.run(_spec(strategy="scan_analytic", iterations=40), cache=prepared.ExecutableCache(),
                       on_progress=heard.append)
    assert whole.chunk_iterations == 0
    # One compiled call reports no iterations, so it announces none: a bar at 0/40 through
    # all of it read as hung on the command line.
    assert [(p.done, p.total) for p in heard if p.phase == "first_call"] == [(0, 0)]
    monkeypatch.setattr(prepared, "CHUNK_WORK", 44 * 6 * 10)  # ten iterations a call
    seen = []
    split = engine.run(_spec(strategy="scan_analytic", iterations=40), cache=prepared.ExecutableCache(),
                       on_progress=seen.append)
    assert split.chunk_iterations == 10
    np.testing.assert_allclose(split.elbo, whole.elbo, rtol=1e-12)
    assert [p.done for p in seen if p.phase == "first_call" and p.elbo is not None] == [10, 20, 30, 40]
    assert {p.total for p in seen if p.phase == "first_call"} == {40}


def test_the_command_lines_bar_says_a_compiled_call_reports_nothing_until_it_returns(capsys):
    from core.cli.output import StderrProgress
    from core.run.progress import Progress

    bar = StderrProgress("scan on oaks x1000")
    bar(Progress("first_call", 0, 0))
    bar(Progress("repeat", 0, 3))
    said = capsys.readouterr().err
    assert "first_call (one compiled call: nothing to report until it returns)" in said
    assert "repeat     [" in said and "0/3" in said


def test_cancel_lands_between_calls_of_a_split_compiled_loop(monkeypatch):
    monkeypatch.setattr(prepared, "CHUNK_WORK", 44 * 6 * 10)
    cancel = threading.Event()
    seen = []

    def on_progress(progress):
        seen.append(progress)
        if progress.phase == "first_call" and progress.done == 20:
            cancel.set()

    with pytest.raises(Cancelled):
        engine.run(_spec(strategy="scan", iterations=40), cache=prepared.ExecutableCache(),
                   on_progress=on_progress, cancel=cancel)
    assert max(p.done for p in seen if p.phase == "first_call") == 20


def test_a_fit_that_stops_at_its_tolerance_reports_the_iteration_it_stopped_at():
    # Between two reports a fit converged: its bar kept the last count ("41 of at most 500",
    # converged at 49) while the first calls timed beside it ran.
    from core.spec import FitSpec

    seen = []
    spec = FitSpec(dataset=TINY, strategy="jit_step", repeats=1)  # the front doors' fit, to its tolerance
    result = engine.run(spec, on_progress=seen.append)
    assert 0 < result.iterations_run < spec.iterations  # it stopped at its tolerance
    last = [p for p in seen if p.phase == "first_call"][-1]
    assert (last.done, last.total) == (result.iterations_run, spec.iterations)
