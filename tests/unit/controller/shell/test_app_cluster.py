"""controller/shell/cluster.py: two MlrouteApps on the same fake switches (one FakeSwitch per controller
connection, sharing the switch's table and roles) and a real ZooKeeper (tests/zookeeper.py): the leader writes
only once MASTER, a follower never writes, a deposed leader is fenced by the switches and writes nothing more,
the new leader recovers from the tables without changing them, REST writes on a follower reach the leader."""

from __future__ import annotations

import copy
import itertools
import json

import pytest
from kazoo.client import KazooClient
from webob import Request

from controller.shell import cluster as app_cluster
from controller.southbound.framework import ofp_event
from tests import topologies
from tests.decision_steps import te_step
from tests.fakeswitch import FakeSwitch
from tests.lab import Lab, arp_request, pin_stride4, stop_apps, topo_event
from tests.oftable import trace
from tests.zookeeper import until

pytestmark = pytest.mark.zookeeper  # a real ZooKeeper server: run alone (scripts/test.sh)

_names = itertools.count()



@pytest.fixture
def node(zookeeper, tmp_path, monkeypatch):
    """A factory of cluster nodes (Labs) on one cluster name; the first one's switches are shared by the rest."""
    name, first = f"app{next(_names)}", []

    def make(node_id, mode="ecmp"):
        path = tmp_path / f"{node_id}.yaml"
        path.write_text(f"te:\n  mode: {mode}\nrest:\n  token: t\ncluster:\n  zookeeper: {zookeeper.hosts}\n"
                        f"  name: {name}\n  node_id: {node_id}\n  session_timeout_s: 4.0\n")
        monkeypatch.setenv("MLROUTE_CONFIG", str(path))
        ref = topologies.fat_tree(4)
        switches = None
        if first:
            switches = {}
            for dpid, other in first[0].switches.items():  # this controller's connections to the same switches
                switches[dpid] = sw = FakeSwitch(dpid)
                sw.table, sw.roles = other.table, other.roles
        lab = Lab(ref, switches)
        first.append(lab)
        return lab
    yield make
    stop_apps()


def _join(lab):
    """Every switch connects to the node, the node joins the cluster; role replies handled."""
    for dpid in lab.switches:
        lab.connect(dpid)
    lab.pump()
    lab.app._cluster_start()


def _lead(lab):
    """Waits until the node leads and asked every switch for MASTER; then the replies and read-backs."""
    until(lambda: lab.app.roles.leading and all(sw.replies for sw in lab.switches.values()))
    lab.pump()
    assert set(lab.app.datapaths) == set(lab.switches)  # adopted: every switch confirmed MASTER
    lab.discover_links()
    for host in lab.ref.hosts.values():
        lab.packet_in(host.dpid, host.port, arp_request(host, "10.0.0.254"))
    lab.app.resync()
    lab.pump()


def _pinned_leader_and_follower(node):
    """Node a leads with the 8 stride elephants pinned; node b follows."""
    a = node("a", mode="mlroute")
    _join(a)
    _lead(a)
    assert pin_stride4(a).applied and len(a.app.core.te.pinned) == 8
    b = node("b", mode="mlroute")
    _join(b)
    return a, b


def _mods(lab):
    return sum(sw.flow_mods + len(sw.packet_outs) + sw.refused_as_slave for sw in lab.switches.values())


def test_the_leader_writes_once_master_and_a_follower_never_writes(node):
    a = node("a")
    _join(a)
    _lead(a)
    assert _mods(a) > 0 and a.app.roles.generation == 1
    for src, dst in (("10.0.0.1", "10.0.0.16"), ("10.0.0.5", "10.0.0.2")):
        t = a.trace(src, dst)
        assert t.delivered and not t.dropped and not t.looped
    b = node("b")
    _join(b)
    until(lambda: b.app.roles.generation == 1)
    b.pump()
    b.app.resync()
    b.app._send_actions(b.app.core.housekeeping().actions)
    assert _mods(b) == 0 and not b.app.datapaths
    status = b.app.cluster_json()
    assert status["role"] == "follower" and status["leader"]["id"] == "a" and status["generation"] == 1
    assert {s["role"] for s in status["switches"].values()} == {"slave"}
    assert {m["id"] for m in status["members"]} == {"a", "b"}
    assert a.app.cluster_json()["role"] == "leader"
    assert {s["writable"] for s in a.app.cluster_json()["switches"].values()} == {True}


