"""A program's size as a slide shows it: jaxpr equations (nested ones included) and HLO
instructions (every computation), counted from the texts the server already holds; and what its
compile seconds measured."""

import jax
import jax.numpy as jnp

from core.inspect import findings


def _scan(x):
    def body(carry, _):
        return carry * 2 + jnp.sin(carry), carry

    return jax.lax.scan(body, x, None, length=3)


def test_a_scan_counts_its_own_equation_and_its_body():
    jaxpr = str(jax.make_jaxpr(_scan)(1.0))
    assert findings.jaxpr_equations(jaxpr) == 4  # the scan, and mul, sin, add inside it


def test_hlo_instructions_are_counted_in_every_computation_and_not_in_the_header():
    hlo = jax.jit(_scan).lower(1.0).compile().as_text()
    counted = findings.hlo_instructions(hlo)
    by_hand = sum(1 for line in hlo.splitlines() if line.startswith("  ") and " = " in line.split("(")[0])
    assert counted == by_hand > 10
    assert findings.hlo_instructions("HloModule m, entry_computation_layout={()->f32[]}\n") == 0


def test_the_compile_seconds_are_named_for_what_they_measured():
    # A program loaded from JAX's persistent cache compiled nothing: its seconds are a load.
    assert findings.compile_heading(compile_count=3, disk_cache_hits=0) == "Compile"
    assert findings.compile_heading(compile_count=0, disk_cache_hits=2) == "Load from disk"
    assert findings.compile_heading(compile_count=1, disk_cache_hits=2) == "Compile + load"
