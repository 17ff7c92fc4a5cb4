"""sFlow detection for the core (``te.detection: sflow | both | auto``): the sFlow pieces put together, and what
the core reads from them each window.

Why a module of its own: the core should know only "a datagram arrived" and "a window ended". ``feed`` runs in
the collector's thread (under the ingest lock); ``tick``, called from a loop of the shell, turns each completed
window into the flow monitor's input (one window stands for one poll, so thresholds, ``te.elephant_polls``,
pattern memory, TE and REST work as in flow-stats mode) and says which host pairs are elephants as a whole with
no elephant 5-tuple of their own (many connections between two hosts: one demand, routed by a pair rule, as a
declared job's send is). Counter samples give the link view its per-port rates (``links``) in place of
port-stats polling. Collector and ingest counters become metrics by their growth since the last tick.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from controller.southbound.sflow.agents import AgentMap, PortRef
from controller.southbound.sflow.counters import CounterRates
from controller.southbound.sflow.decoder import Datagram
from controller.southbound.sflow.ingest import SflowIngest
from controller.state.flowkey import FlowKey
from controller.state.jobs import HostPair
from controller.state.linkstats import PortRates, links_json
from controller.state.sflow_rates import SampleRates, above
from controller.state.topology import Topology


class SflowDetection:
    def __init__(self, sflow: Mapping[str, Any], threshold_bps: float, windows_needed: int, topology: Topology,
                 metrics: Any = None) -> None:  # (web.metrics.Metrics, handed in: southbound imports no web)
        """``sflow`` is the configuration's ``sflow:`` section; ``topology`` says which ports are host-facing
        (a sample counts where its packet entered the fabric) and which ports exist (the agent map learns only
        those)."""
        self.config = sflow
        self.agents = AgentMap(accept=lambda dpid, port: port in topology.ports.get(dpid, ()))
        self.rates = SampleRates(threshold_bps, window_s=sflow["window_s"], windows=sflow["windows"],
                                 windows_needed=windows_needed, idle_windows=sflow["idle_windows"],
                                 max_flows=sflow["max_flows"], max_pairs=sflow["max_pairs"])
        self.counters = CounterRates()
        self.ingest = SflowIngest(self.agents, self.rates, self.counters, topology.is_access_port)
        self.metrics = metrics
        self._window: int | None = None  # the window in progress at the last tick
        self._pairs: set[tuple[str, str]] = set()  # host pairs judged elephants (until the estimator forgets them)
        self.pairs_added = False  # the last tick judged a host pair an elephant that was not one before
        self._published: dict[tuple[str, str], int] = {}  # (metric, outcome) -> value last published

    def feed(self, now: float, datagram: Datagram) -> None:
        """One decoded datagram (the collector's thread)."""
        self.ingest.feed(now, datagram)

    def tick(self, now: float) -> dict[FlowKey, tuple[int, int, float, bool | None]] | None:
        """Close the windows ended by ``now``; when one did, each tracked flow's (ingress dpid, port, bit/s over
        its last ``windows_needed`` windows, whether that is above the threshold by one standard error: None
        while it has been tracked for fewer windows or sampled in one only, ``SampleRates.recent``) -- the
        monitor's input -- else None. ``pairs_added`` says whether this tick judged a new host pair an elephant:
        at a completed window, or within the window in progress once the pair has sent what the whole windows
        ask (``SampleRates.heavy_in_progress``).

        Why an average over the windows and not a streak of windows each above the threshold: at 1-in-N a
        window holds few samples of a flow (10 Mb/s of 9,000-byte frames at 1-in-64: about 2 a second), so a
        window without one is common and would restart a streak; the average over the same windows has the
        same expected latency and its error falls with the samples of all of them (measured live: a streak
        took 11.6 s to pin 8 stride elephants)."""
        with self.ingest.lock:
            self.rates.advance(now)
            before = len(self._pairs)
            if self.config["pairs"]:  # a pair heavy enough within the window in progress is one at once
                self._pairs.update(self.rates.heavy_in_progress(pairs=True))
            self.pairs_added = len(self._pairs) > before
            if self.rates.window == self._window:
                return None
            first, self._window = self._window is None, self.rates.window
            if first:
                return None  # the first window seen is still in progress
            out = {}
            needed, threshold = self.rates.windows_needed, self.rates.threshold_bps
            for key, (rate, judged) in self.rates.recent(needed).items():
                where = self.ingest.ingress_of(key)
                if where is not None:
                    out[key] = (where[0], where[1], rate.bps, above(rate, threshold) if judged else None)
            tracked = self.rates.pairs.tracks
            kept = {p for p in self._pairs if p in tracked}
            self._pairs = kept | {p for p, (rate, judged) in self.rates.recent(needed, pairs=True).items()
                                  if judged and above(rate, threshold)}
            self.pairs_added = self.pairs_added or len(self._pairs) > len(kept)
            return out

    def ingress_of(self, key: FlowKey) -> PortRef | None:
        """Where a sampled flow enters the fabric (its pinned entry goes there)."""
        with self.ingest.lock:
            return self.ingest.ingress_of(key)

    def elephant_pairs(self, elephant_keys: Iterable[FlowKey]) -> list[HostPair]:
        """Host pairs whose aggregate is an elephant while none of their 5-tuples is (``elephant_keys``)."""
        if not self.config["pairs"]:
            return []
        covered = {(k.src_ip, k.dst_ip) for k in elephant_keys}
        return [HostPair(*p) for p in sorted(self._pairs - covered)]

    def pair_rate_bps(self, pair: HostPair) -> float:
        """A host pair's rate over the windows an elephant is judged on (0 when none is known)."""
        with self.ingest.lock:
            rate = self.rates.pair_rate((pair.src_ip, pair.dst_ip), self.rates.windows_needed)
        return rate.bps if rate is not None else 0.0

    def heard(self) -> dict[int, float]:
        """When each switch's export was last heard (a sample mapped to one of its ports)."""
        with self.ingest.lock:
            return dict(self.ingest.heard)

    def links(self, topology: Topology, pinned: Mapping[Any, tuple[int, ...]], capacity_bps: float,
              polled: PortRates | None = None, sampled: Collection[int] = ()) -> list[dict[str, Any]]:
        """The link view from counter samples (``GET /mlroute/links``, mlroute_link_utilisation); with ``polled``
        (te.detection: auto), the switches not in ``sampled`` from their port-stats polls instead."""
        with self.ingest.lock:
            rates: PortRates = self.counters
            if polled is not None:
                rates = PortRates()
                rates.switches = {d: (self.counters if d in sampled else polled).switches.get(d, {})
                                  for d in set(self.counters.switches) | set(polled.switches)}
            return links_json(topology, rates, pinned, capacity_bps)

    def _count(self, name: str, outcome: str, n: int) -> None:
        assert self.metrics is not None
        getattr(self.metrics, f"sflow_{name}").labels(outcome).inc(n)

    def stats(self, collector: Mapping[str, int] | None = None) -> dict[str, dict[str, int]]:
        """Datagrams by outcome (the collector's counters) and flow samples by outcome (the ingest's)."""
        with self.ingest.lock:
            ingest = self.ingest.stats()
        samples = {k[len("flow_samples_"):]: v for k, v in ingest.items() if k.startswith("flow_samples_")}
        datagrams = {k: v for k, v in (collector or {}).items()
                     if k in ("received", "decoded", "callback_errors") or k.startswith("dropped_")}
        return {"datagrams": datagrams, "samples": samples}

    def publish(self, collector: Mapping[str, int] | None = None, on: Callable[[str, str, int], None] | None = None
                ) -> None:
        """Counters' growth since the last call onto the metrics (``on(metric, outcome, growth)``)."""
        if on is None and self.metrics is not None:
            on = self._count
        for name, values in self.stats(collector).items():
            for outcome, value in values.items():
                grown = value - self._published.get((name, outcome), 0)
                if grown > 0 and on is not None:
                    on(name, outcome, grown)
                self._published[(name, outcome)] = value
