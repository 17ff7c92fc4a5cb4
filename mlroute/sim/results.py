"""What a simulation returns: per-job iteration times, every transfer's FCT and throughput, the controller's log.

Plain values, apart from the engine, so that a caller (the CLI, the reproduction grid) can read and serialise them
without knowing how they were produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class JobResult:
    name: str
    kind: str
    model: str | None
    ring: int
    rings: int
    start_s: float
    ideal_s: float  # communication time of one iteration alone on a non-blocking fabric
    iterations: list = field(default_factory=list)  # dicts: iteration, start_s, comm_start_s, allreduce_s
    end_s: float | None = None


@dataclass
class SimResult:
    algo: str
    mode: str
    jobs: list  # JobResult
    fct_s: np.ndarray  # one per transfer (flow slot x step x iteration), in completion order
    throughput_gbps: np.ndarray  # bytes * 8 / fct / 1e9 for the same transfers
    controller_ms: list  # optimiser wall-clock runtime of each recomputation
    recompute_times_s: list  # simulated time of each recomputation
    max_link_load: list  # elephants on the most loaded fabric link, per recomputation
    recompute_flows: list  # flows routed, per recomputation
    proved_optimal: list  # per recomputation: the optimiser's "proved_optimal" (ilp), else None
    makespan_s: float
    events: int
    rate_computations: int
    wall_s: float
    #: per recomputation: the optimiser's wall-clock safety net cut its search short (its answer, unlike every
    #: other, depends on the machine's speed and load)
    cut_by_clock: list = field(default_factory=list)

    def allreduce_times(self) -> np.ndarray:
        return np.array([it["allreduce_s"] for j in self.jobs for it in j.iterations])

    def normalised_allreduce(self) -> np.ndarray:
        return np.array([it["allreduce_s"] / j.ideal_s for j in self.jobs for it in j.iterations])

    def to_dict(self, *, round_lists: int | None = 9) -> dict:
        def rl(a):
            a = np.asarray(a, dtype=float)
            return [float(f"{x:.{round_lists}g}") for x in a] if round_lists else a.tolist()

        return {
            "algo": self.algo,
            "mode": self.mode,
            "jobs": [
                {
                    "job": j.name,
                    "kind": j.kind,
                    "model": j.model,
                    "ring": j.ring,
                    "rings": j.rings,
                    "start_s": j.start_s,
                    "ideal_s": j.ideal_s,
                    "end_s": j.end_s,
                    "iterations": j.iterations,
                }
                for j in self.jobs
            ],
            "fct_s": rl(self.fct_s),
            "throughput_gbps": rl(self.throughput_gbps),
            "controller_ms": [round(x, 4) for x in self.controller_ms],
            "recompute_times_s": self.recompute_times_s,
            "max_link_load": self.max_link_load,
            "recompute_flows": self.recompute_flows,
            "proved_optimal": self.proved_optimal,
            "cut_by_clock": self.cut_by_clock,
            "makespan_s": self.makespan_s,
            "events": self.events,
            "rate_computations": self.rate_computations,
            "wall_s": round(self.wall_s, 3),
        }
