"""The REST server's limits (controller/southbound/wsgi_server.py) on a real eventlet WSGI server in this process: slow
headers are cut off at the deadline, a trickle included, and an escaped exception answers no traceback."""

import logging
import time

import pytest

from controller.southbound import framework as southbound

# Ryu's eventlet server; os-ken's is controller/southbound/http_server.py (test_http_server.py)
if southbound.NAME != "ryu":
    pytest.skip("Ryu's WSGI server: not the framework here", allow_module_level=True)

import eventlet
import eventlet.wsgi
from eventlet.green import socket

from controller.southbound import wsgi_server

TIMEOUT_S = 0.5


def site(environ, start_response):
    if environ["PATH_INFO"] == "/boom":
        raise RuntimeError("a traceback nobody should read")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


@pytest.fixture
def port():
    listener = eventlet.listen(("127.0.0.1", 0))
    server = eventlet.spawn(eventlet.wsgi.server, listener, site, logging.getLogger("test-wsgi"),
                            **wsgi_server.server_options(TIMEOUT_S))
    yield listener.getsockname()[1]
    server.kill()
    listener.close()


def closed_after(conn, limit_s=5.0):
    """Seconds until the server closes ``conn`` (reading whatever it sends), or None past ``limit_s``."""
    started = time.monotonic()
    conn.settimeout(limit_s)
    try:
        while conn.recv(4096):
            pass
    except OSError:
        return None
    finally:
        conn.close()
    return time.monotonic() - started


def test_a_request_answers_as_before(port):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
    conn.settimeout(5)
    assert conn.recv(4096).startswith(b"HTTP/1.1 200 OK")
    conn.close()


def test_half_sent_headers_are_cut_off_at_the_deadline(port):
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
    for conn in conns:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    waited = [closed_after(conn) for conn in conns]
    assert all(w is not None and w < TIMEOUT_S + 1 for w in waited), waited


def test_a_trickle_of_header_bytes_does_not_keep_the_connection(port):
    conn = socket.create_connection(("127.0.0.1", port))
    started = time.monotonic()
    conn.sendall(b"GET / HTTP/1.1\r\n")
    with pytest.raises(OSError):  # the server closed: a send fails (broken pipe / reset) within a few bytes
        for _ in range(40):
            eventlet.sleep(TIMEOUT_S / 5)  # each byte well within the socket timeout
            conn.sendall(b"X")
    assert time.monotonic() - started < 8 * TIMEOUT_S
    conn.close()


def test_an_idle_keep_alive_connection_is_closed_too(port):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.settimeout(5)
    assert conn.recv(4096).startswith(b"HTTP/1.1 200 OK")
    waited = closed_after(conn)
    assert waited is not None and waited < TIMEOUT_S + 1


def test_an_escaped_exception_answers_500_without_its_traceback(port):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"GET /boom HTTP/1.0\r\n\r\n")
    conn.settimeout(5)
    answer = b""
    while chunk := conn.recv(4096):
        answer += chunk
    conn.close()
    assert answer.startswith(b"HTTP/1.1 500") and b"Traceback" not in answer and b"nobody" not in answer


def test_install_makes_the_server_class_serve_with_the_options(monkeypatch):
    seen = {}
    monkeypatch.setattr(eventlet.wsgi, "server", lambda sock, handle, log, **kw: seen.update(kw, sock=sock))

    class Server:  # the shape of Ryu's WSGIServer: a listening socket and a handler
        server, handle = "the socket", staticmethod(site)

    wsgi_server.install(Server, lambda: "a logger", 3.0)
    s = Server()
    s.serve_forever()
    assert s.logger == "a logger" and seen["sock"] == "the socket"
    assert seen["socket_timeout"] == seen["keepalive"] == 3.0 and seen["debug"] is False
    assert seen["protocol"].header_timeout_s == 3.0