def test_a_deposed_leader_is_fenced_by_the_switches_and_the_new_one_recovers_without_changes(node, zookeeper):
    a = node("a")
    _join(a)
    _lead(a)
    b = node("b")
    _join(b)
    until(lambda: b.app.roles.generation == 1)
    b.pump()
    held = {d: (dict(sw.table.flows), dict(sw.table.groups)) for d, sw in a.switches.items()}
    # a's lock node vanishes behind its back (as when its session expired while it was paused): it still
    # believes it leads; b is elected at generation 2 and takes every switch
    _depose(zookeeper, a)
    _lead(b)
    assert b.app.roles.generation == 2 and a.app.roles.leading  # a has not noticed
    assert {d: (dict(sw.table.flows), dict(sw.table.groups)) for d, sw in b.switches.items()} == held
    before = {d: sw.flow_mods for d, sw in a.switches.items()}
    # a writes (a new flow's counting rule, a resync): the switches refuse it as SLAVE and a steps down
    dpid = next(iter(a.switches))
    a.app.resync_owed = True
    a.app.core.installed[dpid].flows.clear()  # it believes a switch lost its rules: it would re-add them
    a.app.core.belief.mark_stale(dpid)
    a.app.resync()
    a.pump()
    assert not a.app.roles.leading and not a.app.datapaths
    assert sum(sw.refused_as_slave for sw in a.switches.values()) > 0
    assert {d: sw.flow_mods for d, sw in a.switches.items()} == before  # nothing applied from a
    refused = sum(sw.refused_as_slave for sw in a.switches.values())
    a.app.resync()
    a.app._send_actions(a.app.core.housekeeping().actions)
    assert sum(sw.refused_as_slave for sw in a.switches.values()) == refused  # it sends nothing more
    assert {d: (dict(sw.table.flows), dict(sw.table.groups)) for d, sw in b.switches.items()} == held


def test_jobs_posted_to_a_follower_are_stored_in_zookeeper_and_applied_by_the_leader(node):
    a = node("a")
    _join(a)
    _lead(a)
    b = node("b")
    _join(b)
    from controller.web.rest import RestController
    jobs = [{"name": "ring0", "hosts": ["10.0.0.1", "10.0.0.5"]}]
    req = Request.blank("/mlroute/jobs", method="POST", body=json.dumps({"jobs": jobs}).encode(),
                        headers={"Authorization": "Bearer t", "Content-Type": "application/json"})
    res = req.get_response(RestController(b.app))
    assert res.status_code == 202, res.body
    assert json.loads(res.body)["cluster"] == {"stored": True, "leader": "a"}
    until(lambda: [j["name"] for j in a.app.core.jobs] == ["ring0"])
    assert a.app.core.jobs[0]["hosts"] == jobs[0]["hosts"]
    res = Request.blank("/mlroute/cluster").get_response(RestController(b.app))
    assert json.loads(res.body)["role"] == "follower"


def test_without_a_cluster_section_the_cluster_view_says_standalone():
    lab = Lab(topologies.fat_tree(4))
    try:
        assert lab.app.cluster_json() == {"enabled": False, "role": "standalone"}
        assert lab.app.may_write(1)
    finally:
        stop_apps()


def test_a_role_reply_for_an_unknown_switch_is_ignored(node):
    a = node("a")
    sw = a.switches[next(iter(a.switches))]
    from tests.fakeswitch import PARSER
    reply = PARSER.OFPRoleReply(sw, role=2, generation_id=5)
    a.app.role_reply(ofp_event.EventOFPRoleReply(reply))
    assert not a.app.datapaths


def _write_once_deposed(lab):
    """``lab``, deposed without knowing it, writes (it believes a switch lost its rules and re-adds them): the
    switches refuse it as SLAVE and it steps down, starting over with a fresh core."""
    dpid = next(iter(lab.switches))
    lab.app.resync_owed = True
    lab.app.core.installed[dpid].flows.clear()
    lab.app.core.belief.mark_stale(dpid)
    lab.app.resync()
    lab.pump()


