"""One rank of a ring all-reduce, run inside an emulated host.

Per iteration: sleep ``compute_s`` (the compute phase), then 2(n-1) steps; in each step send ``bytes`` to the
successor while receiving as much from the predecessor, and start the next step only when both are done (a
ring all-reduce's data dependency). Prints one JSON line per iteration: {"rank", "iteration", "seconds",
"steps_s"} (the iteration's time, and each step's).

Before iteration 0 the ranks pass two tokens around the ring (NCCL's init barrier does the same job): the first
proves every connection is up, the second starts them together. Without it a rank still starting up, or one
whose first SYN was lost (Linux retries after 1 s), shows up as iteration 0 running slower than the rest.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

CHUNK = 1 << 20


def _send(sock: socket.socket, n: int, buf: bytes) -> None:
    while n > 0:
        k = min(n, len(buf))
        sock.sendall(buf[:k])
        n -= k


def _recv(sock: socket.socket, n: int) -> None:
    while n > 0:
        data = sock.recv(min(n, CHUNK))
        if not data:
            raise ConnectionError("peer closed the ring connection")
        n -= len(data)


def _barrier(rank: int, succ: socket.socket, pred: socket.socket) -> None:
    """Two tokens around the ring, started by rank 0: after the first every connection exists, and each rank
    starts on the second, within one ring traversal of the others."""
    for token in (b"r", b"g"):
        if rank == 0:
            succ.sendall(token)
            _expect(pred, token)
        else:
            _expect(pred, token)
            succ.sendall(token)


def _expect(sock: socket.socket, token: bytes) -> None:
    data = sock.recv(1)
    if data != token:
        raise ConnectionError(f"ring barrier: expected {token!r} from the predecessor, got {data!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--peers", required=True, help="comma-separated IPs in ring order")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--bytes", type=int, required=True, help="bytes per ring edge per step")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--compute-s", type=float, default=1.0)
    args = ap.parse_args(argv)
    peers = args.peers.split(",")
    n = len(peers)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", args.port))
    server.listen(1)
    succ = None
    deadline = time.time() + 60
    while succ is None:
        try:
            succ = socket.create_connection((peers[(args.rank + 1) % n], args.port), timeout=5)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    server.settimeout(60)
    pred, _ = server.accept()
    succ.settimeout(None)
    pred.settimeout(None)
    _barrier(args.rank, succ, pred)
    buf = bytes(CHUNK)
    for it in range(args.iterations):
        time.sleep(args.compute_s)
        start = time.monotonic()
        marks = [start]
        for _ in range(2 * (n - 1)):
            sender = threading.Thread(target=_send, args=(succ, args.bytes, buf))
            sender.start()
            _recv(pred, args.bytes)
            sender.join()
            marks.append(time.monotonic())
        steps = [round(b - a, 4) for a, b in zip(marks, marks[1:])]
        print(json.dumps({"rank": args.rank, "iteration": it, "seconds": marks[-1] - start, "steps_s": steps}),
              flush=True)
    succ.close()
    pred.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
