"""`mlroute simulate`: flow-level simulation of ML training jobs on a routed Clos fabric (docs/simulation.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

import numpy as np

from mlroute.routing.optimisers import ALGORITHMS
from mlroute.workloads.jobs import PLACEMENTS

if TYPE_CHECKING:
    from mlroute.sim.engine import SimResult

NAME = "simulate"
HELP = "simulate ML training jobs (ring all-reduce / pipeline) on a fabric routed by an algorithm"



def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fabric")
    g.add_argument("--fabric", choices=("clos", "fattree"), default="clos", help="fabric kind (default clos)")
    g.add_argument("--tors", type=int, default=64, help="ToRs of the Clos (default 64)")
    g.add_argument("--spines", type=int, default=32, help="spines of the Clos (default 32)")
    g.add_argument("--hosts-per-tor", type=int, default=32, help="hosts under each ToR (default 32)")
    g.add_argument("--k", type=int, default=None, help="arity of a --fabric fattree")
    g.add_argument("--link-gbps", type=float, default=100.0, help="rate of every link, Gb/s (default 100)")
    g.add_argument("--failed-spines", default=None, metavar="LIST",
                   help="spines that fail, e.g. 28,29,30,31 or 28-31 (spine/core indices from 0)")
    g.add_argument("--failed-links", default=None, metavar="LIST",
                   help="cables that fail, e.g. tor0:spine3,tor5:spine1")
    g.add_argument("--fail-at", type=float, default=0.0, metavar="SECONDS",
                   help="time of the failures (default 0: failed from the start); the controller re-routes then")
    w = p.add_argument_group("workload (either --traffic or --jobs/--ring)")
    w.add_argument("--traffic", nargs="+", metavar="FILE",
                   help="the paper authors' traffic files, one per job (format: docs/paper.md)")
    w.add_argument("--jobs", type=int, default=None, help="number of concurrent generated jobs (paper: 1-5)")
    w.add_argument("--ring", type=int, default=None, help="data-parallel degree = ring size (paper: 2, 4, 8)")
    w.add_argument("--seed", default="1", metavar="N[,N...]",
                   help="seed of the generated workload and of ECMP/annealing (default 1); a list runs each")
    w.add_argument("--models", default="gpt3,bloom,llama2",
                   help="models of generated jobs, job j gets the (j mod len)-th (default gpt3,bloom,llama2)")
    w.add_argument("--gpus-per-host", type=int, default=1,
                   help="GPUs sharing one host NIC in generated jobs (default 1; see docs/simulation.md)")
    w.add_argument("--kind", choices=("allreduce", "pipeline"), default="allreduce",
                   help="kind of generated jobs (default allreduce)")
    w.add_argument("--placement", choices=PLACEMENTS, default="tor",
                   help="generated jobs: every replica on ToRs of its own (tor: default, as the paper); every host "
                        "drawn at random from the whole fabric (random: a stress test); a job's replicas half on "
                        "each of two pods (fat-tree) / ToRs (Clos), rank order one then the other (contiguous) or "
                        "alternating (interleaved)")
    w.add_argument("--iterations", type=int, default=11, help="training iterations per job (default 11)")
    w.add_argument("--save-traffic", metavar="DIR", default=None,
                   help="also write the generated jobs as traffic files (authors' format, node ids) into DIR")
    r = p.add_argument_group("routing")
    r.add_argument("--algo", default="mlroute", metavar="A[,A...]",
                   help=f"routing algorithm (default mlroute; one of {', '.join(ALGORITHMS)}); a list runs each")
    r.add_argument("--objective", choices=("flow", "job"), default="flow",
                   help="metric variant the optimisers use (default flow)")
    r.add_argument("--mode", choices=("events", "iteration", "comm-start", "period"), default="events",
                   help="controller model: recompute whenever a job starts or ends its communication (events, "
                        "default), at every job iteration start (iteration: the paper's), at every "
                        "communication start (comm-start), or every --period (docs/simulation.md)")
    r.add_argument("--period", type=float, default=None, metavar="SECONDS", help="period for --mode period")
    r.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="optimiser time limit (ilp; default: the optimiser's own)")
    r.add_argument("--choose-rings", action="store_true",
                   help="run twice: all-reduce rings in rank order, then in the order mlroute.routing.ring_choice "
                        "chooses at launch (one --algo and --seed); print both side by side")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    o.add_argument("--no-progress", dest="progress", action="store_false")
    x = p.add_argument_group("several runs (a list of --algo or --seed): one table, or one JSON object per run")
    x.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes for the runs (default: this machine's cores)")
    x.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run them on a Dask distributed cluster instead, e.g. tcp://HOST:8786")


def _positive(name: str, v: int | None) -> None:
    from mlroute.errors import UsageError

    if v is not None and v < 1:
        raise UsageError(f"{name} must be a positive integer (got {v})")


def _runs(args: argparse.Namespace) -> tuple[list[str], list[int]]:
    """The algorithms and seeds asked for, validated."""
    from mlroute.errors import UsageError

    algos = [a.strip() for a in args.algo.split(",") if a.strip()]
    bad = [a for a in algos if a not in ALGORITHMS]
    if bad or not algos:
        raise UsageError(f"--algo: unknown algorithm {bad[0] if bad else ''!r} (known: {', '.join(ALGORITHMS)})")
    try:
        seeds = [int(x) for x in str(args.seed).split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--seed: {args.seed!r} is not an integer or a comma-separated list of them") from None
    if not seeds:
        raise UsageError("--seed: empty list")
    if len(seeds) > 1 and args.save_traffic:
        raise UsageError("--save-traffic takes one --seed (each seed generates other traffic)")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be a positive integer")
    return list(dict.fromkeys(algos)), list(dict.fromkeys(seeds))


def run(args: argparse.Namespace) -> int:
    from mlroute.errors import UsageError
    from mlroute.routing import spec
    from mlroute.routing.fabric import FabricError
    from mlroute.sim.engine import SimulationError

    algos, seeds = _runs(args)
    _positive("--jobs", args.jobs)
    _positive("--gpus-per-host", args.gpus_per_host)
    if args.ring is not None and args.ring < 2:
        raise UsageError(f"--ring must be at least 2 (got {args.ring})")
    if args.mode == "period" and not (args.period and args.period > 0):
        raise UsageError("--mode period needs --period SECONDS > 0")
    if args.mode != "period" and args.period is not None:
        raise UsageError("--period only applies to --mode period")
    if args.time_limit is not None and args.time_limit <= 0:
        raise UsageError("--time-limit must be positive")
    try:
        failed_spines = spec.parse_index_list(args.failed_spines, "--failed-spines")
        failed_links = spec.parse_links(args.failed_links)
    except FabricError as exc:
        raise UsageError(str(exc)) from None
    scenario = dict(
        fabric=args.fabric, tors=args.tors, spines=args.spines, hosts_per_tor=args.hosts_per_tor, k=args.k,
        link_gbps=args.link_gbps, failed_spines=failed_spines,
        failed_links=failed_links, fail_at_s=args.fail_at, traffic=args.traffic,
        n_jobs=args.jobs, iterations=args.iterations, ring=args.ring,
        models=[m.strip() for m in args.models.split(",") if m.strip()], gpus_per_host=args.gpus_per_host,
        kind=args.kind, placement=args.placement,
    )
    routing = dict(mode=args.mode, period_s=args.period, objective=args.objective, time_limit=args.time_limit)
    for seed in seeds:  # every scenario checked here, before any run starts
        _scenario(scenario, seed)
    if args.choose_rings and len(algos) * len(seeds) > 1:
        raise UsageError("--choose-rings takes one --algo and one --seed (it runs the two orders side by side)")
    if len(algos) * len(seeds) > 1:
        return _several(args, scenario, routing, algos, seeds)
    scen = _scenario(scenario, seeds[0])
    if args.save_traffic and not args.traffic:
        from mlroute.workloads.jobs import authors_node_id, write_traffic_files

        d = scen.description
        write_traffic_files(scen.jobs, args.save_traffic,
                            host_id=lambda h: authors_node_id(h, d["tors"], d["spines"]))
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    if args.choose_rings:
        return _choose_rings(args, scen, algos[0], seeds[0], routing, progress)
    try:
        res = _simulate(scen, algos[0], seeds[0], routing, progress=progress)
    except SimulationError as exc:
        print(f"mlroute simulate: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        out = {"scenario": scen.description, **res.to_dict(), **summary(res)}
        json.dump(out, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        print(format_table(res, scen.description))
    return 0


def _scenario(scenario: dict, seed: int):
    from mlroute.errors import UsageError
    from mlroute.routing.fabric import FabricError
    from mlroute.sim.scenario import ScenarioError, build

    try:
        return build(**scenario, seed=seed)
    except (ScenarioError, FabricError) as exc:
        raise UsageError(str(exc)) from None


def _simulate(scen, algo: str, seed: int, routing: dict, progress: bool = False, jobs=None) -> SimResult:
    from mlroute.sim.engine import simulate

    return simulate(scen.fabric, scen.jobs if jobs is None else jobs, algo, link_bps=scen.link_bps,
                    failures=scen.failures, seed=seed, progress=progress, progress_label=f"simulate {algo}",
                    **routing)


def _choose_rings(args: argparse.Namespace, scen, algo: str, seed: int, routing: dict, progress: bool) -> int:
    """The scenario twice, rings in rank order and as chosen (:mod:`mlroute.sim.rings`): a side-by-side table,
    or one JSON object with both runs."""
    from mlroute.errors import UsageError
    from mlroute.sim.engine import SimulationError
    from mlroute.sim.rings import choose_job_rings

    if not any(j.kind == "allreduce" for j in scen.jobs):
        raise UsageError("--choose-rings: no all-reduce job (pipeline chains have no ring to order)")
    chosen, rows = choose_job_rings(scen.fabric, scen.jobs, objective=routing["objective"], algo=algo, seed=seed)
    runs = {}
    try:
        for name, jobs in (("rank_order", scen.jobs), ("chosen", chosen)):
            runs[name] = _simulate(scen, algo, seed, routing, progress=progress, jobs=jobs)
    except SimulationError as exc:
        print(f"mlroute simulate: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        out = {"scenario": scen.description, "algo": algo, "seed": seed, "ring_choice": rows,
               **{name: {**res.to_dict(), **summary(res)} for name, res in runs.items()}}
        json.dump(out, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        print(ring_choice_table(runs["rank_order"], runs["chosen"], rows, scen.description))
    return 0


def ring_choice_table(given: SimResult, chosen: SimResult, rows: list[dict], desc: dict) -> str:
    """Rank order against chosen rings, per job (All-Reduce / ideal, mean and worst iteration) and overall."""
    lines = [_scenario_line(desc, given, links=True),
             "rings in rank order vs chosen at launch (mlroute.routing.ring_choice)"]
    hdr = f"{'job':<16} {'ring':>4} {'changed':>9} {'rank order: mean/ideal':>22} {'max/ideal':>9} " \
          f"{'chosen: mean/ideal':>18} {'max/ideal':>9}"
    lines += [hdr, "-" * len(hdr)]
    changed: dict = {}
    for r in rows:
        done, total = changed.get(r["job"], (0, 0))
        changed[r["job"]] = (done + r["rings"] * r["helps"], total + r["rings"])
    for a, b in zip(given.jobs, chosen.jobs):
        na, nb = _relative(a), _relative(b)
        done, total = changed.get(a.name, (0, 0))
        lines.append(f"{a.name:<16} {a.ring:>4} {f'{done}/{total}':>9} {na.mean():22.3f} {na.max():9.3f} "
                     f"{nb.mean():18.3f} {nb.max():9.3f}")
    s, t = summary(given)["summary"], summary(chosen)["summary"]
    lines.append("")
    lines.append(f"All-Reduce / ideal, rank order: mean {s['allreduce_norm_mean']:.3f}, max "
                 f"{s['allreduce_norm_max']:.3f}; chosen rings: mean {t['allreduce_norm_mean']:.3f}, max "
                 f"{t['allreduce_norm_max']:.3f}; rings changed: {sum(d for d, _ in changed.values())} of "
                 f"{sum(n for _, n in changed.values())}")
    return "\n".join(lines)


def _relative(job) -> np.ndarray:
    """A job's iterations' All-Reduce time over its ideal."""
    return np.array([it["allreduce_s"] for it in job.iterations]) / job.ideal_s


def simulate_run(arg: dict) -> dict:
    """One run of several (a worker process or a Dask worker runs it): the single run's JSON object, or
    ``{"error": ...}`` where the simulation fails."""
    from mlroute.sim.engine import SimulationError

    scen = _scenario(arg["scenario"], arg["seed"])
    try:
        res = _simulate(scen, arg["algo"], arg["seed"], arg["routing"])
    except SimulationError as exc:
        return {"algo": arg["algo"], "seed": arg["seed"], "error": str(exc), "task_s": 0.0}
    return {"scenario": scen.description, "seed": arg["seed"], **res.to_dict(), **summary(res),
            "task_s": res.wall_s}


def _several(args: argparse.Namespace, scenario: dict, routing: dict, algos: list[str], seeds: list[int]) -> int:
    """Every (algorithm, seed) in parallel: a comparison table, or ``{"runs": [...]}`` with --json."""
    from mlroute.sim.reproduce import ALGO_COST
    from mlroute.sim.sweep import Task, run_tasks

    tasks = [Task(simulate_run, {"scenario": scenario, "routing": routing, "algo": a, "seed": sd},
                  f"simulate {a} seed {sd}", cost=ALGO_COST.get(a, 1.0))
             for sd in seeds for a in algos]
    outs, _ = run_tasks(tasks, workers=args.workers, scheduler=args.scheduler, log=sys.stderr, label="simulate",
                        describe=lambda t, o: f"{t.label}: " + (f"error: {o['error']}" if "error" in o else
                                                                  f"All-Reduce/ideal mean "
                                                                  f"{o['summary']['allreduce_norm_mean']:.3f}"))
    for o in outs:
        o.pop("task_s", None)
    if args.json:
        json.dump({"runs": outs}, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        print(compare_table(outs))
    failed = [o for o in outs if "error" in o]
    for o in failed:
        print(f"mlroute simulate: error: {o['algo']} seed {o['seed']}: {o['error']}", file=sys.stderr)
    return 1 if failed else 0


def compare_table(outs: list[dict]) -> str:
    """Several runs side by side: one row per (algorithm, seed)."""
    hdr = f"{'algo':<10} {'seed':>5} {'mean/ideal':>10} {'p99/ideal':>9} {'max/ideal':>9} {'FCT p99 s':>9} " \
          f"{'ctrl ms':>8} {'max load':>8} {'wall s':>7}"
    lines = [hdr, "-" * len(hdr)]
    for o in outs:
        if "error" in o:
            lines.append(f"{o['algo']:<10} {o['seed']:>5} error: {o['error']}")
            continue
        s = o["summary"]
        fct = "-" if s["fct_p99_s"] is None else f"{s['fct_p99_s']:.4f}"
        ctrl = "-" if s["controller_ms_median"] is None else f"{s['controller_ms_median']:.2f}"
        lines.append(f"{o['algo']:<10} {o['seed']:>5} {s['allreduce_norm_mean']:10.3f} {s['allreduce_norm_p99']:9.3f} "
                     f"{s['allreduce_norm_max']:9.3f} {fct:>9} {ctrl:>8} {s['max_link_load_max'] or 0:>8} "
                     f"{o['wall_s']:7.1f}")
    return "\n".join(lines)


def summary(res: SimResult) -> dict:
    """The run's headline statistics (All-Reduce, FCT, throughput, controller runtime, max link load)."""
    ar = res.allreduce_times()
    norm = res.normalised_allreduce()
    ms = np.asarray(res.controller_ms)
    return {
        "summary": {
            "allreduce_mean_s": float(ar.mean()),
            "allreduce_p99_s": float(np.percentile(ar, 99)),
            "allreduce_max_s": float(ar.max()),
            "allreduce_norm_mean": float(norm.mean()),
            "allreduce_norm_p99": float(np.percentile(norm, 99)),
            "allreduce_norm_max": float(norm.max()),
            "fct_mean_s": float(res.fct_s.mean()) if len(res.fct_s) else None,
            "fct_p99_s": float(np.percentile(res.fct_s, 99)) if len(res.fct_s) else None,
            "throughput_mean_gbps": float(res.throughput_gbps.mean()) if len(res.throughput_gbps) else None,
            "controller_ms_median": float(np.median(ms)) if len(ms) else None,
            "controller_ms_max": float(ms.max()) if len(ms) else None,
            "max_link_load_max": max(res.max_link_load, default=None),
        }
    }


