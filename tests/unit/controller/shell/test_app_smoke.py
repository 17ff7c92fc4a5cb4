"""The Ryu app itself, driven without a network (like Faucet's test_valveapp_smoke): synthetic Ryu events
(switch enter, link add, packet-in, multipart stats, flow-removed) into ``MlrouteApp``; fake switches that
consume its real OpenFlow messages; forwarding checked by tracing packets through what the switches hold."""

import time
from types import SimpleNamespace

import pytest

from controller.desired.rules import COOKIE_ELEPHANT, COOKIE_FLOW, COOKIE_FLOW_MISS, TABLE_SEEN
from controller.southbound import framework as southbound
from controller.southbound.framework import arp, ofp_event, packet
from controller.state.flowkey import FlowKey
from tests import topologies
from tests.clock import FakeClock
from tests.decision_steps import te_step
from tests.fakeswitch import PARSER, FakeSwitch
from tests.lab import (
    STRIDE4,
    STRIDE4_V6,
    Lab,
    arp_request,
    counting_stat,
    pin_stride4,
    poll,
    stop_apps,
    tcp_packet,
)
from tests.oftable import trace

switches, topo_event = southbound.topology()  # Ryu's or os-ken's topology app
Switch, Link = switches.Switch, switches.Link


@pytest.fixture
def lab():
    lab = Lab(topologies.fat_tree(4))
    lab.bring_up()
    yield lab
    stop_apps()


def test_every_host_reaches_every_other_through_the_rules_the_switches_received(lab):
    hosts = sorted(lab.ref.hosts)
    assert sorted(lab.app.core.topology.hosts) == hosts
    for src in hosts:
        for dst in hosts:
            if src != dst:
                t = lab.trace(src, dst)
                want = lab.ref.hosts[dst]
                assert t.delivered == {(want.dpid, want.port)} and not t.looped and not t.dropped, (src, dst)


def test_arp_for_a_known_host_is_answered_by_packet_out(lab):
    h1, h2 = lab.ref.hosts["10.0.0.1"], lab.ref.hosts["10.0.0.2"]
    lab.packet_in(h1.dpid, h1.port, arp_request(h1, h2.ip))
    out = lab.switches[h1.dpid].packet_outs[-1]
    assert out.actions[0].port == h1.port
    reply = packet.Packet(out.data).get_protocol(arp.arp)
    assert (reply.opcode, reply.src_ip, reply.src_mac) == (arp.ARP_REPLY, h2.ip, h2.mac)


def test_elephants_from_multipart_stats_are_pinned_on_disjoint_paths_in_the_switch_tables(lab):
    result = pin_stride4(lab)
    assert result.applied and len(result.moved) == 8
    assert any(r.cookie == COOKIE_ELEPHANT for sw in lab.switches.values() for r in sw.table.flows.values())
    used = []
    for key in STRIDE4:
        t = lab.trace(key.src_ip, key.dst_ip, ip_proto=6, tcp_src=key.src_port, tcp_dst=key.dst_port)
        assert len(t.paths) == 1 and tuple(t.paths[0]) == lab.app.core.te.pinned[key]
        used += list(zip(t.paths[0], t.paths[0][1:]))
    assert len(used) == len(set(used))  # no directed link shared


