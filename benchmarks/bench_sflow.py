#!/usr/bin/env python3
"""Benchmark the sFlow path on one core: decoding, the rate estimator, and the collector over localhost UDP.

    python benchmarks/bench_sflow.py            # about 15 s
    python benchmarks/bench_sflow.py --quick    # about 4 s

Datagrams have Open vSwitch's shape under load (tests/sflow_datagrams.py): 7 flow samples of full-size TCP
frames (a 128-byte header record and an extended-switch record each), plus one counter datagram in ten (generic,
ethernet, port-name and OpenFlow-port records for one port). Every figure is printed with a ratio against a
baseline measured in the same run on the same bytes, so the numbers compare across machines:

- decode: ``controller.southbound.sflow.decoder.decode`` vs a bare walk that unpacks only each sample's tag and length
  (the least any decoder must do); target >= 50,000 decoded samples/s on one core.
- estimator: ``SampleRates.add`` and ``SflowIngest.feed`` per sample vs one dict increment per sample.
- collector: datagrams/s through a real UDP socket (decode + ingest in the receiving thread) vs the same socket
  with a receiver that only reads.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.southbound.sflow.agents import AgentMap  # noqa: E402
from controller.southbound.sflow.collector import SflowCollector  # noqa: E402
from controller.southbound.sflow.counters import CounterRates  # noqa: E402
from controller.southbound.sflow.decoder import decode  # noqa: E402
from controller.southbound.sflow.ingest import SflowIngest  # noqa: E402
from controller.state.flowkey import FlowKey  # noqa: E402
from controller.state.sflow_rates import SampleRates  # noqa: E402
from tests import sflow_datagrams as enc  # noqa: E402

TARGET_SAMPLES_PER_S = 50_000
_U32X2 = struct.Struct(">II")


def workload(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        if i % 10 == 9:
            records = [enc.if_counters_record(if_index=7), enc.ethernet_counters_record(),
                       enc.port_name_record("s1-eth1"), enc.openflow_port_record(1, 1)]
            out.append(enc.datagram([enc.counter_sample(records, sequence=i, source_index=7)], agent="127.0.0.1",
                                    sequence=i))
        else:
            out.append(enc.ovs_flow_datagram(7, sequence=i, first_sample=7 * i + 1))
    return out


def bare_walk(data: bytes) -> int:
    """The baseline: the datagram's sample count, then each sample's tag and length, nothing decoded."""
    (count,) = struct.unpack_from(">I", data, 24)
    off, n = 28, 0
    for _ in range(count):
        _tag, length = _U32X2.unpack_from(data, off)
        off += 8 + length
        n += 1
    return n


def timed(fn, seconds: float) -> tuple[float, int]:
    """Run ``fn`` (returning a unit count) repeatedly for about ``seconds`` of process time: units per second."""
    units, start = 0, time.process_time()
    while True:
        units += fn()
        elapsed = time.process_time() - start
        if elapsed >= seconds:
            return units / elapsed, units


def bench_decode(datagrams: list[bytes], seconds: float) -> None:
    samples = sum(len(d.flow_samples) + len(d.counter_samples) for d in map(decode, datagrams))

    def run_decode() -> int:
        for data in datagrams:
            decode(data)
        return samples

    def run_bare() -> int:
        return sum(bare_walk(data) for data in datagrams)

    base, _ = timed(run_bare, seconds / 2)
    rate, _ = timed(run_decode, seconds)
    print(f"decode      {rate:12,.0f} samples/s  ({rate / TARGET_SAMPLES_PER_S:.1f}x the 50,000 target; "
          f"bare tag/length walk {base:,.0f}/s, decode costs {base / rate:.1f}x it)")


def bench_estimator(datagrams: list[bytes], seconds: float) -> None:
    decoded = [decode(d) for d in datagrams]
    flows = [(FlowKey(f"10.0.{i % 16}.{i % 250}", "10.1.0.1", 6, 40000 + i, 5201), 1500) for i in range(2000)]
    clock = [0.0]

    def run_counter() -> int:
        counts: dict[FlowKey, float] = {}
        for k, b in flows:
            counts[k] = counts.get(k, 0.0) + b * 64
        return len(flows)

    rates = SampleRates(threshold_bps=1e6, max_flows=100_000)

    def run_rates() -> int:
        clock[0] += 0.05  # a window closes every 20 rounds
        now = clock[0]
        for k, b in flows:
            rates.add(now, k, b, 64)
        return len(flows)

    agents = AgentMap()
    agents.add("127.0.0.1", 7, 1, 1)
    ingest = SflowIngest(agents, SampleRates(threshold_bps=1e6), CounterRates(), lambda dpid, port: True)
    feed_samples = sum(len(d.flow_samples) + len(d.counter_samples) for d in decoded)

    def run_ingest() -> int:
        ingest.sequences = type(ingest.sequences)()  # the same datagrams again are no replays here
        clock[0] += 0.05
        for d in decoded:
            ingest.feed(clock[0], d)
        return feed_samples

    base, _ = timed(run_counter, seconds / 3)
    add, _ = timed(run_rates, seconds / 3)
    feed, _ = timed(run_ingest, seconds / 3)
    print(f"estimator   {add:12,.0f} SampleRates.add/s  ({base / add:.1f}x a dict increment, {base:,.0f}/s)")
    print(f"ingest      {feed:12,.0f} samples/s through SflowIngest.feed  ({base / feed:.1f}x a dict increment)")


def bench_collector(datagrams: list[bytes], count: int) -> None:
    def blast(address: tuple[str, int]) -> float:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        start = time.perf_counter()
        for i in range(count):
            s.sendto(datagrams[i % len(datagrams)], address)
            if i % 64 == 63:
                time.sleep(0)  # let the receiver run (one core each at best on this machine)
        s.close()
        return time.perf_counter() - start

    def run(handler_collector: SflowCollector) -> tuple[float, int, float]:
        stop = threading.Event()
        thread = threading.Thread(target=handler_collector.serve, args=(stop, 0.05))
        thread.start()
        start = time.perf_counter()
        blast(handler_collector.address)
        time.sleep(0.3)
        stop.set()
        thread.join()
        handler_collector.close()
        elapsed = time.perf_counter() - start - 0.3
        samples = handler_collector.flow_samples + handler_collector.counter_samples
        return handler_collector.received / elapsed, handler_collector.received, samples / elapsed

    agents = AgentMap()
    agents.add("127.0.0.1", 7, 1, 1)
    ingest = SflowIngest(agents, SampleRates(threshold_bps=1e6), CounterRates(), lambda dpid, port: True)
    full = SflowCollector(lambda d, peer: ingest.feed(time.monotonic(), d), port=0, agents=agents,
                          rcvbuf_bytes=8 << 20)
    base_collector = SflowCollector(lambda d, peer: None, port=0, rcvbuf_bytes=8 << 20)
    base_collector.handle = lambda data, peer: setattr(base_collector, "received", base_collector.received + 1)
    base_rate, base_got, _ = run(base_collector)
    rate, got, samples_per_s = run(full)
    print(f"collector   {rate:12,.0f} datagrams/s decoded+ingested ({got}/{count} received, "
          f"{samples_per_s:,.0f} samples/s); read-only receiver {base_rate:,.0f}/s ({base_got}/{count}), "
          f"{base_rate / rate:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else 4.0
    datagrams = workload(500)
    print(f"workload: {len(datagrams)} datagrams, mean {sum(map(len, datagrams)) / len(datagrams):.0f} bytes")
    bench_decode(datagrams, seconds)
    bench_estimator(datagrams, seconds)
    bench_collector(datagrams, 20_000 if args.quick else 60_000)


if __name__ == "__main__":
    main()
