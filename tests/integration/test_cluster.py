"""A controller cluster live (issue 22): three real ryu-managers on Debian's ZooKeeper, every bridge of a k=4
fat-tree (userspace Open vSwitch, jumbo frames) connected to all three. One fabric for the module, the scenarios
in sequence: the leader SIGKILLed under 8 pinned stride elephants with a link cut 0.3 s later, the leader
SIGSTOPped for 15 s, a job posted to a follower, ZooKeeper stopped for 20 s under load, ZooKeeper paused past every
session.

Sessions are 2 s, but a SIGKILLed leader is replaced on proof that its process ended (its liveness port's
connections closed: docs/cluster.md), not when its session expires. A 20-s ZooKeeper outage
expires nobody (the server restores every session with a fresh timeout when it comes back, and the clients
reconnect within a second), so the switches keep their master throughout. Roles are read from the switches'
side (``ovs-vsctl list Controller``: each connection's ``role``)."""

import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows, received_per_second
from mlroute.routing import spec
from mlroute.routing.flow import Flow
from mlroute.routing.metric import report
from mlroute.routing.optimisers import OPTIMISERS
from tests.integration.cluster_roles import (
    all_master,
    cluster,
    confirmed_master,
    leader,
    logged_at,
    masters,
    switch_roles,
)
from tests.integration.flowtables import pinned_in_the_tables
from tests.integration.harness import POLL_S, STRIDE4, ping_all, stride_loss, te_config, wait_until
from tests.integration.ovs_log import ReceivedMessages

SESSION_S = 2.0
CUT_AFTER_KILL_S = 0.3  # a link cut while the old leader is dead: the new one must route around it
NODES = ("a", "b", "c")
TOKEN = "t"


def _config(zookeeper, node_id):
    return te_config(extra=f"rest:\n  token: {TOKEN}\ncluster:\n  zookeeper: {zookeeper.hosts}\n  name: live\n"
                           f"  node_id: {node_id}\n  session_timeout_s: {SESSION_S}\n")


@pytest.fixture(scope="module")
def fab(fabric_factory, zookeeper):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), [_config(zookeeper, n) for n in NODES], jumbo=True)
    assert wait_until(lambda: leader(fab), timeout=20), [c.log()[-1500:] for c in fab.controllers]
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=40, interval=0)
    return fab


class LeaderWatch:
    """When the leader's ephemeral znode goes (ZooKeeper expired its session, it resigned, or a follower deleted it
    on proof of its death): a watch of the
    test's own ZooKeeper client. kazoo's DataWatch reads the node again after the deletion's event, so when the
    next leader has already created its own the deletion shows as a new node (another creation zxid), recorded
    the same way (missed before: no expiry seen in some runs)."""

    def __init__(self, zookeeper, name="live"):
        from kazoo.client import KazooClient
        self.gone = []
        self._created = None  # the creation zxid of the leader node last seen
        self.client = KazooClient(hosts=zookeeper.hosts)
        self.client.start()
        path = f"/mlroute/{name}/leader"

        def changed(data, stat):
            created = stat.czxid if stat is not None else None
            if data is None or self._created is not None and created != self._created:
                self.gone.append(time.time())
            self._created = created
            return True
        self.client.DataWatch(path, changed)

    def first_after(self, t):
        return next((g for g in self.gone if g >= t), None)

    def close(self):
        self.client.stop()
        self.client.close()


def pinned(ctl, ports=None):
    """The paths of the elephants (those to the iperf3 server ``ports`` only, when given) once there are 8 and every
    one has its path; else None."""
    elephants = [e for e in ctl.get("/mlroute/elephants") if ports is None or e["dst_port"] in ports]
    return [e["path"] for e in elephants] if len(elephants) >= 8 and all(e["path"] for e in elephants) else None


def windows(agg, start, n):
    """3-s means of the aggregate from second ``start`` on, ``n`` seconds."""
    after = agg[start:start + n]
    return after, [sum(after[i:i + 3]) / 3 for i in range(len(after) - 2)]