def format_table(res: SimResult, desc: dict) -> str:
    """The human-readable output: the scenario, one row per job, the summary."""
    lines = [_scenario_line(desc, res)]
    hdr = f"{'job':<16} {'kind':<9} {'ring':>4} {'rings':>5} {'ideal s':>8} {'mean s':>8} {'p99 s':>8} " \
          f"{'max s':>8} {'mean/ideal':>10}"
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for j in res.jobs:
        a = np.array([it["allreduce_s"] for it in j.iterations])
        lines.append(f"{j.name:<16} {j.kind:<9} {j.ring:>4} {j.rings:>5} {j.ideal_s:8.3f} {a.mean():8.3f} "
                     f"{np.percentile(a, 99):8.3f} {a.max():8.3f} {a.mean() / j.ideal_s:10.3f}")
    s = summary(res)["summary"]
    lines.append("")
    lines.append(f"All-Reduce / ideal: mean {s['allreduce_norm_mean']:.3f}, p99 {s['allreduce_norm_p99']:.3f}, "
                 f"max {s['allreduce_norm_max']:.3f}")
    if s["fct_mean_s"] is not None:
        lines.append(f"transfers: {len(res.fct_s)}, FCT mean {s['fct_mean_s']:.4f} s, p99 {s['fct_p99_s']:.4f} s, "
                     f"throughput mean {s['throughput_mean_gbps']:.2f} Gb/s")
    if s["controller_ms_median"] is not None:
        lines.append(f"controller: {len(res.controller_ms)} recomputations, runtime median "
                     f"{s['controller_ms_median']:.2f} ms, max {s['controller_ms_max']:.2f} ms; "
                     f"max link load {s['max_link_load_max']}")
    lines.append(f"simulated {res.makespan_s:.2f} s in {res.wall_s:.1f} s wall ({res.events} events, "
                 f"{res.rate_computations} rate computations)")
    return "\n".join(lines)


def _scenario_line(d: dict, res: SimResult, links: bool = False) -> str:
    """The run's one-line header (``links``: with the failed cables)."""
    return (f"{d['fabric']} {d['tors']} ToRs x {d['spines']} spines x {d['hosts_per_tor']} hosts, "
            f"{d['link_gbps']:g} Gb/s, failed spines: {','.join(d['failed_spines']) or 'none'}"
            + (f", failed links: {','.join(d['failed_links']) or 'none'}" if links else "")
            + (f" at {d['fail_at_s']:g} s" if d["fail_at_s"] else "")
            + f"; algo {res.algo}, controller {res.mode}")
