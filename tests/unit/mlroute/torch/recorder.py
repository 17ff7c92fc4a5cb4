"""A stand-in controller for the hook's tests: a local http.server that records every request in arrival order
and answers as told (the real per-job REST's contract: PUT creates, renew of an unknown job is 404)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    body: Any
    auth: str | None


@dataclass
class Recorder:
    """The requests seen, and the controller's memory of jobs (so renew of a job it never got answers 404)."""

    requests: list[Request] = field(default_factory=list)
    jobs: dict[str, Any] = field(default_factory=dict)
    forget_on_renew: int = 0  # answer this many renews 404 by forgetting the job first (a controller restart)
    node_ranks: dict[str, int] | None = None  # a PUT with choose_ring is answered this order (None: the given one)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def of(self, method: str, suffix: str = "") -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path.endswith(suffix)]

    def index(self, method: str, suffix: str = "") -> list[int]:
        with self.lock:
            return [i for i, r in enumerate(self.requests) if r.method == method and r.path.endswith(suffix)]


def _handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet test output
            pass

        def _answer(self, status: int, body: Any = None) -> None:
            data = json.dumps(body if body is not None else {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> Request:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            req = Request(self.command, self.path, json.loads(raw) if raw else None, self.headers.get("Authorization"))
            with rec.lock:
                rec.requests.append(req)
            return req

        def do_PUT(self) -> None:  # noqa: N802 (http.server's naming)
            req = self._record()
            name = req.path.rsplit("/", 1)[1]
            with rec.lock:
                rec.jobs[name] = req.body
            if isinstance(req.body, dict) and req.body.get("choose_ring"):
                given = {h: i for i, h in enumerate(req.body["hosts"])}
                self._answer(200, {"job": {**req.body, "name": name, "node_ranks": rec.node_ranks or given}})
                return
            self._answer(200, {"name": name})

        def do_POST(self) -> None:  # noqa: N802
            req = self._record()
            name = req.path.removesuffix("/renew").rsplit("/", 1)[1]
            with rec.lock:
                if rec.forget_on_renew > 0:
                    rec.forget_on_renew -= 1
                    rec.jobs.pop(name, None)
                known = name in rec.jobs
            self._answer(200 if known else 404)

        def do_DELETE(self) -> None:  # noqa: N802
            req = self._record()
            with rec.lock:
                known = rec.jobs.pop(req.path.rsplit("/", 1)[1], None) is not None
            self._answer(200 if known else 404)

        def do_GET(self) -> None:  # noqa: N802
            """``/marker/...`` is recorded (the training script's "my first all_reduce is done"); ``/count/METHOD``
            answers how many requests of that method arrived (the script waits for renews with it)."""
            if self.path.startswith("/count/"):
                self._answer(200, {"count": len(rec.of(self.path.rsplit("/", 1)[1]))})
                return
            self._record()
            self._answer(200)

    return Handler


class RecordingServer:
    """Context manager: the server on an ephemeral loopback port, in a daemon thread."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.recorder))
        self.server.daemon_threads = True
        self.recorder.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self.recorder

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
