"""`mlroute route`: route a set of elephant flows on a fabric with one optimiser and report the result."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mlroute.errors import UsageError
from mlroute.routing.optimisers import ALGORITHMS

if TYPE_CHECKING:
    from mlroute.routing.fabric import Fabric
    from mlroute.routing.flow import Flow

NAME = "route"
HELP = ("route elephant flows (traffic files or a standard pattern) on a Clos or fat-tree fabric with one "
        "optimiser and print the paths and the metric")



def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fabric", choices=("clos", "fattree"), default="clos",
                   help="2-tier leaf-spine Clos (default) or k-ary 3-tier fat-tree")
    p.add_argument("--tors", type=int, default=64, help="Clos: number of ToRs (default 64)")
    p.add_argument("--spines", type=int, default=32, help="Clos: number of spines (default 32)")
    p.add_argument("--hosts-per-tor", type=int, default=32, help="Clos: hosts under each ToR (default 32)")
    p.add_argument("--k", type=int, default=4, help="fat-tree arity (even; default 4)")
    p.add_argument("--failed-spines", default="", metavar="LIST",
                   help="comma-separated failed spine (Clos) / core (fat-tree) indices, e.g. 28,29,30,31 or 28-31")
    p.add_argument("--failed-links", default="", metavar="LIST",
                   help="comma-separated failed cables as SWITCH:SWITCH, e.g. tor0:spine3,tor5:spine1")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--traffic", nargs="+", metavar="FILE",
                     help="flow files: the paper authors' traffic-pair files (one job per file) or the "
                          "project's .yaml/.yml/.csv format (docs/routing.md)")
    src.add_argument("--pattern", metavar="NAME[:ARGS]",
                     help="a standard pattern: stride:i, randbij, random, stag:pe,pp, hotspot[:n]")
    p.add_argument("--seed", type=int, default=0, help="seed of the pattern and of seeded optimisers (default 0)")
    p.add_argument("--algo", choices=ALGORITHMS, default="mlroute", help="optimiser (default mlroute)")
    p.add_argument("--objective", choices=("flow", "job"), default="flow",
                   help="leximin over flow rates (default) or over job rates first")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="search time limit in seconds (ilp default 60, mlroute local search default 2)")
    p.add_argument("--runs", type=int, default=None,
                   help="runs of the optimiser for the median runtime (default 5; 1 for ilp and annealing)")
    p.add_argument("--choose-rings", action="store_true",
                   help="choose each ring's host order first (mlroute.routing.ring_choice; --traffic files in the "
                        "authors' format, rings in the files' send direction) and route the chosen rings")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def build_fabric(args: argparse.Namespace) -> Fabric:
    """The fabric of ``--fabric`` / ``--tors`` ... with ``--failed-spines`` and ``--failed-links`` failed."""
    from mlroute.routing import spec
    from mlroute.routing.fabric import FabricError

    try:
        fab = spec.build_fabric(args.fabric, args.tors, args.spines, args.hosts_per_tor, args.k)
        switches = spec.top_switches(fab, spec.parse_index_list(args.failed_spines, "--failed-spines"))
        links = spec.parse_links(args.failed_links)
        spec.check_links(fab, links)
    except FabricError as exc:
        raise UsageError(str(exc)) from None
    return spec.fail(fab, switches, links)


def _authors_flows(paths: Sequence[str], fab: Fabric) -> tuple[list[Flow], list[str], dict]:
    from mlroute.workloads.jobs import WorkloadError, jobs_to_flows, read_traffic_files

    tor_where: dict = {}
    try:
        jobs = read_traffic_files(paths, fab.hosts_per_tor, tor_where=tor_where, tors=len(fab.leaves))
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    flows = jobs_to_flows(jobs)
    origins = [tor_where.get(f.src, "?") for f in flows]
    job_specs = {j.name: {"ring": j.ring_size, "bytes": j.step_bytes * j.ring_size} for j in jobs
                 if j.kind == "allreduce"}
    return flows, origins, job_specs


def load_traffic(args: argparse.Namespace, fab: Fabric) -> tuple[list[Flow], list[str], dict]:
    """(flows, origins, job specs) from --traffic files or --pattern."""
    from mlroute.routing.fabric import FabricError
    from mlroute.workloads.flowfile import FlowFileError, is_flow_file, read_flow_file_with_origins
    from mlroute.workloads.patterns import PatternError, pattern_flows

    if args.pattern:
        try:
            generated = pattern_flows(args.pattern, seed=args.seed, fabric=fab)
        except PatternError as exc:
            raise UsageError(f"--pattern: {exc}") from None
        return generated, [f"--pattern {args.pattern}"] * len(generated), {}
    missing = [p for p in args.traffic if not Path(p).is_file()]
    if missing:
        raise UsageError(f"{missing[0]}: no such file")
    ours = [p for p in args.traffic if is_flow_file(p)]
    theirs = [p for p in args.traffic if not is_flow_file(p)]
    flows: list[Flow] = []
    origins: list[str] = []
    specs: dict = {}
    for p in ours:
        try:
            f, o = read_flow_file_with_origins(p)
        except FlowFileError as exc:
            raise UsageError(str(exc)) from None
        flows += f
        origins += o
    if theirs:
        f, o, s = _authors_flows(theirs, fab)
        flows += f
        origins += o
        specs.update(s)
    if not flows:
        raise UsageError(f"{args.traffic[0]}: no flows")
    for flow, where in zip(flows, origins):
        try:
            fab.tor_of(flow)
        except FabricError as exc:
            raise UsageError(f"{where}: {exc}") from None
    return flows, origins, specs


def _choose_rings(args: argparse.Namespace, fab: Fabric) -> tuple[list[Flow], list[dict]]:
    """Every ring of every all-reduce job in the --traffic files chosen in turn (the others as they stand), in
    the files' send direction (member i -> i+1): (the flows of the chosen rings, one report row per ring)."""
    from mlroute.routing.ring_choice import choose_ring, ring_flows
    from mlroute.workloads.flowfile import is_flow_file
    from mlroute.workloads.jobs import WorkloadError, read_traffic_files

    if args.pattern or any(is_flow_file(p) for p in args.traffic):
        raise UsageError("--choose-rings needs --traffic files in the authors' format (ring all-reduce jobs)")
    try:
        jobs = read_traffic_files(args.traffic, fab.hosts_per_tor, tors=len(fab.leaves))
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    place = {h: t for job in jobs for h, t in job.host_tor.items()}
    rings = [(job.name, list(ring)) for job in jobs if job.kind == "allreduce" for ring in job.rings]

    def flows_except(skip: int) -> list[Flow]:
        return [f for i, (name, order) in enumerate(rings) if i != skip
                for f in ring_flows(order, job=name, direction="next", place=place)]

    rows = []
    for i, (name, order) in enumerate(rings):
        c = choose_ring(fab, order, flows_except(i), job=name, direction="next", objective=args.objective,
                        algo=args.algo, seed=args.seed, place=place)
        rings[i] = (name, list(c.order))
        rows.append(dict(c.as_dict(), job=name, ring=i))
    return flows_except(-1), rows


