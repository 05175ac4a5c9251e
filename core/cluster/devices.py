"""What devices a cluster offers, read from its workers' reports (`Cluster.workers()`): one
reading for the sidebar, the Scaling page and a run's device check, so the server, which never
imports JAX, knows the devices only as the workers describe them."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from core.spec import DEVICES


@dataclasses.dataclass(frozen=True)
class Offered:
    """The device platforms a cluster's workers offer.

    Attributes:
        available: the platforms at least one worker serves, in `DEVICES` order.
        kinds: platform -> what it is and where ("NVIDIA H100 80GB HBM3 x1 on gpu-node").
        missing: every other platform of `DEVICES` -> why it is absent.
        workers: how many workers the cluster has, answering or not.
    """

    available: tuple[str, ...]
    kinds: dict[str, str]
    missing: dict[str, str]
    workers: int


def offered(workers: Mapping[str, Any]) -> Offered:
    """The platforms `workers` ({address: facts}) offer. A worker's facts are a dict with
    `served` (platforms), `kinds` ({platform: description}) and `host`; anything else
    is a worker that could not answer (starting, or failing) and offers nothing."""
    answered = [facts for facts in workers.values() if isinstance(facts, dict)]
    kinds: dict[str, set] = {}
    hosts: dict[str, set] = {}
    for facts in answered:
        for platform in facts.get("served", ()):
            kinds.setdefault(platform, set()).add(facts.get("kinds", {}).get(platform, platform))
            hosts.setdefault(platform, set()).add(facts.get("host", "?"))
    available = tuple(platform for platform in DEVICES if platform in kinds)
    if not workers:
        missing = {platform: "no worker has joined the cluster yet" for platform in DEVICES}
    else:
        missing = {platform: "no worker of the cluster has one" for platform in DEVICES if platform not in kinds}
    return Offered(
        available=available,
        kinds={platform: f"{', '.join(sorted(kinds[platform]))} on {', '.join(sorted(hosts[platform]))}"
               for platform in available},
        missing=missing, workers=len(workers))