def pinned_off(fab, link):
    """Every elephant pinned, in the switches' own tables (traced through them) as REST says, and none over
    ``link`` (either direction); else None."""
    crossed = pinned_in_the_tables(fab)
    return None if not crossed or any(set(hop) == set(link) for hops in crossed.values() for hop in hops) \
        else crossed


def carried(cut):
    """The stride's summed max-min fair rate (host links = 1) under the routing core's optimum on the same k=4
    fat-tree, with the Mininet cable ``cut`` (aggregation, core) down (None: none)."""
    fabric = spec.build_fabric("fattree", 0, 0, 0, 4)
    if cut is not None:  # Mininet's a<pod>_<i> / c<n> are the core's agg<pod>_<i> / core<n-1>
        agg, core = cut
        fabric = spec.fail(fabric, [], spec.parse_links(f"agg{agg[1:]}:core{int(core[1:]) - 1}"))
    flows = [Flow(int(src[1:]) - 1, int(dst[1:]) - 1) for src, dst in STRIDE4]
    routing = OPTIMISERS["mlroute"](fabric, flows, seed=0, objective="flow", time_limit=None)
    return report(fabric, flows, routing.paths)["sum_rate"]


def test_sigkill_the_leader_under_pinned_elephants_and_cut_a_link_1s_later(fab, zookeeper):
    old = leader(fab)
    others = [c for c in fab.controllers if c is not old]
    names = {int(sw.dpid, 16): sw.name for sw in fab.net.switches}
    watch = LeaderWatch(zookeeper)
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=34)
    started = time.time()
    timeline, cut, new = {}, None, None
    try:
        assert wait_until(lambda: pinned(old), timeout=5 * POLL_S + 5), old.get("/mlroute/elephants")
        time.sleep(max(0.0, started + 14 - time.time()))
        victim = next(e for e in old.get("/mlroute/elephants") if e["path"])
        path = victim["path"]  # its aggregation-to-core hop is cut 1 s after the kill
        cut = (names[path[1]], names[path[2]])
        on_cut = next(i for i, (src, _) in enumerate(STRIDE4) if fab.net.get(src).IP() == victim["src_ip"])
        changes = {id(c): c.metric("mlroute_rule_changes_total") for c in others}
        kill = time.time()
        old.kill()
        cutter = threading.Timer(CUT_AFTER_KILL_S, lambda: (fab.net.configLinkStatus(*cut, "down"),
                                              timeline.__setitem__("cut", time.time() - kill)))
        cutter.start()
        while new is None and time.time() < kill + 10:
            new = next((c for c in others if (cluster(c) or {}).get("leading")), None)
        timeline["elected (REST says so)"] = time.time() - kill
        assert new is not None, [c.log()[-2000:] for c in others]
        # the switches' own role replies (ovs-vsctl's role column is refreshed every few seconds: checked after)
        assert wait_until(lambda: confirmed_master(new), timeout=5, interval=0.02), \
            (lambda v: (v.get("generation"), {d: (s["role"], s["generation"]) for d, s in v["switches"].items()}))(
                cluster(new))
        timeline["MASTER on every switch (role replies)"] = time.time() - kill
        assert wait_until(lambda: new.metric("mlroute_rule_changes_total") > changes[id(new)], timeout=10,
                          interval=0.05)
        timeline["first flow-mod"] = time.time() - kill
        cutter.join()
        link = (path[1], path[2])
        seen = SimpleNamespace(controller=new, net=fab.net)  # the fabric as the new leader knows it
        off_cut = wait_until(lambda: pinned_off(seen, link), timeout=20, interval=0.2)
        timeline["every elephant pinned off the cut, in the switches' tables"] = time.time() - kill
        assert wait_until(lambda: all_master(fab, new), timeout=8, interval=0.1), switch_roles()
        timeline["MASTER on every switch (ovsdb)"] = time.time() - kill

        def around():  # every elephant pinned, none over the cut link, pings across it answered
            now = pinned(new)
            if now and not any({a, b} == set(link) for p in now for a, b in zip(p, p[1:])):
                return now if stride_loss(fab.net, 4) == 0 else None
            return None
        moved = wait_until(around, timeout=20, interval=0.5)
        timeline["routed around the cut"] = time.time() - kill
    finally:
        reports = flows.reports()
        watch.close()
        if cut:
            fab.net.configLinkStatus(*cut, "up")
    expiry = watch.first_after(kill)
    timeline["dead leader's lock released (leader znode gone)"] = expiry - kill if expiry else None
    k = int(kill - started)
    agg = received_per_second(reports)
    reference = sum(agg[k - 6:k]) / 6
    after, smooth = windows(agg, k, 16)
    rest = received_per_second([r for i, r in enumerate(reports) if i != on_cut])
    rest_ref = sum(rest[k - 6:k]) / 6
    rest_after, rest_smooth = windows(rest, k, 16)
    print("\ntakeover timeline (s after the SIGKILL): " +
          ", ".join(f"{key} {v:.2f}" for key, v in sorted(timeline.items(), key=lambda kv: kv[1] or 99)
                    if v is not None))
    fair = carried(cut) / carried(None)  # what the fabric can still carry of the stride, by the routing core
    print(f"aggregate before the kill {reference:.1f} Mb/s; per second after: {[round(a, 1) for a in after]}; "
          f"lowest 3-s mean {min(smooth) / reference:.3f} of it, {min(smooth) / (fair * reference):.3f} of what the "
          f"fabric carries with the cut cable down ({fair:.3f} of it); the 7 elephants off the cut link: lowest 3-s "
          f"mean {min(rest_smooth) / rest_ref:.3f} ({[round(a, 1) for a in rest_after]})")
    old.restart()  # back as a follower for the next scenarios
    old.wait_ready()
    assert moved, new.get("/mlroute/elephants")
    # the new leader did not wait for the dead one's session (it cannot expire before SESSION_S after the last
    # heartbeat): a follower proved the death through the liveness port and released the lock
    assert timeline["MASTER on every switch (role replies)"] <= SESSION_S / 2, timeline
    assert sum(c.get("/mlroute/cluster").get("dead_leaders_released", 0) for c in others) >= 1
    # a warm takeover: recovery over once the switches are read back, the cut elephant re-pinned by the first
    # decision (measured 0.43-0.47 s after MASTER in four runs). Before, the new leader knew its elephants at its
    # first busy poll and recovery held back any change but those into the dead port: 2.6 s after MASTER in one
    # run, 11-15 s in three (routed around at 13.3-17.5 s)
    assert off_cut, new.get("/mlroute/elephants")
    assert timeline["every elephant pinned off the cut, in the switches' tables"] <= \
        timeline["MASTER on every switch (role replies)"] + 2.0, timeline
    # The issue asks 0.9 of the pre-kill aggregate in every 3-s window. With the cut cable down no routing reaches
    # it: the cable is one of the 4 uplinks (and downlinks) of a pod whose 4 stride elephants need all 4, so the
    # routing core's optimum is 7/8 (a cable of the sending pod) or 6/8 (of the pod that sends and receives) of
    # the fault-free one; the bound is 0.9 of that. Measured: 0.93-0.97 in five runs (and 0.92-0.94 before the
    # warm takeover: on 2 cores the aggregate is set by the cut, not by how soon the new leader re-pins).
    assert min(smooth) >= 0.9 * fair * reference, (reference, fair, after)
    assert min(rest_smooth) >= 0.8 * fair * rest_ref, (rest_ref, fair, rest_after)
    assert "Traceback" not in new.log()


