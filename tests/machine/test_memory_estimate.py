"""The memory estimate against XLA's own memory analysis of the compiled fits, from n >> p
to p >> n: it must count everything XLA keeps (the p x p matrices, the optimizer's state,
the temporaries), with a margin but not wildly over."""

from __future__ import annotations

import dataclasses
import re

import pytest
from specs import tutorial_spec

from core.inspect.xla_analysis import normalise_memory
from core.machine import memory_estimate
from core.run import prepared
from core.spec import DatasetSpec, FitSpec, OptimizerSpec

# (n, p, d): tall, square with covariates, wide (p x p dominates), and p > n with more than
# half as many rows as columns (float32's profiled fits use Sigma's factor there, float64's
# the rows' matrix: `core.fit.row_path`).
SHAPES = [(2000, 10, 1), (150, 150, 3), (20, 500, 1), (120, 200, 1)]


def _xla_peak_bytes(spec: FitSpec) -> int:
    """The most any one executable of the fit holds: its arguments, its temporaries and
    the outputs it does not write over its arguments."""
    prep = prepared.prepare(spec, cache=prepared.ExecutableCache())
    peaks = []
    for executable in prep.executables.values():
        memory = normalise_memory(executable.memory_analysis())
        peaks.append(memory.argument_bytes + memory.temp_bytes + memory.output_bytes - (memory.alias_bytes or 0))
    return max(peaks)


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=["tall", "square", "wide", "p>n"])
@pytest.mark.parametrize("strategy,optimizer", [("scan", "seed"), ("scan", "rprop"), ("jit_step", "adam"),
                                                ("scan", "preconditioned_lbfgs"), ("scan", "lbfgs"),
                                                ("scan", "diagonal_newton")])
def test_the_estimate_covers_what_xla_holds_with_a_bounded_margin(shape, strategy, optimizer, precision):
    n, p, d = shape
    # With a tolerance, as the front doors run them: the loop that stops holds its test too.
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=n, p=p, d=d), strategy=strategy, iterations=3,
                         precision=precision, optimizer=OptimizerSpec(optimizer), repeats=1, tol=1e-9)
    xla = _xla_peak_bytes(spec)
    estimate = memory_estimate.device_bytes(spec, shape)
    assert xla <= estimate <= 2.0 * xla, (estimate / xla, estimate, xla)


def test_a_wide_csv_is_estimated_by_its_p_x_p_matrices():
    # 4 x 10,000: a 139 KB file whose fit holds p x p matrices of 100 million cells each.
    spec = tutorial_spec(strategy="eager", precision="float32")
    assert memory_estimate.device_bytes(spec, (4, 10_000, 1)) >= memory_estimate.P_P_ARRAYS * 4 * 10_000**2


def test_on_the_cpu_the_host_copies_of_the_data_count_too():
    cpu = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=1000, p=50))
    shape = (1000, 50, 1)
    assert memory_estimate.needed_bytes(cpu, shape) == (memory_estimate.device_bytes(cpu, shape)
                                                        + memory_estimate.host_bytes(cpu, shape))


def test_a_gpu_fit_is_estimated_by_the_way_it_makes_omega_there(monkeypatch):
    # At 120 x 200 float32 goes through the rows' n x n matrix on a GPU and through Sigma's
    # factor elsewhere (`core.fit.row_path`). The fit is compiled here the GPU's way (the CPU
    # having no GPU) and the estimate for a GPU spec must cover what XLA holds then.
    # JAX's caches are emptied around it: a trace of the same fit made the CPU's way must not
    # stand in for it, nor it for a later test's.
    import jax

    from core.fit import row_path

    shape = (120, 200, 1)
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=120, p=200), strategy="scan", iterations=3,
                         precision="float32", optimizer=OptimizerSpec("preconditioned_lbfgs"), repeats=1, tol=1e-9)
    rule = row_path.through_rows
    with monkeypatch.context() as patched:
        patched.setattr(row_path, "through_rows", lambda rows, p, precision, platform="cpu": rule(rows, p, precision,
                                                                                                 "gpu"))
        jax.clear_caches()
        try:
            xla = _xla_peak_bytes(spec)
        finally:
            jax.clear_caches()
    on_gpu = memory_estimate.device_bytes(dataclasses.replace(spec, device="gpu"), shape)
    assert xla <= on_gpu <= 2.0 * xla, (on_gpu / xla, on_gpu, xla)
    assert on_gpu != memory_estimate.device_bytes(spec, shape)


@pytest.mark.parametrize("precision, advice", [("float64", "use fewer rows, float32 or a device with more memory"),
                                               ("float32", "use fewer rows or a device with more memory")])
def test_a_refusal_says_its_estimate_to_three_digits_and_offers_float32_only_to_float64(monkeypatch, precision,
                                                                                        advice):
    from core.spec import SpecError

    monkeypatch.setattr(memory_estimate, "free_bytes", lambda platform: 24_003_000_000)
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=10_000_000, p=50), precision=precision)
    with pytest.raises(SpecError) as refused:
        memory_estimate.check(spec)
    said = str(refused.value)
    assert advice in said and "has 24.0 GB free" in said
    needed = re.search(r"needs about ([\d.,]+) GB \(n = 10,000,000", said).group(1)
    assert len(needed.replace(".", "").replace(",", "")) == 3, said
