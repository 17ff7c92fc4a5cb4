"""Proof that a leader's process is gone, long before its ZooKeeper session expires.

Each node listens on a TCP *liveness* port from before it campaigns until its process ends, greets every
connection with a token of its own process, and never closes a connection it accepted while it lives. A follower
keeps one connection to the leader's port (the address and token the leader published with its lead). The
kernel closes a process's sockets when the process ends, however it ends (SIGKILL, a crash, an exit): the
follower's read then returns end-of-file or a reset. That is proof; nothing else is:

* end-of-file or a reset on a connection over which the leader's token arrived: the socket that process held is
  closed, so the process is gone (it closes none while it lives);
* a refused connection, or another token, at an address where the leader's token arrived before in this watch:
  nothing, or another process, holds the port the leader held until its end.

A timeout, an unreachable host, a refused connection at an address never verified (a wrong ``advertise``, a
firewall) prove nothing: the follower waits, and the session's expiry remains the way the leader is replaced.
A paused leader (SIGSTOP, a stalled VM) keeps its sockets, so it is never taken for dead. The assumption: no
middlebox forges a reset into the connection. Thread-free except for the threads it is given (``spawn``).
"""

from __future__ import annotations

import logging
import secrets
import select
import socket
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger("mlroute")

GREETING = b"mlroute-liveness "
CONNECT_TIMEOUT_S = 1.0  # a connect that takes longer proves nothing: tried again after RETRY_S
RETRY_S = 0.5


def new_token() -> str:
    return secrets.token_hex(8)


class LivenessServer:
    """This process's liveness port: bound and listening from construction (before the node campaigns)."""

    def __init__(self, host: str, port: int = 0, token: str | None = None) -> None:
        self.token = token or new_token()
        self._sock = socket.create_server((host, port), backlog=64, reuse_port=False)
        self.host, self.port = host, self._sock.getsockname()[1]
        self._held: list[socket.socket] = []  # every accepted connection, open until close()
        self._closed = False

    def serve(self) -> None:
        """Accept for ever (run it in a thread of its own): greet each connection, keep it open."""
        greeting = GREETING + self.token.encode() + b"\n"
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._closed:
                    return
                continue  # (EMFILE, ECONNABORTED: the listener itself stays open)
            try:
                conn.sendall(greeting)
            except OSError:
                conn.close()  # the follower went away
                continue
            self._held = [c for c in self._held if not _ended(c)] + [conn]

    def close(self) -> None:
        """At the process's end only (a clean stop): what followers would see at its death anyway."""
        self._closed = True
        for conn in [self._sock, *self._held]:
            try:
                conn.close()
            except OSError:
                pass


class LivenessWatch:
    """One follower's watch of one leader's process; ``dead(reason)`` is called at most once, on proof only."""

    def __init__(self, host: str, port: int, token: str, dead: Callable[[str], None],
                 sleep: Callable[[float], Any]) -> None:
        self.host, self.port, self.token = host, port, token
        self._dead, self._sleep = dead, sleep
        self._stopped = False
        self._sock: socket.socket | None = None
        self.verified = False  # the leader's token arrived at this address

    def stop(self) -> None:
        self._stopped = True
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked read: end-of-file, not a proof (stopped)
            except OSError:
                pass

    def run(self) -> None:
        """Watch until stopped or proof (run it in a thread of its own)."""
        while not self._stopped:
            proof = self._once()
            if self._stopped:
                return
            if proof is not None:
                self._stopped = True
                self._dead(proof)
                return
            self._sleep(RETRY_S)

    def _once(self) -> str | None:
        """One connection: the proof it gave, or None (nothing proven: try again)."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            return "its liveness port refuses connections" if self.verified else None
        except OSError:
            return None  # timeout, unreachable: proves nothing
        self._sock = sock
        if self._stopped:  # stop() came while connecting: it could not wake this socket
            self._sock = None
            sock.close()
            return None
        try:
            sock.settimeout(None)  # a paused leader greets late: wait, never conclude from silence
            line = _read_line(sock)
            if line is None:
                return "it closed the connection" if self.verified else None
            if line != self.token:
                return "another process holds its liveness port" if self.verified else None
            self.verified = True
            while True:
                if not sock.recv(64):
                    return "it closed the connection (end-of-file)"
        except ConnectionResetError:
            return "its connection was reset" if self.verified else None
        except OSError:
            return None
        finally:
            self._sock = None
            sock.close()


def _ended(conn: socket.socket) -> bool:
    """A held connection its follower closed (readable, at end-of-file): closed here too, no longer held."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        if readable and not conn.recv(64, socket.MSG_PEEK):
            conn.close()
            return True
    except OSError:
        conn.close()
        return True
    return False


def _read_line(sock: socket.socket) -> str | None:
    """The greeting's token; None at end-of-file before a whole greeting."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(128)
        if not chunk:
            return None
        data += chunk
        if len(data) > 256:
            return ""
    return data[len(GREETING):-1].decode(errors="replace") if data.startswith(GREETING) else ""
