"""The oaks data as a small file shipped with the lab, made from pyPLNmodels' copy.

pyPLNmodels is the source of the oaks data (Jakuschkin et al. 2016: powdery mildew
amplicons on 116 oak leaves, 114 taxa), but reading it through the package costs a
command that fits oaks torch's import, and pyPLNmodels is needed only by its peers. The
file `oaks.npz` beside this module holds the counts and the raw read totals (integers,
as pyPLNmodels' csv files do) and the samples' table (tree, dist2ground, orientation, for
covariates such as "~ 1 + tree"); `tests/data/test_data.py` checks that it equals
`pyPLNmodels.load_oaks()` exactly. Made again with
`python -m core.data.oaks_file` (pyPLNmodels installed).
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

PATH = pathlib.Path(__file__).with_name("oaks.npz")
# Counts reach 2,228 and read totals 11,706: both fit 16 bits, which keeps the file small.
_STORED_DTYPE = np.uint16


def read(path: pathlib.Path = PATH) -> tuple[np.ndarray, np.ndarray]:
    """(counts, log-offsets), both float64 (116, 114): the offsets logged once, as
    `pyPLNmodels.load_oaks()` gives them."""
    with np.load(path) as stored:
        counts = stored["counts"].astype(np.float64)
        offsets = np.log(stored["read_totals"].astype(np.float64))
    return counts, offsets


def samples(path: pathlib.Path = PATH) -> dict[str, np.ndarray]:
    """The samples' table, 116 rows: tree (str), dist2ground (float64), orientation (str)."""
    with np.load(path) as stored:
        return {"tree": stored["tree"].astype(str), "dist2ground": stored["dist2ground"].astype(np.float64),
                "orientation": stored["orientation"].astype(str)}


def _folder() -> pathlib.Path:
    found = importlib.util.find_spec("pyPLNmodels")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("pyPLNmodels is not installed: it holds the oaks data this file is made from")
    return pathlib.Path(found.submodule_search_locations[0]) / "load_data" / "data" / "oaks"


def from_pyplnmodels() -> tuple[np.ndarray, np.ndarray]:
    """(counts, read totals) as pyPLNmodels ships them (its csv files), as int64."""
    # Here only: making the file is the one use of pandas here (reading it needs NumPy alone).
    import pandas as pd

    return tuple(pd.read_csv(_folder() / name).to_numpy(np.int64) for name in ("counts.csv", "offsets.csv"))


def samples_from_pyplnmodels() -> dict[str, np.ndarray]:
    """The samples' table as pyPLNmodels ships it (its covariates.csv; `load_oaks` calls
    the distance `dist2ground`)."""
    # Here only, as in `from_pyplnmodels`: reading the shipped file needs NumPy alone.
    import pandas as pd

    table = pd.read_csv(_folder() / "covariates.csv")
    return {"tree": table["tree"].to_numpy(str), "dist2ground": table["distTOground"].to_numpy(np.float64),
            "orientation": table["orientation"].to_numpy(str)}


def write(path: pathlib.Path = PATH) -> pathlib.Path:
    """Writes the file from pyPLNmodels' copy of the data; returns its path."""
    counts, read_totals = from_pyplnmodels()
    for name, values in (("counts", counts), ("read totals", read_totals)):
        if values.min() < 0 or values.max() > np.iinfo(_STORED_DTYPE).max:
            raise ValueError(f"oaks {name} span {values.min()}..{values.max()}, beyond {_STORED_DTYPE.__name__}")
    np.savez_compressed(path, counts=counts.astype(_STORED_DTYPE), read_totals=read_totals.astype(_STORED_DTYPE),
                        **samples_from_pyplnmodels())
    return path


if __name__ == "__main__":
    print(f"wrote {write()}")