def _fmt_host(h: object) -> object:
    return h if isinstance(h, (int, str)) else str(h)


def run(args: argparse.Namespace) -> int:
    from mlroute.routing.metric import report
    from mlroute.routing.optimisers import OPTIMISERS, Problem

    fab = build_fabric(args)
    flows, _, specs = load_traffic(args, fab)
    chosen = _choose_rings(args, fab) if getattr(args, "choose_rings", False) else None
    if chosen is not None:
        flows = chosen[0]
    fn = OPTIMISERS[args.algo]
    runs = args.runs if args.runs is not None else (1 if args.algo in ("ilp", "annealing") else 5)
    if runs < 1:
        raise UsageError(f"--runs must be at least 1 (got {runs})")
    kw = {"seed": args.seed, "objective": args.objective, "time_limit": args.time_limit}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        routing = fn(fab, flows, **kw)
        times.append(time.perf_counter() - t0)
    rep = report(fab, flows, routing.paths, objective=args.objective)
    bound = Problem(fab, flows).degree_bound()
    info = {k: v for k, v in routing.info.items() if k not in ("algo", "objective")}
    out = {
        "algo": args.algo,
        "objective": args.objective,
        "fabric": _fabric_desc(args, fab),
        "runtime_ms": statistics.median(times) * 1e3,
        "runs": runs,
        "flows": len(flows),
        "max_link_load": rep["max_link_load"],
        "lower_bound": bound,
        "links_at_max": rep["links_at_max"],
        "flows_sharing": rep["flows_sharing"],
        "unroutable": rep["unroutable"],
        "min_rate": rep["min_rate"],
        "median_rate": rep["median_rate"],
        "sum_rate": rep["sum_rate"],
        "fraction_of_ideal": rep["fraction_of_ideal"],
        "info": info,
    }
    if "jobs" in rep:
        out["jobs"] = rep["jobs"]
    if chosen is not None:
        out["ring_choice"] = chosen[1]
    out["routes"] = [{"src": _fmt_host(f.src), "dst": _fmt_host(f.dst), "path": list(p) if p is not None else None}
                     for f, p in zip(flows, routing.paths)]
    try:
        if args.json:
            json.dump(out, sys.stdout, default=str)
            sys.stdout.write("\n")
        else:
            _print_table(out)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _fabric_desc(args: argparse.Namespace, fab: Fabric) -> dict:
    from mlroute.routing.spec import format_link

    d = {"kind": args.fabric}
    if args.fabric == "clos":
        d.update(tors=args.tors, spines=args.spines, hosts_per_tor=args.hosts_per_tor)
    else:
        d.update(k=args.k)
    d["failed_switches"] = sorted(fab.failed_nodes, key=str)
    d["failed_links"] = sorted(format_link(*sorted(map(str, link))) for link in fab.failed_links)
    return d


