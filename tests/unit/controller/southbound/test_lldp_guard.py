"""LLDP that cannot move links: the verdict on claims, the guard's counting and logging, and the patched handler
of a stand-in for Ryu's Switches class (fed packet-in events as Ryu would)."""

import logging
from types import SimpleNamespace

from controller.southbound import lldp_guard
from controller.southbound.lldp_guard import CONFIRMED_RECEIVER, CONFIRMED_SOURCE, HOST_PORT, LldpGuard, verdict
from tests import topologies


def _fabric():
    """A k=4 fat-tree with hosts, and one confirmed link (both directions) and one host port of it."""
    topo = topologies.fat_tree(4)
    link = topo.live_links()[0]
    host = next(iter(topo.hosts.values()))
    return topo, (link.src, link.src_port), (link.dst, link.dst_port), (host.dpid, host.port)


def test_real_lldp_on_a_confirmed_link_is_admitted():
    topo, a, b, _ = _fabric()
    assert verdict(topo, a, b) is None and verdict(topo, b, a) is None


def test_a_frame_from_a_host_port_naming_a_real_switch_port_is_ignored():
    """The measured attack: h1 replays frames that name real fabric ports."""
    topo, a, b, host_port = _fabric()
    assert verdict(topo, a, host_port) == HOST_PORT
    assert verdict(topo, b, host_port) == HOST_PORT


def test_a_confirmed_link_cannot_be_moved_from_either_end():
    topo, a, b, _ = _fabric()
    other = next(x for x in topo.live_links()
                 if (x.src, x.src_port) not in (a, b) and (x.dst, x.dst_port) not in (a, b))
    c = (other.src, other.src_port)
    assert verdict(topo, a, c) == CONFIRMED_SOURCE  # a's link to b stays
    assert verdict(topo, c, b) == CONFIRMED_SOURCE  # c is confirmed too (to its own peer)
    unknown = (999, 1)  # a port the topology has no link for, claiming to reach b
    assert verdict(topo, unknown, b) == CONFIRMED_RECEIVER


def test_a_half_confirmed_link_can_be_relearned():
    """One direction timed out: its frames must get through, or the link could never come back."""
    topo, a, b, _ = _fabric()
    topo.remove_link(b[0], b[1], a[0], a[1])
    assert verdict(topo, b, a) is None and verdict(topo, a, b) is None


def test_guard_counts_every_refusal_and_logs_once_per_port_per_period(caplog):
    topo, a, b, host_port = _fabric()
    counted, now = [], [100.0]
    guard = LldpGuard(topo, counted.append, lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="mlroute"):
        for _ in range(50):
            assert not guard.admit(a, host_port)
        assert guard.admit(a, b)
        now[0] += lldp_guard.LOG_PERIOD_S
        assert not guard.admit(a, host_port)
    assert counted == [HOST_PORT] * 51
    assert sum("LLDP claiming" in r.message for r in caplog.records) == 2


class _Switches:
    """Stands in for ryu.topology.switches.Switches: one LLDP packet-in handler carrying Ryu's registration."""

    def __init__(self):
        self.seen = []

    def lldp_packet_in_handler(self, ev):
        self.seen.append(ev)

    lldp_packet_in_handler.callers = {"EventOFPPacketIn": "registered"}  # what set_ev_cls leaves on a handler


def _parse(data):
    if not data.startswith(b"lldp:"):
        raise ValueError("not LLDP")
    dpid, port = data[5:].split(b",")
    return int(dpid), int(port)


def _packet_in(data, dpid, port):
    return SimpleNamespace(msg=SimpleNamespace(data=data, datapath=SimpleNamespace(id=dpid), match={"in_port": port}))


def test_patched_handler_drops_refused_frames_before_ryu_sees_them():
    class Switches(_Switches):
        lldp_packet_in_handler = _Switches.lldp_packet_in_handler

    lldp_guard.install(Switches, _parse)
    lldp_guard.install(Switches, _parse)  # idempotent: Ryu's handler is wrapped once
    assert Switches.lldp_packet_in_handler.callers == {"EventOFPPacketIn": "registered"}
    # Ryu registers every method that carries subscriptions (handler.register_instance): only the guarded one
    import inspect

    registered = [name for name, m in inspect.getmembers(Switches(), inspect.ismethod) if hasattr(m, "callers")]
    assert registered == ["lldp_packet_in_handler"]
    app = Switches()
    topo, a, b, host_port = _fabric()
    forged = _packet_in(f"lldp:{a[0]},{a[1]}".encode(), *host_port)
    app.lldp_packet_in_handler(forged)
    assert app.seen == [forged]  # no guard yet (the owning app is not up): Ryu's behaviour
    counted = []
    Switches.lldp_guard = LldpGuard(topo, counted.append, lambda: 0.0)
    app.lldp_packet_in_handler(forged)
    real = _packet_in(f"lldp:{a[0]},{a[1]}".encode(), *b)
    other = _packet_in(b"\x00not lldp", *host_port)
    app.lldp_packet_in_handler(real)
    app.lldp_packet_in_handler(other)
    assert app.seen == [forged, real, other] and counted == [HOST_PORT]
