"""Reading JAX's compile log: each compile with its cache miss's explanation and stages."""

from core.machine import compile_log

LOG = [
    "TRACING CACHE MISS at /x/demo.py:13:8 (<module>):\n  never seen function:\n    f id=1 defined at /x/demo.py:10",
    "Finished tracing f for jit in 0.001739740 sec",
    "Compiling jit(f) with global shapes and types (ShapedArray(float32[3]),).",
    "Finished jaxpr to MLIR module conversion jit(f) in 0.008453369 sec",
    "Finished XLA compilation of jit(f) in 0.008259535 sec",
    "Finished tracing convert_element_type for jit in 0.0062 sec",
    "TRACING CACHE MISS at /x/demo.py:14:4 (<module>):\n  for f defined at /x/demo.py:10\n  all previously seen "
    "cache keys differ.",
    "Finished tracing f for jit in 0.0009 sec",
    "Finished XLA compilation of jit(f) in 0.02 sec",
]


def test_each_traced_function_is_one_compile_with_its_reason_and_stages():
    first, helper, second = compile_log.read(LOG)
    # Paths cut to their file's name: a page must not show the server's folders.
    assert first == compile_log.Compile("f", "never seen function: f id=1 defined at demo.py:10", "demo.py:13:8",
                                        0.001739740, 0.008453369, 0.008259535)
    assert (helper.function, helper.why, helper.lower_s, helper.compile_s) == ("convert_element_type", "", None, None)
    assert second.why.startswith("for f defined at demo.py:10 all previously seen cache keys differ")
    assert (second.trace_s, second.lower_s, second.compile_s) == (0.0009, None, 0.02)


def test_a_long_explanation_is_cut():
    log = ["TRACING CACHE MISS at a.py:1:1 (f): " + "x" * 5000, "Finished tracing f for jit in 1 sec"]
    (only,) = compile_log.read(log)
    assert len(only.why) == compile_log.MAX_WHY_CHARS and only.why.endswith("…")


def test_watch_collects_real_compiles_and_leaves_jaxs_logger_as_it_was():
    import logging

    import jax
    import jax.numpy as jnp

    logger = logging.getLogger("jax")
    before = (logger.level, logger.propagate, list(logger.handlers))
    x = jnp.ones(3)
    with compile_log.watch() as compiles:
        jax.jit(lambda v: v * 2)(x)
    assert [c.function for c in compiles] == ["<lambda>"] and compiles[0].compile_s > 0
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def test_watches_in_two_threads_each_see_their_own_compiles():
    import threading

    import jax
    import jax.numpy as jnp

    x = jnp.ones(3)
    seen, ready = {}, threading.Barrier(2)

    def compile_in_turn(name, factor):
        with compile_log.watch() as compiles:
            ready.wait()
            jax.jit(lambda v: v * factor, static_argnames=())(x)
            ready.wait()
        seen[name] = compiles

    threads = [threading.Thread(target=compile_in_turn, args=(name, k)) for k, name in enumerate("ab", 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [c.function for c in seen["a"]] == ["<lambda>"] and [c.function for c in seen["b"]] == ["<lambda>"]
