"""Chaos (issue 25): a seeded random sequence of faults for CHAOS_S seconds on a k=4 fat-tree under the 8 stride
elephants, with the real controller, Open vSwitch and Mininet, while invariants are checked all along and at
the end.

Faults: SIGKILL and restart, fabric link flaps, a switch's OpenFlow connection held down, REST bursts with good
and bad bodies, a host forging another's address (ARP and IPv4 source), forged LLDP from a host port, a host
claiming 2,000 addresses, a connected switch's tables wiped (``ovs-ofctl del-flows`` / ``del-groups``: repaired by
the table audit).

All along (sampled every second): no REST answer is a 5xx, the controller's memory (its process and the
optimiser's worker) stays bounded. At the end, within QUIET_S of the last fault: every host pair reachable,
the 8 elephants pinned on link-disjoint paths that the switches' own tables take, and no traceback in the log.
The seed is printed; ``MLROUTE_CHAOS_SEED=N`` replays a run, ``MLROUTE_CHAOS_S=300`` runs five minutes of it.
"""

import http.client
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.attacks import FORGE, FORGE_HOSTS, FORGE_LLDP
from tests.integration.flowtables import disjoint_in_the_tables
from tests.integration.harness import STRIDE4, ping_all, ping_all_concurrently, point_at, te_config, wait_until

SEED = int(os.environ.get("MLROUTE_CHAOS_SEED", "2503"))
CHAOS_S = float(os.environ.get("MLROUTE_CHAOS_S", "60"))  # the suite's budget; a few minutes: MLROUTE_CHAOS_S=300
QUIET_S = 30
TOKEN = "secret"
CONFIG = te_config("mlroute", f"rest:\n  token: {TOKEN}\n")
MEMORY_BOUND_MIB = 600  # the controller and its optimiser worker together (~250 MiB at rest)


def rss_mib(pid):
    """Resident memory of ``pid`` and its children (the optimiser's worker), MiB."""
    total, pids = 0, [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    for p in pids:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1])
        except (OSError, StopIteration, ValueError):
            pass
    return total / 1024


def request(fab, method, path, body=None, token=None, headers=None):
    """One REST request: its status, or 0 when the controller is not listening (down: not an error)."""
    conn = http.client.HTTPConnection("127.0.0.1", fab.controller.rest_port, timeout=15)
    try:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=hdrs)
        response = conn.getresponse()
        response.read()
        return response.status
    except ConnectionRefusedError:
        return 0
    except OSError as exc:  # a reset from a process killed mid-answer, a timeout
        return -1 if "reset" in repr(exc).lower() or "timed out" in repr(exc) else -2
    finally:
        conn.close()


class Watch(threading.Thread):
    """Every second: the REST views and /metrics (a 5xx is a failure) and the controller's memory."""

    def __init__(self, fab):
        super().__init__(daemon=True)
        self.fab, self.stopped = fab, threading.Event()
        self.errors, self.max_rss, self.samples = [], 0.0, 0

    def run(self):
        while not self.stopped.is_set():
            for path in ("/mlroute/topology", "/mlroute/elephants", "/mlroute/routing", "/metrics"):
                status = request(self.fab, "GET", path)
                if status >= 500:
                    self.errors.append((time.time(), path, status))
            self.max_rss = max(self.max_rss, rss_mib(self.fab.controller.proc.pid))
            self.samples += 1
            self.stopped.wait(1)


