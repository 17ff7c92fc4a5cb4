#!/usr/bin/env python3
"""Takeover of the controller cluster: kill -> a new leader MASTER on every switch, k=4 and k=8 fat-trees.

    python benchmarks/bench_takeover.py                   # k=4 and k=8, 3 kills per way the leader ends
    python benchmarks/bench_takeover.py --k 4 --kills 5

Real parts: Debian's ZooKeeper (tests/zookeeper.py), three real controllers (``ryu-manager controller/app.py``
with a ``cluster:`` section, 4-s sessions, the default) and a Mininet fat-tree on userspace Open vSwitch, every
bridge connected to all three (no traffic: a takeover is the same with or without). For each fabric, the leader
is ended three ways, each ``--kills`` times:

* ``SIGKILL``: a follower proves the process ended through its liveness port and releases its lock
  (docs/cluster.md);
* ``SIGTERM``: a clean stop, its session closed;
* ``SIGKILL, liveness off`` (``cluster.liveness_port: null``): the next node waits for the session to expire,
  the path every open controller takes.

Measured from the switches' side: the new leader's ``GET /mlroute/cluster`` shows each switch's role reply,
polled every 20 ms, until every switch answered MASTER at its generation. "Rule changes" counts the flow and
group modifications the new leader sent in the 5 s after that (``mlroute_rule_changes_total``): a follower
that is ready sends none (nothing changed in the fabric). Needs root (Mininet); never run beside another
Mininet network (``flock /tmp/mininet.lock`` where several users share the machine).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mininet_topos.fattree import FatTreeTopo  # noqa: E402
from mlroute.experiment.emulation import Controller, start_network, stop_network  # noqa: E402
from tests.integration.cluster_roles import cluster, confirmed_master  # noqa: E402
from tests.zookeeper import ZooKeeperServer  # noqa: E402

SESSION_S = 4.0
WAYS = ("SIGKILL", "SIGTERM", "SIGKILL, liveness off")
SETTLE_S = 5.0  # rule changes counted this long after MASTER everywhere


def config(zk: ZooKeeperServer, name: str, node: str, liveness: bool) -> str:
    return ("te:\n  mode: mlroute\n  poll_interval_s: 2\n  host_link_mbps: 10\ncluster:\n"
            f"  zookeeper: {zk.hosts}\n  name: {name}\n  node_id: {node}\n  session_timeout_s: {SESSION_S}\n"
            + ("" if liveness else "  liveness_port: null\n"))


def leader_of(ctls: list[Controller], switches: int, timeout: float) -> Controller | None:
    """The controller every switch answered MASTER at its generation (None after ``timeout``)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in ctls:
            if c.proc.poll() is None and confirmed_master(c, switches):
                return c
        time.sleep(0.02)
    return None


def changes(ctl: Controller) -> float:
    try:
        return ctl.metric("mlroute_rule_changes_total")
    except OSError:
        return float("nan")


def measure(zk: ZooKeeperServer, workdir: Path, k: int, kills: int) -> dict[str, list[tuple[float, float]]]:
    """Per way the leader ends: (kill -> MASTER on every switch at the new leader, rule changes after it)."""
    switches = 5 * k * k // 4
    name = f"bench{k}"
    ctls = [Controller(workdir / f"k{k}-{n}", config(zk, name, n, True)) for n in "abc"]
    out: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    net = None
    try:
        for c in ctls:
            c.wait_ready()
        net = start_network(FatTreeTopo(k=k, bw=10), ctls, jumbo=True)
        for way in WAYS:
            if way.endswith("liveness off"):  # the same fabric, the three controllers restarted without it
                for c, node in zip(ctls, "abc"):
                    (c.workdir / "mlroute.yaml").write_text(config(zk, name, node, False))
                    c.restart()
                for c in ctls:
                    c.wait_ready()
            for _ in range(kills):
                old = leader_of(ctls, switches, 120)
                if old is None:
                    raise RuntimeError(f"k={k}: no leader MASTER on all {switches} switches: "
                                       f"{[cluster(c) for c in ctls]}")
                time.sleep(2.0)  # settled: the followers watch it
                others = [c for c in ctls if c is not old]
                before = {id(c): changes(c) for c in others}
                kill = time.time()
                old.proc.send_signal(signal.SIGTERM if way == "SIGTERM" else signal.SIGKILL)
                new = leader_of(others, switches, SESSION_S + 30)
                done = time.time()
                if new is None:
                    raise RuntimeError(f"k={k}, {way}: no new leader: {[cluster(c) for c in others]}")
                time.sleep(SETTLE_S)
                out[way].append((done - kill, changes(new) - before[id(new)]))
                old.proc.wait(30)
                old.restart()
                old.wait_ready()
                time.sleep(2.0)  # back as a follower on every switch
    finally:
        if net is not None:
            stop_network(net)
        for c in ctls:
            c.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, action="append", help="fat-tree k (default 4 and 8)")
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-takeover-") as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        try:
            print(f"| fabric | switches | the leader | kills | kill -> MASTER on every switch (median, max) | "
                  f"rule changes in the {SETTLE_S:g} s after (max) |")
            print("|---|---|---|---|---|---|")
            for k in args.k or [4, 8]:
                runs = measure(zk, Path(tmp), k, args.kills)
                for way, rows in runs.items():
                    took = [r[0] for r in rows]
                    print(f"| k={k} fat-tree | {5 * k * k // 4} | {way} ({SESSION_S:g}-s session) | {len(rows)} | "
                          f"{statistics.median(took):.2f} s, {max(took):.2f} s | {max(r[1] for r in rows):.0f} |",
                          flush=True)
        finally:
            zk.stop()


if __name__ == "__main__":
    main()
