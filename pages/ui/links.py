"""Links that reproduce a view: the problem and each page's choices live in the URL.

A session reads the URL's query parameters once, when it starts (`restore`), into the
session-state keys of the widgets, before any widget is drawn; from then on the widgets
own their values (`persist_state="session"`) and every run writes them back to the URL
(`publish`). A copied address opened in a new browser therefore shows the same
strategies, problem, precision and device, and on Compare the same filters, ticked runs,
baseline and re-tested run. A parameter that does not parse, or names a choice that does
not exist, is ignored: the page keeps its default rather than failing, and says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import streamlit as st

from core import catalog
from core.results import story
from core.spec import DEVICES, INITS, LR_RANGE, OAKS_FORMULAS, OAKS_REPLICATES, OPTIMIZERS, PRECISIONS, TOL_RANGE, cap
from pages.ui.settings import DEFAULTS, OPTIMIZERS_INIT, key
from pages.ui.text import md

RESTORED = "links_restored"


@dataclasses.dataclass(frozen=True)
class Param:
    """One query parameter and the session-state key it stands for.

    Attributes:
        name: in the URL.
        key: the widget's session-state key.
        read: URL text -> value (raises ValueError or KeyError when the text is not a valid one).
        write: value -> URL text.
        default: left out of the URL when the value is this (None: always written).
    """

    name: str
    key: str
    read: Callable[[str], Any]
    write: Callable[[Any], str] = str
    default: Any = None


def _choice(choices) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text
    return read


def _whole(low: int, high: Callable[[], int] | int) -> Callable[[str], int]:
    def read(text: str) -> int:
        value = int(text)
        if not low <= value <= (high() if callable(high) else high):
            raise ValueError(text)
        return value
    return read


def _number(low: float, high: float) -> Callable[[str], float]:
    def read(text: str) -> float:
        value = float(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value
    return read


def _names(text: str) -> list[str]:
    known = set(catalog.RUNNABLES)
    return [name for name in text.split(",") if name in known]


def _strings(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _joined(values) -> str:
    return ",".join(str(v) for v in values)


def _number_text(value) -> str:
    """A number as a link writes it: whole numbers without a decimal point (the sidebar's
    whole-number boxes hold floats: 150.0 is written 150)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _sidebar(name: str, field: str, read: Callable[[str], Any]) -> Param:
    return Param(name, key(field), read, _number_text, default=getattr(DEFAULTS, field))


SIDEBAR = (
    _sidebar("dataset", "dataset", _choice(("oaks", "simulated"))),  # an upload cannot travel in a link
    _sidebar("replicate", "replicate", lambda t: _choice(tuple(map(str, OAKS_REPLICATES)))(t) and int(t)),
    _sidebar("formula", "formula", _choice(OAKS_FORMULAS)),
    _sidebar("n", "sim_n", _whole(2, lambda: cap("rows"))),
    _sidebar("p", "sim_p", _whole(1, lambda: cap("columns"))),
    _sidebar("d", "sim_d", _whole(1, lambda: cap("covariates"))),
    _sidebar("seed", "sim_seed", _whole(0, 2**31 - 1)),
    _sidebar("device", "device", _choice(DEVICES)),
    _sidebar("precision", "precision", _choice(PRECISIONS)),
    _sidebar("optimizer", "optimizer", _choice(OPTIMIZERS)),
    _sidebar("lr", "lr", _number(*LR_RANGE)),
    _sidebar("init", "init", _choice((OPTIMIZERS_INIT, *INITS))),
    _sidebar("iterations", "iterations", _whole(1, lambda: cap("iterations"))),
    _sidebar("repeats", "repeats", _whole(1, lambda: cap("repeats"))),
    _sidebar("tol", "tol", _number(*TOL_RANGE)),
)
# Compare's filters (a column of the store's frame: its box's label), each carried by a link
# under `FILTER_PREFIX` + its column: bare, "dataset=oaks x1" was the sidebar's own parameter,
# refused as a dataset and setting the sidebar's optimizer and precision for the next Run.
FILTER_PREFIX = "filter_"
COMPARE_FILTERS = {"strategy": "Strategy", "dataset": "Dataset", "device": "Device", "precision": "Precision",
                   "optimizer": "Optimizer", "init": "Initialisation", "status": "Status", "jax_version": "JAX",
                   "git_commit": "Commit"}