def test_ipv6_elephants_are_counted_from_their_copies_and_pinned_on_disjoint_paths_beside_ipv4():
    """Dual stack: each IPv6 TCP flow's copy (real frame bytes) gets its counting rule, the polls find the
    elephants, and the decision pins IPv6 and IPv4 stride elephants alike; each traces along its pin."""
    lab = Lab(topologies.dual_stack(topologies.fat_tree(4)))
    lab.bring_up()
    try:
        src = lab.ref.hosts[STRIDE4_V6[0].src_ip]
        lab.packet_in(src.dpid, src.port, tcp_packet(STRIDE4_V6[0]), cookie=COOKIE_FLOW_MISS)
        counting = [r for r in lab.switches[src.dpid].table.flows.values() if r.cookie == COOKIE_FLOW]
        assert [dict(r.match) for r in counting] == [{
            "eth_type": 0x86DD, "in_port": src.port, "ip_proto": 6, "ipv6_src": "fd00::a00:1",
            "ipv6_dst": "fd00::a00:5", "tcp_src": 40000, "tcp_dst": 5201}]
        result = pin_stride4(lab, STRIDE4_V6 + STRIDE4)
        assert result.applied and set(lab.app.core.te.pinned) == set(STRIDE4_V6 + STRIDE4)
        for keys in (STRIDE4_V6, STRIDE4):
            used = []
            for key in keys:
                t = lab.trace(key.src_ip, key.dst_ip, ip_proto=6, tcp_src=key.src_port, tcp_dst=key.dst_port)
                dst = lab.ref.hosts[key.dst_ip]
                assert t.delivered == {(dst.dpid, dst.port)} and tuple(t.paths[0]) == lab.app.core.te.pinned[key]
                used += list(zip(t.paths[0], t.paths[0][1:]))
            assert len(used) == len(set(used))  # no directed link shared among one family's 8 elephants
    finally:
        stop_apps()


def test_a_restarted_controller_relearns_hosts_flows_and_pins_from_the_tables_without_touching_them(lab):
    pin_stride4(lab)
    pinned, held = dict(lab.app.core.te.pinned), {d: dict(sw.table.flows) for d, sw in lab.switches.items()}
    mods = sum(sw.flow_mods for sw in lab.switches.values())
    new = lab.restart()
    new.reconnect_all()
    core = new.app.core
    assert {ip: (h.dpid, h.port) for ip, h in core.topology.hosts.items()} == \
        {ip: (h.dpid, h.port) for ip, h in lab.ref.hosts.items()}
    assert set(core.accounting) == set(STRIDE4)
    poll(new, STRIDE4, 8)  # one poll after the restart
    result = te_step(core, wait=True)
    assert core.te.pinned == pinned and not result.moved
    core.recovery_ends = 0  # recovery over: from now on the diff may modify and delete
    new.app.resync()
    assert sum(sw.flow_mods for sw in new.switches.values()) == mods, "the restart changed rules on switches"
    assert {d: dict(sw.table.flows) for d, sw in new.switches.items()} == held


def test_a_restarted_controller_adds_no_forwarding_on_links_found_so_far(lab):
    """The restart's churn (CI's failed restart run): before LLDP has found the fabric, the links seen so far make
    no Clos and their plan is shortest paths over them; its per-host entries used to be added above the compact
    plan's host-port defaults of every switch (live: 315 rule changes 0.6 s after the restart, 295 more when
    recovery ended, the aggregate at 0.7-0.8 of its rate for a 3-s window). Now a switch read back forwarding
    keeps it, and once every link is known there is nothing to change."""
    pin_stride4(lab)
    held = {d: (dict(sw.table.flows), dict(sw.table.groups)) for d, sw in lab.switches.items()}
    new = lab.restart()
    for dpid in new.switches:
        new.connect(dpid)
    new.pump()
    links = list(lab.ref.links.values())
    for found in (0, len(links) // 3):  # none yet, then a third of them
        for link in links[:found]:
            new.app.link_add(topo_event.EventLinkAdd(Link(new._port(link.src, link.src_port),
                                                          new._port(link.dst, link.dst_port))))
        new.app.resync()
        assert not new.app.core.tiers.is_clos
        for dpid, sw in new.switches.items():
            flows, groups = held[dpid]
            assert {k: r for k, r in sw.table.flows.items() if r.table == 1} == \
                {k: r for k, r in flows.items() if r.table == 1} and sw.table.groups == groups, dpid
    new.discover_links()
    new.app.resync()
    poll(new, STRIDE4, 8)  # the elephants still busy: their pins stay
    te_step(new.app.core, wait=True)
    new.app.core.recovery_ends = 0
    new.app.resync()
    assert {d: (dict(sw.table.flows), dict(sw.table.groups)) for d, sw in new.switches.items()} == held


def test_flow_removed_takes_the_flow_out_of_accounting(lab):
    key = FlowKey("10.0.0.1", "10.0.0.9", 6, 40000, 5201)
    src = lab.ref.hosts[key.src_ip]
    lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)
    lab.app.resync()
    assert key in lab.app.core.accounting
    assert any(r.cookie == COOKIE_FLOW for r in lab.switches[src.dpid].table.flows.values())
    removed = PARSER.OFPFlowRemoved(lab.switches[src.dpid], cookie=COOKIE_FLOW, priority=20, reason=0, table_id=0,
                                    duration_sec=10, duration_nsec=0, idle_timeout=10, hard_timeout=0,
                                    packet_count=1, byte_count=1,
                                    match=counting_stat(key, src.port, 0, 0).match)
    lab.app.flow_removed(ofp_event.EventOFPFlowRemoved(removed))
    assert key not in lab.app.core.accounting


