"""Ring choice (issue 37) in one run: every job's all-reduce time over ideal with rank-order rings vs the rings
chosen by mlroute.routing.ring_choice, all jobs routed jointly by the default optimiser, per fabric x placement x
failed links. Rings send in gloo's direction (rank r -> r-1); a host holds one block of ranks.

Placements: ``contiguous`` (a job's hosts on two pods / ToRs, rank order one group then the other), ``interleaved``
(the same hosts, rank order alternating between the groups: A, B, A, B), ``random`` (every host of the fabric in a
seeded random job and rank order). Fabrics: ``k4`` (4 jobs x 4 hosts, the issue's case), ``k8`` (16 jobs x 8 hosts),
``paper`` (the paper's 64 ToR x 32 spine x 32 host Clos, 64 jobs x 32 hosts: the grouped method). Failed links:
aggregation-core links of the first pods (fat-trees), ToR-spine links of the first ToRs (Clos).

    .venv/bin/python benchmarks/bench_ring_choice.py [--fabrics k4,k8,paper] [--seed 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mlroute.routing import metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.optimisers import optimise
from mlroute.routing.ring_choice import choose_rings, ring_flows
from mlroute.workloads.placement import RING_PLACEMENTS as PLACEMENTS
from mlroute.workloads.placement import host_groups, place_replicas

FABRICS = {
    # name: (build, hosts per job, failed links by count); hosts are grouped by pod (fat-trees) / ToR (Clos)
    "k4": (lambda: Fabric.fattree(4), 4, [("agg0_0", "core0"), ("agg2_1", "core2")]),
    "k8": (lambda: Fabric.fattree(8), 8, [("agg0_0", "core0"), ("agg2_1", "core5")]),
    "paper": (lambda: Fabric.clos(64, 32, 32), 32, [("tor0", "spine0"), ("tor2", "spine1")]),
}


def jobs_of(fab: Fabric, size: int, placement: str, seed: int) -> dict[str, list]:
    """Job name -> hosts in rank order: as many jobs of ``size`` one-host replicas as the fabric holds, placed by
    :func:`mlroute.workloads.placement.place_replicas` (the simulator's ``--placement``)."""
    placed = place_replicas(host_groups(fab), [(size, 1)] * (len(fab.hosts) // size), placement,
                            np.random.default_rng(seed))
    return {f"j{i}": [h for rep in reps for h in rep] for i, reps in enumerate(placed)}


def assess(fab: Fabric, orders: dict) -> list[float]:
    """Every job's all-reduce time / ideal with these rings, routed jointly."""
    flows = [f for name, order in orders.items() for f in ring_flows(order, job=name)]
    paths = optimise("mlroute", fab, flows, objective="job", time_limit=3600.0).paths
    rep = metric.report(fab, flows, paths, objective="job")
    return [j["allreduce_relative"] for j in rep["jobs"].values()]


def row(name: str, placement: str, failed: int, seed: int, max_candidates: int) -> str:
    build, size, links = FABRICS[name]
    fab = build()
    for u, v in links[:failed]:
        fab.fail_link(u, v)
    jobs = jobs_of(fab, size, placement, seed)
    before = assess(fab, jobs)
    t0 = time.perf_counter()
    chosen = choose_rings(fab, jobs, max_candidates=max_candidates)
    took = time.perf_counter() - t0
    after = assess(fab, {n: c.order for n, c in chosen.items()})
    helped = sum(c.helps for c in chosen.values())
    routed = sum(c.candidates for c in chosen.values())
    methods = "/".join(sorted({c.method for c in chosen.values()}))
    return (f"| {name} | {placement} | {failed} | {len(jobs)} x {len(next(iter(jobs.values())))} | "
            f"{max(before):.2f} | {statistics.mean(before):.2f} | {max(after):.2f} | {statistics.mean(after):.2f} | "
            f"{helped} | {methods} | {routed} | {took:.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fabrics", default="k4,k8,paper")
    p.add_argument("--placements", default=",".join(PLACEMENTS))
    p.add_argument("--failed", default="0,1,2")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-candidates", type=int, default=120,
                   help="distinct orders routed per ring at most (default 120, the controller's)")
    args = p.parse_args()
    print("| fabric | placement | failed links | jobs x hosts | worst / ideal, rank order | mean | "
          "worst / ideal, chosen | mean | rings changed | method | orders routed | choice s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.fabrics.split(","):
        for placement in args.placements.split(","):
            for failed in (int(x) for x in args.failed.split(",")):
                print(row(name, placement, failed, args.seed, args.max_candidates), flush=True)


if __name__ == "__main__":
    main()
