#!/usr/bin/env python3
"""Takeover time of the controller cluster against its ZooKeeper session timeout (issue 22).

    sudo python benchmarks/bench_takeover.py                          # sessions 1, 2, 4 s; 3 kills each
    sudo python benchmarks/bench_takeover.py --session 2 --kills 5

Real parts, no Mininet: Debian's ZooKeeper (tests/zookeeper.py), three real controllers (ryu-manager
controller/app.py with a ``cluster:`` section) and a few Open vSwitch bridges without hosts (userspace datapath,
``fail_mode=secure``, each pointed at all three controllers), which is everything a takeover involves: the
leader is SIGKILLed, ZooKeeper expires its session, the next node is elected, bumps the generation and asks each
switch for MASTER. Measured from the switches' side (each switch's role reply to the new leader, as its
``GET /mlroute/cluster`` shows them, polled every 20 ms; Open vSwitch's own ``role`` column lags by its status
refresh) and ZooKeeper's (when the leader's ephemeral znode went: its session expired). Run it under
``flock /tmp/mininet.lock`` where other Open vSwitch users share the machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlroute.experiment.emulation import Controller  # noqa: E402
from tests.integration.test_cluster import LeaderWatch, confirmed_master, masters_of, switch_roles  # noqa: E402
from tests.zookeeper import ZooKeeperServer  # noqa: E402

BRIDGES = [f"tko{i}" for i in range(4)]


def add_bridges(ports: list[int]) -> None:
    targets = [f"tcp:127.0.0.1:{p}" for p in ports]
    for i, br in enumerate(BRIDGES):
        subprocess.run(["ovs-vsctl", "--may-exist", "add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev",
                        "fail_mode=secure", "protocols=OpenFlow13", f"other-config:datapath-id={0xbe00 + i:016x}"],
                       check=True)
        subprocess.run(["ovs-vsctl", "set-controller", br, *targets], check=True)


def del_bridges() -> None:
    for br in BRIDGES:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], check=False)


def masters() -> dict[str, set[int]]:
    """bridge -> OpenFlow ports of the controllers holding it as MASTER."""
    return masters_of(switch_roles(), BRIDGES)


def wait_master(ports: set[int], timeout: float) -> float | None:
    """Until every bridge has exactly one master among ``ports``; the time (epoch s) or None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = masters()
        if len(m) == len(BRIDGES) and all(len(v) == 1 and v <= ports for v in m.values()):
            return time.time()
        time.sleep(0.02)
    return None


def wait_confirmed(ctls: list[Controller], timeout: float) -> float | None:
    """Until one of ``ctls`` has every bridge's role reply MASTER at its generation; the time (epoch s) or None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(confirmed_master(c, len(BRIDGES)) for c in ctls):
            return time.time()
        time.sleep(0.02)
    return None


def measure(zk: ZooKeeperServer, workdir: Path, session_s: float, kills: int) -> list[tuple[float, float]]:
    """(kill -> session expiry, expiry -> every bridge MASTER at the new leader) per kill."""
    cfg = ("te:\n  mode: ecmp\n  poll_interval_s: 2\ncluster:\n  zookeeper: {zk}\n  name: bench{s}\n"
           "  node_id: {n}\n  session_timeout_s: {s}\n")
    ctls = [Controller(workdir / f"s{session_s}-{n}", cfg.format(zk=zk.hosts, s=session_s, n=n)) for n in "abc"]
    out = []
    watch = LeaderWatch(zk, name=f"bench{session_s}")
    try:
        for c in ctls:
            c.wait_ready()
        add_bridges([c.of_port for c in ctls])
        by_port = {c.of_port: c for c in ctls}
        if wait_master(set(by_port), 30) is None:
            raise RuntimeError(f"no master on every bridge: {masters()}")
        for _ in range(kills):
            (port,) = next(iter(masters().values()))
            old = by_port[port]
            time.sleep(1.0)
            kill = time.time()
            old.kill()
            done = wait_confirmed([c for c in ctls if c is not old], session_s + 15)
            expiry = watch.first_after(kill)
            if done is None or expiry is None:
                raise RuntimeError(f"no takeover after a kill (confirmed {done}, expiry seen {expiry}): {masters()}")
            out.append((expiry - kill, done - expiry))
            old.restart()
            old.wait_ready()
            time.sleep(2.0)  # it reconnects to every bridge as a follower
    finally:
        watch.close()
        del_bridges()
        for c in ctls:
            c.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=float, action="append", help="session timeout(s), s (default 1 2 4)")
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-takeover-") as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        try:
            print("| session timeout | kills | kill -> session expired (median, max) | expired -> MASTER on every "
                  "switch (median, max) | kill -> new master everywhere (median) |")
            print("|---|---|---|---|---|")
            for s in args.session or [1.0, 2.0, 4.0]:
                runs = measure(zk, Path(tmp), s, args.kills)
                exp, tail = [r[0] for r in runs], [r[1] for r in runs]
                print(f"| {s:g} s | {len(runs)} | {statistics.median(exp):.2f} s, {max(exp):.2f} s | "
                      f"{statistics.median(tail):.2f} s, {max(tail):.2f} s | "
                      f"{statistics.median(a + b for a, b in runs):.2f} s |", flush=True)
        finally:
            zk.stop()


if __name__ == "__main__":
    main()