def test_a_reconnecting_switch_is_read_back_and_nothing_still_right_is_resent(lab):
    edge = lab.ref.hosts["10.0.0.1"].dpid
    sw = lab.switches[edge]
    held = dict(sw.table.flows), dict(sw.table.groups)
    lab.disconnect(edge)
    before = sw.flow_mods
    lab.connect(edge)
    lab.app.resync()  # nothing is sent before the switch reported its tables
    assert sw.flow_mods == before
    lab.pump()
    lab.app.resync()
    assert sw.flow_mods == before, "a hitless reconnect re-sends or deletes nothing that is still right"
    assert (dict(sw.table.flows), dict(sw.table.groups)) == held


def test_a_reconnecting_switch_with_stale_rules_gets_only_the_difference(lab):
    edge = lab.ref.hosts["10.0.0.1"].dpid
    sw = lab.switches[edge]
    lab.disconnect(edge)
    victim = next(k for k, r in sw.table.flows.items() if r.table == 1 and r.priority > 1)  # a forwarding entry
    del sw.table.flows[victim]  # lost while disconnected
    before = sw.flow_mods
    lab.connect(edge)
    lab.pump()
    lab.app.resync()
    assert sw.flow_mods == before + 1 and victim in sw.table.flows


def test_malformed_replies_do_not_disturb_the_controller(lab):
    broken = PARSER.OFPFlowStatsReply(lab.switches[lab.ref.hosts["10.0.0.1"].dpid])
    broken.xid, broken.flags, broken.body = 1, 0, [object()]
    lab.app.flow_stats_reply(ofp_event.EventOFPFlowStatsReply(broken))  # logged and skipped
    lab.packet_in(lab.ref.hosts["10.0.0.1"].dpid, 1, b"\x00garbage")
    t = lab.trace("10.0.0.1", "10.0.0.16")
    assert t.delivered == {(lab.ref.hosts["10.0.0.16"].dpid, lab.ref.hosts["10.0.0.16"].port)}


def test_a_new_transport_flow_gets_its_counting_rule_at_once_and_the_resync_sends_nothing_more(lab):
    key = FlowKey("10.0.0.1", "10.0.0.9", 6, 40001, 5201)
    src = lab.ref.hosts[key.src_ip]
    before = {d: sw.flow_mods for d, sw in lab.switches.items()}
    lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)
    sent = {d: sw.flow_mods - before[d] for d, sw in lab.switches.items() if sw.flow_mods != before[d]}
    assert sent == {src.dpid: 1}  # one flow-mod, straight from the packet-in handler
    assert any(r.cookie == COOKIE_FLOW for r in lab.switches[src.dpid].table.flows.values())
    lab.packet_in(src.dpid, src.port, tcp_packet(key), cookie=COOKIE_FLOW_MISS)  # a copy already in flight
    lab.app.resync()
    assert lab.switches[src.dpid].flow_mods == before[src.dpid] + 1


