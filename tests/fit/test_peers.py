"""Peers: the PyTorch twins follow our JAX trajectory; pyPLNmodels' fit is the same model."""

import dataclasses
import functools
import pickle
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from specs import tutorial_spec

from core import catalog
from core.data.datasets import load_oaks
from core.fit import model, peers, strategies
from core.machine.runtime import configure
from core.run import engine
from core.spec import DatasetSpec, OptimizerSpec, SpecError

from project import ROOT

# Warnings from inside torch (its own deprecations, hit by Inductor and by importing torch).
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning"),
]

ITERATIONS = 150
# What rounding explains, as in test_strategies: before the seed optimizer amplifies rounding
# the twins match scan to rounding; over the whole run, within the band that float32
# rounding opens between scan's own float32 and float64 traces, times the spread between
# rounding realisations.
FLOAT32_ACCURACY = 1e-6
BEFORE_AMPLIFICATION = {"float64": 1e-10, "float32": 2 * FLOAT32_ACCURACY}
ROUNDING_REALISATIONS = 10


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # Tests check results, not speed; on a busy machine torch's OpenMP threads spin
    # against other processes and an eager iteration goes from ~3 ms to ~100 ms.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.cache
def _scan(dtype, iterations=ITERATIONS, optimizer=OptimizerSpec(), init="seed"):
    configure()
    counts = load_oaks()
    data = jax.device_put(model.make_data(counts.counts, counts.offsets, counts.covariates, dtype))
    problem = strategies.Problem(counts.n, counts.p, counts.d, dtype, iterations, optimizer)
    state = strategies.init_state(data, init, problem.transformation)
    strategy = strategies.get("scan")
    tol = jnp.asarray(0.0, dtype)
    output = strategy.run(strategy.compile(strategy.lower(problem, state, data, tol)), problem, state, data, tol)
    return np.asarray(jax.block_until_ready(output.elbo), dtype=np.float64)


def _relative(a, b):
    return abs(a - b) / abs(b)


