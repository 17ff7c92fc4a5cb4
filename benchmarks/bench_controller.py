#!/usr/bin/env python3
"""The controller's decision core at data-centre scale, in-process and without Ryu's event loop.

    python benchmarks/bench_controller.py            # fat-tree k = 8, 16, 24 and the 32x64x32 leaf-spine
    python benchmarks/bench_controller.py --quick    # fat-tree k = 4, 8 and a 4x8x4 leaf-spine, smaller TE/stats
    python benchmarks/bench_controller.py --topo fattree:16 --topo leafspine:32x64x32
    python benchmarks/bench_controller.py --tables   # entries per tier, rule changes per link failure (issue 20)

A ``ControllerCore`` is fed the events the Ryu shell would feed it (switches, links, hosts learned by ARP,
new-flow copies, link failures, flow-stats replies, poll ticks) and timed in CPU time (``time.process_time``,
garbage collection included, as in the controller). Every figure is also printed as a ratio to the *full
rebuild* measured in the same run: live graph + tier inference + ``sync.desired_state`` (the whole forwarding
plan and TE layer) + ``sync.plan_sync`` diffed on every switch, which is what every event cost before the
control plane became incremental.

Rows: first install (every rule sent to empty switches), a no-op resync, a new transport flow, a new host, an
aggregation-core (spine-leaf) link failure, TE decisions (first and second period, and a new set of elephants
on the same fabric) at 1k/10k elephants, a job's
arrival beside them (a 64-host ring declared: the decision the job event takes in the optimiser's worker, and the
full decision on the same inputs, the ratio between them printed; and the CPU from its PUT (the jobs set in the
core) to its last flow-mod compiled and serialised: the worker's decision and the event loop's share, with the rule
changes counted; the decision loop's 20-ms look for a decision that ended is not in it), and a
flow-stats poll of 10k/100k counting rules spread over the ingress switches. The poll starts from the reply
bytes a switch sends (OpenFlow 1.3 multipart, split at 64 KiB): Ryu's parser + the per-entry match read-out,
or ``controller.southbound.ofstats`` where it exists; then ``FlowMonitor.update``. Targets (issue 11): link failure at
k=24 <= 0.5 s, new transport flow <= 2 ms, TE decision at 10k elephants <= 1 s, 100k-entry poll <= 2 s.

``--tables`` (issue 20 item 3, compact forwarding): per fabric, with the fixtures' sequential addresses and with
pod-aligned ones (10.pod.edge.host; 10.leaf.0.host), the largest entry count per tier (the forwarding table,
table 1, and every table of the desired state) and the rule changes (flow and group adds, modifies, deletes) a
top-tier link failure costs, for the per-host plan (``forwarding.per_host_plan``, what every switch held
before) and the compact one, both computed in the same run; ratios are old / new. Targets: k=16 edge
<= 2 x its hosts + 16, pod-aligned every switch <= 8k + 32, failure changes >= 5x fewer than the per-host plan.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import struct
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller import config as mlconfig  # noqa: E402
from controller.core import ControllerCore, time_budget_s  # noqa: E402
from controller.decide import te  # noqa: E402
from controller.decide.optimiser_runner import OptimiserRunner  # noqa: E402
from controller.decide.packet_in import PacketIn  # noqa: E402
from controller.desired import forwarding, sync, te_rules  # noqa: E402
from controller.desired.rules import ETH_ARP, TABLE_FORWARD, diff_switch  # noqa: E402
from controller.southbound import ofmsg  # noqa: E402  (Ryu's parser: imported before anything is timed)
from controller.state.flowkey import PROTO_TCP, FlowKey  # noqa: E402
from controller.state.monitor import FlowState  # noqa: E402
from controller.state.tiers import infer_tiers  # noqa: E402
from mlroute.routing import kernels  # noqa: E402
from tests import topologies  # noqa: E402
from tests.decision_steps import te_step  # noqa: E402
from tests.fakeswitch import FakeSwitch  # noqa: E402
from tests.flowstats_bytes import counting_entry, replies  # noqa: E402

try:  # the fast flow-stats parser (issue 11); absent on older trees, where Ryu's parser is all there is
    from controller.southbound import ofstats
except ImportError:
    ofstats = None

ARP_REQUEST = 1


# -- fabrics -----------------------------------------------------------------------------------------------
def fixture(spec: str, aligned: bool = False):
    """``fattree:K`` or ``leafspine:SxLxH`` -> (name, Topology with every host learned); ``aligned``:
    pod-aligned addresses instead of the fixtures' sequential ones."""
    kind, _, size = spec.partition(":")
    if kind == "fattree":
        return f"fat-tree k={size}", topologies.fat_tree(int(size), aligned=aligned)
    if kind == "leafspine":
        spines, leaves, per_leaf = (int(x) for x in size.split("x"))
        return f"leaf-spine {size}", topologies.leaf_spine(spines, leaves, per_leaf, aligned=aligned)
    raise SystemExit(f"unknown topology {spec!r} (fattree:K or leafspine:SxLxH)")


