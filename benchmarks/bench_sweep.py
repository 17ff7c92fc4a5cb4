#!/usr/bin/env python3
"""The paper's sweep on one core against the same sweep on every core, measured in the same run.

    .venv/bin/python benchmarks/bench_sweep.py              # the quick grid without the ILP (a few minutes)
    .venv/bin/python benchmarks/bench_sweep.py --ilp        # with it (the ILP's runs dominate)
    .venv/bin/python benchmarks/bench_sweep.py --workers 4

Prints the wall time of each sweep, the summed time of its runs, the speed-up of the parallel sweep over the
serial one and whether both gave the same results run by run (every field but the wall-clock ones). Nothing is
stored: each sweep computes every run (``mlroute reproduce`` itself reuses finished runs under ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

from mlroute.sim.reproduce import TIMING_FIELDS, GridConfig, run_grids
from mlroute.sim.sweep import default_workers


def sweep(cfgs, workers: int) -> tuple[float, list[dict]]:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        results = run_grids(cfgs, out, log=None, workers=workers, store=False)
        return time.perf_counter() - t0, results


def comparable(results: list[dict]) -> list:
    return [([{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in g["runs"]], g["skipped"])
            for g in results]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=default_workers(), help="parallel workers (default: cores)")
    ap.add_argument("--ilp", action="store_true", help="include the ILP (time-limited: results may then differ)")
    args = ap.parse_args()
    quick = GridConfig.quick()
    algos = tuple(a for a in quick.algos if args.ilp or a != "ilp")
    paper = dataclasses.replace(quick, algos=algos)
    random = dataclasses.replace(paper.random_placement(), algos=tuple(a for a in algos
                                                                        if a not in ("ecmp", "annealing")))
    cfgs = [paper, random]
    runs = sum(len(c.jobs) * len(c.rings) * len(c.failed) * len(c.algos) for c in cfgs)
    serial_s, serial = sweep(cfgs, 1)
    par_s, par = sweep(cfgs, args.workers)
    task_s = par[0]["sweep"]["task_s"]
    print(f"{runs} runs (quick grid{'' if args.ilp else ', no ILP'}, paper + random placement)")
    print(f"serial:            {serial_s:7.1f} s wall")
    print(f"{args.workers} workers:         {par_s:7.1f} s wall, {task_s:7.1f} s of run time in all")
    print(f"speed-up:          {serial_s / par_s:7.2f}x  (ideal {args.workers}x)")
    print(f"same results:      {comparable(serial) == comparable(par)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
