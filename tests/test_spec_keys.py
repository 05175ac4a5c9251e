"""One computation, one key, whichever front door asked for it: the command line, a link or
the sidebar. What a runnable ignores is normalised by the spec itself."""

import pytest

from core import catalog
from core.cli import arguments
from core.spec import DEFAULT_LR, DEFAULTS, FitSpec, OptimizerSpec, refusal
from pages.ui.settings import Settings


def _cli(*options: str) -> FitSpec:
    args = arguments.build_parser().parse_args(["run", *options])
    args.strategy = args.strategy or DEFAULTS.strategy  # as `python -m core run` fills it in
    return arguments.fit_spec(args)


@pytest.mark.parametrize("strategy, optimizer, options", [
    ("scan", "preconditioned_lbfgs", []),
    ("scan", "preconditioned_lbfgs", ["--precision", "float64"]),
    ("scan", "preconditioned_lbfgs", ["--lr", "0.5"]),  # no learning rate: not part of the key
    ("torch_eager", "seed", []),  # runs every iteration: tol is not part of the key
    ("torch_compile", "seed", ["--tol", "0.001"]),
    ("jit_per_function", "adam", ["--lr", "0.05"]),
    ("pyplnmodels", "preconditioned_lbfgs", ["--precision", "float64"]),
])
def test_the_command_line_and_the_sidebar_give_one_problem_one_key(strategy, optimizer, options):
    cli = _cli("--strategy", strategy, "--optimizer", optimizer, *options)
    given = dict(zip(options[::2], options[1::2]))
    precision = given.get("--precision", DEFAULTS.precision)
    # An empty tolerance box (None) is the precision's default, as a missing --tol is.
    sidebar = Settings(optimizer=optimizer, precision=precision, lr=float(given.get("--lr", DEFAULTS.lr)),
                       tol=float(given["--tol"]) if "--tol" in given else None).fit_spec(strategy)
    assert sidebar == cli and sidebar.key == cli.key


def test_what_a_runnable_ignores_is_normalised_by_the_spec():
    assert OptimizerSpec("preconditioned_lbfgs", 0.5).lr == DEFAULT_LR
    assert OptimizerSpec("adam", 0.5).lr == 0.5
    twin = FitSpec(strategy="torch_eager", tol=1e-3)
    assert twin.tol == 0.0 and twin.key == FitSpec(strategy="torch_eager").key
    assert FitSpec(strategy="pyplnmodels", optimizer=OptimizerSpec("preconditioned_lbfgs"), tol=1e-3).tol == 1e-3


@pytest.mark.parametrize("strategy", ["scan", "eager", "jit_per_function", "torch_eager", "sharded"])
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_a_spec_told_nothing_is_the_fit_every_front_door_makes_when_told_nothing(strategy, precision):
    spec = FitSpec(strategy=strategy, precision=precision)
    assert spec == _cli("--strategy", strategy, "--precision", precision)
    if refusal(strategy, DEFAULTS.optimizer) is None:  # the sidebar runs one optimizer: it leaves the others out
        # The sidebar's tolerance box, left empty, is the precision's default.
        assert spec == Settings(precision=precision).fit_spec(strategy)
    assert spec.optimizer.name == DEFAULTS.optimizer_for(strategy)
    assert spec.init == DEFAULTS.init_for(spec.optimizer.name)
    assert spec.iterations == DEFAULTS.iterations and spec.repeats == DEFAULTS.repeats
    if catalog.RUNNABLES[strategy].stops_at_tol:
        assert spec.tol == DEFAULTS.tol_for(precision)
    assert FitSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize("optimizer, start", [("preconditioned_lbfgs", "log_rates_sd"), ("lbfgs", "log_rates_sd"),
                                              ("diagonal_newton", "log_rates_sd"), ("seed", "seed"),
                                              ("adam", "log_rates"), ("rprop", "log_rates"),
                                              ("pyplnmodels_rprop", "log_counts")])
def test_the_start_follows_the_optimizer_unless_one_is_chosen(optimizer, start):
    # The tutorial's clipped steps (and any of a set size) take log_rates_sd's small S through
    # zero: those optimizers start from their own wherever the start is left to the default.
    strategy = "scan"  # it runs every optimizer
    assert FitSpec(strategy=strategy, optimizer=OptimizerSpec(optimizer)).init == start
    assert _cli("--strategy", strategy, "--optimizer", optimizer).init == start
    settings = Settings(optimizer=optimizer)
    assert settings.start == start and settings.fit_spec(strategy).init == start
    # A start chosen is kept, whatever the optimizer.
    assert FitSpec(strategy=strategy, optimizer=OptimizerSpec(optimizer), init="seed").init == "seed"
    assert Settings(optimizer=optimizer, init="log_counts").fit_spec(strategy).init == "log_counts"
    assert _cli("--strategy", strategy, "--optimizer", optimizer, "--init", "log_counts").init == "log_counts"