def test_sigstop_the_leader_for_15s_no_two_masters_and_it_writes_nothing_after(fab):
    assert wait_until(lambda: leader(fab), timeout=20)
    old = leader(fab)
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            seen.append(max((len(p) for p in masters(switch_roles(), fab).values()), default=0))
            time.sleep(0.1)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        changes = old.metric("mlroute_rule_changes_total")
        os.kill(old.proc.pid, signal.SIGSTOP)
        time.sleep(15)
        with ReceivedMessages() as received:  # what the switches receive from here on, from their own log
            os.kill(old.proc.pid, signal.SIGCONT)
            resumed = time.time()
            stepped_down = wait_until(lambda: (cluster(old) or {}).get("role") == "follower", timeout=10)
            down_s = time.time() - resumed
            new = wait_until(lambda: leader(fab), timeout=10)
            time.sleep(3)  # its loops run a few periods more
        after = old.metric("mlroute_rule_changes_total")
    finally:
        stop.set()
        watcher.join()
    said = logged_at(old, "no longer leading", resumed) or logged_at(old, "fenced this node", resumed)
    writes = received.writes_from(old.of_port, after=resumed)
    print(f"\nSIGSTOP 15 s: {len(seen)} role polls, most masters on one switch {max(seen)}; the old leader a "
          f"follower {down_s:.1f} s after SIGCONT, its log says so {(said or resumed) - resumed:.2f} s after it; "
          f"its rule changes {changes:.0f} -> {after:.0f}; the switches received {received.received_from(old.of_port)} "
          f"messages from it after SIGCONT, {len(writes)} of them flow, group or packet-outs {writes[:5]}")
    assert new is not None and new is not old and stepped_down and said is not None
    assert max(seen) == 1 and seen[-1] == 1
    assert after == changes
    # the switches' own word: nothing written by the old leader once it resumed (it holds its writes until
    # ZooKeeper confirms a lead it no longer has), so certainly nothing after its log said it stopped leading
    assert received.received_from(old.of_port) > 0 and writes == []
    assert all_master(fab, new)
    assert "Traceback" not in old.log()


