"""The sFlow collector: one UDP socket, each datagram decoded and handed to a callback, every outcome counted.

Why a plain socket and no framework: the shell runs ``serve`` in a thread of its own (Ryu's event loop must not
block on a socket), and the tests drive ``receive_once`` over a real localhost socket. Work per datagram is
bounded by its size (at most 64 KiB; the decoder checks every count against the bytes left). A datagram that
does not decode is dropped and counted by its ``SflowDecodeError`` reason; with an ``AgentMap``, counter samples
first teach it their ports (Open vSwitch sends the OpenFlow port of each) and a datagram from an agent it still
does not know is dropped as ``unknown_agent``. A callback that raises is logged and counted, and the thread
lives on. No Ryu import.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from controller.southbound.sflow.agents import AgentMap
from controller.southbound.sflow.decoder import Datagram, SflowDecodeError, decode

LOG = logging.getLogger("mlroute.sflow")
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 6343
MAX_DATAGRAM = 65535
UNKNOWN_AGENT = "unknown_agent"

Callback = Callable[[Datagram, tuple[str, int]], None]


class SflowCollector:
    def __init__(self, on_datagram: Callback, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 agents: AgentMap | None = None, rcvbuf_bytes: int | None = None):
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        if rcvbuf_bytes:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        self.sock.bind(sockaddr)
        self.address: tuple[str, int] = self.sock.getsockname()[:2]  # the port actually bound (port 0: any)
        self.on_datagram = on_datagram
        self.agents = agents
        self.received = 0
        self.decoded = 0  # decoded and handed to the callback
        self.dropped: dict[str, int] = {}  # reason -> datagrams
        self.flow_samples = 0
        self.counter_samples = 0
        self.callback_errors = 0

    def handle(self, data: bytes, peer: tuple[str, int]) -> bool:
        """Decode one datagram and hand it on; False when it was dropped."""
        self.received += 1
        try:
            datagram = decode(data)
        except SflowDecodeError as exc:
            self.dropped[exc.reason] = self.dropped.get(exc.reason, 0) + 1
            return False
        if self.agents is not None:
            self.agents.learn(datagram)
            if not self.agents.knows_agent(datagram.agent):
                self.dropped[UNKNOWN_AGENT] = self.dropped.get(UNKNOWN_AGENT, 0) + 1
                return False
        self.decoded += 1
        self.flow_samples += len(datagram.flow_samples)
        self.counter_samples += len(datagram.counter_samples)
        try:
            self.on_datagram(datagram, peer)
        except Exception:
            self.callback_errors += 1
            LOG.exception("sFlow datagram from %s: the callback failed", peer[0])
        return True

    def receive_once(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: forever) for one datagram and handle it; False if none came."""
        self.sock.settimeout(timeout)
        try:
            data, peer = self.sock.recvfrom(MAX_DATAGRAM)
        except (TimeoutError, BlockingIOError):
            return False
        self.handle(data, peer[:2])
        return True

    def serve(self, stop: threading.Event, poll_s: float = 0.25) -> None:
        """Receive until ``stop`` is set (checked at least every ``poll_s`` seconds)."""
        while not stop.is_set():
            try:
                self.receive_once(poll_s)
            except OSError as exc:  # the socket was closed under us, or an ICMP error surfaced: go on or end
                if self.sock.fileno() < 0:
                    return
                LOG.warning("sFlow collector: %s", exc)

    def stats(self) -> dict[str, int]:
        """Counters for metrics: datagrams received / decoded / dropped by reason, samples, callback failures."""
        out = {"received": self.received, "decoded": self.decoded, "flow_samples": self.flow_samples,
               "counter_samples": self.counter_samples, "callback_errors": self.callback_errors}
        out.update({f"dropped_{reason}": n for reason, n in sorted(self.dropped.items())})
        return out

    def close(self) -> None:
        self.sock.close()