def test_listing_what_can_run_imports_neither_torch_nor_pyplnmodels():
    code = (
        "import sys, core.fit.peers, core.catalog\n"
        "assert [d['name'] for d in core.fit.peers.describe()] == list(core.fit.peers.PEER_NAMES)\n"
        "assert list(core.catalog.RUNNABLES)[-3:] == list(core.fit.peers.PEER_NAMES)\n"
        "loaded = [m for m in ('torch', 'pyPLNmodels') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("name", ["scan", "torch_eager", "pyplnmodels"])
def test_a_result_unpickles_without_the_library_that_made_it(name, tmp_path):
    """A worker's result reaches the server pickled: a torch or JAX object in it (torch's
    version string is one) would import the library into the server when unpickled."""
    spec = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=30, p=4), strategy=name, iterations=5, repeats=1,
                         optimizer=OptimizerSpec("seed"), init="seed", tol=0.0)
    (tmp_path / "result.pickle").write_bytes(pickle.dumps(engine.run(spec)))
    code = ("import pickle, sys\n"
            f"result = pickle.loads(open({str(tmp_path / 'result.pickle')!r}, 'rb').read())\n"
            "loaded = [m for m in ('torch', 'jax', 'jaxlib', 'pyPLNmodels') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-1000:]


def test_describe_names_every_peer():
    described = peers.describe()
    assert [d["name"] for d in described] == list(peers.PEER_NAMES) == ["pyplnmodels", "torch_eager", "torch_compile"]
    assert all(d["description"] for d in described)


def test_bad_device_and_unknown_name_are_refused():
    from core.run import peer_timing

    with pytest.raises(SpecError, match="not supported by the PyTorch peers"):
        peer_timing.torch_device("tpu")
    with pytest.raises(SpecError, match="'tpu'"):
        engine.run(tutorial_spec(strategy="torch_eager", device="tpu"))
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SpecError, match="'gpu' is not available to PyTorch"):
            peer_timing.torch_device("gpu")
        for name in peers.PEER_NAMES:
            with pytest.raises(SpecError, match="'gpu' is not available"):
                engine.run(tutorial_spec(strategy=name, device="gpu"))
    with pytest.raises(KeyError, match="unknown strategy 'nope'"):
        catalog.runnable("nope")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_twins_follow_the_jax_scan_trajectory(dtype):
    reference = _scan(dtype)
    spec = tutorial_spec(strategy="torch_eager", iterations=ITERATIONS, precision=dtype, repeats=1)
    counts = load_oaks()
    eager = engine.run(spec, counts)
    compiled = engine.run(dataclasses.replace(spec, strategy="torch_compile"), counts)
    rounding = _relative(_scan("float32"), _scan("float64"))
    beyond = rounding > FLOAT32_ACCURACY
    horizon = int(np.argmax(beyond)) if beyond.any() else ITERATIONS
    band = ROUNDING_REALISATIONS * (rounding.max() + FLOAT32_ACCURACY)
    for result in (eager, compiled):
        assert len(result.elbo) == ITERATIONS and np.all(np.isfinite(result.elbo)), result.strategy
        apart = _relative(np.asarray(result.elbo), reference)
        assert apart[:horizon].max() <= BEFORE_AMPLIFICATION[dtype], (result.strategy, horizon, apart[:horizon].max())
        assert apart.max() <= band, f"{result.strategy}: ELBO parts from scan's by {apart.max():.1e} > {band:.1e}"
        assert result.elbo[-1] > 0.01 * result.elbo[0]
        assert result.transfer_s > 0 and result.first_call_s > 0 and result.run_s_min == result.run_s_max
        assert result.trace_lower_s == 0 and result.iterations_run == ITERATIONS and result.processes == 1
        assert (result.optimizer, result.init, result.device_kind) == ("seed", "seed", "cpu")
        assert result.versions["torch"] and result.log_factorial == "exact"
    assert eager.cache == "none" and eager.compile_s == 0 and eager.compile_count == 0
    # One graph for the whole step, compiled at the first call, never again.
    assert compiled.cache in ("compiled", "disk", "memory") and compiled.recompile_count == 0
    if compiled.cache != "memory":
        assert compiled.compile_count == 1 and compiled.compile_s > 0
        assert compiled.first_call_s > compiled.run_s
    again = engine.run(dataclasses.replace(spec, strategy="torch_compile"), counts)
    assert again.cache == "memory" and again.compile_count == 0 and again.compile_s == 0
    np.testing.assert_array_equal(again.elbo, compiled.elbo)


# Not rprop from log_counts: there B starts at its closed form, where the gradient with
# respect to B is zero up to rounding, and Rprop steps by its sign, so each backend's
# rounding noise picks a different direction (the ELBOs part by ~5e-3 within 60 steps).
@pytest.mark.parametrize("name, init", [("adam", "log_counts"), ("rprop", "seed"), ("seed", "log_rates"),
                                        ("seed", "log_rates_sd")])
def test_torch_optimizers_match_optax(name, init):
    from core.fit.peers import torch_fit

    optimizer = OptimizerSpec(name, 0.01)
    reference = _scan("float64", iterations=60, optimizer=optimizer, init=init)
    spec = tutorial_spec(strategy="torch_eager", iterations=60, precision="float64", optimizer=optimizer, init=init)
    _, elbo = torch_fit.fit(spec, load_oaks(), "cpu", compiled=False)
    np.testing.assert_allclose(elbo, reference, rtol=1e-9)


def test_eager_and_compile_gradients_agree():
    # torch_eager differentiates with torch.autograd, torch_compile with torch.func.
    from core.fit.peers import torch_fit
    from core.fit.peers.torch_optim import make_torch_optimizer

    counts = load_oaks()
    data = torch_fit.make_data(counts.counts, counts.offsets, counts.covariates, "float64", "cpu")
    optimizer = make_torch_optimizer(OptimizerSpec())
    state = torch_fit.init_state(data, "log_counts", optimizer)
    traces = [torch_fit.run_loop(torch_fit.make_step(optimizer, gradient), state, data, 5)[1].numpy()
              for gradient in ("autograd", "func")]
    np.testing.assert_allclose(traces[0], traces[1], rtol=1e-12)


