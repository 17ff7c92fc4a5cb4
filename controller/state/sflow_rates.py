"""Packet samples -> rates per transport flow and per host pair over sliding windows -> elephants.

Why samples: flow-stats mode needs one counting rule per active 5-tuple at its ingress switch; sampling needs
none, sees every 5-tuple (a storm of mice between two hosts included) and reacts within a window.

Estimator. Each sample of a packet of ``b`` bytes taken at sampling rate ``N`` (1-in-N) stands for ``N`` packets
and ``N * b`` bytes: the total over a window is the Horvitz-Thompson estimator of the bytes sent,
``Y = sum(N_i * b_i)``, unbiased for random 1-in-N sampling. Its relative standard error is estimated from the
samples themselves as

    rel_error = sqrt(sum((N_i * b_i) ** 2)) / sum(N_i * b_i)

(the Horvitz-Thompson variance ``sum((1 - p_i) / p_i**2 * y_i**2)`` with ``p_i = 1/N_i``, the factor ``1 - p_i``
dropped, which errs on the safe side). For packets of one size and one sampling rate it is ``1 / sqrt(n)`` for
``n`` samples, the binomial figure of sFlow's "Packet Sampling Basics"
(https://sflow.org/packetSamplingBasics/index.htm: error <= 196 * sqrt(1/n) percent at 95 % confidence); mixed
packet sizes make it larger, as they should (64-byte and 1500-byte packets mixed: about 1.26 / sqrt(n)). The
95 % interval is ``rate * (1 +- 1.96 * rel_error)``; a seeded simulation checks its coverage
(tests/unit/controller/state/test_sflow_rates.py).

Windows are ``window_s`` long, aligned to multiples of it on the clock passed in (no clock is read here); the
last ``windows`` completed ones are kept per key and the one in progress is never reported. A flow is an
elephant once its rate is >= ``threshold_bps`` in ``windows_needed`` consecutive completed windows, as
``elephant_polls`` in flow-stats mode, and stays one until it has had no sample for ``idle_windows`` windows
(then it is forgotten). Host pairs (src IP, dst IP) are aggregated separately from the 5-tuples, so many
connections between two hosts add up to one demand even when each is a mouse, and they are judged alike. Memory
is bounded: at ``max_keys`` the smallest eighth of a table (by bytes over its kept windows) is evicted at once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.state.flowkey import FlowKey

Z95 = 1.96  # two-sided 95 % quantile of the normal distribution
K = TypeVar("K", bound=Hashable)
HostPair = tuple[str, str]  # (source IP, destination IP)


@dataclass(frozen=True)
class RateEstimate:
    """A rate over ``seconds`` from ``samples`` samples; ``rel_error`` is the estimator's relative standard error."""

    bps: float  # bits per second
    pps: float  # packets per second
    samples: int
    seconds: float
    rel_error: float  # inf without samples

    def interval95(self) -> tuple[float, float]:
        """The 95 % confidence interval of ``bps``."""
        half = Z95 * self.rel_error * self.bps
        return (max(0.0, self.bps - half), self.bps + half)


def above(rate: RateEstimate, threshold_bps: float) -> bool:
    """Is the rate above the threshold by at least one standard error of its estimate? A single sample stands
    for 1-in-N packets of its size (at 1-in-64, one 9,000-byte frame is 4.6 Mb/s over a second): without the
    margin any sampled mouse would be an elephant; with it a flow needs two samples at least."""
    return rate.samples > 0 and rate.bps * (1 - rate.rel_error) >= threshold_bps


@dataclass(frozen=True)
class Elephant(Generic[K]):
    key: K
    rate: RateEstimate  # over the windows that made it one (the last ``windows_needed``)
    streak: int  # consecutive completed windows at or above the threshold (0: quiet now, still remembered)


class _Track:
    """One key's windows: the one in progress (bytes, packets, sum of squares, samples) and the completed ones."""

    __slots__ = ("cur", "done", "streak", "elephant", "idle")

    def __init__(self, windows: int):
        self.cur = [0.0, 0.0, 0.0, 0.0]
        self.done: deque[tuple[float, float, float, float]] = deque(maxlen=windows)
        self.streak = 0
        self.elephant = False
        self.idle = 0  # completed windows in a row without a sample

    def weight(self) -> float:
        return self.cur[0] + sum(w[0] for w in self.done)


