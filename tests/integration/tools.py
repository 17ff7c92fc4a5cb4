"""Small helpers of the integration tests that run third-party programs (chromium, prometheus), and the reader of
the DOM headless Chromium dumps."""

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
from html.parser import HTMLParser

import pytest

from mlroute.experiment.emulation import terminate


def required_binary(name: str) -> str:
    """The path of ``name``; skips the test when it is missing, or fails under MLROUTE_REQUIRE_INTEGRATION=1
    (CI, where scripts/setup_env.sh installed it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (scripts/setup_env.sh installs it)"
        if os.environ.get("MLROUTE_REQUIRE_INTEGRATION") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


class DevTools:
    """A page in headless Chromium driven over the DevTools protocol, with a minimal RFC 6455 client (stdlib
    only: the protocol needs text frames out and whole messages in, nothing more)."""

    def __init__(self, chromium: str, url: str, profile, flags: list[str]):
        self.proc = subprocess.Popen([chromium, *flags, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                      url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, HOME=str(profile)))
        active = profile / "DevToolsActivePort"
        deadline = time.time() + 30
        while not (active.exists() and active.read_text().count("\n") >= 1):
            assert self.proc.poll() is None and time.time() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(active.read_text().split("\n")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.loads(r.read()) if t["type"] == "page")
        self._connect(port, page["webSocketDebuggerUrl"].split(f":{port}", 1)[1])
        self._id = 0

    def _connect(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "DevTools connection closed"
            data += chunk
        return data

    def _send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                  bytes([0x80 | 126]) + struct.pack(">H", n) if n < 1 << 16 else
                                  bytes([0x80 | 127]) + struct.pack(">Q", n))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _recv(self) -> str:
        message = b""
        while True:
            first, second = self._recv_exact(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            message += self._recv_exact(n)
            if first & 0x80:  # FIN: the message is complete
                return message.decode()

    def evaluate(self, expression: str):
        """The JSON value of a JavaScript expression in the page (promises awaited); raises on a JS error."""
        self._id += 1
        self._send(json.dumps({"id": self._id, "method": "Runtime.evaluate", "params": {
            "expression": expression, "awaitPromise": True, "returnByValue": True}}))
        while True:
            answer = json.loads(self._recv())
            if answer.get("id") == self._id:
                break
        result = answer["result"]
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            terminate(self.proc)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1500,900"]
BUDGET_MS = 5000  # virtual time: the page's first fetches plus two refreshes at POLL_S


def run_chromium(url, profile, *action):
    """Headless Chromium on ``url`` with a fresh profile; returns stdout (the DOM for --dump-dom)."""
    env = dict(os.environ, HOME=str(profile))
    cmd = [required_binary("chromium"), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
           f"--virtual-time-budget={BUDGET_MS}", *action, url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """Elements of the dumped DOM as (tag, attributes, text inside its <title> child when it has one)."""

    def __init__(self, text):
        super().__init__()
        self.elements, self._stack, self._in_title = [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, **{k: v or "" for k, v in attrs}, "title": ""}
        self.elements.append(element)
        if tag == "title" and self._stack:
            self._in_title = self._stack[-1]
        elif tag not in ("br", "meta", "link", "input", "img", "col"):
            self._stack.append(element)

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = None
            return
        while self._stack:
            if self._stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        if self._in_title is not None:
            self._in_title["title"] += data

    def find(self, tag=None, cls=None, **attrs):
        return [e for e in self.elements if (tag is None or e["tag"] == tag)
                and (cls is None or cls in e.get("class", "").split())
                and all(e.get(k.replace("_", "-")) == v for k, v in attrs.items())]
