"""What a worker sends back is plain data of a schema, never an object to unpickle: the
server's client refuses a pickle, and `plain.decode` rebuilds the result types only."""

import dataclasses
import math

import numpy as np
import pytest

from core.cluster import plain
from core.inspect.pitfall_notes import PitfallResult
from core.inspect.trace_findings import OpTime, Span, StrategyTrace, Timeline
from core.machine.compile_log import Compile
from core.results.estimates import Estimates
from core.results.result import RunResult


class _Planted:
    """What a worker that is not ours might return: unpickling it calls `mkdir` on the
    receiving side."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        import os

        return os.mkdir, (self.path,)


def _planted(path: str, dask_worker=None):
    return _Planted(path)


def test_the_servers_client_refuses_a_pickled_result_and_builds_nothing_of_it(cluster, tmp_path):
    planted = tmp_path / "unpickled-here"
    future = cluster.client.submit(_planted, str(planted), pure=False)
    with pytest.raises(TypeError, match="only able to deserialize data with \\['msgpack'\\]"):
        future.result(timeout=60)
    assert not planted.exists()
    # Plain data comes through (msgpack gives its lists back as tuples), and decodes whole.
    sent = cluster.client.submit(plain.encode, {"a": (1, 2.5), "b": [3]}, pure=False).result(timeout=60)
    assert sent == {"d": {"a": {"t": (1, 2.5)}, "b": (3,)}}
    assert plain.decode(sent) == {"a": (1, 2.5), "b": [3]}


def _run_result(**changes) -> RunResult:
    fields = {field.name: None for field in dataclasses.fields(RunResult) if field.default is dataclasses.MISSING
              and field.default_factory is dataclasses.MISSING}
    fields.update(spec={"strategy": "scan"}, spec_key="k", strategy="scan", dataset="oaks x1", n=116, p=114, d=1,
                  precision="float32", device="cpu", iterations=3, optimizer="seed", lr=0.1, init="seed", repeats=1,
                  tol=0.0, status="ok", iterations_run=3, elbo=[-1.0, -0.5, float("nan")], versions={"jax": "0.10.1"},
                  cache="compiled", final_elbo=-0.5)
    fields.update(changes)
    return RunResult(**fields)


def test_every_result_type_goes_and_comes_back_whole():
    timeline = Timeline("oaks x1", 116, 114, "float32", "cpu", "seed", (
        StrategyTrace("scan", 5, 10.0, 9.0, 1, 1, 20, 8.0, (OpTime("copy.1", 2.0, 1.0),), 2.0,
                      (Span("XLA: ops", "copy.1", 0.0, 1.5),)),), b"\x1f\x8b", {"jax": "0.10.1"},
                        (("jit_per_function", "only the gradient optimizers"),))
    pitfall = PitfallResult("recompiles", "t", "e", {"a": 4.0}, {"b": 1.0}, True,
                            recompiles=(Compile("f", "never seen", "x.py:1:1", 0.1, None, 0.2),))
    with_estimates = _run_result(estimates=Estimates(np.arange(6.0).reshape(2, 3), np.eye(3), ("(intercept)", "x2"),
                                                     ("a", "b", "c")))
    for value in (timeline, pitfall, (_run_result(), {"worker": "tls://1", "runs": 3}), with_estimates,
                  ([_run_result(), _run_result(id=2)], {"x": None}), (["table"], [_run_result()])):
        back = plain.decode(plain.encode(value))
        assert repr(back) == repr(value)  # NaN != NaN; their reprs agree
    assert math.isnan(plain.decode(plain.encode(_run_result())).elbo[2])


def test_arrays_of_numbers_and_keys_that_are_not_strings_come_back():
    value = {1: np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.float64(2.5)}
    back = plain.decode(plain.encode(value))
    assert back[1].dtype == np.float32 and back[1].shape == (2, 3) and (back[1] == value[1]).all()
    assert back["s"] == 2.5 and type(back["s"]) is float


@pytest.mark.parametrize("value", [object(), _Planted("x"), np.array([object()]), {1, 2}, RuntimeError("x")])
def test_anything_else_is_refused_on_the_worker(value):
    with pytest.raises(plain.NotPlain):
        plain.encode(value)


@pytest.mark.parametrize("data, why", [
    ({"o": "Popen", "f": {}}, "not one of the result types"),
    ({"o": "OpTime", "f": {"name": "x"}}, "fields missing"),
    ({"o": "OpTime", "f": {"name": "x", "us_per_iteration": 1.0, "calls_per_iteration": 1.0, "extra": 1}}, "unknown"),
    ({"a": ["object", [1], b"\0" * 8]}, "numeric dtype"),
    ({"a": ["float64", [2], b"\0" * 8]}, "shape"),
    ({"d": {"k": {"x": 1}}}, "unexpected keys"),
    ({"m": [[[1], 2]]}, "unhashable"),
    ({"t": [1]} , None),
])
def test_decode_refuses_what_the_schema_does_not_hold(data, why):
    if why is None:
        assert plain.decode(data) == (1,)
        return
    with pytest.raises(plain.NotPlain, match=why):
        plain.decode(data)


def test_nesting_is_bounded():
    deep = []
    for _ in range(plain.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(plain.NotPlain, match="deeper"):
        plain.encode(deep)
    with pytest.raises(plain.NotPlain, match="deeper"):
        plain.decode(deep)


def test_a_task_stopped_by_its_cancel_returns_that_instead_of_failing():
    from core.run.progress import Cancelled

    def fit():
        raise Cancelled("cancelled; nothing was stored")

    def broken():
        raise ValueError("a real failure")

    assert plain.decode(plain.returned(fit)()) == plain.Stopped("cancelled; nothing was stored")
    with pytest.raises(ValueError, match="a real failure"):  # still the worker's to report
        plain.returned(broken)()


def test_a_task_whose_spec_or_data_is_refused_returns_the_refusal_instead_of_failing():
    # Raised on the worker, each refusal was logged there as "Compute Failed" with its
    # traceback; it is the user's answer, raised again by the submitter as what it was.
    from core.data.counts import DataError
    from core.spec import SpecError

    def too_big():
        raise SpecError("about 112 GB; the device has 24.0 GB free")

    def bad_data():
        raise DataError("counts.csv: row 3 has a negative count")

    for task, kind in ((too_big, SpecError), (bad_data, DataError)):
        refused = plain.decode(plain.returned(task)())
        assert isinstance(refused, plain.Refused)
        error = refused.error()
        assert type(error) is kind and str(error) in ("about 112 GB; the device has 24.0 GB free",
                                                      "counts.csv: row 3 has a negative count")