def _estimate(windows: list[tuple[float, float, float, float]], window_s: float) -> RateEstimate:
    seconds = len(windows) * window_s
    total = sum(w[0] for w in windows)
    n = int(sum(w[3] for w in windows))
    if not windows or seconds <= 0:
        return RateEstimate(0.0, 0.0, 0, 0.0, math.inf)
    rel = math.sqrt(sum(w[2] for w in windows)) / total if total > 0 else math.inf
    return RateEstimate(8 * total / seconds, sum(w[1] for w in windows) / seconds, n, seconds, rel)


class _Table(Generic[K]):
    def __init__(self, max_keys: int, windows: int):
        self.tracks: dict[K, _Track] = {}
        self.max_keys = max_keys
        self.windows = windows
        self.evicted = 0
        self.expired = 0

    def add(self, key: K, weight: float, packets: float) -> None:
        tr = self.tracks.get(key)
        if tr is None:
            if len(self.tracks) >= self.max_keys:
                self._evict()
            tr = self.tracks[key] = _Track(self.windows)
        cur = tr.cur
        cur[0] += weight
        cur[1] += packets
        cur[2] += weight * weight
        cur[3] += 1

    def _evict(self) -> None:
        n = max(1, self.max_keys // 8)
        for key in sorted(self.tracks, key=lambda k: self.tracks[k].weight())[:n]:
            del self.tracks[key]
        self.evicted += n

    def close(self, closed: int, window_s: float, threshold_bps: float, needed: int, idle_windows: int) -> None:
        """``closed`` windows have ended (the first with what was accumulated, the others empty): judge."""
        gone = []
        threshold_bytes = threshold_bps * window_s / 8
        for key, tr in self.tracks.items():
            cur = tr.cur
            sampled = cur[3] > 0
            tr.done.append((cur[0], cur[1], cur[2], cur[3]))
            empties = min(closed - 1, self.windows)
            tr.done.extend([(0.0, 0.0, 0.0, 0.0)] * empties)
            tr.cur = [0.0, 0.0, 0.0, 0.0]
            if sampled and cur[0] >= threshold_bytes:
                tr.streak += 1
                if tr.streak >= needed:
                    tr.elephant = True
            else:
                tr.streak = 0
            if closed > 1:  # the windows after it had no sample
                tr.streak = 0
            tr.idle = closed - 1 if sampled else tr.idle + closed
            if tr.idle >= idle_windows:
                gone.append(key)
        for key in gone:
            del self.tracks[key]
        self.expired += len(gone)


class SampleRates:
    """Per 5-tuple and per host-pair rates from flow samples; feed with ``add``, ask with ``rate`` / ``elephants``."""

    def __init__(self, threshold_bps: float, window_s: float = 1.0, windows: int = 5, windows_needed: int = 2,
                 idle_windows: int = 10, max_flows: int = 100_000, max_pairs: int = 20_000):
        if window_s <= 0 or windows < 1 or not 1 <= windows_needed <= windows or idle_windows < 1:
            raise ValueError("window_s > 0, windows >= 1, 1 <= windows_needed <= windows, idle_windows >= 1")
        self.threshold_bps = threshold_bps
        self.window_s = window_s
        self.windows = windows
        self.windows_needed = windows_needed
        self.idle_windows = idle_windows
        self.flows: _Table[FlowKey] = _Table(max_flows, windows)
        self.pairs: _Table[HostPair] = _Table(max_pairs, windows)
        self._window: int | None = None  # index of the window in progress
        self.samples = 0

    def add(self, now: float, key: FlowKey, frame_bytes: int, sampling_rate: int) -> None:
        """One packet sample of flow ``key``: ``frame_bytes`` long, taken at 1-in-``sampling_rate``."""
        self.advance(now)
        weight = float(frame_bytes * sampling_rate)
        self.flows.add(key, weight, sampling_rate)
        self.pairs.add((key.src_ip, key.dst_ip), weight, sampling_rate)
        self.samples += 1

    def advance(self, now: float) -> None:
        """Close the windows that ended by ``now`` (``add`` does it too; call it when no samples come)."""
        w = math.floor(now / self.window_s)
        if self._window is None:
            self._window = w
        elif w > self._window:
            closed = w - self._window
            self._window = w
            for table in (self.flows, self.pairs):
                table.close(closed, self.window_s, self.threshold_bps, self.windows_needed, self.idle_windows)

    @property
    def window(self) -> int | None:
        """The index of the window in progress (``floor(now / window_s)``; None before the first ``advance``)."""
        return self._window

    def recent(self, windows: int, pairs: bool = False) -> dict:
        """Each tracked flow's (or host pair's) RateEstimate over its last ``windows`` completed windows, and
        whether it can be judged on them: tracked that long (one seen in fewer is estimated over those it has)
        and sampled in two of its kept windows at least (one window when ``windows`` is 1).

        Why two windows: the estimate says how many bytes, not over how long. A 20-kB connection that lives
        16 ms, sampled twice in its 9,000-byte frames at 1-in-64, stands for 1.15 MB: averaged over two 1-s
        windows 4.6 Mb/s, above a 1-Mb/s threshold by its standard error (measured live: one such false
        elephant among 1,150 short connections a minute). Samples in two windows show the flow lasted past a
        window's end; a 10 Mb/s stream of jumbo frames (about 2 samples a window) shows that within its first
        windows, a mouse almost never."""
        out = {}
        lasted = min(2, windows)
        for k, tr in (self.pairs if pairs else self.flows).tracks.items():
            done = tr.done
            n = min(windows, len(done))
            if n:
                judged = n >= windows and sum(1 for w in done if w[3]) >= lasted
                out[k] = (_estimate([done[-i] for i in range(n, 0, -1)], self.window_s), judged)
        return out

    def heavy_in_progress(self, pairs: bool = False) -> list:
        """Flows (or host pairs) whose window in progress alone already holds, by one standard error of its
        estimate, the bytes that ``windows_needed`` whole windows at the threshold carry: the average over the
        windows the rule waits for is above the threshold whatever the rest of them brings (bytes are never
        negative), so the judgement can be taken now. Why: a heavy aggregate (a storm of new connections, a
        collective library's many streams) is known within a fraction of a window instead of after the whole
        windows; what only just passes the threshold still waits for them (at 10 Mb/s and 1-in-64, a storm of
        64-byte frames at the NIC's rate is judged in about 0.3 s, a 10 Mb/s stream of 9,000-byte frames never
        early: about 2 samples a second)."""
        need = self.threshold_bps * self.window_s * self.windows_needed / 8
        out = []
        for key, tr in (self.pairs if pairs else self.flows).tracks.items():
            total, _, squares, n = tr.cur
            if n >= 2 and total - math.sqrt(squares) >= need:  # total * (1 - rel_error) >= need
                out.append(key)
        return out

    def _rate(self, table: _Table[K], key: K, windows: int | None) -> RateEstimate | None:
        tr = table.tracks.get(key)
        if tr is None:
            return None
        done = list(tr.done)
        return _estimate(done[-windows:] if windows else done, self.window_s)

    def flow_rate(self, key: FlowKey, windows: int | None = None) -> RateEstimate | None:
        """The flow's rate over its last ``windows`` completed windows (all kept ones by default)."""
        return self._rate(self.flows, key, windows)

    def pair_rate(self, pair: HostPair, windows: int | None = None) -> RateEstimate | None:
        return self._rate(self.pairs, pair, windows)

    def _elephants(self, table: _Table[K]) -> Iterator[Elephant[K]]:
        for key, tr in table.tracks.items():
            if tr.elephant:
                done = list(tr.done)[-self.windows_needed:]
                yield Elephant(key, _estimate(done, self.window_s), tr.streak)

    def elephants(self) -> list[Elephant[FlowKey]]:
        """Transport flows that are elephants, in a stable order."""
        return sorted(self._elephants(self.flows), key=lambda e: e.key.sort_key())

    def elephant_pairs(self) -> list[Elephant[HostPair]]:
        """Host pairs whose aggregate is an elephant: one demand, routed by a src/dst pair rule."""
        return sorted(self._elephants(self.pairs), key=lambda e: e.key)

    def forget(self, key: FlowKey) -> bool:
        return self.flows.tracks.pop(key, None) is not None

    def forget_pair(self, pair: HostPair) -> bool:
        return self.pairs.tracks.pop(pair, None) is not None

    def stats(self) -> dict[str, int]:
        """Counters for metrics: samples taken, keys tracked, evicted (table full), expired (idle)."""
        return {"samples": self.samples, "flows": len(self.flows.tracks), "pairs": len(self.pairs.tracks),
                "flows_evicted": self.flows.evicted, "pairs_evicted": self.pairs.evicted,
                "flows_expired": self.flows.expired, "pairs_expired": self.pairs.expired}