# Per page (its url_path): what its own widgets hold.
PAGES: dict[str, tuple[Param, ...]] = {
    "run": (Param("strategies", "run_strategies", _names, _joined),
            Param("cold", "run_cold", lambda t: t == "1", lambda v: "1" if v else "0", default=False)),
    "scaling": (Param("strategies", "scl_strategies", _names, _joined),
                Param("sizes", "scl_sizes", lambda t: [k for k in _ints(t) if k in OAKS_REPLICATES], _joined),
                Param("cold", "scl_cold", lambda t: t == "1", lambda v: "1" if v else "0", default=False)),
    "compare": (*(Param(FILTER_PREFIX + column, f"cmp_f_{column}", _strings, _joined, default=[])
                  for column in COMPARE_FILTERS),
                Param("group", "cmp_group", _strings, _joined),
                Param("timing", "cmp_metric", str),
                Param("ratio_timing", "cmp_metric_ratio", str),
                Param("baseline", "cmp_baseline", int),
                Param("retest", "cmp_retest", int),
                Param("ticked", "cmp_ticked", _ints, _joined, default=[])),
    # Counted from 1 in the address, as the page says "Step 3 of 7" (from 0 in the session).
    # A step past the last is refused with a note, as any value out of range is (step=99
    # opened the last step without a word).
    "story": (Param("step", "story_step", lambda text: _whole(1, len(story.STEPS))(text) - 1,
                    lambda step: str(int(step) + 1), default=0),),
}


def _all() -> list[Param]:
    return [*SIDEBAR, *(param for params in PAGES.values() for param in params)]


def restore() -> list[str]:
    """Once per session, before any widget is drawn: the URL's parameters into session state.

    Parameters of every page are read (the URL names one page, but its values are only
    ever those of the page it names), each checked by its `Param.read`. Returns those that
    did not read ("init=bogus"), whose defaults stand, for the page to say so; [] after the
    session's first call.
    """
    if st.session_state.get(RESTORED):
        return []
    st.session_state[RESTORED] = True
    given = st.query_params.to_dict()
    refused = []
    for param in _all():
        text = given.get(param.name)
        if text is None or param.key in st.session_state:
            continue
        try:
            st.session_state[param.key] = param.read(text)
        except (ValueError, KeyError, TypeError):
            refused.append(f"{param.name}={text}")  # a mistyped or stale link: the page's default stands
    return refused


# How much of a refused parameter a note repeats: a link is anyone's text.
REFUSED_SHOWN_CHARS = 40


def refused_note(refused: list[str]) -> str:
    """One line (markdown, the link's text shown literally) naming what `restore` refused."""
    shown = [md(text if len(text) <= REFUSED_SHOWN_CHARS else text[:REFUSED_SHOWN_CHARS - 1] + "…")
             for text in refused]
    one = len(refused) == 1
    return (f"This link's {', '.join(shown)} could not be read: "
            f"{'its default stands' if one else 'their defaults stand'}.")


def publish(page: str) -> None:
    """The sidebar's and `page`'s current values into the URL (defaults left out)."""
    wanted = {}
    for param in (*SIDEBAR, *PAGES.get(page, ())):
        if param.key not in st.session_state:
            continue
        value = st.session_state[param.key]
        if param.default is not None and value == param.default:
            continue
        if not _reads_back(param, value):
            continue
        wanted[param.name] = param.write(value)
    if st.session_state.get(key("dataset")) == "oaks":  # the simulated shape says nothing about oaks
        for name in ("n", "p", "d", "seed"):
            wanted.pop(name, None)
    else:  # nor oaks' covariates about other data
        wanted.pop("formula", None)
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def _reads_back(param: Param, value: Any) -> bool:
    """Whether a link with `value` would restore it: a widget's state is briefly one its
    parameter cannot carry (Compare's baseline box, whose runs had just changed, once held
    its label "#1 eager" instead of a run id), and a link written then opened another view."""
    try:
        param.read(param.write(value))
    except (ValueError, KeyError, TypeError):
        return False
    return True


def write(page: str, name: str, value: Any) -> None:
    """Set one of `page`'s parameters now (for values a page works out during its run,
    such as the ticked runs), and keep it in session state for the next `publish`."""
    param = next(p for p in PAGES[page] if p.name == name)
    st.session_state[param.key] = value
    text = param.write(value)
    if param.default is not None and value == param.default:
        if name in st.query_params:
            del st.query_params[name]
    elif st.query_params.get(name) != text:
        st.query_params[name] = text
