"""The seed tutorial's pitfalls: each demo shows the bug, and the right value is right."""

import inspect

import jaxlib
import numpy as np
import pytest

from core.inspect import pitfall_notes, pitfalls


def test_trace_precedence_differs_and_the_correct_term_is_np():
    result = pitfalls.trace_precedence(n=20, p=3)
    assert result.reproduced
    (correct, n_p) = result.correct.values()
    assert n_p == 60.0 and correct == pytest.approx(60.0, rel=1e-4)
    (buggy,) = result.buggy.values()
    assert np.isfinite(buggy) and abs(buggy - 60.0) > 1.0


def test_logdet_overflows_in_float32_while_cholesky_stays_finite():
    result = pitfalls.logdet_overflow()
    assert result.reproduced
    (buggy,) = result.buggy.values()
    assert np.isinf(buggy)
    reference = result.correct["slogdet, float64 (reference)"]
    assert reference > 88.8  # past float32's largest exponent: det() must overflow
    for value in result.correct.values():
        assert np.isfinite(value) and value == pytest.approx(reference, rel=1e-4)


def test_seed_pytree_class_never_updates_omega():
    result = pitfalls.pytree_class(iterations=4)
    assert result.reproduced
    (buggy,) = result.buggy.values()
    (correct,) = result.correct.values()
    assert buggy == 0.0 and correct > 0.0
    assert pitfalls.pln is None  # the leaked tracers are dropped


def test_fused_reduction_agrees_on_the_installed_jaxlib_and_says_which():
    result = pitfalls.fused_reduction()
    reference = result.correct["NumPy Stirling sum, float64"]
    assert reference == pytest.approx(1.286e6, rel=1e-3)
    for value in result.buggy.values():
        assert value == pytest.approx(reference, rel=1e-6)
    assert jaxlib.__version__ in result.note and jaxlib.__version__ in result.explanation
    assert not result.reproduced
    assert "0.10.2" in result.explanation and "1.114e6" in result.explanation


def test_recompiles_counts_each_loops_compiles_and_gives_jaxs_reason_for_each():
    for _ in range(2):  # a second demonstration in the same process compiles as the first did
        result = pitfalls.recompiles(iterations=3)
        assert result.reproduced
        assert list(result.buggy.values()) == [3.0, 3.0] and list(result.correct.values()) == [1.0]
        compiles = result.recompiles
        assert [c.function for c in compiles] == ["<lambda>"] * 3 + ["step"] * 4
        assert result.recompile_ways == (pitfalls.WAYS[0],) * 3 + (pitfalls.WAYS[1],) * 3 + (pitfalls.WAYS[2],)
    assert "re-defined repeatedly" in compiles[1].why
    # A second press defines the demonstration's step anew: not the flaw of the two other ways.
    assert not any("re-defined repeatedly" in c.why for c in compiles[3:])
    assert "an earlier press traced that line" in compiles[6].why
    assert "step_size" in compiles[4].why and "Static(val=0.05)" in compiles[4].why
    # The right way's one compile is its first sight of its function, not a miss against the
    # static way's keys.
    assert compiles[6].why.startswith("never seen function") and "cache keys differ" not in compiles[6].why
    for c in compiles:  # every call site in the demo, every compile traced
        assert c.trace_s > 0 and "pitfalls.py:" in c.where
    rows = pitfall_notes.compile_rows(result)
    assert rows[0]["where"].startswith("pitfalls.py:") and rows[0]["stages"].startswith("trace ")
    assert rows[4]["way"] == pitfalls.WAYS[1] and "Static(val=0.05)" in rows[4]["why"]


def test_catalogue_lists_runnable_pitfalls_with_their_code():
    items = pitfalls.catalogue()
    assert [p.key for p in items] == ["trace_precedence", "logdet_overflow", "pytree_class", "fused_reduction",
                                      "recompiles"]
    for item in items:
        assert item.title == pitfalls.TITLES[item.key] and item.summary
        code = pitfalls.source(item.key)
        assert f"def {item.run.__name__}(" in code
        # Read from the file without Python's parser: what inspect finds in the module.
        assert code == "\n\n".join(inspect.getsource(part).rstrip("\n") for part in item.code)
    assert "class SeedPLN" in pitfalls.source("pytree_class")
    with pytest.raises(KeyError, match="known: trace_precedence"):
        pitfalls.run("nope")
    assert pitfalls.run("trace_precedence").key == "trace_precedence"


def test_only_the_tutorials_bugs_are_called_the_tutorials_way():
    # The recompiles demo is a mistake any JIT level can make: its page says so of its first way.
    def result(key):
        return pitfall_notes.PitfallResult(key, pitfall_notes.TITLES[key], "", {}, {}, True)

    assert (result("recompiles").wrong_way, result("recompiles").kind) == ("the wrong way", "Pitfall")
    assert (result("trace_precedence").wrong_way, result("trace_precedence").kind) == ("the tutorial's way", "Bug")
    assert pitfall_notes.ANY_JIT_LEVEL <= set(pitfall_notes.TITLES)
