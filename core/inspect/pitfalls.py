"""The seed tutorial's pitfalls, each as a minimal demonstration that runs live.

The seed tutorial (Gangloff, "JIT compilation with JAX", FinistR 2023) has three bugs
that the product must not reproduce, and the jaxlib release after ours has a CPU
miscompilation that changes the seed's ELBO. Each demo here computes the buggy and the
correct value side by side on small data and says whether the bug showed:

- `trace_precedence`: tr(M^T M + D Omega) instead of tr(Omega (M^T M + D));
- `logdet_overflow`: log(det(Omega)) overflows in float32 for p = 114;
- `pytree_class`: the level-4 class whose Omega never leaves the identity;
- `fused_reduction`: jax-ml/jax#39103, the jitted Stirling sum on jaxlib 0.10.2;
- `recompiles`: not the seed's, but what turns any JIT level back into a compile per
  iteration (a jit inside the loop, a changing static argument), explained by JAX.

`catalogue()` lists them with the code a reader should see; `run(key)` runs one.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax.tree_util import register_pytree_node_class

from core.data.datasets import load_oaks, simulate
from core.fit import model
from core.fit.optim import make_optimizer
from core.fit.strategies import init_state, scan_pytree_class
from core.inspect.pitfall_notes import CODE, SUMMARIES, TITLES, PitfallResult, source  # noqa: F401
from core.machine import compile_log, runtime
from core.spec import OptimizerSpec


def trace_precedence(n: int = 20, p: int = 3, seed: int = 0) -> PitfallResult:
    """The seed's trace term next to the correct one, at the closed-form Omega."""
    rng = np.random.default_rng(seed)
    M = jnp.asarray(rng.normal(size=(n, p)), jnp.float32)
    S = jnp.asarray(rng.uniform(0.2, 1.0, size=(n, p)), jnp.float32)
    D = jnp.diag(jnp.sum(S**2, axis=0))
    Omega = jnp.linalg.inv((M.T @ M + D) / n)  # the closed form (B = 0), as in the seed
    buggy = jnp.trace(M.T @ M + jnp.diag(jnp.sum(S**2, axis=0)) @ Omega)  # the seed's line
    correct = jnp.trace(Omega @ (M.T @ M + D))  # equals n p at the closed form
    identity = jnp.eye(p, dtype=jnp.float32)
    agree_at_identity = abs(float(jnp.trace(M.T @ M + D @ identity) - jnp.trace(identity @ (M.T @ M + D))))
    return PitfallResult(
        key="trace_precedence",
        title=TITLES["trace_precedence"],
        explanation=(
            "The seed writes `jnp.trace(M.T @ M + jnp.diag(...) @ Omega)`: `@` binds tighter than "
            "`+`, so Omega multiplies only the diagonal part and the ELBO's trace term becomes "
            "tr(M^T M) + tr(D Omega) instead of tr(Omega (M^T M + D)). At the closed-form Omega the "
            f"correct term is exactly n p = {n * p}; the two agree only when Omega = I "
            f"(difference there: {agree_at_identity:.1e})."
        ),
        buggy={"tr(M^T M + D Omega)": float(buggy)},
        correct={"tr(Omega (M^T M + D))": float(correct), "n p": float(n * p)},
        reproduced=not np.isclose(float(buggy), float(correct), rtol=1e-3),
    )


def logdet_overflow(latent_sd: float = 0.1) -> PitfallResult:
    """log(det(Omega)) against Cholesky and slogdet, in float32, for an oaks-sized Omega."""
    Y = load_oaks().counts  # 116 x 114
    n, p = Y.shape
    M = np.log(Y + (Y == 0))  # pyPLNmodels' starting means
    sigma = (M.T @ M + n * latent_sd**2 * np.eye(p)) / n  # the seed's Sigma, uncentred
    Omega = jnp.asarray(np.linalg.inv(sigma), jnp.float32)
    buggy = jnp.log(jnp.linalg.det(Omega))  # the seed's line
    cholesky = 2.0 * jnp.sum(jnp.log(jnp.diagonal(jnp.linalg.cholesky(Omega))))
    sign, slogdet = jnp.linalg.slogdet(Omega)
    reference = np.linalg.slogdet(np.linalg.inv(sigma))[1]
    return PitfallResult(
        key="logdet_overflow",
        title=TITLES["logdet_overflow"],
        explanation=(
            f"det of a {p} x {p} matrix is a product of {p} eigenvalues: here log det(Omega) is about "
            f"{reference:.0f}, far past float32's largest exponent (about 88.7), so det() returns inf "
            "and the ELBO is not finite. In the seed's own float32 fit of oaks this happens from the "
            "fourth iteration on. A Cholesky factor (or slogdet) sums logarithms instead and stays finite."
        ),
        buggy={"log(det(Omega)), float32": float(buggy)},
        correct={
            "2 sum log diag(chol(Omega)), float32": float(cholesky),
            "slogdet(Omega), float32": float(slogdet) if float(sign) > 0 else float("nan"),
            "slogdet, float64 (reference)": float(reference),
        },
        reproduced=not np.isfinite(float(buggy)) and bool(np.isfinite(float(cholesky))),
        note=f"Omega = Sigma^-1 with Sigma = (M^T M + D) / n on oaks, M = log(Y + (Y == 0)), S = {latent_sd}.",
    )


