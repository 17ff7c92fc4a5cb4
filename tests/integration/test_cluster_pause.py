"""A cluster's leader paused for less than its session (issue 35): three real ryu-managers on Debian's ZooKeeper
with 8-s sessions, every bridge of a small leaf-spine connected to all three; the leader SIGSTOPped for 2 s and
for 6 s.

A paused process is not a dead one: its liveness port's connections stay open (the kernel holds them), so no
follower can prove its death (docs/cluster.md) and nobody may take over before its session expires. While it
sleeps and after it wakes, no other node leads, every switch's only MASTER is the paused node, and its
generation stands. Woken after more than a third of its session (6 s), it writes nothing until ZooKeeper
confirms it still leads, then reads every switch back; after 2 s it was never held. Either way no switch ever
refuses what it sends (no fencing, no IS_SLAVE or STALE error)."""

import os
import signal
import threading
import time

import pytest

from mininet_topos.leafspine import LeafSpineTopo
from tests.integration.cluster_roles import all_master, cluster, leader, masters, switch_roles
from tests.integration.harness import ping_all, te_config, wait_until

SESSION_S = 8.0
NODES = ("a", "b", "c")


def _config(zookeeper, node_id):
    return te_config(extra=f"cluster:\n  zookeeper: {zookeeper.hosts}\n  name: pause\n  node_id: {node_id}\n"
                           f"  session_timeout_s: {SESSION_S}\n")


@pytest.fixture(scope="module")
def fab(fabric_factory, zookeeper):
    fab = fabric_factory(LeafSpineTopo(spines=2, leaves=2, hosts_per_leaf=2), [_config(zookeeper, n) for n in NODES])
    assert wait_until(lambda: leader(fab), timeout=30), [c.log()[-1500:] for c in fab.controllers]
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=40, interval=0)
    return fab


class Watch:
    """Samples each bridge's MASTER connections (Open vSwitch's view) and which nodes say they lead (their REST;
    a paused node does not answer within 0.5 s and counts as not saying so), each in a thread of its own so a
    paused node's silence holds neither up."""

    def __init__(self, fab):
        self.fab, self.masters, self.leading = fab, [], []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(sample,), daemon=True)
                         for sample in (self._masters, self._leading)]
        for thread in self._threads:
            thread.start()

    def _masters(self):
        self.masters.append(masters(switch_roles(), self.fab))

    def _leading(self):
        self.leading.append({i for i, c in enumerate(self.fab.controllers)
                             if (cluster(c, timeout=0.5) or {}).get("leading")})

    def _run(self, sample):
        while not self._stop.is_set():
            sample()
            time.sleep(0.1)

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join()


@pytest.mark.parametrize("pause_s", [2.0, 6.0])
def test_a_leader_paused_for_less_than_its_session_stays_the_only_master_and_is_never_refused(fab, pause_s):
    old = wait_until(lambda: leader(fab), timeout=20)
    index = fab.controllers.index(old)
    others = [c for c in fab.controllers if c is not old]
    before = cluster(old)
    log_from = len(old.log())
    watch = Watch(fab)
    try:
        os.kill(old.proc.pid, signal.SIGSTOP)
        time.sleep(pause_s)
        os.kill(old.proc.pid, signal.SIGCONT)
        woke = time.time()
        assert wait_until(lambda: leader(fab) is old, timeout=10)
        answered_s = time.time() - woke
        time.sleep(3)  # its loops run a few periods more
    finally:
        watch.stop()
    after = cluster(old)
    log = old.log()[log_from:]
    counts = sorted({len(p) for m in watch.masters for p in m.values()})
    leaders = sorted({tuple(sorted(s)) for s in watch.leading})
    print(f"\nSIGSTOP {pause_s:.0f} s (session {SESSION_S:.0f} s): {len(watch.masters)} role samples, masters per "
          f"bridge {counts}; {len(watch.leading)} REST samples, leaders seen {leaders}; the leader again "
          f"{answered_s:.2f} s after SIGCONT")
    assert all(ports <= {old.of_port} for m in watch.masters for ports in m.values()), watch.masters
    assert all(s <= {index} for s in watch.leading), watch.leading
    assert after["role"] == "leader" and after["generation"] == before["generation"], (before, after)
    assert all_master(fab, old)
    assert sum((cluster(c) or {}).get("dead_leaders_released", 0) for c in others) == 0
    held = "writing nothing until ZooKeeper confirms it still leads" in log
    assert held == (pause_s > SESSION_S / 3), log[-3000:]  # the hold: past a third of the session only
    if held:
        assert log.index("writing nothing until") < log.index("ZooKeeper confirms this node still leads")
    for refused in ("fenced this node", "IS_SLAVE", "STALE", "no longer lead", "Traceback"):
        assert refused not in log, log[-3000:]
