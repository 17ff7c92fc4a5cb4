"""Ryu's REST server with a deadline for slow clients and no tracebacks in answers.

Ryu starts ``eventlet.wsgi.server(sock, app, log)`` with eventlet's defaults: no socket timeout (a client that
sends half its headers keeps its connection and green thread for ever), keep-alive connections idle without
limit, and ``debug=True``, which puts the traceback of any unhandled exception into the 500's body. This runs
the same server with:

- a deadline of ``timeout_s`` for the request line and headers of each request, counted from the moment the
  connection is ready for one (so an idle keep-alive connection closes after it too): a client trickling one
  header byte a second is cut off, not only one that goes silent;
- ``socket_timeout=timeout_s``: every read of a body and every write of an answer must progress within it
  (rest.py also bounds a whole body's read by it);
- ``debug=False``: a 500 that escapes rest.py's own handler (which answers JSON with an error id) is empty.

Installed by controller/app.py on Ryu's ``WSGIServer`` class before ryu-manager starts it (``install``);
eventlet only, no Ryu import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import eventlet
import eventlet.wsgi


class HeaderDeadlineProtocol(eventlet.wsgi.HttpProtocol):
    """eventlet's HTTP protocol with a deadline on each request's line and headers (``header_timeout_s``)."""

    header_timeout_s = 5.0

    def handle_one_request(self) -> None:
        self._header_deadline = eventlet.Timeout(self.header_timeout_s)
        try:
            super().handle_one_request()
        except eventlet.Timeout as timeout:
            if timeout is not self._header_deadline:
                raise
            self.close_connection = 1  # no answer: the client did not finish asking
        finally:
            self._header_deadline.cancel()

    def parse_request(self) -> bool:
        try:
            return bool(super().parse_request())
        finally:
            self._header_deadline.cancel()  # the headers are in: the handler's own time is not limited here


def protocol(timeout_s: float) -> type:
    """A protocol class with a header deadline of ``timeout_s``."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": float(timeout_s)})


def server_options(timeout_s: float) -> dict[str, Any]:
    """The keyword arguments of ``eventlet.wsgi.server`` for a REST server whose slow clients are cut off."""
    return {"protocol": protocol(timeout_s), "socket_timeout": float(timeout_s), "keepalive": float(timeout_s),
            "debug": False}


def install(server_cls: type, logger: Callable[[], Any], timeout_s: float) -> None:
    """Make ``server_cls`` (Ryu's ``ryu.app.wsgi.WSGIServer``, a StreamServer with ``server`` and ``handle``)
    serve with ``server_options(timeout_s)``; ``logger`` makes its log object (Ryu's ``hub.LoggingWrapper``)."""
    options = server_options(timeout_s)

    def serve_forever(self: Any) -> None:
        self.logger = logger()
        eventlet.wsgi.server(self.server, self.handle, self.logger, **options)

    setattr(server_cls, "serve_forever", serve_forever)  # noqa: B010  (any class)