# --- pytree_class: the seed's level-4 class, kept faithful in a tiny form -----------------

pln = None  # the tutorial's module-level instance, which its methods write to by mistake
_seed_class_lock = threading.Lock()  # `pln` is shared by every thread of a server


@register_pytree_node_class
class SeedPLN:
    """The seed's level-4 class, reduced to what its two bugs need (do not copy)."""

    def __init__(self, Y, O, X):
        self.Y, self.O, self.X = Y, O, X
        self.n, self.p = Y.shape
        self.d = X.shape[1]
        self.M = jnp.zeros(Y.shape, Y.dtype)
        self.S = jnp.ones(Y.shape, Y.dtype)
        self.B = jnp.zeros((self.d, self.p), Y.dtype)
        self.Sigma = jnp.eye(self.p, dtype=Y.dtype)
        self.Omega = jnp.eye(self.p, dtype=Y.dtype)

    def set_optim_params(self, params):
        self.B, self.M, self.S = params

    def update_Sigma(self):
        pln.Sigma = (self.M.T @ self.M + jnp.diag(jnp.sum(self.S**2, axis=0))) / self.n  # bug: global

    def update_Omega(self):
        pln.Omega = jnp.linalg.inv(self.Sigma)  # bug: global, and self.Sigma never changed

    def tree_flatten(self):
        children = (self.B, self.M, self.S, self.Sigma, self.Omega)
        aux_data = {"Y": self.Y, "O": self.O, "X": self.X, "n": self.n, "p": self.p, "d": self.d}
        return children, aux_data

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        B, M, S, Sigma, Omega = children
        obj = cls(aux_data["Y"], aux_data["O"], aux_data["X"])
        obj.B, obj.M, obj.S = B, M, S  # bug: Sigma and Omega are dropped
        return obj


def pytree_class(iterations: int = 5, n: int = 12, p: int = 3) -> PitfallResult:
    """The seed's class inside `lax.scan` vs core's scan_pytree_class, on tiny simulated data."""
    global pln
    counts = simulate(n, p, 1, seed=0)
    data = model.make_data(counts.counts, counts.offsets, counts.covariates, "float32")
    data = model.PLNData(*(jnp.asarray(a) for a in data))
    optimizer = make_optimizer(OptimizerSpec())

    def scan_fun(carry, _):
        fit, opt_state = carry
        params = model.PLNParams(fit.B, fit.M, fit.S)
        loss, grads = jax.value_and_grad(model.negative_elbo)(params, fit.Omega, data)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        fit.set_optim_params(jax.tree.map(jnp.add, params, updates))
        fit.update_Sigma()
        fit.update_Omega()
        return (fit, opt_state), -loss

    with _seed_class_lock:
        pln = SeedPLN(data.counts, data.offsets, data.covariates)
        start = model.PLNParams(pln.B, pln.M, pln.S)
        try:
            (seed_fit, _), _ = jax.lax.scan(scan_fun, (pln, optimizer.init(start)), length=iterations)
        finally:
            pln = None  # it now holds leaked tracers; drop them
    seed_omega = np.asarray(seed_fit.Omega)

    state = init_state(data, "seed", optimizer)
    output = scan_pytree_class._fit(state, data, optimizer, iterations)
    core_omega = np.asarray(output.state.precision)
    eye = np.eye(p)
    buggy_change = float(np.max(np.abs(seed_omega - eye)))
    correct_change = float(np.max(np.abs(core_omega - eye)))
    return PitfallResult(
        key="pytree_class",
        title=TITLES["pytree_class"],
        explanation=(
            "The seed's level-4 class writes `pln.Sigma = ...` and `pln.Omega = ...`, a global name, "
            "instead of `self`, and its `tree_unflatten` rebuilds the object without Sigma and Omega. "
            "Inside `lax.scan` the carried object is rebuilt every iteration, so Omega stays the "
            "identity and the fit optimises the wrong objective, silently. Core's scan_pytree_class "
            "keeps every array a pytree child and returns updated copies."
        ),
        buggy={f"max |Omega - I| after {iterations} iterations (seed's class)": buggy_change},
        correct={f"max |Omega - I| after {iterations} iterations (core's class)": correct_change},
        reproduced=buggy_change == 0.0 and correct_change > 0.0,
        note=f"simulated {n} x {p}, float32, the seed's optimizer.",
    )


