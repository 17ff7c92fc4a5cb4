"""The unit of routing: one long-lived ("elephant") flow between two hosts."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Flow:
    """An unsplittable flow that gets exactly one path.

    src, dst:  host ids exactly as the input gave them (ints for generated fabrics, any hashable otherwise).
    src_tor, dst_tor:  override where the hosts sit (index into ``Fabric.leaves`` or a leaf switch name);
        ``None`` means the fabric's default placement (host h under ToR h // hosts_per_tor, or the
        ``hosts`` map given to ``Fabric.from_graph``).
    demand:  a fraction of host-link capacity the flow would use on a non-blocking network, or ``None`` for
        "as much as it can get" (elephants in the paper are network-limited).
    job:  the training job the flow belongs to (job-level metric, All-Reduce estimate), or ``None``.
    key:  an opaque id for the caller (the controller uses a 5-tuple); never interpreted here.
    weight:  the weight of the flow's job in the job-level objective (e.g. GPU intensity = compute per
        iteration / communication time, as Crux does): a job's rate counts as rate / weight, so a heavier job
        needs more bandwidth to be as well off. All flows of a job carry the same weight.
    """

    src: Hashable
    dst: Hashable
    src_tor: int | None = None
    dst_tor: int | None = None
    demand: float | None = None
    job: str | None = None
    key: Hashable | None = None
    weight: float = 1.0
