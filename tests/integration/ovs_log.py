"""What Open vSwitch itself received on its controller connections, read from ovs-vswitchd's own log with its
``vconn`` module at debug level for a window: the switches' evidence of what a controller sent (a controller's
counters and log are only its own word)."""

import datetime
import re
import subprocess
from pathlib import Path

DEFAULT_LOG = Path("/var/log/openvswitch/ovs-vswitchd.log")
PIDFILE = Path("/var/run/openvswitch/ovs-vswitchd.pid")
#: the messages that change a switch or put a packet on its wire
WRITES = frozenset({"OFPT_FLOW_MOD", "OFPT_GROUP_MOD", "OFPT_PACKET_OUT", "OFPT_METER_MOD", "OFPT_PORT_MOD"})
_RECEIVED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z\|\d+\|vconn\|DBG\|tcp:[^|]*?:(\d+): "
                       r"received: (OFPT_\w+)")


def log_path() -> Path:
    """ovs-vswitchd's log file, as its command line names it (``--log-file=``)."""
    try:
        pid = PIDFILE.read_text().strip()
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return DEFAULT_LOG
    named = [a.decode().split("=", 1)[1] for a in args if a.startswith(b"--log-file=")]
    return Path(named[0]) if named else DEFAULT_LOG


class ReceivedMessages:
    """A context: while it is open every OpenFlow message a switch receives is logged; on exit, ``messages`` holds
    (epoch seconds, the controller's TCP port, message type) for each, in order."""

    def __init__(self):
        self.path = log_path()
        self.messages: list[tuple[float, int, str]] = []

    def __enter__(self):
        self._start = self.path.stat().st_size
        subprocess.run(["ovs-appctl", "vlog/set", "vconn:file:dbg"], check=True, capture_output=True)
        return self

    def __exit__(self, *exc):
        subprocess.run(["ovs-appctl", "vlog/set", "vconn:file:info"], check=True, capture_output=True)
        with self.path.open("rb") as log:
            log.seek(self._start)
            text = log.read().decode(errors="replace")
        for line in text.splitlines():
            m = _RECEIVED.match(line)
            if m:
                when = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc)
                self.messages.append((when.timestamp(), int(m.group(2)), m.group(3)))
        return False

    def writes_from(self, of_port: int, after: float = 0.0) -> list[tuple[float, str]]:
        """The writes (WRITES) a switch received from the controller on ``of_port`` after ``after``."""
        return [(t, kind) for t, port, kind in self.messages if port == of_port and kind in WRITES and t > after]

    def received_from(self, of_port: int) -> int:
        """How many messages of any kind came from the controller on ``of_port`` (0: the window saw nothing of
        it, so its silence proves nothing)."""
        return sum(1 for _, port, _ in self.messages if port == of_port)