def test_pyplnmodels_peer_reports_its_own_algorithm_with_the_exact_log_factorial():
    iterations = 5
    counts = load_oaks()
    spec = tutorial_spec(strategy="pyplnmodels", iterations=iterations, precision="float64", repeats=2)
    seen = []
    result = engine.run(spec, counts, on_progress=seen.append)
    assert (result.optimizer, result.lr, result.init) == ("rprop", 0.01, "log_counts")
    assert result.warnings == []
    # Its float32 ELBO is its own code's, summed in float32: the run says so.
    single = engine.run(dataclasses.replace(spec, precision="float32", repeats=1), counts)
    assert any("its own float32 sums" in warning for warning in single.warnings)
    assert result.cache == "none" and result.compile_s == 0 and result.run_s_min <= result.run_s <= result.run_s_max
    assert result.iterations_run == iterations and result.versions["pyPLNmodels"]
    assert [p.phase for p in seen][-1] == "done" and any(p.elbo is not None for p in seen)
    # Iteration 0 is the ELBO at pyPLNmodels' init, which is ours for init="log_counts".
    configure()
    data = model.make_data(counts.counts, counts.offsets, counts.covariates, "float64")
    ours = float(model.elbo(*model.init_params(data, "log_counts"), data))
    assert _relative(result.elbo[0], ours) < 1e-13
    # optax's rprop applies each step one iteration late (its first update is zero);
    # early on, before B's own steps matter, the trajectories are the same up to that lag.
    reference = _scan("float64", iterations=iterations + 1, optimizer=OptimizerSpec("rprop", 0.01), init="log_counts")
    np.testing.assert_allclose(result.elbo[:iterations], reference[1:], rtol=1e-6)


def test_pyplnmodels_converges_to_where_our_rprop_goes():
    # Measured on oaks: relative gap 1.0e-2 at 100 iterations, 2.6e-3 at 400, 5.6e-4 at
    # 1000, 5.5e-6 at 3000 (pyPLNmodels profiles B and steps at once, so it gets there first).
    import torch

    from core.fit.peers import pyplnmodels_fit

    iterations = 1000
    counts = load_oaks()
    fitted = pyplnmodels_fit.fit(pyplnmodels_fit.build(counts, torch.device("cpu"), "float64"), iterations)
    theirs = pyplnmodels_fit.exact_elbo(pyplnmodels_fit.recorded_elbo(fitted), counts.counts)
    ours = _scan("float64", iterations=iterations, optimizer=OptimizerSpec("rprop", 0.01), init="log_counts")
    assert theirs.shape == (iterations,) and np.all(np.isfinite(theirs))
    assert theirs[-1] >= ours[-1]
    assert _relative(theirs[-1], ours[-1]) < 1e-3


def test_simulated_data_with_covariates_and_a_zero_column():
    # pyPLNmodels drops all-zero columns by default; the peer keeps them (same p as ours).
    from core.data.datasets import simulate

    counts = simulate(60, 5, 2, 0)
    counts.counts[:, 2] = 0
    for name in ("pyplnmodels", "torch_eager"):
        result = engine.run(tutorial_spec(dataset=DatasetSpec(kind="simulated", n=60, p=5, d=2), strategy=name,
                                          iterations=20, precision="float64", repeats=1), counts)
        assert len(result.elbo) == 20 and np.all(np.isfinite(result.elbo)), name


def test_pyplnmodels_stopping_on_a_non_finite_elbo_is_reported_not_raised(monkeypatch):
    import torch

    from core.fit.peers import pyplnmodels_fit

    cls = pyplnmodels_fit.model_class()
    original = cls.compute_elbo
    calls = []

    def failing_after_three(self):
        calls.append(1)
        value = original(self)
        return value if len(calls) <= 3 else value * torch.nan

    monkeypatch.setattr(cls, "compute_elbo", failing_after_three)
    spec = tutorial_spec(strategy="pyplnmodels", iterations=10, precision="float64", repeats=3)
    result = engine.run(spec, load_oaks())
    assert result.status == "diverged" and result.diverged_at == 3 and result.iterations_run == 3
    assert np.all(np.isfinite(result.elbo)) and "not finite at iteration 3" in result.error
    # A fit that stopped is not timed again: its one time stands for the repeats.
    assert result.run_s == result.run_s_min == result.run_s_max == result.first_call_s