def _depose(zookeeper, lab):
    """``lab``'s lock node vanishes behind its back (its session expired while it was paused)."""
    zk = KazooClient(hosts=zookeeper.hosts)
    zk.start()
    try:
        election = f"/mlroute/{lab.app.config['cluster']['name']}/election"
        for child in zk.get_children(election):
            if zk.get(f"{election}/{child}")[0] == lab.app.config["cluster"]["node_id"].encode():
                zk.delete(f"{election}/{child}")
    finally:
        zk.stop()
        zk.close()


def test_a_new_leader_starts_from_the_published_links_and_a_deposed_one_forgets_what_it_knew(node, zookeeper):
    a = node("a")
    _join(a)
    _lead(a)
    b = node("b")
    _join(b)
    assert a.app.coordinator.publish_view(dict(a.app._view(), version=1))
    until(lambda: (b.app.cluster_view or {}).get("version") == 1)
    assert len(b.app.cluster_view["links"]) == len(a.app.core.topology.links) > 0
    assert not b.app.core.topology.links  # a follower's own core knows nothing: no LLDP as SLAVE
    assert not any(b.app.may_write(d) for d in b.switches)  # so its topology app holds its LLDP back
    _depose(zookeeper, a)
    until(lambda: b.app.roles.leading and all(sw.replies for sw in b.switches.values()))
    b.pump()  # role replies: every switch adopted, no LLDP yet
    assert set(b.app.datapaths) == set(b.switches)
    assert set(b.app.core.topology.links) == set(a.app.core.topology.links)  # from the view, before any LLDP
    _write_once_deposed(a)
    assert not a.app.roles.leading
    assert not a.app.core.topology.links and not a.app.core.topology.hosts and not a.app.core.te.pinned


def test_a_view_zookeeper_did_not_take_is_published_the_next_period_not_only_at_the_next_change(node, monkeypatch):
    """A publish refused (the connection lost, the lock gone meanwhile) is tried again the next period. Before,
    the view counted as published anyway and the followers kept the older one until the view changed again:
    a new leader then took over from a view without the last changes (a cut cable's restore, the pins moved)."""
    monkeypatch.setattr(app_cluster, "VIEW_PERIOD_S", 3600.0)  # the periods are this test's calls
    a = node("a")
    _join(a)
    _lead(a)
    b = node("b")
    _join(b)
    publish = a.app.coordinator.publish_view
    a.app.coordinator.publish_view = lambda view: False
    a.app._publish_view()
    a.app.coordinator.publish_view = publish
    assert b.app.cluster_view is None
    a.app._publish_view()
    until(lambda: (b.app.cluster_view or {}).get("version") == 1)
    assert len(b.app.cluster_view["links"]) == len(a.app.core.topology.links) > 0
    a.app._publish_view()  # unchanged: not published again
    assert a.app._view_version == 1


def test_a_new_leader_whose_view_lacks_a_restored_cable_keeps_the_clos_and_the_pins_until_lldp_finds_it(
        node, zookeeper, monkeypatch):
    """The view is published every 2 s: a leader stopped just after a cable came back leaves a view without it.
    The new leader judges the half-known graph against the old leader's tiers (in the view), so the cable's live,
    linkless ports do not make its switches host-facing: a Clos at once, every pin kept, nothing moved; once LLDP
    finds the cable, still a Clos. Before, the fabric read "not a Clos" until LLDP found it and the first
    decision dropped every pin."""
    monkeypatch.setattr(app_cluster, "VIEW_PERIOD_S", 3600.0)  # the view is this test's
    a, b = _pinned_leader_and_follower(node)
    pins = dict(a.app.core.te.pinned)
    used = {frozenset(hop) for path in pins.values() for hop in zip(path, path[1:])}
    tiers = a.app.core.tiers.tiers
    cable = next(ln for ln in a.ref.links.values()  # an aggregation-core cable no pin uses
                 if (tiers[ln.src], tiers[ln.dst]) == ("aggregation", "core") and {ln.src, ln.dst} not in used)
    view = a.app._view()
    ends = {(cable.src, cable.src_port), (cable.dst, cable.dst_port)}
    view["links"] = [ln for ln in view["links"] if {(ln[0], ln[1]), (ln[2], ln[3])} != ends]
    assert len(view["links"]) == len(a.app.core.topology.links) - 2 and view["kind"] == "fattree"
    assert a.app.coordinator.publish_view(dict(view, version=1))
    until(lambda: (b.app.cluster_view or {}).get("version") == 1)
    _depose(zookeeper, a)
    until(lambda: b.app.roles.leading and all(sw.replies for sw in b.switches.values()))
    b.pump()  # adopted (the view's links), read back
    b.app.resync()
    core = b.app.core
    assert len(core.topology.links) == len(a.app.core.topology.links) - 2  # the cable not known yet
    assert core.tiers.is_clos, core.tiers.reason
    assert core.te.pinned == pins
    assert not te_step(core, wait=True).moved  # the first decision: every pin stays
    assert core.te.pinned == pins
    b.discover_links()  # LLDP finds the cable
    b.app.resync()
    assert len(core.topology.links) == len(a.app.core.topology.links) and core.tiers.is_clos


