"""What looking inside a fit finds, as plain data: the compiled functions of a strategy and
their XLA analyses, where each array lives, the machine's peaks and a strategy's floor.

The inspections run on a worker (`core.cluster.tasks`), which has JAX; these types are what
comes back to the dashboard's server, which has not, so this module imports nothing that
does. `core.inspect.introspect`, `layout` and `roofline` make them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from core.inspect.xla_analysis import Cost, Memory


@dataclasses.dataclass(frozen=True)
class ArrayLayout:
    """One placed array.

    Attributes:
        name: its path in the fit, e.g. "data.counts", "state.params.latent_mean".
        global_shape: the whole array's shape.
        dtype: e.g. "float32".
        sharding: "PartitionSpec('rows', None) over mesh rows=4" (row blocks, on one
            device too), "replicated over mesh rows=4" or "single device".
        devices: how many devices hold a part of it (or a copy).
        per_device_shape: the shape of the block one device holds.
        bytes_per_device: the bytes of that block.
    """

    name: str
    global_shape: tuple[int, ...]
    dtype: str
    sharding: str
    devices: int
    per_device_shape: tuple[int, ...]
    bytes_per_device: int


# Characters of a text shown on the page; st.code slows the browser down past this and
# nobody reads 100 kB of HLO on a projector. The full text stays downloadable.
DISPLAY_CHARS = 40_000


@dataclasses.dataclass(frozen=True)
class Executable:
    """One compiled function of a strategy.

    Attributes:
        name: the strategy's name for it ("fit", "step", "value_and_grad", ...).
        stablehlo: the lowered module (`Lowered.as_text()`), before XLA's passes.
        optimized_hlo: after XLA's passes (`Compiled.as_text()`); "" if unavailable.
        cost: XLA's cost analysis of the executable.
        memory: XLA's memory analysis, or None where the backend gives none.
    """

    name: str
    stablehlo: str
    optimized_hlo: str
    cost: Cost
    memory: Memory | None


@dataclasses.dataclass(frozen=True)
class Inspection:
    """Everything the "Under the hood" page shows for one FitSpec; plain data only.

    Attributes:
        strategy, description: the strategy's name and its module docstring.
        dataset, n, p, d, precision, device, iterations, optimizer: what was inspected.
        compiled: False for eager, which hands nothing to XLA ahead of time.
        python_loop: whether iterations are driven from Python.
        sources: (title, Python source) pairs: the strategy module, then the shared
            `fit_step` and `elbo` every strategy runs.
        jaxpr: the jaxpr of what is compiled (one iteration for Python loops).
        jaxpr_of: what `jaxpr` is the jaxpr of, in words.
        executables: one entry per compiled function (empty for eager).
        cost_per_iteration, cost_per_run: XLA's estimates (None fields if unknown).
        cost_note: how the per-iteration and per-run figures were derived.
        compile_count, disk_cache_hits, cache, trace_lower_s, compile_s: as the engine
            reports them for a cold in-process cache ("disk" when JAX's persistent
            cache supplied the executables).
        versions: jax and jaxlib versions the texts come from.
        layout: where each array of the placed data and initial state lives (shape,
            sharding, what one device holds), data first.
    """

    strategy: str
    description: str
    dataset: str
    n: int
    p: int
    d: int
    precision: str
    device: str
    iterations: int
    optimizer: str
    compiled: bool
    python_loop: bool
    sources: tuple[tuple[str, str], ...]
    jaxpr: str
    jaxpr_of: str
    executables: tuple[Executable, ...]
    cost_per_iteration: Cost
    cost_per_run: Cost
    cost_note: str
    compile_count: int
    disk_cache_hits: int
    cache: str
    trace_lower_s: float
    compile_s: float
    versions: dict[str, str]
    layout: tuple[ArrayLayout, ...] = ()


def clip(text: str, limit: int = DISPLAY_CHARS) -> tuple[str, bool]:
    """`text` cut to `limit` characters at a line end, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    cut = text.rfind("\n", 0, limit)
    cut = cut if cut > 0 else limit
    note = f"\n... [{len(text) - cut:,} more characters: download the full text]"
    return text[:cut] + note, True