class Yields:
    """The pause hook the Ryu shell gives the core (a green-thread yield there): here it records the longest
    stretch of CPU time the core ran without yielding, i.e. the longest event-loop step."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.last, self.longest = time.process_time(), 0.0

    def __call__(self):
        now = time.process_time()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def finish(self):
        self()
        return 1e3 * self.longest


def core_for(topo, held_back, yields, config=None, clock=time.monotonic):
    """A ControllerCore that learned ``topo`` through its own event calls, with its switches read back empty.
    ``held_back`` hosts are left unlearned (the new-host row learns one)."""
    config = config or mlconfig.load(None)
    try:
        core = ControllerCore(config, clock, pause=yields)
    except TypeError:  # a core without the pause hook (before issue 11): a sync is one event-loop step
        core = ControllerCore(config, clock)
    for dpid, ports in topo.ports.items():
        core.switch_connected(dpid, sorted(ports))
    for link in topo.links.values():
        core.link_added(link.src, link.src_port, link.dst, link.dst_port)
    for host in topo.hosts.values():
        if host.ip not in held_back:
            learn(core, host)
    for dpid in topo.ports:
        core.flows_read_back(dpid, [])
        core.groups_read_back(dpid, [])
    return core


def learn(core, host):
    core.packet(PacketIn(host.dpid, host.port, host.mac, "ff:ff:ff:ff:ff:ff", ETH_ARP, ARP_REQUEST, host.ip,
                         host.ip))  # a gratuitous ARP


def full_rebuild(core):
    """The reference: what every event cost before the incremental control plane (nothing is sent)."""
    graph = core.topology.graph()
    tiers = infer_tiers(graph, core.topology.access_switches(), core.config["tiers"])
    copy = getattr(getattr(core, "plan", None), "copy", None)  # how new flows are copied (te.flow_copy)
    desired = sync.desired_state(core.topology, tiers, core.accounting, core.te.pinned,
                                 stagger=core.config["te"]["ecmp_stagger"],
                                 idle_timeout=core.config["te"]["flow_idle_timeout_s"], graph=graph,
                                 **({} if copy is None else {"copy": copy}))
    return sync.plan_sync(core.installed, desired, sorted(core.connected))


def cpu(fn, *args, yields=None):
    gc.collect()  # garbage left by the previous row is not this row's cost
    if yields is not None:
        yields.reset()
    t0 = time.process_time()
    out = fn(*args)
    return 1e3 * (time.process_time() - t0), out


def new_flow(core, key, dpid, port):
    """A new-flow copy arrives and the resync loop runs: the counting rule is sent at once or by the resync."""
    sent, _ = core.new_transport_flow(key, dpid, port)
    return len(sent) + changes(core.sync())


def changes(steps):
    return sum(len(s.changes) for s in steps)


def fabric_link(topo):
    """A link between the top tier and the one below it (aggregation-core, or leaf-spine)."""
    top = max(topo.ports)  # cores / spines carry the largest DPIDs in both numberings
    return next(link for link in topo.links.values() if link.dst == top)


# -- rows ----------------------------------------------------------------------------------------------------
def bench_events(name, topo, rows):
    hosts = list(topo.hosts.values())
    newcomer = hosts[len(hosts) // 2]
    yields = Yields()
    core = core_for(topo, {newcomer.ip}, yields)
    t_first, steps = cpu(core.sync, yields=yields)
    longest = yields.finish()
    rows.append((name, "first install", t_first, changes(steps)))
    rows.append((name, "  longest step between yields in it", longest, None))
    t_full, steps = cpu(full_rebuild, core)
    assert changes(steps) == 0, "the reference rebuild must agree with what the core installed"
    rows.append((name, "full rebuild (reference)", t_full, 0))
    base = t_full
    t, steps = cpu(core.sync)
    rows.append((name, "no-op resync", t, changes(steps)))
    src, dst = hosts[0], hosts[-1]
    t, n = cpu(new_flow, core, FlowKey(src.ip, dst.ip, PROTO_TCP, 40000, 5201), src.dpid, src.port)
    rows.append((name, "new transport flow", t, n))
    learn(core, newcomer)
    t, steps = cpu(core.sync)
    rows.append((name, "new host", t, changes(steps)))
    link = fabric_link(topo)  # a cable pulled: both ports go down (LLDP's link timeout comes later, if at all)
    core.port_changed(link.src, link.src_port, False)
    core.port_changed(link.dst, link.dst_port, False)
    t, steps = cpu(core.sync, yields=yields)
    longest = yields.finish()
    rows.append((name, "link failure", t, changes(steps)))
    rows.append((name, "  longest step between yields in it", longest, None))
    core.port_changed(link.src, link.src_port, True)
    core.port_changed(link.dst, link.dst_port, True)
    core.link_added(link.src, link.src_port, link.dst, link.dst_port)
    core.link_added(link.dst, link.dst_port, link.src, link.src_port)
    t, steps = cpu(core.sync)
    rows.append((name, "link restored", t, changes(steps)))
    return core, base


def elephant_keys(hosts, n, seed=1):
    """``n`` distinct TCP 5-tuples between random pairs of distinct hosts (an iperf-like port range)."""
    rng = random.Random(seed)
    keys = set()
    while len(keys) < n:
        a, b = rng.sample(hosts, 2)
        keys.add(FlowKey(a.ip, b.ip, PROTO_TCP, rng.randrange(32768, 61000), 5201 + rng.randrange(64)))
    return sorted(keys)


def timed_decisions(core):
    """Count the CPU time of the TE decisions a resync takes in-process: ``te.decide``, what a controller's
    optimiser worker runs (without a worker the core decides in-process). The decision's inputs (the fabric of
    a changed graph among them) and taking its answer stay in the event loop's share."""
    spent = [0.0]
    decide = te.decide

    def timed(*args, **kwargs):
        t0 = time.process_time()
        try:
            return decide(*args, **kwargs)
        finally:
            spent[0] += 1e3 * (time.process_time() - t0)
    te.decide = timed
    return spent