def test_a_switch_that_loses_its_controller_is_not_a_topology_change(lab):
    agg = next(d for d, t in lab.app.core.tiers.tiers.items() if t == "aggregation")
    edge = lab.ref.hosts["10.0.0.1"].dpid
    before = {d: sw.flow_mods for d, sw in lab.switches.items()}
    lab.disconnect(agg)
    lab.disconnect(edge)
    lab.app.resync()
    assert {d: sw.flow_mods for d, sw in lab.switches.items()} == before, "other switches' routes moved"
    assert sorted(lab.app.core.topology.hosts) == sorted(lab.ref.hosts)  # its hosts are not forgotten
    t = lab.trace("10.0.0.1", "10.0.0.16")  # the disconnected switches still forward with what they hold
    assert t.delivered == {(lab.ref.hosts["10.0.0.16"].dpid, lab.ref.hosts["10.0.0.16"].port)}


def test_arp_for_known_hosts_is_answered_in_the_data_plane_without_the_controller(lab):
    h1, h9 = lab.ref.hosts["10.0.0.1"], lab.ref.hosts["10.0.0.9"]
    request = {"eth_type": 0x0806, "eth_src": h1.mac, "arp_op": 1, "arp_sha": h1.mac, "arp_spa": h1.ip,
               "arp_tpa": h9.ip}
    t = trace(lab.tables(), lab.ref, h1.dpid, h1.port, request)
    assert t.delivered == {(h9.dpid, h9.port)} and not t.looped  # straight to the target, never flooded
    assert t.to_controller == [h1.dpid]  # copied once, where it entered the fabric: not once per hop
    reply = {"eth_type": 0x0806, "eth_src": h9.mac, "arp_op": 2, "arp_sha": h9.mac, "arp_spa": h9.ip,
             "arp_tpa": h1.ip}
    assert trace(lab.tables(), lab.ref, h9.dpid, h9.port, reply).delivered == {(h1.dpid, h1.port)}
    unknown = dict(request, arp_tpa="10.0.0.200")
    assert trace(lab.tables(), lab.ref, h1.dpid, h1.port, unknown).delivered == set()  # the controller asks


def test_the_leave_of_an_old_connection_after_a_reconnect_changes_nothing(lab):
    edge = lab.ref.hosts["10.0.0.1"].dpid
    old = lab.switches[edge]
    fresh = FakeSwitch(edge, lab._deliver)
    fresh.table = old.table  # the same switch, a new OpenFlow connection
    lab.switches[edge] = fresh
    lab.connect(edge)
    lab.pump()
    lab.app.switch_leave(topo_event.EventSwitchLeave(Switch(old)))  # Ryu reports the old one leaving late
    assert edge in lab.app.core.connected and lab.app.datapaths[edge] is fresh


def brand_x_lab(switch=1000):
    ref = topologies.fat_tree(4)
    switches = {d: FakeSwitch(d) for d in ref.ports}
    switches[switch].desc = (b"Brand X", b"9000")
    return Lab(ref, switches)


def test_by_default_a_switch_that_is_not_open_vswitch_copies_new_flows_with_plain_openflow(caplog):
    lab = brand_x_lab()
    with caplog.at_level("INFO", logger="mlroute"):
        lab.bring_up()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    said = "switch 1000 (Brand X / 9000): profile generic-of13, new flows copied with plain OpenFlow 1.3"
    assert any(said in r.getMessage() for r in caplog.records)
    assert not any(r.table == TABLE_SEEN for r in lab.switches[1000].table.flows.values())
    for src, copies in (("10.0.0.1", [1000, 1000]), ("10.0.0.5", [1100])):  # 10.0.0.1 is behind Brand X
        got = [d for _ in range(2) for d in lab.trace(src, "10.0.0.16", ip_proto=6, tcp_src=40000,
                                                      tcp_dst=80).to_controller]
        assert got == copies
    stop_apps()