def table_rows(layouts: tuple[ArrayLayout, ...] | list[ArrayLayout]) -> list[dict[str, Any]]:
    """Rows for a table: shapes written "n × p", bytes as they are."""
    def shape(dims) -> str:
        return " × ".join(f"{d:,}" for d in dims) or "scalar"

    return [{"array": row.name, "global shape": shape(row.global_shape), "dtype": row.dtype,
             "sharding": row.sharding, "devices": row.devices, "per-device shape": shape(row.per_device_shape),
             "bytes per device": row.bytes_per_device} for row in layouts]


_COLUMNS = {  # table column -> (where, field, unit); oaks x1 to x1000 stay readable in these units
    "MFLOP": ("cost", "flops", 1e6), "MB accessed": ("cost", "bytes_accessed", 1e6),
    "transcendentals (k)": ("cost", "transcendentals", 1e3), "arguments (MB)": ("memory", "argument_bytes", 1e6),
    "outputs (MB)": ("memory", "output_bytes", 1e6), "temporaries (MB)": ("memory", "temp_bytes", 1e6),
    "peak (MB)": ("memory", "peak_bytes", 1e6), "code (MB)": ("memory", "generated_code_bytes", 1e6),
}


# An equation of a jaxpr ("c:f32[] = mul a b"; nested jaxprs' equations count too) and an
# instruction of an HLO module ("%add.3 = f32[4]{0} add(...)", "ROOT %tuple = ..."): what a
# slide counts as a program's size.
_JAXPR_EQUATION = re.compile(r"^\s+\S.* = \S", re.MULTILINE)
_HLO_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?[\w.\-]+ = ", re.MULTILINE)


def jaxpr_equations(jaxpr: str) -> int:
    """How many equations a printed jaxpr holds, those of nested jaxprs (a scan's body) included."""
    return len(_JAXPR_EQUATION.findall(jaxpr))


def hlo_instructions(hlo: str) -> int:
    """How many instructions a printed HLO module holds, in every computation."""
    return len(_HLO_INSTRUCTION.findall(hlo))


def compile_heading(compile_count: int, disk_cache_hits: int) -> str:
    """What the "compile" seconds of an inspection measured: XLA compiling, loading executables
    from JAX's persistent cache (then no compilation ran, and "Compile" beside "0 compilations"
    would read as a contradiction), or both."""
    if not disk_cache_hits:
        return "Compile"
    return "Compile + load" if compile_count else "Load from disk"


def executable_rows(inspection: Inspection) -> list[dict[str, Any]]:
    """One row per executable for a table: its size in HLO instructions after XLA's passes,
    costs in MFLOP / MB / thousands, memory in MB."""
    rows = []
    for executable in inspection.executables:
        parts = {"cost": executable.cost, "memory": executable.memory or Memory()}
        row: dict[str, Any] = {"executable": executable.name,
                               "HLO instructions": hlo_instructions(executable.optimized_hlo) or None}
        for column, (where, field, unit) in _COLUMNS.items():
            value = getattr(parts[where], field)
            row[column] = None if value is None else value / unit
        rows.append(row)
    return rows


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Measured rates of one device for one dtype.

    Attributes:
        matmul_flops_per_s: dense (1024 x 1024) matmul FLOP/s.
        exp_per_s: `exp` evaluations per second (summed, so nothing is written back).
        bytes_per_s: bytes read per second by a sum over 128 MB (float32).
        device_kind, dtype, host: what was measured.
    """

    matmul_flops_per_s: float
    exp_per_s: float
    bytes_per_s: float
    device_kind: str
    dtype: str
    host: str


@dataclasses.dataclass(frozen=True)
class Floor:
    """The time floor of one iteration, in seconds, and which side binds."""

    compute_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One strategy's work per iteration against the machine's limit.

    Attributes:
        cost: XLA's cost analysis of one iteration (None fields where XLA gives none;
            all None for eager and the peers, which hand XLA nothing ahead of time).
        floor: the roofline floor of that work, or None without a cost.
        compulsory_bytes: what one iteration must move: read the data, read and write
            the state (parameters, Omega, optimizer moments).
        peak_bytes: XLA's memory analysis: the largest (arguments + outputs + temporaries
            - aliased) over the strategy's executables, or None.
        model_bytes: the arrays the model itself holds: Y, O, X, B, M, S and Omega.
    """

    cost: Cost
    floor: Floor | None
    compulsory_bytes: int
    peak_bytes: int | None
    model_bytes: int
