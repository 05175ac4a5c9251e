"""A measurement's final point checked in float64 (`core.fit.certificate`), once the run has
left the device queue: the check takes a NumPy evaluation or a few (a second at oaks x1000
on a CPU), which neither another user's turn nor the run's time budget should pay for."""

from __future__ import annotations

import dataclasses

import numpy as np

from core.data.counts import CountData
from core.fit import certificate
from core.results import estimates
from core.results.result import Measurement


def certified(measurement: Measurement, counts: CountData | None) -> Measurement:
    """`measurement` with `certified_elbo` and `estimated_gap` filled in from its final M and
    S, and its `estimates` (B and Sigma there), and M and S dropped; as it is where there are
    none, or no host data (drawn on the devices)."""
    latent = measurement.final_latent
    if latent is None:
        return measurement
    if counts is None:
        return dataclasses.replace(measurement, final_latent=None)
    # Padded rows (sharded layouts) are cut off: the check is of the real rows.
    mean, sd = (np.asarray(array, dtype=np.float64)[: counts.n] for array in latent)
    found = certificate.certify(counts.counts, counts.offsets, counts.covariates, mean, sd)
    made = None if found.coef is None else estimates.of(found.coef, found.covariance, counts.covariate_labels(),
                                                         counts.column_labels(), counts.notes,
                                                         counts.warnings, counts.unbounded,
                                                         counts.separated)
    return dataclasses.replace(measurement, final_latent=None, certified_elbo=found.elbo, estimated_gap=found.gap,
                               estimates=made)
