#!/usr/bin/env python3
"""Benchmark the routing optimisers at the paper's scale (and a few other places).

    python benchmarks/bench_routing.py            # full paper grid (1-5 jobs x ring 2/4/8 x 0/1/4/8 failed
                                                  # spines on 64 ToRs x 32 spines x 32 hosts), ILP 10 s/instance
    python benchmarks/bench_routing.py --quick    # a 12-instance subset, ILP 3 s, small fat-trees only
    python benchmarks/bench_routing.py --large    # also 100,000 flows on a k=48 fat-tree (greedy vs mlroute)
    python benchmarks/bench_routing.py --csv out.csv   # one row per (instance, algorithm)

Per algorithm it prints: the median runtime (the optimiser alone, median of --repeats runs, algorithms
interleaved so that machine noise hits all alike) and the median and 90th percentile over the instances of
its ratio to `greedy` measured on the same instance; how often the max link load equals the lower bound
ceil(Delta/S) and the mean excess; flows sharing a link; and the estimated All-Reduce time relative to a
non-blocking fabric (ring step time is set by the slowest flow of the job: ideal slowest rate / actual).

Workloads: ``mlroute.workloads.jobs.paper_jobs`` (GPT-3 / BLOOM / LLaMA-2 replicas on random ToRs, one
ring per GPU position).  When the jobs do not fit 2,048 hosts with one GPU per host, GPUs are packed
(``min_gpus_per_host``), so several rings share a NIC and the elephant count can exceed 2,048.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time

import numpy as np

from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.metric import report
from mlroute.routing.optimisers import ALGORITHMS, OPTIMISERS, Problem
from mlroute.workloads.patterns import pattern_flows

#: every optimiser, the paper's greedy first: the baseline of the runtime ratios
ALGOS = ["greedy"] + [a for a in ALGORITHMS if a != "greedy"]


def paper_flows(n_jobs, ring, seed):
    from mlroute.workloads.jobs import jobs_to_flows, min_gpus_per_host, paper_jobs

    g = min_gpus_per_host(n_jobs, ring, 64, 32)
    return jobs_to_flows(paper_jobs(n_jobs, ring, 64, 32, seed=seed, gpus_per_host=g)), g


def timed(fn, fab, flows, **kw):
    t0 = time.perf_counter()
    r = fn(fab, flows, **kw)
    return r, time.perf_counter() - t0


def bench_instance(fab, flows, algos, repeats, ilp_limit):
    times = {a: [] for a in algos}
    result = {}
    for rep in range(repeats):
        for a in algos:
            if a == "ilp" and rep > 0:
                continue  # one run is enough (and long)
            kw = {"time_limit": ilp_limit} if a == "ilp" else {}
            r, dt = timed(OPTIMISERS[a], fab, flows, **kw)
            times[a].append(dt)
            result[a] = r
    bound = Problem(fab, flows).degree_bound()
    rows = {}
    for a in algos:
        rep = report(fab, flows, result[a].paths)
        jobs = rep.get("jobs", {})
        ar = [j["allreduce_relative"] for j in jobs.values()]
        rows[a] = {
            "runtime_ms": statistics.median(times[a]) * 1e3,
            "max_link_load": rep["max_link_load"],
            "bound": bound,
            "flows_sharing": rep["flows_sharing"],
            "min_rate": rep["min_rate"],
            "fraction_of_ideal": rep["fraction_of_ideal"],
            "ar_mean": float(np.mean(ar)) if ar else float("nan"),
            "ar_max": float(np.max(ar)) if ar else float("nan"),
            "proved_optimal": result[a].info.get("proved_optimal"),
            "ilp_bound": result[a].info.get("lower_bound") if a == "ilp" else None,
        }
    return rows


def summarise(all_rows, algos, title):
    print(f"\n## {title}\n")
    head = ("| algo | runtime median (ms) | x greedy (median / p90) | max load = bound | mean excess | "
            "flows sharing (mean) | sum rate / ideal | All-Reduce time / ideal (mean / worst) |")
    print(head)
    print("|" + "---|" * 8)
    for a in algos:
        rs = [r[a] for r in all_rows if a in r]
        if not rs:
            continue
        ratio = [r[a]["runtime_ms"] / r["greedy"]["runtime_ms"] for r in all_rows if a in r and "greedy" in r]
        hit = sum(1 for r in rs if r["bound"] is not None and r["max_link_load"] == r["bound"])
        with_bound = sum(1 for r in rs if r["bound"] is not None)
        excess = (np.mean([r["max_link_load"] - r["bound"] for r in rs if r["bound"] is not None]) if with_bound
                  else float("nan"))
        ars = [r["ar_mean"] for r in rs if np.isfinite(r["ar_mean"])]
        ar_txt = (f"{np.mean(ars):.3f} / {max(r['ar_max'] for r in rs if np.isfinite(r['ar_max'])):.3f}"
                  if ars else "- (no jobs)")
        print(f"| {a} | {statistics.median(r['runtime_ms'] for r in rs):.2f} | "
              f"{np.median(ratio):.2f} / {np.percentile(ratio, 90):.2f} | {hit}/{with_bound} | {excess:.2f} | "
              f"{np.mean([r['flows_sharing'] for r in rs]):.1f} | "
              f"{np.mean([r['fraction_of_ideal'] for r in rs]):.3f} | {ar_txt} |")
    if any("ilp" in r for r in all_rows):
        proved = sum(1 for r in all_rows if r.get("ilp", {}).get("proved_optimal"))
        print(f"\nILP proved optimality on {proved}/{sum(1 for r in all_rows if 'ilp' in r)} instances.")


def random_grid(repeats, quick):
    """Paper-scale Clos, unstructured traffic (where the greedy is not optimal): random permutations with k
    flows per host, with 0/4/8 failed spines."""
    from mlroute.routing.metric import compare, rates

    rows = []
    cases = [(k, f, seed) for k in (1, 2, 3) for f in (0, 4, 8) for seed in range(1 if quick else 2)]
    wins = {a: [0, 0, 0] for a in ("coloring", "gff", "greedy")}
    for k, failed, seed in cases:
        fab = Fabric.clos(64, 32, 32, failed_spines=range(32 - failed, 32))
        flows = []
        for j in range(k):
            flows += pattern_flows("randbij", seed=1000 * seed + j, fabric=fab)
        algos = ["greedy", "mlroute", "coloring", "ecmp", "gff"]
        r = bench_instance(fab, flows, algos, repeats, None)
        r["case"] = f"randbij x{k}, {failed} failed"
        rows.append(r)
        res = {a: OPTIMISERS[a](fab, flows).paths for a in ("mlroute", "coloring", "gff", "greedy")}
        rm = rates(fab, flows, res["mlroute"])
        for a in wins:
            wins[a][compare(rm, rates(fab, flows, res[a])) + 1] += 1
        print(f"  {r['case']:<30} {len(flows)} flows  bound {r['mlroute']['bound']}  "
              + "  ".join(f"{a} {r[a]['max_link_load']}" for a in algos), flush=True)
    summarise(rows, ["greedy", "mlroute", "coloring", "ecmp", "gff"],
              f"Paper-scale Clos, random permutation traffic ({len(rows)} instances)")
    print("\nmlroute vs others in the metric (leximin of max-min fair rates), instances worse / equal / better: "
          + ", ".join(f"{a} {w[0]}/{w[1]}/{w[2]}" for a, w in wins.items()))
    return rows


def fattree_gap(ilp_limit, repeats, seeds):
    """Small fat-trees (k=4, 8) with patterns and failures: max load of each heuristic vs the ILP optimum."""
    rows = []
    cases = []
    for k in (4, 8):
        for spec in ("randbij", "random", "stag:0.2,0.3"):
            for fail in (False, True):
                for seed in range(seeds):
                    cases.append((k, spec, fail, seed))
    for k, spec, fail, seed in cases:
        fab = Fabric.fattree(k)
        if fail:
            fab.fail_switch("core0")
            fab.fail_link("edge0_0", "agg0_0")
        flows = pattern_flows(spec, seed=seed, fabric=fab)
        flows = flows + pattern_flows("randbij", seed=seed + 100, fabric=fab)  # two flows per host
        r = bench_instance(fab, flows, ["greedy", "mlroute", "coloring", "ecmp", "ilp"], repeats, ilp_limit)
        r["case"] = f"k={k} {spec}{' +failures' if fail else ''} seed {seed}"
        rows.append(r)
    print("\n## Small fat-trees: max link load vs the ILP optimum\n")
    print("| instances | algo | = ILP optimum | mean gap to ILP | sum rate / ideal |")
    print("|---|---|---|---|---|")
    proved = [r for r in rows if r["ilp"]["proved_optimal"]]
    for a in ("greedy", "mlroute", "coloring", "ecmp"):
        eq = sum(1 for r in proved if r[a]["max_link_load"] == r["ilp"]["max_link_load"])
        gap = np.mean([r[a]["max_link_load"] - r["ilp"]["max_link_load"] for r in proved]) if proved else float("nan")
        print(f"| {len(proved)} proved of {len(rows)} | {a} | {eq}/{len(proved)} | {gap:.2f} | "
              f"{np.mean([r[a]['fraction_of_ideal'] for r in rows]):.3f} |")
    return rows


def large(seed):
    fab = Fabric.fattree(48)
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, fab.n_hosts, size=(100_000, 2))
    flows = [Flow(int(a), int(b)) for a, b in pairs if a != b]
    print(f"\n## Large: {len(flows)} random flows on a k=48 fat-tree ({fab.n_hosts} hosts)\n")
    print("| algo | first run (s, cold path caches) | second run (s) | max link load |")
    print("|---|---|---|---|")
    for a in ("greedy", "mlroute"):
        fab2 = Fabric.fattree(48)
        r1, t1 = timed(OPTIMISERS[a], fab2, flows)
        r2, t2 = timed(OPTIMISERS[a], fab2, flows)
        print(f"| {a} | {t1:.2f} | {t2:.2f} | {r2.info.get('max_link_load')} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a small subset of the grid, ILP 3 s")
    ap.add_argument("--large", action="store_true", help="also 100,000 flows on a k=48 fat-tree")
    ap.add_argument("--repeats", type=int, default=5, help="runs per algorithm and instance (median)")
    ap.add_argument("--ilp-time-limit", type=float, default=None, help="seconds per ILP (default 10, quick 3)")
    ap.add_argument("--no-ilp", action="store_true", help="skip the ILP at paper scale")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", help="write one row per (instance, algorithm) here")
    args = ap.parse_args(argv)
    ilp_limit = args.ilp_time_limit or (3.0 if args.quick else 10.0)
    if args.quick:
        grid = [(j, r, f) for j in (1, 3, 5) for r in (2, 8) for f in (0, 4)]
    else:
        grid = [(j, r, f) for j in range(1, 6) for r in (2, 4, 8) for f in (0, 1, 4, 8)]
    algos = [a for a in ALGOS if not (a == "ilp" and args.no_ilp)]
    print(f"# Routing benchmark: {len(grid)} paper-scale instances (64 ToRs x 32 spines x 32 hosts), "
          f"{args.repeats} runs each, ILP limit {ilp_limit:g} s")
    all_rows = []
    t_start = time.perf_counter()
    for n_jobs, ring, failed in grid:
        flows, g = paper_flows(n_jobs, ring, args.seed + 7 * n_jobs + ring)
        fab = Fabric.clos(64, 32, 32, failed_spines=range(32 - failed, 32))
        rows = bench_instance(fab, flows, algos, args.repeats, ilp_limit)
        rows["case"] = f"{n_jobs} jobs, ring {ring}, {failed} failed, {len(flows)} flows, {g} GPU/host"
        all_rows.append(rows)
        m, gr = rows["mlroute"], rows["greedy"]
        ilp = rows.get("ilp")
        print(f"  {rows['case']:<52} bound {m['bound']}  greedy {gr['max_link_load']} ({gr['runtime_ms']:.1f} ms)"
              f"  mlroute {m['max_link_load']} ({m['runtime_ms']:.1f} ms)"
              + (f"  ilp {ilp['max_link_load']}{'*' if ilp['proved_optimal'] else ''}" if ilp else ""),
              flush=True)
    summarise(all_rows, algos, f"Paper grid ({len(grid)} instances)")
    ratios = [(r["mlroute"]["runtime_ms"] / r["greedy"]["runtime_ms"], int(r["case"].split(", ")[3].split()[0]))
              for r in all_rows]
    big = [x for x, n in ratios if n >= 1024]
    print(f"\nmlroute / greedy runtime per instance: median {np.median([x for x, _ in ratios]):.2f}, "
          f"p90 {np.percentile([x for x, _ in ratios], 90):.2f}"
          + (f"; on the {len(big)} instances with >= 1,024 elephants: median {np.median(big):.2f}, "
             f"max {max(big):.2f}" if big else ""))
    rnd = random_grid(args.repeats, args.quick)
    small = fattree_gap(ilp_limit, 1 if args.quick else 3, 1 if args.quick else 2)
    if args.large:
        large(args.seed)
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["case", "algo", "runtime_ms", "max_link_load", "bound", "flows_sharing", "min_rate",
                        "fraction_of_ideal", "allreduce_mean", "allreduce_max", "proved_optimal"])
            for r in all_rows + rnd + small:
                for a, v in r.items():
                    if a == "case":
                        continue
                    w.writerow([r["case"], a, f"{v['runtime_ms']:.3f}", v["max_link_load"], v["bound"],
                                v["flows_sharing"], v["min_rate"], v["fraction_of_ideal"], v["ar_mean"],
                                v["ar_max"], v["proved_optimal"]])
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