def test_a_leader_held_up_past_a_third_of_its_session_writes_nothing_until_zookeeper_confirms(node, zookeeper):
    import time

    a = node("a")
    _join(a)
    _lead(a)
    dpid = next(iter(a.switches))
    a.app._cluster_beat()
    assert a.app.may_write(dpid)
    a.app._beat = time.monotonic() - a.app._held_up_s - 0.5  # the lag loop did not tick: a SIGSTOP, a stall
    a.app.resync_owed = True
    assert not a.app.may_write(dpid) and a.app.writes_held()
    assert a.app.coordinator.confirm()  # still the lock holder
    a.app._confirm_lead()
    assert a.app.may_write(dpid) and not a.app.writes_held()
    _depose(zookeeper, a)
    assert not a.app.coordinator.confirm()  # its lock node is gone: it would stay held until it steps down


def test_a_warm_takeover_keeps_the_pins_and_reroutes_the_one_whose_link_went_down_at_once(node, zookeeper):
    """With the old leader's view (its links), the new leader's recovery ends as soon as every switch is read
    back: the pins in the tables are elephants at once, a live one keeps its path, one whose link went down while
    nobody led is routed again in the first decision. Before, the new leader only added rules for a restart's
    10 s and re-pinned the cut elephant after it (live: 13.7-18 s after the kill, aggregate 0.79-0.87)."""
    a, b = _pinned_leader_and_follower(node)
    assert a.app.coordinator.publish_view(dict(a.app._view(), version=1))
    until(lambda: (b.app.cluster_view or {}).get("version") == 1)
    pins = dict(a.app.core.te.pinned)
    key, path = min(pins.items(), key=lambda kv: str(kv[0]))
    cut = next(ln for ln in a.ref.links.values() if (ln.src, ln.dst) == (path[1], path[2]))
    for dpid, port in ((cut.src, cut.src_port), (cut.dst, cut.dst_port)):  # nobody leads: b hears it as SLAVE
        b.app.port_change(topo_event.EventPortModify(b._port(dpid, port, live=False)))
    _depose(zookeeper, a)
    until(lambda: b.app.roles.leading and all(sw.replies for sw in b.switches.values()))
    b.pump()  # role replies: adopted; then the read-backs
    b.app.resync()
    core = b.app.core
    assert not core.recovering(), "recovery is over once every switch of the view is read back"
    assert {k: p for k, p in core.te.pinned.items()} == {k: p for k, p in pins.items() if k != key}
    assert all(core.monitor.flows[k].elephant for k in pins)
    assert te_step(core, wait=True).applied
    b.app.resync()
    b.pump()
    new = core.te.pinned[key]
    assert (cut.src, cut.dst) not in set(zip(new, new[1:])), new
    live = copy.deepcopy(b.ref)
    for dpid, port in ((cut.src, cut.src_port), (cut.dst, cut.dst_port)):
        live.port_down(dpid, port)
    tables = {d: sw.table for d, sw in b.switches.items()}
    t = trace(tables, live, live.hosts[key.src_ip].dpid, live.hosts[key.src_ip].port, {
        "eth_type": 0x0800, "eth_src": live.hosts[key.src_ip].mac, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip,
        "ip_proto": 6, "tcp_src": key.src_port, "tcp_dst": key.dst_port})
    assert t.delivered == {(live.hosts[key.dst_ip].dpid, live.hosts[key.dst_ip].port)} and t.paths == [list(new)]