class Chaos:
    """The faults, each leaving the fabric as it found it (links up, switches pointed at the controller)."""

    def __init__(self, fab, rng):
        self.fab, self.net, self.rng = fab, fab.net, rng
        self.links = [(ln.intf1.node.name, ln.intf2.node.name) for ln in fab.net.links
                      if not ln.intf1.node.name.startswith("h") and not ln.intf2.node.name.startswith("h")]
        self.rest_errors = []

    def kill_and_restart(self):
        self.fab.controller.kill()
        down = self.rng.uniform(0, 3)
        time.sleep(down)
        self.fab.controller.restart()
        self.fab.controller.wait_ready()
        return f"controller killed, restarted after {down:.1f} s"

    def link_flap(self):
        a, b = self.rng.choice(self.links)
        down = self.rng.uniform(1, 4)
        self.net.configLinkStatus(a, b, "down")
        try:
            time.sleep(down)
        finally:
            self.net.configLinkStatus(a, b, "up")
        return f"link {a}-{b} down for {down:.1f} s"

    def switch_disconnect(self):
        switch = self.rng.choice(self.net.switches).name
        down = self.rng.uniform(2, 5)
        point_at([switch], "tcp:127.0.0.1:9")
        try:
            time.sleep(down)
        finally:
            point_at([switch], f"tcp:127.0.0.1:{self.fab.controller.of_port}")
        return f"switch {switch} disconnected for {down:.1f} s"

    def tables_wiped(self):
        switch = self.rng.choice(self.net.switches).name
        for what in ("del-flows", "del-groups"):  # an operator's flush: the controller is told nothing
            subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", what, switch], check=True)
        return f"switch {switch}'s tables wiped while connected"

    def rest_burst(self):
        bodies = [("GET", "/mlroute/topology", None, None), ("POST", "/mlroute/recompute", b"{}", TOKEN),
                  ("POST", "/mlroute/recompute", b"{}", "wrong"), ("POST", "/mlroute/jobs", b"{", TOKEN),
                  ("POST", "/mlroute/jobs", b"\xff\xfe", TOKEN), ("POST", "/mlroute/jobs", b"[" * 5000, TOKEN),
                  ("POST", "/mlroute/jobs", b"x" * (2 << 20), TOKEN), ("POST", "/mlroute/jobs", b"{}", None),
                  ("GET", "/mlroute/nothing-here", None, None)]
        statuses = []

        def client():
            for _ in range(6):
                method, path, body, token = self.rng.choice(bodies)
                statuses.append((path, request(self.fab, method, path, body, token)))
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.rest_errors += [(p, s) for p, s in statuses if s >= 500]
        return f"REST burst: {sorted({s for _, s in statuses})}"

    def _host_runs(self, host, script, *args, timeout=60):
        attack = host.popen([sys.executable, "-c", script, host.defaultIntf().name, *map(str, args)])
        attack.communicate(timeout=timeout)

    def forged_address(self):
        attacker, victim = self.rng.sample(self.net.hosts, 2)
        target = self.rng.choice([h for h in self.net.hosts if h not in (attacker, victim)])
        self._host_runs(attacker, FORGE, victim.IP(), f"{target.IP()},10.0.0.250", 5)
        return f"{attacker.name} forges {victim.name}'s address"

    def forged_lldp(self):
        from controller.southbound.framework import topology

        lldp = topology()[0].LLDPPacket  # (Ryu's or os-ken's LLDP frame builder)
        attacker = self.rng.choice(self.net.hosts)
        links = self.fab.controller.get("/mlroute/topology")["links"]
        claims = self.rng.sample(links, min(4, len(links))) if links else []
        frames = [lldp.lldp_packet(x["src"], x["src_port"], attacker.MAC(), 120).hex() for x in claims]
        if frames:
            self._host_runs(attacker, FORGE_LLDP, 20, 3, *frames)
        return f"{attacker.name} forges LLDP naming {len(frames)} real ports"

    def address_flood(self):
        attacker = self.rng.choice(self.net.hosts)
        self._host_runs(attacker, FORGE_HOSTS, 2000)
        return f"{attacker.name} claims 2000 addresses"

    FAULTS = ("kill_and_restart", "link_flap", "switch_disconnect", "rest_burst", "forged_address", "forged_lldp",
              "address_flood", "tables_wiped")
    WEIGHTS = (2, 3, 2, 3, 1, 1, 1, 2)

    def run(self, seconds):
        done, end = [], time.time() + seconds
        while time.time() < end:
            fault = self.rng.choices(self.FAULTS, self.WEIGHTS)[0]
            done.append(f"{time.time() - (end - seconds):5.1f} s  {getattr(self, fault)()}")
            time.sleep(self.rng.uniform(0.5, 3))
        return done


def test_a_seeded_chaos_run_keeps_every_invariant(fabric_factory):
    print(f"\nchaos seed {SEED} (replay: MLROUTE_CHAOS_SEED={SEED})")
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), CONFIG, jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=CHAOS_S + QUIET_S + 30)
    watch = Watch(fab)
    watch.start()
    chaos = Chaos(fab, random.Random(SEED))
    try:
        assert wait_until(lambda: disjoint_in_the_tables(fab), timeout=20, interval=0.5), \
            fab.controller.get("/mlroute/elephants")
        faults = chaos.run(CHAOS_S)
        quiet = time.time()
        reachable = wait_until(lambda: ping_all_concurrently(fab.net, timeout_s=2) == 0 or None, timeout=QUIET_S,
                               interval=0)
        reachable_s = time.time() - quiet
        paths = wait_until(lambda: disjoint_in_the_tables(fab), timeout=quiet + QUIET_S - time.time(), interval=0.5)
        disjoint_s = time.time() - quiet
    finally:
        watch.stopped.set()
        watch.join()
        flows.stop()
    replay = f"(seed {SEED}; replay with MLROUTE_CHAOS_SEED={SEED})"
    print("\n".join(faults))
    print(f"{len(faults)} faults; after the last: every pair reachable at {reachable_s:.1f} s, elephants "
          f"link-disjoint in the tables at {disjoint_s:.1f} s; {watch.samples} samples, max memory "
          f"{watch.max_rss:.0f} MiB")
    assert not watch.errors and not chaos.rest_errors, (watch.errors, chaos.rest_errors, replay)
    assert reachable, f"not every pair reachable {QUIET_S} s after the last fault {replay}"
    assert paths, f"elephants not link-disjoint {QUIET_S} s after the last fault {replay}: " \
        f"{fab.controller.get('/mlroute/elephants')}"
    assert watch.max_rss < MEMORY_BOUND_MIB, (watch.max_rss, replay)
    log = fab.controller.log()
    assert "Traceback" not in log, (log[log.index("Traceback") - 2000:][:4000], replay)