def set_elephants(core, topo, n, seed=1):
    """``n`` elephants (``elephant_keys``) in the monitor, none pinned: the TE step starts from nothing."""
    where = {h.ip: h for h in topo.hosts.values()}
    core.monitor.flows.clear()
    core.te.pinned.clear()
    core.te.last = core.te.settled = None
    for key in elephant_keys(list(topo.hosts.values()), n, seed):
        src = where[key.src_ip]
        core.monitor.flows[key] = FlowState(key, src.dpid, 10 ** 6, 10.0, rate_bps=8e5, streak=3, elephant=True,
                                            last_active=time.monotonic())


def bench_te(name, core, topo, n, rows):
    set_elephants(core, topo, n)
    t, result = cpu(te_step, core)
    rows.append((name, f"TE decision, {n} elephants, 1st period", t, len(result.moved)))
    for period in ("2nd", "3rd", "4th"):  # on until a period has nothing to search (a settled decision)
        t, result = cpu(te_step, core)
        label = "settled, not searched" if result.reason == te.SETTLED else "searched"
        rows.append((name, f"TE decision, {n} elephants, {period} ({label})", t, len(result.moved)))
        if result.reason == te.SETTLED:
            break
    # Another set of elephants on the same fabric: the path caches the 1st period filled are warm (as in a
    # controller's worker between topology changes); then the first set again, as it was, for the rows below.
    kept = dict(core.monitor.flows), dict(core.te.pinned), core.te.last, core.te.settled
    set_elephants(core, topo, n, seed=2)
    t, result = cpu(te_step, core)
    rows.append((name, f"TE decision, {n} other elephants, same fabric", t, len(result.moved)))
    flows, pinned, core.te.last, core.te.settled = kept
    core.monitor.flows.clear()
    core.monitor.flows.update(flows)
    core.te.pinned = pinned
    t, steps = cpu(core.sync)
    rows.append((name, f"  resync installing {len(core.te.pinned)} pins", t, changes(steps)))
    link = fabric_link(topo)
    core.port_changed(link.src, link.src_port, False)
    core.port_changed(link.dst, link.dst_port, False)
    decide, spent = te.decide, timed_decisions(core)
    t, steps = cpu(core.sync)  # the pins through the link are moved by the decision the resync asks for
    rows.append((name, f"  link failure under {len(core.te.pinned)} pins", t, changes(steps)))
    rows.append((name, "    of which the TE decision it triggers (a worker's, live)", spent[0], None))
    rows.append((name, "    the rest: the event loop's, live", t - spent[0], None))
    last = core.te.last
    rows.append((name, f"    elephants it moved (of {last.elephants if last else 0})", 0.0,
                 len(last.moved) if last else 0))
    te.decide = decide
    core.port_changed(link.src, link.src_port, True)
    core.port_changed(link.dst, link.dst_port, True)
    core.link_added(link.src, link.src_port, link.dst, link.dst_port)
    core.link_added(link.dst, link.dst_port, link.src, link.src_port)
    core.sync()