def test_a_job_posted_to_a_follower_is_pinned_by_the_leader(fab):
    lead = wait_until(lambda: leader(fab), timeout=20)
    follower = next(c for c in fab.controllers if c is not lead and c.proc.poll() is None)
    ring = [fab.net.get(h).IP() for h in ("h13", "h9", "h5", "h1")]
    answer = follower.post("/mlroute/jobs", {"jobs": [{"name": "ring-live", "hosts": ring, "rings": [ring]}]},
                           token=TOKEN)
    assert answer["cluster"]["stored"], answer
    pairs = list(zip(ring, ring[1:] + ring[:1]))

    def pins():
        view = cluster(lead)["view"] or {}
        flows = [p["flow"] for p in view.get("pinned", ())]
        return all(any(f"'{s}'" in f and f"'{d}'" in f for f in flows) for s, d in pairs) or None
    assert wait_until(lambda: [j["name"] for j in lead.get("/mlroute/jobs")["jobs"]] == ["ring-live"], timeout=5)
    if not wait_until(pins, timeout=10):
        status = cluster(lead)
        view = status["view"] or {}
        pytest.fail(f"the ring not pinned in the view within 10 s. The view: version {view.get('version')}, "
                    f"generation {view.get('generation')} of {view.get('leader')} (the leader: {status['node_id']} "
                    f"at {status['generation']}), pinned {[p['flow'] for p in view.get('pinned', ())]}\n"
                    f"topology: {lead.get('/mlroute/topology').get('links')}\n"
                    + "\n".join(f"--- {n}:\n{decisions_log(c)}" for n, c in zip(NODES, fab.controllers)))
    lead.post("/mlroute/jobs", {"jobs": []}, token=TOKEN)


def decisions_log(ctl, lines=80):
    """The controller's log lines about leading, the views, the topology, decisions and its optimiser worker: a
    failure's evidence, every node's, on one timeline (the harness stamps each line)."""
    keep = ("te:", "cluster", "Clos", "LLDP", "link", "optimiser", "worker", "Traceback", "Error")
    return "\n".join([line for line in ctl.log().splitlines() if any(k in line for k in keep)][-lines:])


