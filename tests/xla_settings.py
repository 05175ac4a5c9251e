"""XLA's CPU settings in the suite: quick for what a test drives, the lab's own where a test
guards the compiled arithmetic.

Compiling is most of the suite's fit time (about 800 of 1,200 s of the in-process fit tests,
measured with jax.monitoring), so conftest sets `QUICK_FLAGS` in XLA_FLAGS for the whole
session: the test processes, and the servers, command lines and workers they start, which
inherit the environment. These settings compile the same StableHLO program with the CPU's
older emitters and no LLVM optimisation: the fits' arithmetic, compiled in about half the time.

The programs users run are built with XLA's defaults (`PRODUCTION`, which a compile's
options override XLA_FLAGS with): tests/fit/test_production_compile.py fits the default on
the corpus sets that broke it before, and tests/fit/test_reductions.py evaluates the ELBO at
any row count, both so compiled. Processes started with simulated CPU devices keep the
quick settings beside their device count (`with_device_count`).
"""

QUICK = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}
QUICK_FLAGS = " ".join(f"--{name}={str(value).lower()}" for name, value in QUICK.items())
# XLA's defaults, spelled out: the same optimized HLO as no options at all (checked by
# tests/fit/test_production_compile.py).
PRODUCTION = {"xla_cpu_use_fusion_emitters": True, "xla_backend_optimization_level": 3}


def with_device_count(count: int) -> str:
    """An XLA_FLAGS value for a process with `count` simulated CPU devices, compiling quick."""
    return f"{QUICK_FLAGS} --xla_force_host_platform_device_count={count}"
