"""About: the model and its ELBO, what each strategy compiles, and how the timings are taken."""

from __future__ import annotations

import streamlit as st

from core.results.outcome import CONVERGED_GAP
from pages.ui import resources

st.title("About PLN JIT Lab")
st.markdown(
    "Which way of compiling this JAX fit is fastest, by how much, and does it still compute the same "
    "thing? The lab fits the **Poisson log-normal (PLN)** model by variational inference under several "
    "JAX JIT strategies, times each one the same way, and keeps every run in a store that all users share."
)

st.header("The model")
st.markdown(
    "Counts $Y$ ($n \\times p$), log-offsets $O$ ($n \\times p$) and covariates $X$ ($n \\times d$; an "
    "intercept only by default). Each sample has a Gaussian latent vector, and counts are Poisson given it:"
)
st.latex(r"Z_i \sim \mathcal{N}(X_i B,\ \Sigma), \qquad "
         r"Y_{ij} \mid Z_{ij} \sim \mathcal{P}\!\left(\exp(O_{ij} + Z_{ij})\right)")
st.markdown("The variational posterior is Gaussian with a diagonal covariance, and $M$ is **uncentred**:")
st.latex(r"q(Z_i) = \mathcal{N}\!\left(M_i,\ \operatorname{diag}(S_i^2)\right)")
# One definition a line: a single line overflows the column of a 1024 px projector.
st.latex(r"\begin{gathered} \Omega = \Sigma^{-1}, \qquad A = \exp\!\left(O + M + \tfrac{1}{2} S^2\right), \\ "
         r"R = M - XB, \qquad D = \operatorname{diag}\Big(\sum_i S_i^2\Big) \end{gathered}")
st.markdown("The evidence lower bound (ELBO), with sums over all $n \\times p$ entries and products elementwise:")
# Three lines: a longer one overflows the column of a 1024 px projector.
st.latex(r"\begin{aligned} \mathrm{ELBO} = {} & \frac{n}{2} \log\det\Omega "
         r"- \frac{1}{2} \operatorname{tr}\!\big(\Omega\,(R^\top R + D)\big) \\ "
         r"& + \sum \Big(Y \odot (O + M) - A + \tfrac{1}{2} \log S^2\Big) \\ "
         r"& - \sum \log Y! + \frac{np}{2} \end{aligned}")
st.markdown("For given $M$ and $S$, $B$ and $\\Sigma$ have closed forms:")
st.latex(r"\hat B = (X^\top X)^{-1} X^\top M, \qquad \hat\Sigma = \frac{1}{n}\left(R^\top R + D\right)")
st.markdown("At these the trace term equals $np$, and the ELBO becomes the **profiled ELBO** that "
            "pyPLNmodels maximises:")
st.latex(r"\begin{aligned} \mathrm{ELBO}_{\text{profiled}}(M, S) = {} & -\frac{n}{2} \log\det\hat\Sigma "
         r"- \sum \log Y! \\ & + \sum \Big(Y \odot (O + M) - A + \tfrac{1}{2} \log S^2\Big) \end{aligned}")
st.markdown(
    "- **Reported values** are the ELBO itself (negative numbers) with the **exact** "
    "$\\log Y! = \\operatorname{gammaln}(Y + 1)$, computed once on the host in float64. Plots show "
    "$\\log(-\\mathrm{ELBO})$, as the seed tutorial does.\n"
    "- pyPLNmodels (and the seed tutorial) use **Stirling's approximation** of $\\log Y!$ instead. On oaks "
    "the two sums differ by a constant of about **570**, so an ELBO from pyPLNmodels is about 570 higher "
    "than the same fit's ELBO here; every number on this site says which one it uses.\n"
    "- Log-determinants come from a Cholesky factor, never `log(det(...))`, which overflows in float32 "
    "for $p = 114$; inverses are Cholesky solves."
)
st.page_link("pages/under_the_hood/page.py", label="The seed tutorial's bugs, run live: Under the hood",
              icon=":material/bug_report:")

st.header("What each strategy compiles")
st.markdown(
    "Every strategy fits the same model with the same optimizer and starting point; only what is handed "
    "to XLA differs. One iteration is the optimizer's step: for the seed tutorial's algorithm, the ELBO and "
    "its gradient in $B, M, S$ at the current $\\Omega$, the optimizer's update, then "
    "$\\Omega \\leftarrow \\hat\\Sigma^{-1}$ at the closed form. With a tolerance, every strategy stops "
    "inside its loop after two iterations in a row whose relative ELBO change is under it (the scans then "
    "run their body in a `lax.while_loop`, which can end early). Before a fit says it converged, its last "
    "point is evaluated again in float64 and its gradient estimates how far the optimum still is: a fit "
    f"stopped more than {CONVERGED_GAP:.0e} (relative) short says \"stopped short of the optimum, not converged\", "
    "with how far it believes it is, instead."
)
levels = {name: level for level, name in enumerate(resources.tutorial_levels())}
lines = []
for runnable in resources.runnables():
    tags = [runnable.tag]
    if runnable.name in levels:
        tags.append(f"seed tutorial level {levels[runnable.name]}")
    lines.append(f"- **{runnable.name}** ({', '.join(tags)}): {runnable.summary}")
