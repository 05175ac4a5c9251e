"""One run lifecycle for fits in this process and on workers: noted while under way, then
stored, stored as interrupted, or gone."""

import threading

import pytest
from specs import tutorial_spec

from core.cluster.errors import WorkerDied
from core.coordination import under_way
from core.run import lifecycle
from core.run.progress import Cancelled
from core.spec import DatasetSpec
from core.store.run_store import RunStore

from fake_runs import make_run

SPECS = [tutorial_spec(dataset=DatasetSpec(kind="oaks"), strategy=name, iterations=3) for name in ("scan", "jit_step")]


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs.sqlite3")


def test_results_replace_the_notes_owned_by_the_owner(store):
    seen_under_way = []

    def fit(cancel):
        seen_under_way.append(len(store.in_flight()))
        return [make_run(spec.strategy) for spec in SPECS]

    results = lifecycle.fit_and_store(store, SPECS, fit, owner_id="session:abc")
    assert seen_under_way == [2] and store.in_flight() == []
    assert sorted(r.strategy for r in store.list()) == ["jit_step", "scan"]
    assert {r.owner for r in results} == {"session:abc"} and all(r.id for r in results)


def test_a_death_is_stored_as_interrupted_for_every_spec_and_named(store):
    def fit(cancel):
        raise WorkerDied("the worker process running it died", worker="tls://w:1", host="h", pid=7, started_at=1.0)

    with pytest.raises(lifecycle.RunInterrupted, match="interrupted: the worker process running it died"):
        lifecycle.fit_and_store(store, SPECS, fit, owner_id="session:abc")
    stored = store.list()
    assert [r.status for r in stored] == ["interrupted", "interrupted"] and store.in_flight() == []
    assert {r.owner for r in stored} == {"session:abc"} and {r.worker for r in stored} == {"tls://w:1 on h"}


@pytest.mark.parametrize("failure", [Cancelled("cancelled"), ValueError("refused"), KeyboardInterrupt()])
def test_anything_else_leaves_nothing(store, failure):
    def fit(cancel):
        raise failure

    with pytest.raises(type(failure)):
        lifecycle.fit_and_store(store, SPECS, fit)
    assert store.list() == [] and store.in_flight() == []


def test_a_cancel_asked_through_the_store_reaches_the_fit(store):
    cancel = threading.Event()

    def fit(cancel_seen):
        (note,) = store.in_flight()
        store.request_cancel(note["id"])
        assert cancel_seen is cancel and cancel.wait(10)
        raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        lifecycle.fit_and_store(store, SPECS[:1], fit, cancel)
    assert store.list() == []


def test_the_fit_serves_its_batchs_key_which_the_device_queue_carries_and_each_note_begins_with(store, tmp_path):
    from core.coordination.device_queue import DeviceQueue

    queue = DeviceQueue(tmp_path / "queue")
    seen = {}

    def fit(cancel):
        with queue.hold("cpu", lifecycle.label(SPECS), "test"):
            seen["tickets"] = [t.run for t in queue.entries("cpu")]
        seen["notes"] = [note["lease"] for note in sorted(store.in_flight(), key=lambda note: note["id"])]
        return [make_run(spec.strategy) for spec in SPECS]

    lifecycle.fit_and_store(store, SPECS, fit)
    assert len(set(seen["notes"])) == 2 and len(seen["tickets"]) == 1
    assert [under_way.batch_of(key) for key in seen["notes"]] == seen["tickets"] * 2


def test_one_label_for_a_run_under_way():
    assert lifecycle.label(SPECS[0]) == lifecycle.label(SPECS[:1]) == "scan · oaks x1 · float32"
    assert lifecycle.label(SPECS) == "2 strategies timed together · oaks x1 · float32"
