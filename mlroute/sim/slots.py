"""The flow slots of a set of jobs: every send of every ring or chain, fixed for the whole run.

The engine keeps its state in arrays indexed by slot (rates, links, progress), so the static part -- which job,
ring and edge a slot belongs to, its bytes per step, each ring's steps -- is computed once, here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from mlroute.workloads.jobs import Job, jobs_to_flows


class FlowSlots:
    """The static table of flow slots of a set of jobs."""

    def __init__(self, jobs: Sequence[Job]):
        self.jobs = list(jobs)
        # slot order = job order, ring order, edge order. Each slot gets its own key (job, ring, edge): the
        # flows of two GPUs that share a NIC pair are different connections, hashed separately by ECMP.
        self.flows = []
        for job in self.jobs:
            fl = jobs_to_flows([job])
            k = 0
            for r in range(len(job.rings)):
                for e in range(len(job.edges(r))):
                    self.flows.append(dataclasses.replace(fl[k], key=(job.name, r, e)))
                    k += 1
        job_of, ring_of, edge_of, ring_job, ring_steps, ring_first = [], [], [], [], [], []
        bytes_ = []
        ring_id = 0
        for j, job in enumerate(self.jobs):
            for r in range(len(job.rings)):
                n_edges = len(job.edges(r))
                ring_first.append(len(job_of))
                for e in range(n_edges):
                    job_of.append(j)
                    ring_of.append(ring_id)
                    edge_of.append(e)
                    bytes_.append(job.step_bytes)
                ring_job.append(j)
                ring_steps.append(job.steps_per_iteration(r))
                ring_id += 1
        self.job_of = np.array(job_of, dtype=np.int64)
        self.ring_of = np.array(ring_of, dtype=np.int64)
        self.edge_of = np.array(edge_of, dtype=np.int64)
        self.bytes = np.array(bytes_, dtype=float)
        self.ring_job = np.array(ring_job, dtype=np.int64)
        self.ring_steps = np.array(ring_steps, dtype=np.int64)
        self.ring_first = np.array(ring_first + [len(job_of)], dtype=np.int64)
        self.ring_size = np.diff(self.ring_first)
        self.job_kind = [job.kind for job in self.jobs]
        self.job_rings = [np.flatnonzero(self.ring_job == j) for j in range(len(self.jobs))]
        self.n = len(job_of)
        self.n_rings = ring_id
