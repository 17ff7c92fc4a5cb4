"""A real ZooKeeper server for tests: Debian's ``zookeeper`` package (3.8) run in the foreground.

``java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar org.apache.zookeeper.server.quorum.QuorumPeerMain
zoo.cfg`` with a generated standalone configuration: a temporary data directory, a free client port, a 100 ms
tick (sessions down to 0.2 s, so expiry tests are short). ``stop`` / ``start`` keep the port and the data, so
clients reconnect and their sessions survive a short outage, as with a restarted production server.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

JAR = Path("/usr/share/java/zookeeper.jar")
CONF_DIR = Path("/etc/zookeeper/conf")  # log4j.properties
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 100


def until(predicate, timeout_s: float = 20.0) -> None:
    """Polls ``predicate`` until true (cluster callbacks run on kazoo's threads): a bound against hanging, not a
    timing assertion."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing() -> str | None:
    """Why no server can be started here (None: it can)."""
    if not JAR.is_file():
        return f"{JAR} missing: apt-get install zookeeper (scripts/setup_env.sh installs it)"
    if shutil.which("java") is None:
        return "java missing (Debian's zookeeper package depends on a JRE)"
    return None


class ZooKeeperServer:
    """One standalone server; ``hosts`` is the connection string."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root, self.port = root, port or free_port()
        self.hosts = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        (root / "data").mkdir(parents=True, exist_ok=True)
        (root / "zoo.cfg").write_text(
            f"tickTime={TICK_MS}\ndataDir={root / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            f"minSessionTimeout={2 * TICK_MS}\nmaxSessionTimeout=60000\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=srvr\n")

    def start(self, timeout_s: float = 30.0) -> None:
        problem = missing()
        if problem:
            raise RuntimeError(problem)
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen(
            # C1 only and the serial collector: a test server starts and answers sooner on a loaded machine (a
            # restarted server gives its restored sessions one timeout from start to reconnect; JIT threads
            # competing with the tests for 2 cores used it up, and the leader's session expired)
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
             "-Dzookeeper.log.dir=" + str(self.root), "-cp", f"{CONF_DIR}:{JAR}", MAIN,
             str(self.root / "zoo.cfg")], stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while not self.serving():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not serve within {timeout_s:g} s; see "
                                   f"{self.root / 'server.log'}")
            time.sleep(0.1)

    def serving(self) -> bool:
        """The server serves clients (``srvr`` reports its mode). Not ``ruok``: it answers as soon as the process
        listens, before the data is loaded, and a restarted server's clients must reconnect within their session
        from when it serves."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"srvr")
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
                return b"Mode:" in answer
        except OSError:
            return False

    def pause(self) -> None:
        """Frozen (SIGSTOP): it answers nothing and expires nothing until :meth:`resume`, when every session whose
        timeout passed meanwhile expires at once (a stalled server, as a long GC pause or a frozen VM is)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Killed (SIGKILL: a crash, as a lost quorum looks to its clients); the data stays."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self.proc = None


def run_node(hosts: str, name: str, node_id: str, session_timeout_s: float, liveness: str | None = None,
             published: str | None = None) -> None:
    """A cluster node in a process of its own (``python -m tests.zookeeper HOSTS NAME ID TIMEOUT [BIND
    [PUBLISHED]]``: with a liveness server on BIND, published as PUBLISHED): one line per event on stdout
    (``leading G`` / ``following G`` / ``shared KEY JSON``), so a test can SIGKILL or SIGSTOP it like a
    controller."""
    import json
    import sys

    from kazoo.handlers.threading import SequentialThreadingHandler

    from controller.cluster.zookeeper import Coordinator

    class Printer:
        def leading(self, generation):
            print("leading", generation, flush=True)

        def following(self, generation):
            print("following", generation, flush=True)

        def shared(self, key, value):
            print("shared", key, json.dumps(value), flush=True)

    from controller.cluster.liveness import LivenessServer

    server = LivenessServer(liveness) if liveness else None
    node = Coordinator(hosts, name, node_id, f"http://{node_id}:8080", session_timeout_s, Printer(),
                       handler=SequentialThreadingHandler(), liveness=server, liveness_host=published)
    node.start()
    print("started", flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)
    node.stop()


if __name__ == "__main__":
    import sys

    run_node(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), *sys.argv[5:7])
