"""The REST server used where the framework has none (controller/southbound/http_server.py, os-ken) on real sockets
in this process: an answer as before, half-sent and trickled headers cut off at the deadline, one request per
connection, and an escaped exception answers no traceback."""

import socket
import time

import pytest

from controller.southbound import http_server

TIMEOUT_S = 0.5


def site(environ, start_response):
    if environ["PATH_INFO"] == "/boom":
        raise RuntimeError("secret internals")
    body = b"socket" if "mlroute.socket" in environ else b"none"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture(scope="module")
def port():
    server = http_server.start(site, ("127.0.0.1", 0), TIMEOUT_S)
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def ask(port, raw):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(raw)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        return answer


def test_a_request_is_answered_and_its_connection_closed(port):
    answer = ask(port, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")  # recv until the server closes
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"socket")


def test_half_sent_headers_are_cut_off_at_the_deadline(port):
    started = time.monotonic()
    assert ask(port, b"GET /x HTTP/1.1\r\nHost: a\r\n") == b""  # closed, no answer
    assert TIMEOUT_S * 0.8 < time.monotonic() - started < TIMEOUT_S + 1


def test_a_trickle_of_header_bytes_does_not_keep_the_connection(port):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /x HTTP/1.1\r\n")
        with pytest.raises(OSError):
            for _ in range(50):
                time.sleep(TIMEOUT_S / 5)  # each byte well within the socket timeout
                s.sendall(b"X: y\r\n")
                try:
                    closed = s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""  # the server closed it
                except BlockingIOError:  # still open, nothing to read
                    closed = False
                if closed:
                    raise ConnectionResetError
    assert TIMEOUT_S * 0.8 < time.monotonic() - started < TIMEOUT_S + 1.5


def test_an_escaped_exception_answers_500_without_the_traceback(port):
    answer = ask(port, b"GET /boom HTTP/1.1\r\nHost: a\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 500") and b"secret internals" not in answer and b"Traceback" not in answer


def test_connections_past_the_limit_are_closed_unanswered():
    server = http_server.start(site, ("127.0.0.1", 0), 2.0)
    server.max_connections = 2
    port = server.server_address[1]
    try:
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
        time.sleep(0.2)  # both accepted, each waiting for its headers
        assert ask(port, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n") == b""  # the third: closed at once
        for s in held:
            s.close()
        time.sleep(0.5)  # the held ones closed: their threads end
        assert ask(port, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n").startswith(b"HTTP/1.0 200")
    finally:
        server.shutdown()
        server.server_close()