def test_switches_remembering_a_newer_generation_than_zookeeper_are_caught_up_by_doubling(node):
    """ZooKeeper's data lost (a fresh server, a compose ``down``) while the switches stay up: they remember
    generation 40 and refuse 1, 2, ... as STALE. A fenced leader with no newer generation in ZooKeeper doubles it
    before it resigns, so the cluster is MASTER everywhere after a few elections; before, one election per
    generation (40 here, any number on a long-lived fabric)."""
    a = node("a")
    for sw in a.switches.values():
        sw.roles.generation = 40  # what every switch remembers
    _join(a)
    elections = 0
    while elections < 12 and set(a.app.datapaths) != set(a.switches):
        until(lambda: a.app.roles.leading and all(sw.replies for sw in a.switches.values()))
        elections += 1
        a.pump()  # the role replies: STALE (fenced: the generation skips ahead, it resigns) or MASTER
    assert set(a.app.datapaths) == set(a.switches), (elections, a.app.roles.generation)
    assert a.app.roles.generation > 40 and elections <= 7, (elections, a.app.roles.generation)
    assert a.app.roles.leading and a.app.cluster_json()["generation"] == a.app.roles.generation


# -- per-job REST on a cluster (issue 31) ----------------------------------------------------------------------
RINGS = [[f"10.0.0.{r + 1 + 4 * i}" for i in range(4)] for r in range(4)]  # ring r: hosts r+1, r+5, r+9, r+13


def _rest(lab, method, path, body=None):
    from controller.web.rest import RestController
    req = Request.blank(path, method=method, body=b"" if body is None else json.dumps(body).encode(),
                        headers={"Authorization": "Bearer t"})
    res = req.get_response(RestController(lab.app))
    return res.status_code, json.loads(res.body)


def _job_names(lab):
    return sorted(j["name"] for j in lab.app.core.jobs)


def _stored(lab):
    """The job list as ZooKeeper holds it now (read through the node's own session)."""
    data, _ = lab.app.coordinator.client.get(f"/mlroute/{lab.app.config['cluster']['name']}/shared/jobs")
    return json.loads(data)


def test_a_job_put_to_a_follower_is_stored_and_the_leader_pins_its_ring(node):
    from controller.state.jobs import HostPair

    a = node("a", mode="mlroute")
    _join(a)
    _lead(a)
    b = node("b", mode="mlroute")
    _join(b)
    status, body = _rest(b, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 60})
    assert status == 202, body
    assert body["cluster"] == {"stored": True, "leader": "a"} and body["decision"] is None
    assert body["job"]["lease_s"] == 60.0 and 0 < body["job"]["expires_in_s"] <= 60
    until(lambda: _job_names(a) == ["ring0"] and _job_names(b) == ["ring0"])
    assert te_step(a.app.core, wait=True).applied
    assert set(a.app.core.te.pinned) == {HostPair(RINGS[0][i], RINGS[0][(i + 1) % 4]) for i in range(4)}
    status, body = _rest(a, "GET", "/mlroute/jobs/ring0")
    assert status == 200 and body["job"]["lease_s"] == 60.0 and "expires_at" not in body["job"]
    status, body = _rest(b, "DELETE", "/mlroute/jobs/ring0")
    assert status == 202 and body["deleted"] == "ring0"
    until(lambda: _job_names(a) == [] and _job_names(b) == [])
    assert _rest(a, "DELETE", "/mlroute/jobs/ring0")[0] == 404
    assert _rest(b, "POST", "/mlroute/jobs/ring0/renew")[0] == 404


