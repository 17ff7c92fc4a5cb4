"""`mlroute experiment`: compare routing modes on an emulated fabric (real controller, OVS, Mininet)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from mlroute.errors import UsageError

NAME = "experiment"
MODES = "ecmp,mlroute,nonblocking"
EXTERNAL_MODES = "external,nonblocking"
HELP = ("run the controller in several routing modes on an emulated fat-tree / leaf-spine with iperf3 or ring "
        "all-reduce traffic, and report throughput vs a non-blocking reference (needs root)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topo", choices=("fattree", "leafspine"), required=True)
    p.add_argument("--k", type=int, default=4, help="fat-tree arity (default 4)")
    p.add_argument("--spines", type=int, default=4)
    p.add_argument("--leaves", type=int, default=4)
    p.add_argument("--hosts-per-leaf", type=int, default=2)
    p.add_argument("--pattern", action="append", required=True,
                   help="stride:I | randbij | random | stag:PE,PP | hotspot | allreduce:RINGSxSIZE[,mb=M]"
                        "[,iters=I][,compute=S] | torch-allreduce:JOBSxRANKS[,mb=M][,iters=I][,compute=S]"
                        "[,placement=random|interleaved-pods|grouped-pods][,ring=given|choose] (real "
                        "PyTorch gloo jobs through torchrun -m mlroute.torch, one rank per host, declaring "
                        "themselves over a management network; placement: hosts at random, or each job on two "
                        "pods, ranks alternating or grouped; ring=choose: the ranks run in the controller's "
                        "order, MLROUTE_RING=choose; needs python3-torch or $MLROUTE_TORCH_PYTHON); "
                        "repeat for several")
    p.add_argument("--modes", default=None,
                   help=f"comma-separated: ecmp, nonblocking, mlroute or any optimiser name, mlroute-undeclared "
                        "(mode mlroute, the all-reduce jobs not declared: it learns them from their traffic) "
                        f"(default {MODES}); "
                        f"with --controllers: external (the runs on them) and nonblocking (default {EXTERNAL_MODES})")
    p.add_argument("--bw", type=float, default=10.0, help="link rate in Mb/s (default 10)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of traffic per run (default 30)")
    p.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    p.add_argument("--out", default=None, help="output directory (default results/experiment-<time>)")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--undeclared", action="store_true",
                   help="do not declare all-reduce rings to the controller: it learns them from flow statistics, "
                        "so iteration 0 runs on ECMP (the comparison)")
    p.add_argument("--detection", choices=("flowstats", "sflow", "both"), default="flowstats",
                   help="how the controller finds elephants (te.detection): flow statistics of a counting rule "
                        "per flow, or sFlow samples that every switch exports to it (default %(default)s)")
    p.add_argument("--sampling", type=int, default=64, help="sFlow sampling, 1-in-N packets (default 64)")
    p.add_argument("--fail-link", action="append", default=[], metavar="A:B[,C:D]",
                   help="cables down before the traffic starts (Mininet node names, e.g. a0_0:c1: pod 0's first "
                        "aggregation switch to core 1); repeat for several; not in the nonblocking reference")
    p.add_argument("--controllers", metavar="ADDR[,ADDR...]", default=None,
                   help="run on these controllers, already running, instead of starting one per run (mode "
                        "external): a controller cluster's nodes or one controller, every switch connected to all; "
                        "ADDR = HOST:OF_PORT or HOST:OF_PORT/REST_PORT (with REST ports the leader's elephants and "
                        "counters are read); the nonblocking reference still starts its own")


def run(args: argparse.Namespace) -> int:
    from mlroute.experiment import report, runner

    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    patterns = [p for arg in args.pattern for p in _split_patterns(arg)]
    try:
        controllers = runner.parse_controllers(args.controllers) if args.controllers is not None else []
        fail_links = [link for text in args.fail_link for link in runner.parse_fail_links(text)]
    except runner.ExperimentError as exc:
        raise UsageError(str(exc)) from None
    modes = args.modes if args.modes is not None else EXTERNAL_MODES if controllers else MODES
    spec = runner.ExperimentSpec(args.topo, args.k, args.spines, args.leaves, args.hosts_per_leaf, patterns,
                                 [m.strip() for m in modes.split(",") if m.strip()], args.bw,
                                 args.duration, seeds, declare_jobs=not args.undeclared,
                                 detection=args.detection, sampling=args.sampling, controllers=controllers,
                                 fail_links=fail_links)
    out = args.out or f"results/experiment-{time.strftime('%Y%m%d-%H%M%S')}"
    signal.signal(signal.SIGTERM, _interrupt)  # clean up on kill as on Ctrl-C
    # Ctrl-C is KeyboardInterrupt even in a process started with SIGINT ignored (a background job of a script,
    # where Python leaves it ignored): the test suite's own runs, for one
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        data = runner.run(spec, out)
    except runner.ExperimentError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        print("mlroute experiment: interrupted; networks and controllers cleaned up", file=sys.stderr)
        return 130
    data = report.write(data, out)
    if args.json:
        print(json.dumps(data, default=float))
    else:
        print((Path(out) / "summary.md").read_text())
        print(f"results, summary and plots in {out}/")
    failed = report.failed_runs(data)
    if failed:  # the outputs are written either way; a script must still see that runs failed
        print(f"mlroute experiment: {len(failed)} of {len(data['results'])} runs failed (see summary.md)",
              file=sys.stderr)
        return 1
    return 0


def _split_patterns(arg: str) -> list[str]:
    """'stride:4' -> [stride:4]; allow several in one flag separated by ';'."""
    return [p.strip() for p in arg.split(";") if p.strip()]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
