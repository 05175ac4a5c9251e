"""About: the model and its ELBO, what each strategy compiles, and how the timings are taken."""

from __future__ import annotations

import streamlit as st

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
    "to XLA differs. One iteration is always: the ELBO and its gradient in $B, M, S$ at the current "
    "$\\Omega$; the optimizer's update; then $\\Omega \\leftarrow \\hat\\Sigma^{-1}$ at the closed form."
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
    "the steady state, the **median, min and max of R repeats** (the sidebar's *Repeats*), each starting "
    "from the same initial state (the compiled loops consume their state, so each repeat gets a fresh copy, "
    "made before its clock starts). Per-iteration time = steady-state median / iterations run.\n"
    "- **Spread**: every steady-state timing is shown with its range, the fastest to the slowest repeat, "
    "and a speed-up with the range the two runs' repeats allow (e.g. ×23.5 (×21–×26)). When the ranges of "
    "two runs overlap, the difference is within run-to-run noise and is labelled **no significant "
    "difference**, as `asv compare` and `pyperf` do, rather than shown as a speed-up.\n"
    "- **Data transfer** to the device is timed on its own and not counted in the fit.\n"
    "- **Compilations are counted** from `jax.monitoring` events (one per executable built or loaded), "
    "so a recompilation during the steady state would show.\n"
    "- **Cache**: compiled executables are kept in memory per strategy, problem shape and device, and on "
    "disk in JAX's persistent compilation cache. A run says `compiled` (built now), `memory` (reused in "
    "this server), `disk` (loaded from the persistent cache: no compile time) or `none` (eager). "
    "**Compile from scratch** (Run and Scaling; `--cold` on the command line) skips both caches for one "
    "run, which then stores its executables as usual; beside a cached run, the latest compile from scratch "
    "of the same problem on the same machine and versions is drawn dashed.\n"
    "- **One timed run per device at a time**: every session and command-line run on this host queues for "
    "the device, first come first served, so that runs do not distort each other's timings. Each run "
    "records its wait and the epoch window of its timed section.\n"
    "- **Large compiled loops** run in calls of about 2 s of work each (`chunk_iterations`), so that Cancel "
    "lands within seconds; a call costs one dispatch, nothing next to its work.\n"
    "- **Environment**: each run records jax/jaxlib versions, the device kind, the platform and the CPU count."
)

st.header("Optimizer and initialisation")
st.markdown(
    "- **seed** (the default, the tutorial's): `optax.chain(optax.scale_by_radam(), optax.scale(-1.0), "
    "optax.clip(0.1))` on $B, M, S$, starting from $M = 0$, $S = 1$, $B = 0$, $\\Omega = I$. The "
    "tutorial's `lr = 1e-4` is never used by that chain.\n"
    "- **pyPLNmodels**: optimises only $M$ and $S$ with `Rprop(lr=0.01, step_sizes=(1e-10, 50))`, from "
    "$M = \\log(Y + \\mathbb{1}[Y = 0])$ and $S = 0.5$, with $B$ and $\\Sigma$ at their closed forms (the "
    "profiled ELBO). Here: optimizer *rprop* and initialisation *log_counts* in the sidebar.\n"
    "- **adam** is offered as a common baseline."
)

st.header("Data")
st.markdown(
    "**oaks** (Jakuschkin et al., 2016): 116 tree-leaf samples x 114 fungal and bacterial amplicons, 34% "
    "zeros, largest count 2228, shipped inside the pyPLNmodels wheel with its log-offsets. The seed grows "
    "it with `np.repeat(Y, k, axis=0)` (x100); the sidebar offers x1 to x1000. **simulated** draws PLN "
    "counts with a known $B$ and $\\Sigma$; **upload** fits your own CSV."
)
