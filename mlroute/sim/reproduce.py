"""The paper's evaluation grid, run through the simulator, and its Markdown + PNG report.

Grid (the paper's evaluation, docs/paper.md): 1-5 concurrent jobs x ring 2/4/8 x 0/1/4/8 failed spines x every
algorithm, on the 64 ToR x 32 spine x 32 host Clos at 100 Gb/s, 11 iterations per job. Seeds: the workload of a
(jobs, ring) cell is ``paper_jobs(jobs, ring, seed=seed + 100 * jobs + ring)``; the same workload is used for
every failure count and algorithm (paired comparison). Failed spines are the last ones (0/1/4/8 -> spines 31,
28-31, 24-31), from time 0. Where the jobs do not fit one GPU per host NIC (4-5 jobs of ring 8 need more ToRs of
their own than the 64 there are), the cell uses the smallest GPUs-per-host packing that fits
(:func:`mlroute.workloads.jobs.min_gpus_per_host`) and the report says so.

``ilp`` runs where it finishes: before a cell's ILP simulation, one probe solve over all flows of the cell (every
job live, the most the controller ever routes at once) must prove optimality within the ILP's node budget
(``ilp.NODE_LIMIT``); if it does not, the cell's ILP run is skipped and reported as such.

Every optimiser's budget is counted in work (mlroute's work units, the annealing's steps, the ILP's nodes), so a
cell's result is the same on any machine, at any load, with any number of workers. ``ilp_time_limit`` (and
mlroute's own clock cap) is only a safety net: a run records in ``cut_by_clock`` how many of its decisions it cut
short (0: reproducible to the bit), a skipped ILP cell whether its probe was (``cut_by_clock``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from mlroute.sim.engine import simulate
from mlroute.sim.report import ALGO_ORDER
from mlroute.sim.sweep import ResultStore, Task, code_version, run_tasks
from mlroute.workloads.jobs import PAPER_ITERATIONS, PAPER_MODELS, min_gpus_per_host, paper_jobs

#: The grid's algorithms in report order: every name of :data:`mlroute.routing.optimisers.ALGORITHMS` (a unit
#: test keeps the two sets equal), mlroute first, the exact ILP last.
ALGOS = ALGO_ORDER
QUANTILES = np.linspace(0.0, 1.0, 101)


@dataclass
class GridConfig:
    tors: int = 64
    spines: int = 32
    hosts_per_tor: int = 32
    link_gbps: float = 100.0
    jobs: tuple = (1, 2, 3, 4, 5)
    rings: tuple = (2, 4, 8)
    failed: tuple = (0, 1, 4, 8)
    algos: tuple = ALGOS
    iterations: int = PAPER_ITERATIONS
    seed: int = 1
    ilp_time_limit: float = 10.0
    models: tuple = PAPER_MODELS
    placement: str = "tor"
    label: str = "full"
    #: cables failed in every cell from time 0, besides the failed spines (``mlroute simulate --failed-links``)
    failed_links: tuple = ()
    #: every run also simulated with the rings ring choice picks at launch (its row's ``chosen``)
    choose_rings: bool = False

    @classmethod
    def quick(cls):
        """A small grid that runs in a few minutes: the paper's fabric, fewer cells and iterations."""
        return cls(jobs=(1, 3, 5), rings=(2, 8), failed=(0, 4), iterations=3, ilp_time_limit=5.0, label="quick")

    def random_placement(self):
        """The supplementary grid (not in the paper): the same jobs with every host drawn at random from the
        whole fabric, largest ring only -- the regime where the paper's greedy is not optimal."""
        return dataclasses.replace(self, placement="random", rings=(max(self.rings),),
                                   label=f"{self.label}, random placement")


def cell_seed(cfg: GridConfig, n_jobs: int, ring: int) -> int:
    return cfg.seed + 100 * n_jobs + ring


def _fabric(cfg, failed):
    from mlroute.routing.fabric import Fabric

    fab = Fabric.clos(cfg.tors, cfg.spines, cfg.hosts_per_tor,
                      failed_spines=list(range(cfg.spines - failed, cfg.spines)))
    for u, v in cfg.failed_links:
        fab.fail_link(u, v)
    return fab


