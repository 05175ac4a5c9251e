"""Which fits of one request are timed together: JAX strategies of one problem side by side,
peers and fits without a partner alone."""

import dataclasses

from specs import tutorial_spec

from core.run import batches
from core.spec import DatasetSpec, FitSpec

OAKS = tutorial_spec(dataset=DatasetSpec(kind="oaks"))


def spec(strategy: str, **changes) -> FitSpec:
    return dataclasses.replace(OAKS, strategy=strategy, **changes)


def test_jax_strategies_of_one_problem_go_together_and_peers_alone_after_them():
    request = [spec("torch_eager"), spec("scan"), spec("eager"), spec("pyplnmodels"), spec("jit_step")]
    assert batches.plan(request) == [batches.Batch((1, 2, 4), True), batches.Batch((0,), False),
                                     batches.Batch((3,), False)]


def test_each_problem_is_its_own_group_and_a_fit_without_a_partner_runs_alone():
    bigger = DatasetSpec(kind="oaks", replicate=10)
    request = [spec("scan"), spec("scan", dataset=bigger), spec("eager"), spec("eager", dataset=bigger),
               spec("jit_step", repeats=2)]
    assert batches.plan(request) == [batches.Batch((0, 2), True), batches.Batch((1, 3), True),
                                     batches.Batch((4,), False)]


def test_a_request_to_run_alone_is_one_batch_per_fit_in_its_order():
    request = [spec("scan"), spec("eager")]
    assert batches.plan(request, together=False) == [batches.Batch((0,), False), batches.Batch((1,), False)]
    assert batches.plan([]) == []