st.markdown("\n".join(lines))
with st.expander("Each strategy in full", icon=":material/menu_book:"):
    for runnable in resources.runnables():
        st.markdown(f"**{runnable.name}**: {runnable.description}")

st.header("How timings are taken")
st.markdown(
    "- **Clock**: `time.perf_counter()` around work that ends in `jax.block_until_ready(...)`, because JAX "
    "dispatches asynchronously and a call returns before the device has finished.\n"
    "- **Phases, reported apart**: tracing + lowering to StableHLO; XLA compilation; the first call; and "
    "the steady state, the **median, min and max of R repeats or more** (the sidebar's *Repeats*, more for "
    "a short fit: below), each starting from the same initial state (the compiled loops consume their state, "
    "so each repeat gets a fresh copy, made before its clock starts). Per-iteration time = steady-state "
    "median / iterations run.\n"
    "- **Repeats, calibrated**: a short fit is repeated until it has been timed for 0.25 s in all, up to 25 "
    "repeats (never fewer than the sidebar's *Repeats*), and each repeat's time is stored. Strategies run "
    "together take their repeats in turn, as pyperf and asv interleave benchmarks.\n"
    "- **Differences tested**: a speed-up reads e.g. ×23.5 (×21–×26), its range a 95% bootstrap interval "
    "of the ratio of the medians. Whether it is a difference at all is decided as `asv compare` does: a "
    "two-sided **Mann–Whitney U test** on the two runs' stored repeats, p < 0.05, and at least 1% apart; "
    "otherwise it is labelled **no significant difference**. With too few repeats for the test (3 against 3 "
    "never reaches p < 0.05), or for runs stored before each repeat was kept, the repeats' ranges decide: "
    "overlapping ranges are labelled **not told apart** (no test found them alike; more Repeats can tell them "
    "apart). Each verdict's help names the test and its p-value.\n"
    "- **One program, one speed**: each run stores a fingerprint of the program XLA compiled (its lowered "
    "StableHLO without source locations). Two runs of one fingerprint on one problem and machine executed "
    "the same program, so their timings differ by noise only: every page says **same program** and draws no "
    "speed-up between them.\n"
    "- **The machine's state**: CPU model, frequency and governor, usable cores, the project's commit, the "
    "JAX and XLA variables, the load before and after, and the share of the cores other processes took "
    "while the run was timed. Above a quarter the run is marked **unstable**.\n"
    "- **Data transfer** to the device is timed on its own and not counted in the fit.\n"
    "- **Compilations are counted** from `jax.monitoring` events (one per executable built or loaded), "
    "so a recompilation during the steady state would show.\n"
    "- **Cache**: compiled executables are kept in memory per strategy, problem shape and device, and on "
    "disk in JAX's persistent compilation cache. A run says `compiled` (built now), `memory` (reused in "
    "this server), `disk` (loaded from the persistent cache), `none` (eager), or how many executables came "
    "from each place when they came from several (`compiled 1, disk 3`). A disk hit is not free: the run "
    "still traces and lowers (JAX keys its cache on the lowered computation) and loads each executable "
    "instead of compiling it: for the default fit at oaks x1, 0.12 s of tracing and lowering and a "
    "0.06 s load instead of a 1.0 s compile; a memory hit skips both (medians of 5, "
    "`benchmarks/cold_start.py`, on a quiet 2-core CPU). **Compile from scratch** (Run "
    "and Scaling; `--cold` on the command line) skips both caches for one run, which then stores its "
    "executables as usual; beside a cached run, the latest compile from scratch of the same problem on the "
    "same machine and versions is drawn dashed.\n"
    "- **From the command to the answer** (`benchmarks/cold_start.py`, oaks x1, float32, fresh processes, "
    "2-core CPU): `solve` with an empty compilation cache 2.20 s (2.17–2.22), with a warm one "
    "1.07 s (1.04–1.17), against 5.42 s (5.36–5.50) for a script that imports pyPLNmodels and fits oaks: "
    "0.41x and 0.20x. Steady state to within 1e-5 of the optimum (`python -m core bench --sizes 1 100 "
    "--tables time-to-solution`, contenders in turn): 0.035x pyPLNmodels' time at oaks x1 (31 iterations of "
    "0.52 ms against 244 of 1.9 ms), 0.074x at x100 (31 of 21 ms against 240 of 37 ms; rounds 0.072x to "
    "0.092x) and 0.050x at x1000 (31 of 425 ms against 239 of 1.09 s). "
    "On one NVIDIA H100, both on the GPU: 0.016x, 0.020x and 0.062x.\n"
    "- **One timed run per device at a time**: every session and command-line run on this host queues for "
    "the device, first come first served, so that runs do not distort each other's timings. Each run "
    "records its wait and the epoch window of its timed section.\n"
    "- **Large compiled loops** run in calls of about 2 s of work each (`chunk_iterations`), so that Cancel "
    "lands within seconds. A call costs its dispatch and its scratch buffer, whose pages fault in afresh "
    "at every call (about 35 ms at oaks x100), so an iteration count with few divisors (31) runs as one "
    "call rather than as calls of one iteration.\n"
    "- **Environment**: each run records jax/jaxlib versions, the device kind, the platform and the CPU count.\n"
    "- **Time to solution** is what a user waits for: the steady-state time from the first iteration to the "
    "stop at the tolerance (the repeats all stop there), for a fit that met it. Per-iteration time ranks "
    "strategies that share one algorithm; across algorithms it misleads, and time to solution is the headline. "
    "`python -m core bench` times each contender to within 1e-5 of the optimum, against pyPLNmodels' own fit in "
    "the same run. The optimum is the best ELBO this project's fits reached (summed in float64); pyPLNmodels' "
    "float32 ELBOs scatter up to 5e-6 above it and do not set it."
)