def _print_table(out: dict) -> None:
    def rate(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    bound = out["lower_bound"]
    rows = [
        ("algo", out["algo"] + ("" if out["objective"] == "flow" else " (job objective)")),
        ("flows", str(out["flows"])),
        ("max link load", f"{out['max_link_load']}"
         + (f"   (lower bound ceil(Delta/S) = {bound})" if bound is not None else "")),
        ("links at max load", str(out["links_at_max"])),
        ("flows sharing a link", str(out["flows_sharing"])),
        ("min rate", rate(out["min_rate"])),
        ("median rate", rate(out["median_rate"])),
        ("sum of rates / ideal", "-" if out["fraction_of_ideal"] is None else f"{out['fraction_of_ideal']:.3f}"),
        ("runtime", f"{out['runtime_ms']:.2f} ms (median of {out['runs']})"),
    ]
    if out["unroutable"]:
        rows.append(("unroutable flows", str(out["unroutable"])))
    if out["info"].get("proved_optimal") is not None:
        rows.append(("proved optimal", "yes" if out["info"]["proved_optimal"] else "no"))
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    if out.get("ring_choice"):
        print()
        print(f"{'ring choice: job':<24} {'ring':>5} {'helps':>6} {'time / ideal: given':>20} {'chosen':>7} "
              f"{'cross-rack (bound)':>19} {'method':>8}")
        for c in out["ring_choice"]:
            rack = c["crossings"]["rack"]
            print(f"{c['job']:<24} {c['ring']:>5} {'yes' if c['helps'] else 'no':>6} "
                  f"{_fmt_ratio(c['given_relative']):>20} {_fmt_ratio(c['chosen_relative']):>7} "
                  f"{f'{rack[0]} -> {rack[1]} ({rack[2]})':>19} {c['method']:>8}")
    if out.get("jobs"):
        print()
        print(f"{'job':<24} {'flows':>6} {'min rate':>9} {'ideal':>7} {'All-Reduce time / ideal':>24}")
        for name, j in out["jobs"].items():
            print(f"{name:<24} {j['flows']:>6} {j['min_rate']:>9.3f} {j['ideal_min_rate']:>7.3f} "
                  f"{j['allreduce_relative']:>24.3f}")


def _fmt_ratio(x: float | None) -> str:
    return "inf" if x is None else f"{x:.3f}"