# --- fused_reduction: jax-ml/jax#39103 ------------------------------------------------------

AFFECTED_JAXLIB = ("0.10.2",)  # releases known to miscompile the jitted Stirling sum on CPU


def _log_stirling(integer):
    """The seed's Stirling approximation of log(integer!), elementwise."""
    integer_ = integer + (integer == 0)
    return jnp.log(jnp.sqrt(2 * jnp.pi * integer_)) + integer_ * jnp.log(integer_ / jnp.exp(1))


def fused_reduction() -> PitfallResult:
    """The jitted Stirling sum of log Y! on oaks against NumPy's, on the installed jaxlib."""
    runtime.configure()  # float64 must be available for the float64 sum
    Y = load_oaks().counts
    stirling_sum = jax.jit(lambda y: jnp.sum(_log_stirling(y)))
    jitted = {dtype: float(stirling_sum(jax.device_put(jnp.asarray(Y, dtype), jax.devices("cpu")[0])))
              for dtype in ("float32", "float64")}
    reference = model.stirling_log_factorial_sum(Y)
    worst = max(abs(value - reference) / abs(reference) for value in jitted.values())
    version = jaxlib.__version__
    affected = version in AFFECTED_JAXLIB
    verdict = (
        f"jaxlib {version} is installed: a known-affected release." if affected
        else f"jaxlib {version} is installed, which is not known to be affected, so the sums agree "
             f"here (worst relative difference {worst:.1e}); on jaxlib 0.10.2 the jitted sum is 1.114e6."
    )
    return PitfallResult(
        key="fused_reduction",
        title=TITLES["fused_reduction"],
        explanation=(
            "On jaxlib 0.10.2, XLA:CPU miscompiles some fused reductions (jax-ml/jax#39103): on oaks "
            "the jitted Stirling sum of log Y! is 1.114e6 instead of 1.286e6, which shifts every ELBO "
            "of the seed's code. This project pins jax and jaxlib 0.10.1 and computes sum(log Y!) "
            "once on the host with gammaln. " + verdict
        ),
        buggy={f"jitted Stirling sum, {dtype} (CPU)": value for dtype, value in jitted.items()},
        correct={"NumPy Stirling sum, float64": reference,
                 "exact sum(log Y!) (gammaln), for comparison": model.exact_log_factorial_sum(Y)},
        reproduced=worst > 1e-3,
        note=f"installed jaxlib {version}; known affected: {', '.join(AFFECTED_JAXLIB)}.",
    )


def _poisson_step(latent_mean, counts, step_size):
    """One gradient step on the Poisson part of the ELBO in M: the smallest fit step."""
    return latent_mean + step_size * (counts - jnp.exp(latent_mean))


# The three loops of the demo, as the page names them.
WAYS = ("jit inside the loop", "step size as a static argument", "jitted once, step size an array")


# JAX's hint on a new function made on a line it has traced before (its explanation's lines
# joined, as `compile_log` keeps them), and what it means in the demonstration below.
_SEEN_ON_THE_LINE = ("but seen another function defined on the same line; maybe the function is being re-defined "
                     "repeatedly, preventing caching?")
_NEW_THIS_PRESS = "(this demonstration's own step: each press defines it anew, and an earlier press traced that line)"