def _quantiles(a):
    a = np.asarray(a, dtype=float)
    if not len(a):
        return []
    return [float(f"{x:.6g}") for x in np.quantile(a, QUANTILES)]


def _git_commit():
    """The commit of the code that ran (None outside a git checkout)."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--", "..", "../../controller"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + (" (+ uncommitted changes)" if dirty.stdout.strip() else "")


def _ilp_probe(cfg, fabric, jobs, optimisers):
    """Does one ILP solve over all flows of the cell prove optimality within its node budget? (proved, seconds,
    why, whether the time limit, a safety net, cut it short)"""
    from mlroute.workloads.jobs import jobs_to_flows

    flows = jobs_to_flows(jobs)
    t0 = time.perf_counter()
    try:
        routing = optimisers["ilp"](fabric, flows, seed=cfg.seed, objective="flow", time_limit=cfg.ilp_time_limit)
    except Exception as exc:  # noqa: BLE001 - any solver failure means "did not finish"
        return False, time.perf_counter() - t0, f"failed: {exc}", False
    elapsed = time.perf_counter() - t0
    info = getattr(routing, "info", {}) or {}
    proved = bool(info.get("proved_optimal", False))
    cut = bool(info.get("cut_by_clock", False))
    why = "proved optimal" if proved else \
        "cut short by the time limit (a safety net)" if cut else "not proved optimal within the node limit"
    return proved, elapsed, why, cut


def cell_spec(cfg: GridConfig, n_jobs: int, ring: int, failed: int, algo: str) -> dict:
    """Everything that determines one simulation of the grid (JSON-able: the key of its stored result)."""
    return {"tors": cfg.tors, "spines": cfg.spines, "hosts_per_tor": cfg.hosts_per_tor, "link_gbps": cfg.link_gbps,
            "iterations": cfg.iterations, "seed": cfg.seed, "ilp_time_limit": cfg.ilp_time_limit,
            "models": list(cfg.models), "placement": cfg.placement, "jobs": n_jobs, "ring": ring, "failed": failed,
            "algo": algo,
            # only when set: a grid without them keeps its stored runs' keys
            **({"failed_links": [list(x) for x in cfg.failed_links]} if cfg.failed_links else {}),
            **({"choose_rings": True} if cfg.choose_rings else {})}


#: relative cost of one simulation by algorithm (from `mlroute reproduce --quick` wall times; a run's cost grows
#: about as (jobs x ring)^1.5): only the order in which a sweep starts its runs (longest first) and its ETA.
ALGO_COST = {"ilp": 8.0, "ecmp": 4.0, "annealing": 2.0, "gff": 1.5}


def _tag(spec: dict) -> str:
    return (f"{spec['placement']} jobs={spec['jobs']} ring={spec['ring']} failed={spec['failed']} {spec['algo']}"
            + (" choose-rings" if spec.get("choose_rings") else ""))


def run_cell(spec: dict, optimisers=None) -> dict:
    """One simulation of the grid: ``{"run": row}``, or ``{"skipped": entry}`` where the ILP's probe fails.
    A module-level function of plain data, so that worker processes and Dask workers run it as they are."""
    if optimisers is None:
        from mlroute.routing.optimisers import OPTIMISERS as optimisers  # noqa: N811
    t0 = time.perf_counter()
    cfg = GridConfig(**{k: (tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v)
                        for k, v in spec.items() if k not in ("jobs", "ring", "failed", "algo")})
    n_jobs, ring, failed, algo = spec["jobs"], spec["ring"], spec["failed"], spec["algo"]
    gph = min_gpus_per_host(n_jobs, ring, cfg.tors, cfg.hosts_per_tor, cfg.models, placement=cfg.placement)
    seed = cell_seed(cfg, n_jobs, ring)
    jobs = paper_jobs(n_jobs, ring, cfg.tors, cfg.hosts_per_tor, seed=seed, models=cfg.models,
                      iterations=cfg.iterations, gpus_per_host=gph, placement=cfg.placement)
    n_flows = sum(len(j.all_edges()) for j in jobs)
    fabric = _fabric(cfg, failed)
    time_limit = None
    if algo == "ilp":
        ok, secs, why, cut = _ilp_probe(cfg, fabric, jobs, optimisers)
        if not ok:
            return {"skipped": {"jobs": n_jobs, "ring": ring, "failed": failed, "algo": algo, "flows": n_flows,
                                "reason": f"ILP probe over {n_flows} flows: {why} ({secs:.1f} s, limit "
                                          f"{cfg.ilp_time_limit:g} s)", "cut_by_clock": cut},
                    "task_s": time.perf_counter() - t0}
        time_limit = cfg.ilp_time_limit
    res = simulate(fabric, jobs, algo, link_bps=cfg.link_gbps * 1e9, seed=cfg.seed, time_limit=time_limit,
                   optimisers=optimisers)
    row = _row(res, n_jobs, ring, failed, algo, seed, gph, n_flows, jobs, time_limit)
    if cfg.choose_rings:
        row["chosen"] = _chosen(cfg, fabric, jobs, algo, time_limit, optimisers)
    return {"run": row, "task_s": time.perf_counter() - t0}


def _chosen(cfg: GridConfig, fabric, jobs: list, algo: str, time_limit, optimisers) -> dict:
    """The cell again with the rings chosen at launch (:mod:`mlroute.sim.rings`): its All-Reduce / ideal and
    how many rings changed."""
    from mlroute.sim.rings import choose_job_rings

    chosen, rows = choose_job_rings(fabric, jobs, objective="flow", algo=algo, seed=cfg.seed)
    res = simulate(fabric, chosen, algo, link_bps=cfg.link_gbps * 1e9, seed=cfg.seed, time_limit=time_limit,
                   optimisers=optimisers)
    norm = res.normalised_allreduce()
    return {"norm_mean": float(norm.mean()), "norm_p99": float(np.percentile(norm, 99)),
            "norm_max": float(norm.max()), "rings": sum(r["rings"] for r in rows),
            "rings_changed": sum(r["rings"] for r in rows if r["helps"])}


def _row(res, n_jobs, ring, failed, algo, seed, gph, n_flows, jobs, time_limit) -> dict:
    ar = res.allreduce_times()
    norm = res.normalised_allreduce()
    return {
        "jobs": n_jobs, "ring": ring, "failed": failed, "algo": algo, "seed": seed,
        "gpus_per_host": gph, "flows": n_flows, "models": [j.model for j in jobs],
        "allreduce_mean_s": float(ar.mean()), "allreduce_p99_s": float(np.percentile(ar, 99)),
        "norm_mean": float(norm.mean()), "norm_p99": float(np.percentile(norm, 99)),
        "norm_max": float(norm.max()), "norm_all": [float(f"{x:.6g}") for x in norm],
        "ideal_s": {j.name: j.ideal_s for j in res.jobs},
        "fct_mean_s": float(res.fct_s.mean()), "fct_p99_s": float(np.percentile(res.fct_s, 99)),
        "tput_mean_gbps": float(res.throughput_gbps.mean()),
        "tput_p1_gbps": float(np.percentile(res.throughput_gbps, 1)),
        "fct_q": _quantiles(res.fct_s), "tput_q": _quantiles(res.throughput_gbps),
        "transfers": int(len(res.fct_s)),
        "controller_ms_median": float(np.median(res.controller_ms)),
        "controller_ms_max": float(np.max(res.controller_ms)),
        "controller_ms": [round(x, 3) for x in res.controller_ms],
        "recompute_flows": res.recompute_flows,
        "unproved": sum(1 for x in res.proved_optimal if x is False),
        "cut_by_clock": sum(res.cut_by_clock),  # decisions the safety net cut short: 0 = reproducible to the bit
        "ilp_time_limit_s": time_limit,
        "max_link_load": int(max(res.max_link_load)),
        "makespan_s": res.makespan_s, "events": res.events, "wall_s": res.wall_s,
    }


#: fields of a run that measure this machine's speed (wall-clock), not the simulation: they differ between two
#: runs of the same cell; everything else is identical whatever the workers or the order.
TIMING_FIELDS = ("controller_ms_median", "controller_ms_max", "controller_ms", "wall_s")


def _describe(task: Task, out: dict) -> str:
    if "skipped" in out:
        return f"{task.label}: skipped ({out['skipped']['reason'].split(': ', 1)[1]})"
    row = out["run"]
    return (f"{task.label}: All-Reduce/ideal mean {row['norm_mean']:.3f} p99 {row['norm_p99']:.3f}, "
            f"max load {row['max_link_load']}, controller {row['controller_ms_median']:.1f} ms, "
            f"wall {row['wall_s']:.1f} s"
            + (f"; chosen rings: mean {row['chosen']['norm_mean']:.3f}" if "chosen" in row else ""))


def grid_tasks(cfg: GridConfig, optimisers=None) -> list[Task]:
    """The grid's simulations in report order (jobs, ring, failed spines, algorithm)."""
    fn = run_cell if optimisers is None else functools.partial(run_cell, optimisers=optimisers)
    tasks = []
    for n_jobs in cfg.jobs:
        for ring in cfg.rings:
            for failed in cfg.failed:
                for algo in cfg.algos:
                    spec = cell_spec(cfg, n_jobs, ring, failed, algo)
                    cost = ALGO_COST.get(algo, 1.0) * (n_jobs * ring) ** 1.5 * cfg.iterations
                    tasks.append(Task(fn, spec, _tag(spec), cost))
    return tasks


