"""The compile figure beside runs shown together (`core.results.compile_cost`): the longest
compile paid, by a run or, for a run loaded from a cache, by the run that made its program."""

from core.results import compile_cost
from core.results.frame import results_frame

from fake_runs import make_run


def test_the_longest_compile_a_run_paid():
    runs = [make_run("scan", compile_s=0.3, id=1), make_run("jit_step", compile_s=1.2, id=2)]
    cost = compile_cost.longest(results_frame(runs), results_frame([]))
    assert cost == compile_cost.CompileCost("Longest compile", 0.02 + 1.2, 0, "", f"run #{runs[1].id} (jit_step)")


def test_a_program_loaded_from_a_cache_counts_what_making_it_cost():
    loaded = make_run("scan", cache="disk", trace_lower_s=0.0, compile_s=0.001)
    maker = make_run("scan_namedtuple", trace_lower_s=0.5, compile_s=2.0, id=4)
    cost = compile_cost.longest(results_frame([loaded]), results_frame([maker]))
    assert cost == compile_cost.CompileCost("First compile", 2.5, 1, "disk", f"run #{maker.id} (scan_namedtuple)")
    # Beside a run that compiled less itself, the maker's compile is still the longest.
    both = compile_cost.longest(results_frame([loaded, make_run("jit_step", cache="memory"),
                                               make_run("scan_pytree_class", compile_s=0.1)]),
                                results_frame([maker]))
    # Named: the maker may be a run not shown, whose compile is longer than any bar drawn.
    assert both == compile_cost.CompileCost("Longest compile", 2.5, 2, "disk and memory",
                                            f"run #{maker.id} (scan_namedtuple)")


def test_a_load_with_no_run_that_made_it_is_not_measured_and_eager_compiles_nothing():
    loaded = make_run("scan", cache="memory")
    assert compile_cost.longest(results_frame([loaded]), results_frame([])) == \
        compile_cost.CompileCost("Longest compile", None, 1, "memory")
    assert compile_cost.longest(results_frame([make_run("eager", cache="none")]), results_frame([])) is None