def test_zookeeper_stopped_for_20s_under_load_nothing_changes_at_the_switches(fab, zookeeper):
    lead = wait_until(lambda: leader(fab), timeout=20)
    before = masters(switch_roles(), fab)
    generation = cluster(lead)["generation"]
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=40, base_port=5400)
    started = time.time()
    changed = []
    try:
        time.sleep(14)  # pinned and at full rate before the reference window
        stopped = time.time()
        zookeeper.stop()
        while time.time() < stopped + 20:
            now = masters(switch_roles(), fab)
            if now != before:
                changed.append((time.time() - stopped, now))
            time.sleep(0.5)
        zookeeper.start()
        back = time.time()
        assert wait_until(lambda: all((cluster(c) or {}).get("session") == "connected" for c in fab.controllers),
                          timeout=15)
        back_s = time.time() - back
    finally:
        reports = flows.reports()
    agg = received_per_second(reports)
    k = int(stopped - started)
    reference = sum(agg[k - 6:k]) / 6
    after, smooth = windows(agg, k, 22)
    print(f"\nZooKeeper stopped 20 s: aggregate before {reference:.1f} Mb/s, per second during "
          f"{[round(a, 1) for a in after]}, lowest 3-s mean {min(smooth) / reference:.3f}; every node connected "
          f"again {back_s:.1f} s after it was back")
    assert not changed, changed[:2]
    assert leader(fab) is lead and cluster(lead)["generation"] == generation
    assert min(smooth) >= 0.9 * reference, (reference, after)
    assert ping_all(fab.net) == 0


def elephant_rates(ctl):
    """flow -> rate (b/s) as the node's REST shows its elephants now."""
    return {(e["src_ip"], e["dst_ip"], e["src_port"], e["dst_port"]): e["rate_bps"]
            for e in ctl.get("/mlroute/elephants")}


def test_zookeeper_paused_past_every_session_one_election_and_the_leader_serves_rest(fab, zookeeper):
    """A frozen ZooKeeper expires the sessions at once when it resumes: at most one election follows (the
    generation one more), and the node that leads then (the one before or another) answers from its live state:
    its elephants' rates move from poll to poll and a decision asked over REST is taken (200)."""
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=45, base_port=5500)
    try:
        # these 8 flows pinned (the scenarios before leave idle elephants listed until their pattern memory ends)
        assert wait_until(lambda: (lead := leader(fab)) and pinned(lead, ports=range(5500, 5500 + len(STRIDE4)))
                          and lead, timeout=20), [c.log()[-1500:] for c in fab.controllers]
        generation = cluster(leader(fab))["generation"]
        zookeeper.pause()
        time.sleep(3 * SESSION_S)
        zookeeper.resume()
        back = time.time()
        new = wait_until(lambda: leader(fab) if all((cluster(c) or {}).get("session") == "connected"
                                                    for c in fab.controllers) else None, timeout=20)
        assert new, [c.log()[-1500:] for c in fab.controllers]
        print(f"\nZooKeeper paused {3 * SESSION_S:g} s: {NODES[fab.controllers.index(new)]} leads at generation "
              f"{cluster(new)['generation']} (before: {generation}) {time.time() - back:.1f} s after it resumed")
        # a frozen server answers nothing, and a client that keeps sending requests never sends the ping whose
        # silence would tell it (kazoo counts a request as one): ZooKeeper expires the sessions as it resumes,
        # unless those queued requests touch them first: one election or none, never two
        assert cluster(new)["generation"] in (generation, generation + 1), "at most one election"
        first = elephant_rates(new)
        assert wait_until(lambda: (now := elephant_rates(new)) and now != first, timeout=3 * POLL_S, interval=0.5), \
            f"the leader's elephant rates did not move: {first}"
        answer = new.post("/mlroute/recompute", token=TOKEN)
        assert set(answer) >= {"applied", "reason", "moved"}, answer
    finally:
        flows.reports()
    assert ping_all(fab.net) == 0
