"""`mlroute reproduce`: run the paper's evaluation grid in the simulator and write a report (docs/simulation.md)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlroute.errors import UsageError
from mlroute.routing.optimisers import ALGORITHMS
from mlroute.workloads.jobs import PLACEMENTS

if TYPE_CHECKING:
    from mlroute.sim.reproduce import GridConfig

NAME = "reproduce"
HELP = "run the paper's evaluation grid in the flow-level simulator and write report.md + PNG plots"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="directory for report.md, results.json and plots")
    p.add_argument("--quick", action="store_true",
                   help="a small grid (1/3/5 jobs x ring 2/8 x 0/4 failed spines, 3 iterations): minutes")
    p.add_argument("--iterations", type=int, default=None, help="iterations per job (default 11; quick: 3)")
    p.add_argument("--jobs", default=None, metavar="LIST", help="concurrent-job counts, e.g. 1,2,3,4,5")
    p.add_argument("--rings", default=None, metavar="LIST", help="ring sizes, e.g. 2,4,8")
    p.add_argument("--failed", default=None, metavar="LIST", help="failed-spine counts, e.g. 0,1,4,8")
    p.add_argument("--algos", default=None, metavar="LIST",
                   help="algorithms (default all: mlroute,greedy,coloring,annealing,gff,ecmp,ilp)")
    p.add_argument("--seed", type=int, default=1, help="base seed (default 1)")
    p.add_argument("--ilp-time-limit", type=float, default=None, metavar="SECONDS",
                   help="per-solve ILP safety-net clock: the ILP stops at ilp.NODE_LIMIT branch-and-bound nodes "
                        "(deterministic) and is skipped in cells it cannot prove within them; a solve this clock "
                        "cut first is reported as such (default 10; quick 5)")
    p.add_argument("--tors", type=int, default=64)
    p.add_argument("--spines", type=int, default=32)
    p.add_argument("--hosts-per-tor", type=int, default=32)
    p.add_argument("--link-gbps", type=float, default=100.0)
    p.add_argument("--placement", choices=PLACEMENTS, default="tor",
                   help="placement of the grid's jobs (default tor, the paper's; contiguous / interleaved: a job's "
                        "replicas on a pair of ToRs, rank order one then the other or alternating; random)")
    p.add_argument("--failed-links", default=None, metavar="LIST",
                   help="cables failed in every cell besides the failed spines, e.g. tor0:spine0,tor2:spine1")
    p.add_argument("--choose-rings", action="store_true",
                   help="also simulate every run with the rings mlroute.routing.ring_choice chooses at launch; the "
                        "report compares them with rank order")
    p.add_argument("--no-random-placement", action="store_true",
                   help="skip the supplementary grid with random host placement (not in the paper)")
    p.add_argument("--random-algos", default=None, metavar="LIST",
                   help="algorithms of the random-placement grid (default: those of the paper grid but ecmp and "
                        "annealing, which take over 10 min per run there: random placement merges the components "
                        "the simulator exploits)")
    p.add_argument("--random-only", action="store_true",
                   help="keep the paper grid of DIR/results.json and (re)run only the random-placement grid")
    p.add_argument("--report-only", action="store_true",
                   help="do not simulate: rewrite report.md and plots from DIR/results.json")
    s = p.add_argument_group("execution (results do not depend on it)")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes (default: this machine's cores; 1 runs in this process)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on a Dask distributed cluster instead, e.g. tcp://HOST:8786 (pip install "
                        "'mlroute[dask]'; its workers need the same mlroute installed)")
    s.add_argument("--fresh", action="store_true",
                   help="recompute every run instead of reusing those stored under DIR/runs by an earlier run")


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a comma-separated list of integers") from None
    if not vals:
        raise UsageError(f"{what}: empty list")
    return vals


def _command_line(args: argparse.Namespace) -> str:
    """The invocation, rebuilt from the parsed options (only those that differ from their defaults)."""
    parts = ["mlroute reproduce", "--out", str(args.out)]
    for flag in ("quick", "choose_rings", "no_random_placement", "random_only", "report_only", "fresh"):
        if getattr(args, flag):
            parts.append("--" + flag.replace("_", "-"))
    defaults = {"seed": 1, "tors": 64, "spines": 32, "hosts_per_tor": 32, "link_gbps": 100.0, "placement": "tor"}
    for name in ("iterations", "jobs", "rings", "failed", "placement", "failed_links", "algos", "random_algos",
                 "ilp_time_limit", "seed", "tors",
                 "spines", "hosts_per_tor", "link_gbps", "workers", "scheduler"):
        v = getattr(args, name)
        if v is not None and v != defaults.get(name):
            parts += ["--" + name.replace("_", "-"), str(v)]
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    from mlroute.sim.report import write_report

    cmd = _command_line(args)
    if args.report_only:
        return _report_only(args.out, cmd)
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be a positive integer")
    if args.workers is not None and args.scheduler:
        raise UsageError("--workers and --scheduler exclude each other (the cluster has its own workers)")
    cfg = _grid_config(args)
    extra_cfg = None if args.no_random_placement else _random_config(args, cfg)
    sweep = {"workers": args.workers, "scheduler": args.scheduler, "fresh": args.fresh}
    signal.signal(signal.SIGTERM, _interrupt)  # stopped by kill as by Ctrl-C: workers stopped, runs kept
    # Ctrl-C is KeyboardInterrupt even in a process started with SIGINT ignored (a background job of a script,
    # where Python leaves it ignored): the test suite's own runs, for one
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        results = _sweep(args, cfg, extra_cfg, sweep, cmd)
    except KeyboardInterrupt:
        stored = len(list(Path(args.out, "runs").glob("*.json")))
        print(f"mlroute reproduce: interrupted; {stored} finished runs are kept under "
              f"{os.path.join(args.out, 'runs')}: the same command resumes from them", file=sys.stderr)
        return 130
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(results, fh, separators=(",", ":"))
    write_report(results, args.out, command=results["command"])
    print(f"report: {os.path.join(args.out, 'report.md')} ({len(results['runs'])} simulations, "
          f"{results['wall_s'] / 60:.1f} min)")
    return 0


def _sweep(args: argparse.Namespace, cfg: GridConfig, extra_cfg: GridConfig | None, sweep: dict, cmd: str) -> dict:
    """The grids' runs (the paper grid and the random-placement one, or --random-only's), as one results dict."""
    from mlroute.sim.reproduce import run_grids

    if args.random_only:
        results, extra_cfg = _earlier_results(args.out, extra_cfg, cmd)
        results["extra"] = run_grids([extra_cfg], args.out, **sweep)[0]
        results["wall_s"] += results["extra"]["wall_s"]
    else:
        grids = run_grids([cfg, extra_cfg] if extra_cfg else [cfg], args.out, **sweep)
        results = grids[0]
        results["command"] = cmd
        if extra_cfg:
            results["extra"] = grids[1]
    return results


def _report_only(out: str, cmd: str) -> int:
    from mlroute.sim.report import load_results, write_report

    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        raise UsageError(f"--report-only: {path} does not exist")
    results = load_results(path)
    write_report(results, out, command=results.get("command", cmd))
    print(f"report: {os.path.join(out, 'report.md')}")
    return 0


def _grid_config(args: argparse.Namespace) -> GridConfig:
    """The paper grid the options ask for, validated."""
    from mlroute.sim.reproduce import GridConfig

    cfg = GridConfig.quick() if args.quick else GridConfig()
    cfg.seed = args.seed
    for name in ("tors", "spines", "hosts_per_tor"):
        v = getattr(args, name)
        if v < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer")
        setattr(cfg, name, v)
    if args.link_gbps <= 0:
        raise UsageError("--link-gbps must be positive")
    cfg.link_gbps = args.link_gbps
    if args.iterations is not None:
        if args.iterations < 1:
            raise UsageError("--iterations must be a positive integer")
        cfg.iterations = args.iterations
    if args.jobs:
        cfg.jobs = _ints(args.jobs, "--jobs")
    if args.rings:
        cfg.rings = _ints(args.rings, "--rings")
    if args.failed:
        cfg.failed = _ints(args.failed, "--failed")
    if args.algos:
        cfg.algos = _algos(args.algos, "--algos")
    if args.ilp_time_limit is not None:
        if args.ilp_time_limit <= 0:
            raise UsageError("--ilp-time-limit must be positive")
        cfg.ilp_time_limit = args.ilp_time_limit
    if any(j < 1 for j in cfg.jobs) or any(r < 2 for r in cfg.rings):
        raise UsageError("--jobs must be >= 1 and --rings >= 2")
    if any(not 0 <= f < cfg.spines for f in cfg.failed):
        raise UsageError(f"--failed: counts must be in 0..{cfg.spines - 1}")
    cfg.placement, cfg.choose_rings = args.placement, args.choose_rings
    cfg.failed_links = _failed_links(args.failed_links, cfg)
    if args.quick or any(v is not None for v in (args.jobs, args.rings, args.failed, args.algos, args.iterations)) \
            or (cfg.tors, cfg.spines, cfg.hosts_per_tor) != (64, 32, 32) \
            or (cfg.placement, cfg.failed_links, cfg.choose_rings) != ("tor", (), False):
        cfg.label = "quick" if args.quick else "custom"
    _check_fits(cfg, cfg.placement)
    return cfg


def _failed_links(text: str | None, cfg: GridConfig) -> tuple:
    """--failed-links as cables of the grid's fabric."""
    from mlroute.routing import spec
    from mlroute.routing.fabric import Fabric, FabricError

    try:
        links = spec.parse_links(text)
        spec.check_links(Fabric.clos(cfg.tors, cfg.spines, cfg.hosts_per_tor), links)
    except FabricError as exc:
        raise UsageError(str(exc)) from None
    return tuple(links)