def test_two_jobs_put_at_once_through_two_nodes_both_stay(node):
    """Node b reads the stored list, node a stores its job before b writes: b's write is refused by ZooKeeper
    (the version it read is gone) and b edits the list again, a's job in it. Before: the last writer's list."""
    a = node("a")
    _join(a)
    _lead(a)
    b = node("b")
    _join(b)
    assert _rest(b, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]]})[0] == 202  # the znode exists
    client, reads, raced = b.app.coordinator.client, [], []
    real_get = client.get

    def get(path, *args, **kwargs):
        got = real_get(path, *args, **kwargs)
        if path.endswith("/shared/jobs") and not args and not kwargs:  # b's edit (its watch reads with a watcher)
            reads.append(path)
            if not raced:  # a's PUT lands between b's read and b's write
                raced.append(_rest(a, "PUT", "/mlroute/jobs/ring1", {"rings": [RINGS[1]]})[0])
        return got
    client.get = get
    try:
        status, body = _rest(b, "PUT", "/mlroute/jobs/ring2", {"rings": [RINGS[2]], "lease_s": 30})
    finally:
        del client.get
    assert status == 202 and raced == [202] and len(reads) == 2, (status, body, raced, reads)
    assert sorted(j["name"] for j in _stored(a)) == ["ring0", "ring1", "ring2"]
    until(lambda: _job_names(a) == _job_names(b) == ["ring0", "ring1", "ring2"])


def test_only_the_leader_ends_a_job_whose_lease_ran_out_and_a_renew_through_a_follower_keeps_it(node):
    from tests.clock import FakeClock

    a = node("a")
    _join(a)
    _lead(a)
    b = node("b")
    _join(b)
    clock = FakeClock(1.7e9)  # the wall clock every node stamps and judges leases by
    a.app.core.leases.clock = b.app.core.leases.clock = clock
    assert _rest(b, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 10})[0] == 202
    assert _rest(b, "PUT", "/mlroute/jobs/fixed", {"hosts": ["10.0.0.2"]})[0] == 202
    until(lambda: _job_names(a) == _job_names(b) == ["fixed", "ring0"])
    assert _stored(a)[0]["expires_at"] == 1.7e9 + 10  # the absolute expiry, in ZooKeeper
    clock.advance(8)
    status, body = _rest(b, "POST", "/mlroute/jobs/ring0/renew")
    assert status == 200 and body["job"]["expires_in_s"] == 10.0 and body["cluster"]["stored"]
    clock.advance(5)  # past the first lease, within the renewed one
    a.app._expire_jobs()
    assert [j["name"] for j in _stored(a)] == ["ring0", "fixed"]
    clock.advance(5)
    b.app._expire_jobs()  # a follower ends nothing
    assert [j["name"] for j in _stored(a)] == ["ring0", "fixed"]
    a.app._expire_jobs()
    assert [j["name"] for j in _stored(a)] == ["fixed"]
    until(lambda: _job_names(a) == _job_names(b) == ["fixed"])


def test_rest_answers_from_the_core_in_force_after_a_step_down(node, zookeeper):
    """A node that steps down starts over with a fresh core; the REST application made at start-up must answer
    from that one (before: it kept the first core, so a re-elected leader's REST showed stale elephants and its
    recompute calls waited for decisions nobody took, 503)."""
    from controller.web.rest import RestController

    a = node("a")
    _join(a)
    _lead(a)
    rest = RestController(a.app)
    first = a.app.core
    b = node("b")
    _join(b)
    _depose(zookeeper, a)
    until(lambda: b.app.roles.leading)
    _write_once_deposed(a)
    assert not a.app.roles.leading and a.app.core is not first
    assert rest.core is a.app.core
    res = Request.blank("/mlroute/topology").get_response(rest)
    assert res.status_code == 200 and json.loads(res.body)["links"] == []  # the fresh core's (nothing learnt yet)


def test_the_liveness_server_is_bound_on_the_rest_host_and_published_at_the_advertised_one(caplog):
    from controller.shell.cluster import _liveness

    assert _liveness("127.0.0.1", "http://127.0.0.1:8080", None) == {}  # liveness_port: null
    given = _liveness("127.0.0.1", "http://ctl-a.example:8080", 0)
    try:
        assert given["liveness_host"] == "ctl-a.example" and given["liveness"].host == "127.0.0.1"
        taken = given["liveness"].port
        assert _liveness("127.0.0.1", "http://127.0.0.1:8080", taken) == {}  # the port is taken: said, not raised
        assert f"liveness port 127.0.0.1:{taken} unavailable" in caplog.text
    finally:
        given["liveness"].close()
    wildcard = _liveness("0.0.0.0", "http://0.0.0.0:8080", 0)
    try:
        assert wildcard["liveness_host"] not in ("0.0.0.0", "")  # this host's own name: 0.0.0.0 reaches no peer
    finally:
        wildcard["liveness"].close()