def recompiles(iterations: int = 4, n: int = 20, p: int = 3) -> PitfallResult:
    """Three loops of the same step, counted and explained by JAX: jitted inside the loop,
    with its step size as a static argument, and jitted once with the step size an array."""
    runtime.configure()
    counts = jnp.asarray(np.random.default_rng(0).poisson(2.0, size=(n, p)), jnp.float32)
    start = jnp.zeros((n, p), jnp.float32)
    schedule = [0.1 / (t + 1) for t in range(iterations)]
    sizes = [jnp.asarray(size, jnp.float32) for size in schedule]  # made before the watch: no compile of ours

    # A new function for each demonstration and each way: JAX caches by function, so a second
    # demo in this worker would find the first one's traces and compile nothing, and the right
    # way's one compile was explained against the static way's keys ("all previously seen cache
    # keys differ"), as if it too had missed.
    def new_step():
        def step(latent_mean, counts, step_size):
            return _poisson_step(latent_mean, counts, step_size)
        return step

    step = new_step()
    with compile_log.watch() as inside_loop:
        latent_mean = start
        for size in schedule:  # a new function object every iteration: JAX's cache never sees it again
            latent_mean = jax.jit(lambda m: step(m, counts, size))(latent_mean)
    with compile_log.watch() as static_size:
        stepped = jax.jit(new_step(), static_argnames="step_size")
        latent_mean = start
        for size in schedule:  # a static argument is part of the cache key: each new value compiles
            latent_mean = stepped(latent_mean, counts, step_size=size)
    with compile_log.watch() as once:
        stepped = jax.jit(new_step())
        latent_mean = start
        for size in sizes:  # same shapes and dtypes every call: one compile
            latent_mean = stepped(latent_mean, counts, size)

    def ours(compiles):
        return [c for c in compiles if c.function in ("<lambda>", "step")]

    def one_step_a_press(compiles):
        # From the second demonstration on, JAX adds to the static and the right way's first
        # compile that it has seen "another function defined on the same line": the step of an
        # earlier press (`new_step`), not a flaw of the way shown. Said as what it is.
        return [dataclasses.replace(c, why=c.why.replace(_SEEN_ON_THE_LINE, _NEW_THIS_PRESS)) for c in compiles]

    loops = [ours(inside_loop), one_step_a_press(ours(static_size)), one_step_a_press(ours(once))]
    seconds = sum((c.trace_s or 0) + (c.lower_s or 0) + (c.compile_s or 0) for c in loops[0] + loops[1])

    def times(count: int) -> str:
        return "once" if count == 1 else f"{count} times"

    return PitfallResult(
        key="recompiles",
        title=TITLES["recompiles"],
        explanation=(
            f"The same step, {iterations} iterations, three ways. `jax.jit(lambda ...)` inside the loop builds a "
            f"new function every iteration: it compiled {times(len(loops[0]))}. A step size passed as a static "
            f"argument is part of the cache key: {times(len(loops[1]))}. Together "
            f"{seconds * 1e3:,.0f} ms of tracing, lowering and compiling. Jitted once, with the step size an "
            f"array: {times(len(loops[2]))}. Below, each compile with JAX's own explanation "
            "(`jax.explain_cache_misses`) and its stages' times (`jax.log_compiles`)."),
        buggy={f"compiles: {WAYS[0]}": float(len(loops[0])), f"compiles: {WAYS[1]}": float(len(loops[1]))},
        correct={f"compiles: {WAYS[2]}": float(len(loops[2]))},
        reproduced=len(loops[0]) > 1 and len(loops[1]) > 1,
        recompiles=tuple(c for loop in loops for c in loop),
        recompile_ways=tuple(way for way, loop in zip(WAYS, loops) for _ in loop),
    )


class Pitfall(NamedTuple):
    """A pitfall as the page lists it: its demo and the code worth reading."""

    key: str
    title: str
    summary: str
    run: Callable[[], PitfallResult]
    code: tuple[Callable, ...]


def catalogue() -> list[Pitfall]:
    """Every pitfall, in the order the tutorial meets them."""
    demos = {"trace_precedence": trace_precedence, "logdet_overflow": logdet_overflow,
             "pytree_class": pytree_class, "fused_reduction": fused_reduction, "recompiles": recompiles}
    return [Pitfall(key, TITLES[key], SUMMARIES[key], demo, tuple(globals()[name] for name in CODE[key]))
            for key, demo in demos.items()]


def run(key: str) -> PitfallResult:
    """Run pitfall `key`'s demonstration; `KeyError` names the known keys."""
    found = {pitfall.key: pitfall for pitfall in catalogue()}
    if key not in found:
        raise KeyError(f"unknown pitfall {key!r}; known: {', '.join(found)}")
    return found[key].run()