def worker_cpu_ms(runner):
    """CPU time (user + system) the runner's worker process has used so far, from /proc (10 ms ticks)."""
    fields = Path(f"/proc/{runner.worker_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return 1e3 * (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_te_worker(name, core, topo, n, rows, variant="compiled"):
    """The decision as the controller takes it: in the optimiser's worker process (a fresh interpreter holding
    only the fabric and the engineer), its CPU read from /proc, with the event loop's share (pickling the
    inputs, applying the outcome) beside it. ``variant="python"``: the same in a worker on the routing core's
    pure-Python references (MLROUTE_KERNELS=python), the baseline of the compiled kernels."""
    saved = os.environ.get("MLROUTE_KERNELS")
    os.environ["MLROUTE_KERNELS"] = "python" if variant == "python" else ""
    try:
        runner = OptimiserRunner(time_budget_s(core.config))
        runner.start()
    finally:
        if saved is None:
            del os.environ["MLROUTE_KERNELS"]
        else:
            os.environ["MLROUTE_KERNELS"] = saved
    if not runner.wait_ready(120):
        raise SystemExit("the optimiser worker did not start")
    core.runner = runner
    steps = ((3, "its 1st decision (the fabric sent)"), (4, "other elephants (fabric held)"), (4, "the same again"))
    tag = "" if variant == "compiled" else ", pure Python"
    try:
        for seed, what in steps[:2] if tag else steps:
            if what != "the same again":
                set_elephants(core, topo, n, seed)
            before = worker_cpu_ms(runner)
            t, result = cpu(te_step, core, True)
            rows.append((name, f"TE in the worker, {n} elephants, {what}{tag}", worker_cpu_ms(runner) - before,
                         len(result.moved)))
            rows.append((name, f"  event-loop CPU of it ({result.reason[:24]})", t, None))
    finally:
        core.runner = None
        runner.close()


def arrival_ring(topo, size=64, seed=5):
    """A declared job of ``size`` hosts in one ring (``size`` host-pair sends), hosts drawn at random."""
    hosts = sorted(h.ip for h in topo.hosts.values())
    return mlconfig.validate_jobs([{"name": "arriving", "rings": [random.Random(seed).sample(hosts, size)]}],
                                  "request body")


def bench_job_arrival(name, core, topo, n, rows, size=64):
    """A job declared (REST PUT, an urgent decision) beside ``n`` pinned, settled elephants, decided in the
    optimiser's worker: the decision the job event takes, and beside it the full decision (the optimiser over
    everything, as every job event took before issue 33) on the very same inputs, its CPU the baseline."""
    runner = OptimiserRunner(time_budget_s(core.config))
    runner.start()
    if not runner.wait_ready(120):
        raise SystemExit("the optimiser worker did not start")
    core.runner = runner
    try:
        core.set_jobs([])
        set_elephants(core, topo, n, seed=3)
        for _ in range(4):  # pinned, then settled: the steady state a job arrives into
            if te_step(core, True).reason == te.SETTLED:
                break
        core.sync()  # the pins in the switches, as a job finds them when it arrives
        held = core.te.pinned, core.te.settled, core.te.last
        spent = {}
        for how in ("full", "arrival"):
            core.te.pinned, core.te.settled, core.te.last = held
            core.set_jobs(arrival_ring(topo, size))
            core.incremental_next = how == "arrival"  # (the full decision: as if no job event asked for it)
            before, loop = worker_cpu_ms(runner), time.process_time()
            result = te_step(core, True)
            spent[how] = worker_cpu_ms(runner) - before, result
        sent = flow_mods(core.sync())
        to_last = spent["arrival"][0] + 1e3 * (time.process_time() - loop)  # the worker's CPU and the loop's
        (t_full, full), (t_new, new) = spent["full"], spent["arrival"]
        rows.append((name, f"job arrival ({size} flows, {len(held[0])} pins): full", t_full, len(full.moved)))
        how = {te.ARRIVAL: "placed", te.PLACED: "placed, searched next"}.get(new.reason, "searched")
        rows.append((name, f"  as a job event decides it ({how}): {t_new / t_full:.2f}x", t_new, len(new.moved)))
        rows.append((name, "  its PUT to its last flow-mod sent (CPU)", to_last, sent))
    finally:
        core.set_jobs([])
        core.runner = None
        runner.close()


def flow_mods(steps) -> int:
    """The OpenFlow messages of ``steps`` compiled and serialised as the shell sends them (southbound/ofmsg.py,
    one fake datapath per switch): how many."""
    switches: dict[int, FakeSwitch] = {}
    for step in steps:
        for dpid, change in step.changes:
            dp = switches.get(dpid) or switches.setdefault(dpid, FakeSwitch(dpid))
            ofmsg.compile_change(dp, change).serialize()
    return changes(steps)


def poll_messages(topo, n, poll):
    """Per ingress switch, the reply messages of poll number ``poll`` over ``n`` counting rules."""
    hosts = list(topo.hosts.values())
    where = {h.ip: h for h in hosts}
    per_switch = {}
    for key in elephant_keys(hosts, n, seed=7):
        src = where[key.src_ip]
        per_switch.setdefault(src.dpid, []).append(counting_entry(key, src.port, 125_000 * 5 * poll, 5.0 * poll))
    return {dpid: replies(entries, xid=poll) for dpid, entries in per_switch.items()}


def poll_with_ryu(core, messages):
    """The reply path before issue 11: Ryu parses every entry (OFPMatch objects), the shell reads the fields."""
    from controller.southbound.framework import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser
    from controller.state.monitor import StatsAssembler, sample_from_stat

    assembler = StatsAssembler()
    for dpid, msgs in messages.items():
        dp = SimpleNamespace(id=dpid, ofproto=ofproto_v1_3, ofproto_parser=ofproto_v1_3_parser)
        for raw in msgs:
            version, msg_type, msg_len, xid = struct.unpack_from("!BBHI", raw)
            msg = ofproto_parser.msg(dp, version, msg_type, msg_len, xid, raw)
            entries = assembler.feed(dpid, msg.xid, list(msg.body), bool(msg.flags & 1))
            if entries is not None:
                core.flow_stats(dpid, [sample_from_stat(dpid, ofmsg.stats_fields(s), s.byte_count, s.duration_sec,
                                                        s.duration_nsec) for s in entries])


def poll_with_ofstats(core, messages):
    """The reply path with controller.southbound.ofstats: samples straight from the body bytes."""
    from controller.state.monitor import StatsAssembler

    assembler = StatsAssembler()
    for dpid, msgs in messages.items():
        for raw in msgs:
            reply = ofstats.parse_flow_stats_reply(dpid, raw)
            entries = assembler.feed(dpid, reply.xid, reply.samples, reply.more)
            if entries is not None:
                core.flow_stats(dpid, entries)


def sflow_period(topo, n, samples_per_window, windows=2):
    """The datagrams of one poll period (``windows`` sFlow windows) in which ``n`` elephants each give
    ``samples_per_window`` samples at their ingress port (1-in-1024, 1,500-byte frames, 7 samples a datagram
    as Open vSwitch packs them), window by window; ifIndex = dpid * 1000 + port, one data source per switch."""
    from tests.sflow_datagrams import datagram, ethernet_frame, flow_sample, header_record

    where = {h.ip: h for h in topo.hosts.values()}
    seq, periods = {}, []
    for _ in range(windows):
        per_switch = {}
        for key in elephant_keys(list(where.values()), n, seed=7):
            src = where[key.src_ip]
            frame = ethernet_frame(src_ip=key.src_ip, dst_ip=key.dst_ip, src_port=key.src_port,
                                   dst_port=key.dst_port, payload=1448)
            for _ in range(samples_per_window):
                seq[src.dpid] = seq.get(src.dpid, 0) + 1
                per_switch.setdefault(src.dpid, []).append(flow_sample(
                    [header_record(frame)], sequence=seq[src.dpid], source_type=2, source_index=src.dpid,
                    sampling_rate=1024, input_value=src.dpid * 1000 + src.port, output_value=1))
        window = []
        for samples in per_switch.values():
            window += [datagram(samples[i:i + 7], agent="127.0.0.1", sequence=len(window) + 1)
                       for i in range(0, len(samples), 7)]
        periods.append(window)
    return periods


def bench_sflow(name, topo, n, samples_per_window, rows):
    """Issue 21: the controller's CPU per poll period in ``te.detection: sflow`` at ``n`` elephants (decoding
    the period's datagrams, the ingest, the windows' ticks with the monitor's update), against a flow-stats poll
    of the same ``n`` counting rules (the row before it)."""
    from controller.southbound.sflow.decoder import decode

    clock = [0.0]
    config = mlconfig.parse("te:\n  detection: sflow\n  poll_interval_s: 2\n")
    core = core_for(topo, set(), None, config, lambda: clock[0])
    for dpid, ports in topo.ports.items():
        for port in ports:
            core.sflow.agents.add("127.0.0.1", dpid * 1000 + port, dpid, port)
    warm, period = sflow_period(topo, n, samples_per_window), sflow_period(topo, n, samples_per_window)

    def run(windows):
        for window in windows:
            for raw in window:
                core.sflow_datagram(clock[0], decode(raw))
            clock[0] += 1.0
            core.sflow_tick()
    run(warm)  # the estimator and the monitor hold the n flows, as in steady state
    t, _ = cpu(run, period)
    elephants = len(core.monitor.elephants())
    rows.append((name, f"sFlow period, {n} elephants x {2 * samples_per_window} samples", t, None))
    print(f"  ({name}: {n * 2 * samples_per_window} samples in {sum(len(w) for w in period)} datagrams, "
          f"{elephants} elephants judged)", flush=True)


def bench_stats(name, core, topo, n, rows):
    core.monitor.flows.clear()
    first, second = poll_messages(topo, n, 1), poll_messages(topo, n, 2)
    paths = [("Ryu parser", poll_with_ryu)] + ([("ofstats", poll_with_ofstats)] if ofstats else [])
    for label, poll in paths:
        core.monitor.flows.clear()
        poll(core, first)
        gc.collect()
        t, _ = cpu(poll, core, second)
        assert len(core.monitor.flows) == n, (len(core.monitor.flows), n)
        rows.append((name, f"stats poll, {n} entries ({label})", t, None))


# -- table sizes (compact forwarding) -------------------------------------------------------------------------
def desired_with(plan, topo, graph, tiers):
    """The desired state (as ``sync.desired_state``) with ``plan`` as the forwarding baseline."""
    desired = plan(topo, tiers.levels, True, graph)
    for rule in te_rules.te_rules(topo, tiers, {}, {}, 10, graph=graph):
        if rule.dpid in desired:
            desired[rule.dpid].add_flow(rule)
    return desired


def largest_per_tier(desired, tiers):
    """tier -> (largest table-1 entry count, largest entry count over all tables) of its switches."""
    out: dict[str, tuple[int, int]] = {}
    for dpid, rules in desired.items():
        forward = sum(1 for r in rules.flows.values() if r.table == TABLE_FORWARD)
        a, b = out.get(tiers.tiers[dpid], (0, 0))
        out[tiers.tiers[dpid]] = (max(a, forward), max(b, len(rules.flows)))
    return out


def failure_changes(before, after):
    return sum(len(diff_switch(before.get(d), after[d])) for d in after)


def bench_tables(specs, reference=True):
    """Entries per tier and rule changes per top-tier link failure, per-host plan against compact plan."""
    print(f"{'fabric':<22} {'addresses':<11} {'tier':<12} {'table 1 old':>11} {'new':>6} {'all old':>8} "
          f"{'new':>6} {'x':>7}")
    for spec in specs:
        for aligned in (False, True):
            name, topo = fixture(spec, aligned)
            graph = topo.graph()
            tiers = infer_tiers(graph, topo.access_switches())
            plans = [("new", forwarding.plan)] + ([("old", forwarding.per_host_plan)] if reference else [])
            sizes, changes_of, cpu_of = {}, {}, {}
            link = fabric_link(topo)
            for label, plan in plans:
                t0 = time.process_time()
                before = desired_with(plan, topo, graph, tiers)
                cpu_of[label] = 1e3 * (time.process_time() - t0)
                sizes[label] = largest_per_tier(before, tiers)
                topo.port_down(link.src, link.src_port)
                topo.port_down(link.dst, link.dst_port)
                failed = topo.graph()
                after = desired_with(plan, topo, failed, infer_tiers(failed, topo.access_switches(), previous=tiers))
                changes_of[label] = failure_changes(before, after)
                topo.port_up(link.src, link.src_port)
                topo.port_up(link.dst, link.dst_port)
                topo.add_link(link.src, link.src_port, link.dst, link.dst_port)
                topo.add_link(link.dst, link.dst_port, link.src, link.src_port)
                del before, after
            addressing = "pod-aligned" if aligned else "sequential"
            old = sizes.get("old", {})
            for tier, (forward, total) in sorted(sizes["new"].items()):
                f_old, t_old = old.get(tier, (0, 0))
                print(f"{name:<22} {addressing:<11} {tier:<12} {f_old or '-':>11} {forward:>6} {t_old or '-':>8} "
                      f"{total:>6} {(f_old / forward if f_old else 0):>7.1f}", flush=True)
            c_old = changes_of.get("old")
            print(f"{name:<22} {addressing:<11} {'link failure: rule changes':<28} {c_old or '-':>8} "
                  f"{changes_of['new']:>6} {(c_old / changes_of['new'] if c_old else 0):>7.1f}   (plan CPU ms: "
                  f"old {cpu_of.get('old', 0):.0f}, new {cpu_of['new']:.0f})", flush=True)


# -- main ----------------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument("--topo", action="append", help="fattree:K or leafspine:SxLxH (repeatable)")
    ap.add_argument("--te", default=None, help="comma-separated elephant counts (default 1000,10000)")
    ap.add_argument("--stats", default=None, help="comma-separated poll sizes (default 10000,100000)")
    ap.add_argument("--skip", default="", help="comma-separated row groups to skip: te, worker, python (the worker on "
                                           "the pure-Python references), arrival (a job declared beside the "
                                           "pins), stats, sflow")
    ap.add_argument("--sflow-samples", type=int, default=4, help="samples per elephant per sFlow window in the "
                                                                   "sflow rows (2 in a 2-window period is the least "
                                                                   "that judges one)")
    ap.add_argument("--tables", action="store_true", help="entries per tier and rule changes per link failure, "
                                                          "per-host against compact forwarding (issue 20)")
    ap.add_argument("--no-reference", action="store_true", help="with --tables: the compact plan only")
    args = ap.parse_args(argv)
    specs = args.topo or (["fattree:4", "fattree:8", "leafspine:4x8x4"] if args.quick else
                          ["fattree:8", "fattree:16", "leafspine:32x64x32", "fattree:24"])
    te_sizes = [int(x) for x in (args.te or ("100,1000" if args.quick else "1000,10000")).split(",") if x]
    stats_sizes = [int(x) for x in (("1000,10000" if args.quick else "10000,100000") if args.stats is None
                                    else args.stats).split(",") if x]
    skip = set(args.skip.split(","))
    if args.tables:
        bench_tables(specs, reference=not args.no_reference)
        return 0
    kernels.warm()  # compiled code loaded (or compiled) first, as the optimiser's worker does when it starts
    print(f"{'fabric':<22} {'what':<44} {'CPU ms':>10} {'x full':>8} {'changes':>8}")
    for spec in specs:
        name, topo = fixture(spec)
        rows = []
        core, base = bench_events(name, topo, rows)
        if "te" not in skip:
            for n in te_sizes:
                bench_te(name, core, topo, n, rows)
        if "worker" not in skip:
            for n in te_sizes:
                bench_te_worker(name, core, topo, n, rows)
            if "python" not in skip:
                bench_te_worker(name, core, topo, max(te_sizes), rows, variant="python")
        if "arrival" not in skip:
            for n in te_sizes:
                bench_job_arrival(name, core, topo, n, rows)
        if "stats" not in skip:
            for n in stats_sizes:
                bench_stats(name, core, topo, n, rows)
        if "sflow" not in skip:
            for n in te_sizes:
                bench_stats(name, core, topo, n, rows)  # the flow-stats poll of the same n, for the ratio
                bench_sflow(name, topo, n, args.sflow_samples, rows)
        for fabric, what, ms, n_changes in rows:
            print(f"{fabric:<22} {what:<44} {ms:>10.2f} {ms / base:>8.4f} {'' if n_changes is None else n_changes:>8}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
