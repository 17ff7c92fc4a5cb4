"""`mlroute rank`: this host's node rank in the order the controller chose for a job's ring, before launch.

A batch script places ranks before it starts the job: every node runs ``mlroute rank --job NAME --hosts ...`` and
launches ``torchrun --rdzv-backend=static --nnodes N --node-rank R --master-addr M ...`` with what it prints.
The controller is asked once per node; its choice is deterministic on the fabric and jobs it holds, and a node
that finds the job already declared with these hosts takes the order stored there, so every node agrees.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from mlroute.errors import UsageError

NAME = "rank"
HELP = ("ask the controller for a job's ring order and print this host's node rank and the master address "
        "(node rank 0's host), for torchrun --node-rank / --master-addr")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", required=True, help="the job's name (the one the hook declares: MLROUTE_JOB)")
    hosts = p.add_mutually_exclusive_group(required=True)
    hosts.add_argument("--hosts", metavar="H1,H2,...", help="the job's hosts' fabric addresses in launch order")
    hosts.add_argument("--hostfile", type=Path, metavar="FILE",
                       help="one host per line (blank lines and # comments skipped; a second field `slots=N` or "
                            "a number is that host's ranks, as in MPI hostfiles)")
    p.add_argument("--ranks-per-host", type=int, default=None, metavar="N",
                   help="ranks on every host (torchrun --nproc-per-node); default 1, or the hostfile's slots")
    p.add_argument("--me", metavar="ADDR", help="this host's fabric address (default: MLROUTE_ADDR, else the "
                                                 "source address of the route to the first host)")
    p.add_argument("--url", default=os.environ.get("MLROUTE_URL"), help="the controller's REST root "
                                                                        "(default: MLROUTE_URL)")
    p.add_argument("--token", default=os.environ.get("MLROUTE_TOKEN"), help="REST token (default: MLROUTE_TOKEN)")
    p.add_argument("--lease-s", type=float, default=None,
                   help="the declared job's lease (default: MLROUTE_LEASE_S or 30 s): the hook renews it once the "
                        "job runs; an unlaunched job's order is forgotten when it runs out")
    p.add_argument("--json", action="store_true", help="print the whole answer as JSON instead")


def read_hostfile(path: Path) -> list[tuple[str, int | None]]:
    """(host, ranks or None) per line of an MPI-style hostfile."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UsageError(f"--hostfile {path}: {exc.strerror or exc}") from None
    out: list[tuple[str, int | None]] = []
    for number, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        slots = None
        if len(fields) > 1:
            value = fields[1].removeprefix("slots=")
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"--hostfile {path}, line {number}: slots must be a positive integer, got "
                                 f"{fields[1]!r}")
            slots = int(value)
        out.append((fields[0], slots))
    return out


def blocks_of(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(host, ranks) per node in launch order, from --hosts / --hostfile and --ranks-per-host."""
    if args.hosts is not None:
        listed: list[tuple[str, int | None]] = [(h.strip(), None) for h in args.hosts.split(",") if h.strip()]
    else:
        listed = read_hostfile(args.hostfile)
    if args.ranks_per_host is not None and args.ranks_per_host < 1:
        raise UsageError(f"--ranks-per-host must be at least 1, got {args.ranks_per_host}")
    hosts = [h for h, _ in listed]
    if len(set(hosts)) != len(hosts):
        raise UsageError(f"a host is listed twice: {sorted(h for h in set(hosts) if hosts.count(h) > 1)}")
    if len(hosts) < 2:
        raise UsageError("a ring needs at least two hosts")
    return [(h, args.ranks_per_host or slots or 1) for h, slots in listed]


def run(args: argparse.Namespace) -> int:
    from mlroute.torch import job, rank_order
    from mlroute.torch.address import fabric_address
    from mlroute.torch.client import Controller, UnreachableError

    if not args.url:
        raise UsageError("no controller: give --url or set MLROUTE_URL")
    blocks = blocks_of(args)
    hosts = [h for h, _ in blocks]
    me = args.me or fabric_address(hosts[0], os.environ)
    if me not in hosts:
        raise UsageError(f"this host ({me or 'no route to ' + hosts[0]}) is not one of the job's hosts: give --me")
    controller = Controller(args.url, args.token or None)
    name = job.clean(args.job)
    lease_s = args.lease_s if args.lease_s is not None else job.lease_seconds(os.environ)
    try:
        answer = _stored(controller, name, hosts) or _choose(controller, name, blocks, lease_s)
    except UnreachableError as exc:
        raise UsageError(f"controller {controller.url} unreachable: {exc}") from None
    chosen = rank_order.node_ranks(answer, blocks)
    if chosen is None:
        raise UsageError(f"the controller's answer names no node order for these hosts: {json.dumps(answer)[:300]}")
    master = min(chosen, key=chosen.__getitem__)
    if args.json:
        print(json.dumps({"node_rank": chosen[me], "master_addr": master, "nnodes": len(hosts),
                          "node_ranks": chosen, "ring_choice": answer["job"].get("ring_choice")}))
    else:
        print(chosen[me], master)
    return 0


def _stored(controller, name: str, hosts: list[str]) -> dict | None:
    """The job as the controller holds it, when another node already asked with the same hosts."""
    from mlroute.torch import rank_order

    answer = rank_order.json_answer(controller.call("GET", controller.job_path(name), limit=1 << 20))
    job = (answer or {}).get("job") or {}
    return answer if job.get("node_ranks") and sorted(job.get("hosts") or []) == sorted(hosts) else None


def _choose(controller, name: str, blocks: list[tuple[str, int]], lease_s: float) -> dict:
    from mlroute.torch import rank_order

    reply, answer = rank_order.ask(controller, name, rank_order.choose_body(blocks, lease_s))
    if answer is None:
        raise UsageError(f"the controller refused the job ({reply.status}): {reply.text.strip()[:300]}")
    return answer