st.header("Do the strategies compute the same thing?")
st.markdown(
    "They compute the same iteration and differ only in rounding: each compilation orders the same "
    "floating-point operations differently. What that rounding does depends on the optimizer, and the "
    "agreement badge on the Run page judges runs by the criterion that fits theirs:\n"
    "- **Over the first iterations**, every strategy's ELBO is eager's to rounding (1e-10 of it in float64), "
    "whatever the optimizer.\n"
    "- **rprop amplifies rounding.** It steps by the *sign* of each gradient. Where a gradient is rounding "
    "noise, as that of $B$ at its closed form when the fit starts from log counts, or of every coordinate "
    "near the optimum, the sign is the noise's, so each strategy steps its own way; rprop's sign tests then "
    "grow or shrink those steps. One ulp in $M$ moves the whole ELBO trace by up to 1e-2, and on oaks the "
    "strategies part by up to 1.2e-2 along the way. They still **meet at the optimum**: run to convergence, "
    "their final ELBOs agree to 1e-7 (float64). The badge shows such runs as **drift** (blue), not as a "
    "disagreement, until they have converged.\n"
    "- **The seed optimizer and adam** normalise their steps (RAdam's and Adam's $m/\\sqrt{v}$), which also "
    "turns rounding noise into steps of full size: the tutorial's optimizer parts strategies by about 1e-3 "
    "after a few hundred iterations and, its steps never shrinking, does not converge at all.\n"
    "- **Converged runs** (stopped at their tolerance, 1e-7, and checked in float64) sit at one optimum and are "
    "held to it.\n"
    "- In **float32** the rounding starts 1e9 times larger, so the same amplification shows sooner; the "
    "tests hold float32 strategies to what float32 rounding does to eager's own trace.\n\n"
    "**How a run ends** is read from its ELBO trace, the same way for every strategy and peer: "
    "*diverged* when the ELBO is not finite or ends more than 1,000 times further from 0 than it started "
    "(with the iteration where it went wrong), and *not converged* when a tolerance was set and the last "
    "relative change is above it."
)

st.header("float32: accurate ELBOs, and what float32 cannot hold")
st.markdown(
    "A float32 fit stays float32, but near the optimum the ELBO is a small difference of sums 50 times its "
    "size ($\\sum Y(O+M)$ and $\\sum \\log Y!$ on oaks), so a float32 sum over a million cells loses up to "
    "1e-5 of it, enough to report an ELBO *above* the optimum. Every ELBO here is therefore summed in "
    "float64 (row sums as a matrix-vector product with a float64 result, fused into the loop that makes the "
    "terms), with $\\sum \\log Y!$ kept in float64: each strategy reports the ELBO of its parameters to 1e-6 "
    "of its float64 value; per iteration the autodiff strategies got faster (scan by about 15%: the trace "
    "term no longer forms a p x p Gram) and scan_analytic up to about 10% slower.\n\n"
    "What float32 cannot hold however it sums is told before a float32 fit runs: a cell with a count of "
    "1e9 has terms of 2e10 that float32 rounds by hundreds before any sum. From the counts alone (no fit), "
    "the lab estimates how far float32 rounding can move the ELBO; above 1e-5 of it (or with a count above "
    "2^24) it refuses float32 and names float64, above 1e-6 it runs and marks the run with a warning."
)