def test_a_forced_learn_names_a_switch_that_is_not_open_vswitch_with_the_setting_to_change(caplog, tmp_path,
                                                                                           monkeypatch):
    config = tmp_path / "mlroute.yaml"
    config.write_text("te:\n  flow_copy: learn\n")
    monkeypatch.setenv("MLROUTE_CONFIG", str(config))
    lab = brand_x_lab()
    with caplog.at_level("ERROR", logger="mlroute"):
        lab.bring_up()
    problems = [r.getMessage() for r in caplog.records if "te.flow_copy" in r.getMessage()]
    assert len(problems) == 1 and "switch 1000 (Brand X / 9000)" in problems[0]
    stop_apps()

def test_a_recovered_pin_whose_flow_ends_before_its_first_poll_is_forgotten_and_its_hops_go(lab):
    pin_stride4(lab)
    new = lab.restart()
    new.reconnect_all()
    core, key = new.app.core, STRIDE4[0]
    assert key in core.recovered.hops
    src = lab.ref.hosts[key.src_ip]
    removed = PARSER.OFPFlowRemoved(new.switches[src.dpid], cookie=COOKIE_FLOW, priority=20, reason=0, table_id=0,
                                    duration_sec=10, duration_nsec=0, idle_timeout=10, hard_timeout=0,
                                    packet_count=1, byte_count=1, match=counting_stat(key, src.port, 0, 0).match)
    new.app.flow_removed(ofp_event.EventOFPFlowRemoved(removed))
    assert key not in core.recovered.hops and key not in core.recovered.counting
    core.recovery_ends = 0
    new.app.resync()
    held = [r for sw in new.switches.values() for r in sw.table.flows.values()
            if r.cookie == COOKIE_ELEPHANT and dict(r.match).get("tcp_src") == key.src_port]
    assert held == []  # its pinned hops above the ingress are deleted once recovery is over


def test_with_sflow_detection_the_app_collects_datagrams_copies_nothing_and_stops_its_collector(tmp_path,
                                                                                                monkeypatch):
    import socket
    import time

    from controller.southbound.sflow.decoder import decode
    from mlroute.experiment.emulation import free_port
    from tests.sflow_datagrams import counter_sample, datagram, if_counters_record, openflow_port_record

    port = free_port()
    config = tmp_path / "mlroute.yaml"
    config.write_text(f"te:\n  detection: sflow\nsflow:\n  port: {port}\n")
    monkeypatch.setenv("MLROUTE_CONFIG", str(config))
    lab = Lab(topologies.fat_tree(4))
    lab.bring_up()
    try:
        assert not [r for sw in lab.switches.values() for r in sw.table.flows.values()
                    if r.cookie == COOKIE_FLOW_MISS or r.table == TABLE_SEEN]  # no new-flow copies anywhere
        lab.app._start_sflow()
        southbound.kill(lab.app._threads.pop())  # (the test ticks the core itself)
        sample = counter_sample([if_counters_record(if_index=42), openflow_port_record(1000, 1)])
        data = datagram([sample], agent="127.0.0.1")
        decode(data)  # (well-formed)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(data, ("127.0.0.1", port))
        deadline = time.monotonic() + 5
        while lab.app.collector.stats()["decoded"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lab.app.collector.stats()["decoded"] == 1
        assert lab.app.core.sflow.agents.port_of("127.0.0.1", 0, 42) == (1000, 1)  # learned from it
        assert lab.app.core.sflow.ingest.counter_samples == 1
        assert isinstance(lab.app.links_json(), list)  # the link view reads the counter samples
        # a cluster node that steps down starts over with a new core: the collector learns into that one's map
        lab.app._new_core(lab.app.core.runner, metrics=lab.app.core.metrics)
        lab.app.core.switch_connected(1000, [1])  # (its map accepts ports of switches it knows)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(data, ("127.0.0.1", port))
        deadline = time.monotonic() + 5
        while lab.app.collector.stats()["decoded"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lab.app.core.sflow.agents.port_of("127.0.0.1", 0, 42) == (1000, 1)
    finally:
        collector = lab.app.collector
        lab.app.release()
        stop_apps()
    assert lab.app.collector is None and collector.sock.fileno() < 0


def test_a_sync_step_waits_for_barriers_once_in_all_not_once_per_switch(lab, monkeypatch):
    """Switches that answer barriers late cost a step BARRIER_TIMEOUT_S in all. Before, each switch got its own
    timeout, one after the other: live at k=8 a busy Open vSwitch held a step, and the tiers of every topology
    change behind it, for over a minute. (The clock and the waits are the test's: each wait takes the time it
    is given, and nothing answers.)"""
    from controller.shell import loops as app_loops

    clock = FakeClock(100.0)
    waits = []

    class SilentEvent:  # a barrier reply that never comes: the wait lasts its whole timeout
        def set(self):
            raise AssertionError("no switch answers")

        def wait(self, timeout=None):
            waits.append(timeout)
            clock.advance(timeout)
            return False

    monkeypatch.setattr(app_loops, "time", SimpleNamespace(monotonic=clock))
    monkeypatch.setattr(app_loops.southbound, "Event", SilentEvent)
    silent = []
    for dpid in sorted(lab.switches)[:10]:
        sw = FakeSwitch(dpid)
        sw.deliver = lambda name, msg: None  # never answers (its barrier reply is lost or late)
        silent.append(sw)
    started = clock()
    lab.app._barrier(silent)
    assert len(waits) == 10 and waits[0] == app_loops.BARRIER_TIMEOUT_S and waits[1:] == [0.0] * 9, waits
    assert clock() - started == app_loops.BARRIER_TIMEOUT_S, "one timeout in all"
    assert not lab.app._barriers, "a late reply finds no event to wake"


def test_a_core_replaced_mid_decision_still_decides_with_the_same_worker(lab):
    """A cluster node that steps down starts over with a fresh core and the same optimiser worker; a decision
    in flight then belongs to no core. Before, nothing read its answer: the worker stayed busy and the node
    never decided again (no decision, no warning). The decision loop's ticks now read and drop it."""
    core = lab.app.core
    runner = core.runner
    assert runner.wait_ready(60)
    core.request_decision()
    core.decision_tick()
    assert runner.busy, "a decision in flight"
    lab.app._new_core(runner, metrics=core.metrics)  # as shell.cluster._step_down does
    fresh = lab.app.core
    fresh.request_decision()
    deadline = time.monotonic() + 30
    while fresh.decisions.decisions == 0 or fresh.decisions.busy:  # the decision loop's ticks
        assert time.monotonic() < deadline, "the fresh core never decided"
        fresh.decision_tick()
        time.sleep(0.02)
    assert fresh.decisions.decisions == 1 and not runner.busy


def test_a_stuck_decision_loop_is_reported_with_where_it_is_stuck(lab, caplog):
    """The decision loop's own warnings (worker not ready, decision late) cannot fire from a loop that is stuck:
    the lag loop's watchdog says so, with the loop's stack (a CI run's new cluster leader once decided nothing
    for a minute, leaving no trace)."""
    from controller.shell import loops as app_loops

    release = southbound.Event()

    def stuck_in_a_wait_nobody_ends():
        release.wait(timeout=30)

    thread = southbound.spawn(stuck_in_a_wait_nobody_ends)
    southbound.sleep(0.01)  # it runs into its wait
    try:
        lab.app._decision_thread = thread
        lab.app._decision_ticked = time.monotonic() - app_loops.DECISION_STALL_S - 1
        lab.app._check_decision_loop()
        assert "decision loop" not in caplog.text  # nothing wanted: a quiet loop is not stuck
        lab.app.core.request_decision()
        with caplog.at_level("WARNING", logger="mlroute"):
            lab.app._check_decision_loop()
            lab.app._check_decision_loop()  # once a minute, not at every lag tick
        assert caplog.text.count("the decision loop has not come round") == 1, caplog.text
        assert "stuck_in_a_wait_nobody_ends" in caplog.text
        lab.app._decision_ticked = time.monotonic()  # it came round: nothing to say
        caplog.clear()
        lab.app._stall_log = type(lab.app._stall_log)(time.monotonic)
        lab.app._check_decision_loop()
        assert "decision loop" not in caplog.text
    finally:
        release.set()
        southbound.sleep(0.01)