def run_grids(cfgs: Sequence[GridConfig], out_dir: str, *, log=sys.stderr, optimisers=None,
              workers: int | None = None, scheduler: str | None = None, fresh: bool = False,
              store: bool = True) -> list[dict]:
    """Run every cell of every grid as one sweep (the last grid's runs fill the workers the first leaves idle)
    and return each grid's results. Finished runs are stored under ``out_dir/runs/`` as they arrive and reused
    by a later call (unless ``fresh``); ``optimisers`` (tests) runs in this process, unstored."""
    os.makedirs(out_dir, exist_ok=True)
    commit = _git_commit()  # of the code that runs now (the sweep may take an hour: HEAD can move meanwhile)
    per_grid = [grid_tasks(cfg, optimisers) for cfg in cfgs]
    tasks = [t for ts in per_grid for t in ts]
    injected = optimisers is not None
    outs, stats = run_tasks(tasks, store=None if injected or not store else ResultStore(os.path.join(out_dir, "runs")),
                            workers=workers, scheduler=scheduler, fresh=fresh, log=log, label="reproduce",
                            describe=_describe, in_process=injected)
    results, at = [], 0
    for cfg, ts in zip(cfgs, per_grid):
        mine = outs[at:at + len(ts)]
        at += len(ts)
        results.append({
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
            "machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count()},
            "code_commit": commit,
            "code_version": code_version(),
            "sweep": {"executor": stats.executor, "workers": stats.workers, "runs": stats.total,
                      "reused": stats.reused, "computed": stats.computed, "wall_s": stats.wall_s,
                      "task_s": stats.task_s},
            "wall_s": stats.wall_s if cfg is cfgs[0] else 0.0,
            "runs": [o["run"] for o in mine if "run" in o],
            "skipped": [o["skipped"] for o in mine if "skipped" in o],
        })
    return results


def run_grid(cfg: GridConfig, out_dir: str, *, log=sys.stderr, optimisers=None, filename: str = "results.json",
             workers: int | None = None, scheduler: str | None = None, fresh: bool = False) -> dict:
    """Run every cell of one grid, write ``filename`` into ``out_dir`` and return the results."""
    results = run_grids([cfg], out_dir, log=log, optimisers=optimisers, workers=workers, scheduler=scheduler,
                        fresh=fresh)[0]
    with open(os.path.join(out_dir, filename), "w") as fh:
        json.dump(results, fh, separators=(",", ":"))
    return results
