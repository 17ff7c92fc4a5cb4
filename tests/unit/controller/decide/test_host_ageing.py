"""Host ageing (controller.decide.host_ageing) on a fake clock, then through the app: silent bindings are probed, the
ones that answer stay, the others are forgotten and their rules leave the switches."""

from controller.decide.host_ageing import HostAgeing
from controller.decide.packet_in import PROBE_MAC
from controller.southbound.framework import arp, ethernet, packet
from controller.state.topology import UNKNOWN_MAC
from tests import topologies
from tests.clock import FakeClock
from tests.lab import Lab, arp_request, stop_apps

H1 = "10.0.0.1"


def ageing(**kw):
    topo = topologies.fat_tree(4)
    clock = FakeClock()
    return topo, clock, HostAgeing(topo, clock, **{"age_after_s": 60, "probes": 3, "probe_interval_s": 1, **kw})


def run(clock, age, seconds, answer=()):
    """Tick once a second for ``seconds``; hosts in ``answer`` reply to every probe, expired ones are forgotten
    (as the core does). Returns (probes, expired)."""
    probes, expired = [], []
    for _ in range(int(seconds)):
        clock.advance(1)
        sent, gone = age.tick()
        probes += sent
        expired += gone
        for host in gone:
            age.topology.forget_host(host.ip)
        for p in sent:
            if p.ip in answer:
                host = age.topology.hosts[p.ip]
                age.heard_from(p.ip, host.dpid, host.port, host.mac)
    return probes, expired


def test_a_silent_host_is_probed_and_forgotten_after_its_probes_go_unanswered():
    topo, clock, age = ageing()
    h1 = topo.hosts[H1]
    assert age.tick() == ([], [])  # every binding starts its clock
    probes, expired = run(clock, age, 59)
    assert probes == [] and expired == []
    probes, expired = run(clock, age, 5, answer=set(topo.hosts) - {H1})
    assert len([p for p in probes if p.ip == H1]) == 3
    assert (probes[0].dpid, probes[0].port, probes[0].mac) == (h1.dpid, h1.port, h1.mac)
    assert expired == [h1]  # only h1: the others answered their probe
    assert H1 not in age.probing and H1 not in age.heard


def test_a_host_that_answers_or_sends_traffic_stays():
    topo, clock, age = ageing()
    age.tick()
    h1 = topo.hosts[H1]
    for _ in range(5):
        run(clock, age, 50)
        age.heard_from(H1, h1.dpid, h1.port)  # counting-rule bytes from its port
    probes, expired = run(clock, age, 30, answer=set(topo.hosts))
    assert H1 not in {p.ip for p in probes} and expired == []


def test_a_packet_from_another_port_or_mac_is_no_sign_of_life():
    topo, clock, age = ageing()
    age.tick()
    h1 = topo.hosts[H1]
    run(clock, age, 55)
    age.heard_from(H1, h1.dpid, h1.port + 1, h1.mac)  # someone else's port claiming h1's address
    age.heard_from(H1, h1.dpid, h1.port, "02:00:00:00:00:99")  # another MAC at h1's port
    _, expired = run(clock, age, 10, answer=set(topo.hosts) - {H1})
    assert expired == [h1]


def test_a_recovered_binding_without_a_mac_is_refreshed_by_its_host_and_probed_by_broadcast():
    topo, clock, age = ageing()
    h1 = topo.hosts[H1]
    topo.forget_host(H1)
    topo.learn_host(H1, UNKNOWN_MAC, h1.dpid, h1.port)
    age.tick()
    run(clock, age, 59)
    probes, _ = run(clock, age, 1)
    assert [p.frame[:6] for p in probes if p.ip == H1] == [b"\xff" * 6]
    age.heard_from(H1, h1.dpid, h1.port, h1.mac)
    assert H1 not in age.probing


def test_probes_per_tick_are_bounded_longest_silence_first():
    topo, clock, age = ageing(max_probes_per_tick=4)
    age.tick()
    clock.advance(30)
    for ip in sorted(topo.hosts)[4:]:
        host = topo.hosts[ip]
        age.heard_from(ip, host.dpid, host.port)  # these spoke 30 s later than the first four
    clock.advance(60)
    probes, _ = age.tick()
    assert sorted(p.ip for p in probes) == sorted(topo.hosts)[:4]
    clock.advance(1)
    assert len(age.tick()[0]) == 4  # retries of those four come first; the rest wait their turn


def test_age_zero_never_ages():
    topo, clock, age = ageing(age_after_s=0)
    assert run(clock, age, 10_000) == ([], [])


def probe_answer(host):
    """What a Linux host sends for an RFC 5227 probe of its own address."""
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst=PROBE_MAC, src=host.mac, ethertype=0x0806))
    p.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=host.mac, src_ip=host.ip, dst_mac=PROBE_MAC,
                           dst_ip="0.0.0.0"))
    p.serialize()
    return bytes(p.data)


def test_addresses_claimed_and_dropped_by_a_host_age_out_with_their_rules_and_real_hosts_stay():
    ref = topologies.fat_tree(4)
    lab = Lab(ref)
    core = lab.app.core
    clock = FakeClock(1000.0)
    core.clock = clock
    lab.bring_up()
    baseline = {d: dict(sw.table.flows) for d, sw in lab.switches.items()}
    h1 = ref.hosts[H1]
    forged = [f"10.9.0.{i}" for i in range(1, 21)]
    for ip in forged:  # h1 announces 20 addresses it does not hold (it will not answer probes for them)
        fake = type(h1)(ip, h1.mac, h1.dpid, h1.port)
        lab.packet_in(h1.dpid, h1.port, arp_request(fake, ip))
    lab.app.resync()
    assert set(forged) <= set(core.topology.hosts)
    assert sum(len(sw.table.flows) for sw in lab.switches.values()) > sum(map(len, baseline.values()))
    age = core.ageing
    for _ in range(int(age.age_after_s + (age.probes + 2) * age.probe_interval_s) + 2):
        clock.advance(1)
        outs = {d: len(sw.packet_outs) for d, sw in lab.switches.items()}
        lab.app._send_actions(core.housekeeping().actions)
        for d, sw in lab.switches.items():  # the real hosts answer their probes; nobody answers for the forged
            for out in sw.packet_outs[outs[d]:]:
                target = packet.Packet(out.data).get_protocol(arp.arp).dst_ip
                if target in ref.hosts:
                    host = ref.hosts[target]
                    lab.packet_in(host.dpid, host.port, probe_answer(host))
        lab.app.resync()
    assert sorted(core.topology.hosts) == sorted(ref.hosts)
    assert {d: dict(sw.table.flows) for d, sw in lab.switches.items()} == baseline  # their rules are gone
    assert core.metrics.hosts_aged._value.get() == len(forged)
    stop_apps()