def _random_config(args: argparse.Namespace, cfg: GridConfig) -> GridConfig:
    """The supplementary random-placement grid, validated."""
    extra_cfg = cfg.random_placement()
    if args.random_algos:
        extra_cfg.algos = _algos(args.random_algos, "--random-algos")
    else:
        extra_cfg.algos = tuple(a for a in cfg.algos if a not in ("ecmp", "annealing"))
        if not extra_cfg.algos:
            raise UsageError(f"--random-algos: unknown algorithm '' (known: {', '.join(ALGORITHMS)})")
    _check_fits(extra_cfg, "random")
    return extra_cfg


def _algos(text: str, what: str) -> tuple[str, ...]:
    algos = tuple(a.strip() for a in text.split(",") if a.strip())
    bad = [a for a in algos if a not in ALGORITHMS]
    if bad or not algos:
        raise UsageError(f"{what}: unknown algorithm {bad[0] if bad else ''!r} (known: {', '.join(ALGORITHMS)})")
    return algos


def _check_fits(cfg: GridConfig, placement: str) -> None:
    """Every (jobs, ring) cell must fit the fabric with some GPUs-per-host packing."""
    from mlroute.workloads.jobs import WorkloadError, min_gpus_per_host

    for j in cfg.jobs:
        for r in cfg.rings:
            try:
                min_gpus_per_host(j, r, cfg.tors, cfg.hosts_per_tor, cfg.models, placement=placement)
            except WorkloadError as exc:
                raise UsageError(str(exc)) from None


def _earlier_results(out: str, extra_cfg: GridConfig | None, cmd: str) -> tuple[dict, GridConfig]:
    """--random-only: the stored paper grid, and the random-placement grid of its configuration."""
    from mlroute.sim.report import load_results
    from mlroute.sim.reproduce import GridConfig

    path = os.path.join(out, "results.json")
    if not os.path.exists(path) or extra_cfg is None:
        raise UsageError(f"--random-only needs {path} and the random-placement grid")
    results = load_results(path)
    stored: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in results["config"].items()}
    algos = extra_cfg.algos
    extra_cfg = GridConfig(**stored).random_placement()
    extra_cfg.algos = algos
    results["wall_s"] -= (results.get("extra") or {}).get("wall_s", 0.0)
    results["command"] = results.get("command", "mlroute reproduce --out DIR") + f"; then `{cmd}`"
    return results, extra_cfg


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt

