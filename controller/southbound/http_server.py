"""The REST server where the framework has none (os-ken 4): the standard library's WSGI server, one native
thread per connection, with the limits controller/southbound/wsgi_server.py gives Ryu's eventlet server:

- a deadline of ``timeout_s`` for the request line and headers, counted from the connection's start: a client
  trickling one header byte a second is cut off (its connection shut, no answer), not only one that goes silent;
- every read of a body and every write of an answer must progress within ``timeout_s`` (the socket timeout),
  and rest.py bounds a whole body's read by it (``southbound.deadline`` sets the socket timeout to what is
  left, from the socket this server puts in the environment as ``mlroute.socket``);
- no traceback in any answer (an exception that escapes rest.py's own JSON 500 gives wsgiref's plain 500);
- one request per connection (HTTP/1.0): no idle keep-alive connections;
- at most ``MAX_CONNECTIONS`` connections at once (eventlet's server's default of 1024 green threads); one more
  is closed unanswered.

No framework import; used by controller/southbound/framework.py.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

LOG = logging.getLogger("mlroute.rest")


class DeadlineHandler(WSGIRequestHandler):
    """wsgiref's request handler with a header deadline and socket timeouts of ``timeout_s``."""

    timeout_s = 5.0

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.timeout_s)  # every read and write must progress within it
        self._cut = False
        self._watchdog = threading.Timer(self.timeout_s, self._cut_off)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _cut_off(self) -> None:
        """The request line and headers did not arrive within the deadline: shut the connection."""
        self._cut = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def parse_request(self) -> bool:
        try:
            parsed = bool(super().parse_request())  # reads the headers
        finally:
            self._watchdog.cancel()  # the headers are in (or failed): the handler's own time is not limited here
        return parsed and not self._cut

    def handle(self) -> None:
        try:
            super().handle()
        except (OSError, ValueError):  # the client went away, was cut off, or timed out mid-answer
            self.close_connection = True
        finally:
            self._watchdog.cancel()

    def get_environ(self) -> dict[str, Any]:
        environ = super().get_environ()
        environ["mlroute.socket"] = self.connection
        return environ

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        LOG.info("%s %s", self.address_string(), format % args)


MAX_CONNECTIONS = 1024


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    max_connections = MAX_CONNECTIONS
    _active = 0
    _count_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count_lock:
            if self._active >= self.max_connections:
                self.shutdown_request(request)
                return
            self._active += 1
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count_lock:
                self._active -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        LOG.warning("REST connection from %s failed", client_address, exc_info=True)


def start(app: Any, address: tuple[str, int], timeout_s: float) -> ThreadingServer:
    """Serve the WSGI ``app`` on ``address`` from a daemon thread; returns the server (``shutdown()`` stops it)."""
    handler = type("DeadlineHandler", (DeadlineHandler,), {"timeout_s": float(timeout_s)})
    server = ThreadingServer(address, handler)
    server.set_app(app)
    threading.Thread(target=server.serve_forever, name="mlroute-rest", daemon=True).start()
    LOG.info("REST on http://%s:%d", *server.server_address[:2])
    return server
