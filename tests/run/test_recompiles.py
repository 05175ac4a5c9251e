"""A compile during the timed repeats is a number's caveat: the run says so in JAX's words."""

import jax
from specs import tutorial_spec

from core.machine import compile_log
from core.run import jax_timing
from core.spec import DatasetSpec, OptimizerSpec

TINY = tutorial_spec(dataset=DatasetSpec(kind="simulated", n=30, p=4, d=1, seed=0), strategy="jit_step", iterations=3,
                     precision="float32", device="cpu", optimizer=OptimizerSpec("seed"), init="seed", repeats=1)


def _timing():
    return jax_timing.start(TINY, None, lambda progress: None, None, None, watched=False)


def test_repeats_that_compile_nothing_carry_no_caveat():
    timing = _timing()
    measured = timing.measurement([timing.repeat(r)[0] for r in range(2)])
    assert measured.recompile_count == 0 and not any("compiled again" in w for w in measured.warnings)


def test_a_repeat_that_compiles_again_says_which_function_and_why():
    timing = _timing()
    jax.clear_caches()  # what a leaking closure or a changed static value would do mid-run
    measured = timing.measurement([timing.repeat(0)[0]])
    said = [w for w in measured.warnings if "compiled again during the timed repeats" in w]
    assert measured.recompile_count >= 1 and said
    # jax.numpy's own helpers (the ELBOs' stack): JAX explains only functions outside itself.
    assert any(w.startswith("stack compiled again") and "JAX gave no reason" in w for w in said)


def test_past_a_few_the_rest_are_counted():
    many = [compile_log.Compile("f", "never seen function: f")] * 5
    said = jax_timing.recompile_warnings(many)
    assert said[:3] == ["f compiled again during the timed repeats: never seen function: f"] * 3
    assert said[3] == "2 more compiles during the timed repeats" and jax_timing.recompile_warnings([]) == []
