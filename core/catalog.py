"""The one list of everything that fits: the JIT strategies, the optimizers and the peers, as
plain data.

Every table that names a strategy, an optimizer or a peer reads it: the spec's choices and
refusals, the sidebar's labels, the charts' colours, the time budget's dispatch floors, the
registries that build them. It imports nothing (no JAX, no torch), so the dashboard's server,
which never imports JAX, knows every runnable by reading it; `tests/fit/test_catalog.py`
holds the registries and the strategy classes to it, and fails on a name it does not know.

Adding a strategy: its module in `core/fit/strategies/` (its docstring is its description,
read here without importing it) and one `Runnable` line below; adding an optimizer: its
module in `core/fit/algorithms/` and one `Optimizer` line.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pathlib

# The fit's modules, whose docstrings describe the strategies (read as text: they import JAX).
_FIT = pathlib.Path(__file__).parent / "fit"

GRADIENT, PROFILED = "gradient", "profiled"


@dataclasses.dataclass(frozen=True)
class Optimizer:
    """One way of moving the parameters (`core.fit.algorithms`).

    Attributes:
        name: as in `OptimizerSpec.name`.
        family: GRADIENT (an optax transformation of the ELBO's gradient on B, M and S) or
            PROFILED (M and S move; B and Sigma at their closed forms).
        label: a line for lists, e.g. "lbfgs (optax.lbfgs, profiled)".
        takes_lr: whether its steps scale with `OptimizerSpec.lr`.
        set_steps: whether its steps have a set size (a learning rate, or seed's clip at 0.1)
            rather than one found by a line search or a Newton step: from a start whose S is
            small (log_rates_sd), such a step can take S through zero.
        start: its default start where it is not the front doors' (`spec.DEFAULTS.init`,
            log_rates_sd), chosen on the corpus (docs/accuracy.md); None for that one.
    """

    name: str
    family: str
    label: str
    takes_lr: bool = False
    set_steps: bool = False
    start: str | None = None


@dataclasses.dataclass(frozen=True)
class Runnable:
    """One way of running a fit that can be timed: a JAX strategy or a peer.

    Attributes:
        name: as in `FitSpec.strategy`.
        loop: "python" (iterations driven from Python: the first call can report its ELBO
            as it goes), "compiled" (the whole loop is one XLA program) or "peer" (another
            library's fit).
        colour: its colour in every chart (`tests/charts/test_palette.py` holds the palette to
            contrast and colour-vision rules).
        source: the file under core/fit whose docstring describes it (strategies).
        blurb: its description, where no module of its own has one (peers).
        dispatch_floor_s: a floor on what one iteration costs beside its arithmetic (Python's
            dispatch of ops or calls), for the time budget (`core.coordination.budget`); 0 for
            compiled loops, which dispatch once.
        takes: the optimizer families it runs; a spec pairing it with another is refused.
        needs: why it takes only those (for the refusal's message).
        tutorial_level: its level in the seed tutorial (0 to 4), None if it is not one.
        donates_state: whether its new state is written over the old one (the memory
            estimate counts one state less).
        label: a few words for a chart's legend or a slide.
        stops_at_tol: whether it stops at a spec's `tol` (every JAX strategy and pyPLNmodels);
            the PyTorch twins run every iteration, and their specs keep tol 0.
    """

    name: str
    loop: str
    colour: str
    label: str
    source: str = ""
    blurb: str = ""
    dispatch_floor_s: float = 0.0
    takes: tuple[str, ...] = (GRADIENT, PROFILED)
    needs: str = ""
    tutorial_level: int | None = None
    donates_state: bool = False
    stops_at_tol: bool = True

    @property
    def is_peer(self) -> bool:
        return self.loop == "peer"

    @property
    def python_loop(self) -> bool:
        """Whether its iterations are driven from Python (a peer's twins are; pyPLNmodels'
        loop is its own `fit`)."""
        return self.loop == "python" or (self.is_peer and self.name != "pyplnmodels")

    @property
    def inspectable(self) -> bool:
        """Whether XLA compiles its work, so that its jaxpr, HLO and costs can be shown."""
        return not self.is_peer

    @property
    def tag(self) -> str:
        return {"python": "Python loop", "compiled": "loop compiled", "peer": "peer"}[self.loop]

    @property
    def description(self) -> str:
        """What it does, in a paragraph, without the leading "name: "."""
        text = self.blurb or _docstring(self.source)
        return " ".join(text.split()).removeprefix(f"{self.name}: ")

    @property
    def summary(self) -> str:
        """The description's first sentence."""
        return self.description.split(". ")[0].rstrip(".") + "."

    @property
    def accepted(self) -> list[str]:
        """The optimizers it runs."""
        return [o.name for o in OPTIMIZERS.values() if o.family in self.takes]

    def refusal(self, optimizer: str) -> str | None:
        """Why this runnable cannot run `optimizer`, or None when it can."""
        if OPTIMIZERS[optimizer].family in self.takes:
            return None
        accepted = self.accepted
        return (f"strategy {self.name} {self.needs}, so it runs only the optimizers {', '.join(accepted)}; got "
                f"{optimizer}: run it under another strategy (jit_step, scan, while_loop ...)")


@functools.cache
def _docstring(source: str) -> str:
    """The docstring of core/fit/`source`, read without importing the module (it imports JAX)
    and without Python's parser: CPython 3.11's is not safe in several threads at once ("AST
    constructor recursion depth mismatch"), and every session of a server asks from its own
    thread, while Streamlit compiles pages in others. The modules open with a plain
    triple-quoted docstring (tests/fit/test_catalog.py holds each to its `__doc__`)."""
    text = (_FIT / source).read_text()
    start = text.find('"""')
    end = text.find('"""', start + 3)
    return inspect.cleandoc(text[start + 3:end]) if 0 <= start < end else ""


_OPTIMIZERS = (
    # The tutorial's pair: from log_rates its clipped steps ended 2 to 2,000 times further from
    # the optimum after 500 iterations than from its own start, and diverged on a crossover
    # chromosome; from log_rates_sd they diverged at once.
    Optimizer("seed", GRADIENT, "seed: RAdam, clipped at 0.1 (the tutorial's)", set_steps=True, start="seed"),
    # From log_rates_sd rprop diverged on counts to 1e5; from log_counts (no offsets) adam
    # ended 2,400 times the optimum's size below it on oaks, and from seed's start 54 times.
    Optimizer("adam", GRADIENT, "adam (optax, on B, M, S)", takes_lr=True, set_steps=True, start="log_rates"),
    Optimizer("rprop", GRADIENT, "rprop (optax, on B, M, S)", takes_lr=True, set_steps=True, start="log_rates"),
    # pyPLNmodels' own start, which makes it pyPLNmodels' fit exactly (as quick as log_rates here).
    Optimizer("pyplnmodels_rprop", PROFILED, "pyplnmodels_rprop: pyPLNmodels' algorithm", takes_lr=True,
              set_steps=True, start="log_counts"),
    Optimizer("lbfgs", PROFILED, "lbfgs (optax.lbfgs, profiled)"),
    Optimizer("diagonal_newton", PROFILED, "diagonal_newton (variational EM)"),
    Optimizer("preconditioned_lbfgs", PROFILED, "preconditioned_lbfgs (fastest to converge)"),
)
OPTIMIZERS: dict[str, Optimizer] = {optimizer.name: optimizer for optimizer in _OPTIMIZERS}

_GRADIENT_ONLY = (GRADIENT,)
# Floors on Python's dispatch per iteration (see `core.coordination.budget`): eager ~14 ms an
# iteration measured on a 2-core CPU, floor 0.5 ms; jit_step ~80 us, floor 10 us.
# Colours: the tutorial's five kept from Okabe-Ito and Paul Tol's schemes, the others picked by
# an exhaustive search over an sRGB grid so that, under normal vision and simulated protanopia
# and deuteranopia (Machado et al. 2009), any two differ by CIELAB delta E >= 14, neighbours in
# this order and the groups shown together by default (the tutorial's five, the peers) by
# >= 36; no two are in one hue family (CIELCh hue under 30 degrees and L* under 15 apart: scan's
# orange and a burnt orange read as one series); each has 3:1 contrast on white and 2:1 on the
# dark theme (`core.charts.colour_vision` has the arithmetic). Thirteen colours in the
# lightness band that white and the dark theme both allow admit no stricter family rule.
_RUNNABLES = (
    Runnable("eager", "python", "#734026", "no JIT", source="strategies/eager.py", dispatch_floor_s=5e-4,
             tutorial_level=0),
    Runnable("jit_per_function", "python", "#339999", "jit each function", source="strategies/jit_per_function.py",
             dispatch_floor_s=2e-5, takes=_GRADIENT_ONLY, tutorial_level=1,
             needs="jits the pieces of a gradient step on B, M and S (value_and_grad, the optimizer's update, "
                   "apply_updates, Sigma, its inverse); the profiled optimizers' steps are made of other pieces"),
    Runnable("jit_step", "python", "#7766FF", "jit one iteration", source="strategies/jit_step.py",
             dispatch_floor_s=1e-5, donates_state=True),
    Runnable("scan", "compiled", "#E65E19", "lax.scan", source="strategies/scan.py", tutorial_level=2,
             donates_state=True),
    Runnable("scan_namedtuple", "compiled", "#0077BB", "scan, NamedTuple", source="strategies/scan_namedtuple.py",
             tutorial_level=3, donates_state=True),
    Runnable("scan_pytree_class", "compiled", "#5E19E6", "scan, pytree class",
             source="strategies/scan_pytree_class.py", tutorial_level=4, donates_state=True),
    Runnable("fori_loop", "compiled", "#DD5566", "lax.fori_loop", source="strategies/fori_loop.py",
             donates_state=True),
    Runnable("while_loop", "compiled", "#990066", "lax.while_loop", source="strategies/while_loop.py",
             donates_state=True),
    Runnable("scan_analytic", "compiled", "#FF33DD", "hand-derived gradients", source="strategies/scan_analytic.py",
             takes=_GRADIENT_ONLY, donates_state=True,
             needs="writes out the gradient of the full ELBO in B, M and S and packs them into one array for an "
                   "element-wise optax transformation"),
    Runnable("sharded", "compiled", "#AA8844", "scan, rows sharded", source="strategies/sharded.py",
             donates_state=True),
    Runnable("pyplnmodels", "peer", "#1188AA", "pyPLNmodels", dispatch_floor_s=5e-5, blurb=(
        "pyPLNmodels' own Pln.fit (PyTorch, eager) on the same data, iterations and device. Its own algorithm "
        "whatever the spec says: Rprop(lr=0.01) on M and S from M = log(Y + (Y == 0)), S = 0.5, with B and Sigma "
        "profiled. Its ELBO is re-expressed with the exact log Y!; its float32-only inputs are cast to the spec's "
        "precision. With a tolerance it stops by the rule every strategy uses (relative ELBO change), not by its "
        "own criterion.")),
    Runnable("torch_eager", "peer", "#665500", "PyTorch eager", dispatch_floor_s=5e-5, takes=_GRADIENT_ONLY,
             stops_at_tol=False,
             needs="mirrors the optax optimizers seed, adam and rprop line for line in PyTorch", blurb=(
                 "the JAX strategies' fit line for line in PyTorch (same model, initialisation and optax optimizer "
                 "semantics: seed, adam and rprop), run op by op from a Python loop, every iteration: the "
                 "PyTorch counterpart of the eager strategy.")),
    Runnable("torch_compile", "peer", "#559977", "torch.compile", dispatch_floor_s=1e-5, takes=_GRADIENT_ONLY,
             stops_at_tol=False,
             needs="mirrors the optax optimizers seed, adam and rprop line for line in PyTorch", blurb=(
                 "the same PyTorch step under torch.compile (TorchDynamo + Inductor, mode='default', "
                 "dynamic=False), one compiled function per iteration driven from a Python loop, like jit_step. "
                 "Compilation happens at the first call; compile_s is estimated as first call minus a "
                 "steady-state call.")),
)
RUNNABLES: dict[str, Runnable] = {runnable.name: runnable for runnable in _RUNNABLES}

# Strategies this program does not know (runs imported from another version): a hue no
# runnable above has.
UNKNOWN_COLOUR = "#DDCC77"


def runnable(name: str) -> Runnable:
    """The runnable called `name`; `KeyError` names the known ones."""
    try:
        return RUNNABLES[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known: {', '.join(RUNNABLES)}") from None


def strategy_names() -> tuple[str, ...]:
    """The JAX strategies, in teaching order (from nothing compiled to the whole loop compiled)."""
    return tuple(r.name for r in _RUNNABLES if not r.is_peer)


def least_compiled(names) -> str:
    """The first of `names` in teaching order (those this program does not know last): a
    speed-up's baseline, the same whichever run was slowest at one click."""
    order = list(RUNNABLES)
    return min(names, key=lambda name: order.index(name) if name in order else len(order))


def peer_names() -> tuple[str, ...]:
    return tuple(r.name for r in _RUNNABLES if r.is_peer)


def tutorial_levels() -> tuple[str, ...]:
    """The seed tutorial's five levels, in order."""
    levels = sorted((r.tutorial_level, r.name) for r in _RUNNABLES if r.tutorial_level is not None)
    return tuple(name for _, name in levels)


def optimizer_names(family: str | None = None) -> tuple[str, ...]:
    """The optimizers (of `family` when given), gradient ones first."""
    return tuple(o.name for o in _OPTIMIZERS if family is None or o.family == family)


def colour(name: str) -> str:
    """The chart colour of runnable `name` (UNKNOWN_COLOUR for a name this program does not know)."""
    found = RUNNABLES.get(name)
    return found.colour if found is not None else UNKNOWN_COLOUR