st.header("Optimizers and initialisations")
st.markdown(
    "On $B, M, S$ by the gradient of the ELBO, as the seed tutorial fits:\n"
    "- **seed** (the tutorial's): `optax.chain(optax.scale_by_radam(), optax.scale(-1.0), "
    "optax.clip(0.1))`, from the tutorial's start $M = 0$, $S = 1$, $B = 0$, $\\Omega = I$. The "
    "tutorial's `lr = 1e-4` is never used by that chain. It does not come within 1e-5 of the optimum on oaks "
    "in 10,000 iterations.\n"
    "- **adam** and **rprop** (`optax.adam`, `optax.rprop`). *rprop* is **not** pyPLNmodels' algorithm: it "
    "moves $B$ by gradient where pyPLNmodels profiles it, and optax's Rprop applies each step one iteration "
    "late (its first update is zero), where torch's steps with the current sign. It needs about 2,500 "
    "iterations to within 1e-5 on oaks, pyPLNmodels about 260.\n\n"
    "On $M, S$ with $B$ and $\\Sigma$ at their closed forms (the profiled ELBO, its gradient analytic, "
    "evaluated in one pass with sums in float64):\n"
    "- **pyplnmodels_rprop**: pyPLNmodels' own algorithm, exactly: torch's `Rprop(lr=0.01, etas=(0.5, 1.2), "
    "step_sizes=(1e-10, 50))` on $M$ and $S$ from its start $M = \\log(Y + \\mathbf{1}_{Y = 0})$, $S = 0.5$ "
    "(*log_counts*, its default). Its float64 ELBO follows pyPLNmodels' own recorded ELBO to 1e-11 (a test).\n"
    "- **lbfgs**: `optax.lbfgs` with its zoom line search, on $(M, \\log S)$ scaled by the curvature "
    "expected at the optimum.\n"
    "- **diagonal_newton**: variational EM, a Newton step per cell in $M$ (curvature $A + \\Omega_{jj}$) "
    "and the fixed point $S^2 = 1 / (A + \\operatorname{diag}\\Omega)$, accelerated by SQUAREM.\n"
    "- **preconditioned_lbfgs**: L-BFGS whose initial inverse Hessian inverts a model of the curvature, "
    "re-estimated every iteration: that diagonal curvature, less $\\Omega_{jj}$ along the columns of $X$ "
    "(moving $M$ there moves $B$ with it, so only $A$ curves the ELBO); a halving line search; 30 iterations to within "
    "1e-5 of the optimum on oaks (43 with the diagonal alone), the fastest to converge here.\n\n"
    "Initialisations: *seed* (the tutorial's), *log_counts* (pyPLNmodels'), *log_rates*, "
    "$M = \\log(Y + \\mathbf{1}_{Y = 0}) - O$: pyPLNmodels' start ignores the log-offsets, so its "
    "$A = \\exp(O + M + S^2/2)$ starts near $Y e^{O}$; this one starts near $Y$; and *log_rates_sd*, "
    "*log_rates* with $S = 1 / \\sqrt{Y + 1}$ in each cell instead of 0.5, near the optimum's "
    "$S^2 = 1 / (A + \\Omega_{jj})$: fewer iterations on most data sets (44 instead of 97 to within 1e-5 on "
    "pyPLNmodels' microcosm, 400 x 100) for the optimizers on $M, S$ with the closed forms, but the "
    "tutorial's optimizer, whose steps of up to 0.1 take a small $S$ through zero, diverges from it. "
    "Left to its default (the sidebar's *the optimizer's own*), the start follows the optimizer, as "
    "chosen on the corpus of data sets: *log_rates_sd* for lbfgs, diagonal_newton and preconditioned_lbfgs; "
    "the tutorial's *seed* for seed (from *log_rates* its steps ended further from the optimum than they "
    "had been, and diverged on a crossover chromosome); *log_rates* for adam and rprop; *log_counts* for "
    "pyplnmodels_rprop.\n\n"
    "jit_per_function and scan_analytic take a gradient step apart, and the PyTorch twins mirror optax's "
    "optimizers: they run only *seed*, *adam* and *rprop*, and refuse the others up front."
)

st.header("Data")
st.markdown(
    "**oaks** (Jakuschkin et al., 2016): 116 tree-leaf samples x 114 fungal and bacterial amplicons, 34% "
    "zeros, largest count 2228, shipped inside the pyPLNmodels wheel with its log-offsets. The seed grows "
    "it with `np.repeat(Y, k, axis=0)` (x100); the sidebar offers x1 to x1000. **simulated** draws PLN "
    "counts with a known $B$ and $\\Sigma$; **upload** fits your own CSV: cells separated by commas, semicolons "
    "or tabs, line 1 read as column names or not as you choose (auto says what it decided and why), and "
    "all-zero columns dropped and named, as pyPLNmodels does: such a column has no finite optimum."
)
