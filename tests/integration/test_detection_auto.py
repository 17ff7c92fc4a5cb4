"""te.detection: auto with the real controller, Open vSwitch and Mininet: every switch of the k=4 fat-tree runs the
generic-of13 profile (plain OpenFlow 1.3 copies, no groups, paced flow-mods) with every table capped by Open
vSwitch's flow_limit (overflow refused), and exports 1-in-64 sFlow to the controller. Each switch starts on flow
stats and moves to sFlow once its export is heard; then a minute of short TCP connections (20 kB each, 50 ms
apart) h13 -> h15 runs beside the 8 stride elephants. The scenario runs once (a module fixture); the tests read
what it recorded: no short connection is ever an elephant, the elephants are all pinned, every switch shows
sflow in GET /mlroute/switches all along, and no table ever holds more than its cap (no TABLE_FULL, nothing held
back)."""

import re
import threading
import time
from dataclasses import dataclass, field

import pytest

from controller.desired.rules import COOKIE_FLOW
from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.emulation import enable_sflow, free_port, sflow_config
from mlroute.experiment.traffic import Iperf3Flows, ShortConnections
from tests.integration.flowtables import bridges, dump_flows
from tests.integration.harness import STRIDE4, ping_all, te_config, wait_until

SAMPLING = 64
SECONDS = 60
TABLE_CAP = 40  # per table, every switch: group-free forwarding needs 27 in table 1; auto's table 0 about 20
SHORT_PORT = 7000
BASE_PORT = 5300  # the elephants' iperf3 server ports (Iperf3Flows' default)
GENERIC = 'switches:\n  - description: ".*"\n    profile: generic-of13\n'
FALSE_IN_LOG = re.compile(rf"elephant FlowKey\([^)]*(src|dst)_port={SHORT_PORT}\)")


@dataclass
class Minute:
    """What the minute of short connections beside the elephants left behind."""

    moved_s: float  # from sFlow switched on until every switch showed sflow
    opened: int = 0  # short connections made
    false: set = field(default_factory=set)  # short connections REST showed as elephants (src, dst port)
    pinned_at: dict = field(default_factory=dict)  # elephant server port -> seconds until REST showed it pinned
    detections: set = field(default_factory=set)  # every detection REST showed for a switch during the minute
    most: dict = field(default_factory=dict)  # (bridge, table) -> most entries seen
    counted_short: int = 0  # counting entries for a short connection seen in a table
    mbps: list = field(default_factory=list)  # the elephants' iperf3 rates
    log: str = ""
    metrics: dict = field(default_factory=dict)


def watch_tables(fab, minute, done):
    """Every second: each table's entries per switch (the most kept), and counting entries for short ones."""
    names = list(bridges(fab).values())
    while not done.is_set():
        for name in names:
            rules = dump_flows(name)
            for table in {r["table"] for r in rules}:
                n = sum(1 for r in rules if r["table"] == table)
                minute.most[(name, table)] = max(minute.most.get((name, table), 0), n)
            minute.counted_short += sum(1 for r in rules if r["cookie"] == COOKIE_FLOW
                                        and str(SHORT_PORT) in r["match"].values())
        done.wait(1.0)


@pytest.fixture(scope="module")
def minute(fabric_factory):
    port = free_port()
    fab = fabric_factory(FatTreeTopo(k=4, bw=10),
                         te_config("mlroute", "  detection: auto\n" + sflow_config(port) + GENERIC),
                         jumbo=True, table_limit=TABLE_CAP)
    ctl = fab.controller
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    shown = lambda: {s["dpid"]: s["detection"] for s in ctl.get("/mlroute/switches")["switches"]}  # noqa: E731
    assert set(shown().values()) == {"flowstats"}, shown()  # before any export
    enable_sflow(fab.net, port, SAMPLING)
    began = time.time()
    moved = wait_until(lambda: len(shown()) == 20 and set(shown().values()) == {"sflow"} or None, timeout=30,
                       interval=0.5)
    assert moved, shown()
    result = Minute(moved_s=time.time() - began)
    done = threading.Event()
    watcher = threading.Thread(target=watch_tables, args=(fab, result, done), daemon=True)
    watcher.start()
    shorts = ShortConnections(fab.net, "h13", "h15", SECONDS, port=SHORT_PORT)
    started = time.time()
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=SECONDS + 5, base_port=BASE_PORT)
    try:
        while time.time() - started < SECONDS:
            for e in ctl.get("/mlroute/elephants"):
                if SHORT_PORT in (e["src_port"], e["dst_port"]) and e["proto"] != 0:
                    result.false.add((e["src_port"], e["dst_port"]))
                elif e["path"] and BASE_PORT <= e["dst_port"] < BASE_PORT + len(STRIDE4):
                    result.pinned_at.setdefault(e["dst_port"], round(time.time() - started, 1))
            result.detections |= set(shown().values())
            time.sleep(0.5)
        result.opened = shorts.opened()
    finally:
        result.mbps = flows.results_mbps()
        done.set()
        watcher.join(timeout=30)
        shorts.stop()
    result.log = ctl.log()
    result.metrics = {
        "openflow_errors": ctl.metric("mlroute_openflow_errors_total"),
        "over_budget": ctl.metric("mlroute_rules_over_budget"),
        "uncounted_table_full": ctl.metric("mlroute_flows_uncounted_total", {"reason": "table_full"}),
        "newflow_packet_ins": ctl.metric("mlroute_packet_in_total", {"kind": "newflow"}),
        "on_sflow": ctl.metric("mlroute_switches_by_detection", {"detection": "sflow"}),
        "on_flowstats": ctl.metric("mlroute_switches_by_detection", {"detection": "flowstats"}),
    }
    print(f"\nauto: every switch on sFlow {result.moved_s:.1f} s after its export began; {result.opened} short "
          f"connections in {SECONDS} s, {len(result.false)} false elephants; elephants pinned at "
          f"{sorted(result.pinned_at.values())}; most entries per table {max(result.most.values(), default=0)} "
          f"(cap {TABLE_CAP}); {result.metrics}; iperf3 {result.mbps} Mb/s")
    return result


def test_a_minute_of_short_connections_makes_no_false_elephant(minute):
    assert minute.opened >= 10 * SECONDS, minute.opened  # (1,100 a minute measured under sflow)
    assert minute.false == set()
    assert not FALSE_IN_LOG.search(minute.log), FALSE_IN_LOG.search(minute.log)
    assert minute.counted_short == 0  # no counting rule for any of them: their switch detects by samples


def test_the_elephants_beside_them_are_all_pinned(minute):
    assert len(minute.pinned_at) == len(STRIDE4), minute.pinned_at
    assert min(minute.mbps) > 0, minute.mbps


def test_every_switch_shows_sflow_detection_all_along(minute):
    assert minute.detections == {"sflow"}
    assert minute.metrics["on_sflow"] == 20 and minute.metrics["on_flowstats"] == 0
    assert minute.metrics["newflow_packet_ins"] == 0  # no copy rules left at any host port


def test_no_table_holds_more_than_its_cap(minute):
    assert minute.most and max(minute.most.values()) <= TABLE_CAP, minute.most
    assert minute.metrics["openflow_errors"] == 0, minute.log[-3000:]  # no TABLE_FULL, nothing refused
    assert minute.metrics["over_budget"] == 0 and minute.metrics["uncounted_table_full"] == 0
