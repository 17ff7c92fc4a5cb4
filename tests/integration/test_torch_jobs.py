"""Real PyTorch training jobs declare themselves (issue 31): Debian's python3-torch gloo jobs, one rank per host of
the emulated k=4 fat-tree at 10 Mb/s, each host running its own ``torchrun ... -m mlroute.torch`` and reaching the
controller's REST over a management network (a veth per host to a bridge in the root namespace, 198.18.0.0/16),
never through the fabric. Nobody POSTs anything by hand: the hook PUTs each job before init_process_group returns,
renews its lease and deletes it at exit.

One scenario, in order: 4 jobs x 4 ranks (2 MB, 4 iterations) under mlroute, then (on the same network) two jobs
of which one is killed with SIGKILL, then the same 4 jobs under ECMP on a fresh network and controller, then on one
big switch (the non-blocking reference). Speeds are compared with that reference, measured in the same run on the
same loaded machine: the ideal ring time assumes the emulation itself costs nothing, and on 2 cores running 32
torch processes and Open vSwitch's userspace datapath the big switch itself ran 1.09-1.19x the ideal while the
machine was shared, 1.04-1.05x for one job alone; the routing's share of the time is what the test holds.
"""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest

from mlroute.experiment import torch_jobs
from mlroute.experiment.management import ManagementNetwork
from mlroute.experiment.runner import ring_placement
from tests.integration import harness
from tests.integration.flowtables import dump_flows

PATTERN = "torch-allreduce:4x4,mb=2,iters=4"
SPEC = torch_jobs.parse(PATTERN)
SEED = 1
BW = 10.0
LEASE_S = 6.0  # short, so a killed job ends within the test; renewed every 2 s
IDEAL_S = torch_jobs.ideal_seconds(SPEC.ranks, SPEC.mb, BW)  # 2.4 s
# controller/desired/rules.py: a declared pair's ingress (PRIO_PAIR) and upward hops (PRIO_PAIR_HOP), a pinned
# elephant's upward hops (PRIO_ELEPHANT); a counting rule (PRIO_FLOW) that outputs (a pinned first hop) counts too
PIN_PRIORITIES = (15, 25, 30)
PRIO_FLOW = 20


TORCH_MISSING = torch_jobs.torch_problem() if shutil.which("mnexec") else None  # no Mininet: conftest skips
pytestmark = pytest.mark.skipif(TORCH_MISSING is not None, reason=f"{TORCH_MISSING} (scripts/setup_env.sh installs "
                                                                    "python3-torch)")


class TorchFabric:
    """A controller whose REST listens on the management bridge only, a fat-tree connected to it, every host on
    the management network."""

    def __init__(self, mode, mgmt, workdir, topo=None):
        self.mode = mode
        self.mgmt = mgmt
        self.workdir = workdir
        self.token = "torch-jobs-test-token"
        self.net = None
        config = harness.te_config(mode, f"rest:\n  token: {self.token}\n")
        self.controller = harness.Controller(workdir / "ctl", config, rest_host=mgmt.address)
        self.controller.wait_ready()
        from mininet_topos.fattree import FatTreeTopo
        self.net = harness.start_network(topo or FatTreeTopo(k=4, bw=BW), self.controller, jumbo=True)
        mgmt.attach(self.net)
        assert harness.wait_until(lambda: harness.ping_all_concurrently(self.net) == 0, timeout=60, interval=1), \
            "the fabric did not converge"
        self.url = mgmt.url(self.controller.rest_port)

    def jobs(self, placement, workdir, iterations=None, names=None):
        return torch_jobs.TorchJobs(self.net, placement, SPEC, workdir, url=self.url, token=self.token,
                                    lease_s=LEASE_S, iterations=iterations, names=names)

    def stop(self):
        try:
            self.mgmt.detach()
            if self.net is not None:
                harness.stop_network(self.net)
        finally:
            self.controller.stop()
            print(f"\n--- {self.mode} controller log tail ---\n{self.controller.log()[-1500:]}")


@pytest.fixture(scope="module")
def mgmt():
    with ManagementNetwork() as network:
        yield network


@pytest.fixture(scope="module")
def fabrics(mgmt, tmp_path_factory):
    """``make(mode)``: a fresh controller and network; the one before is stopped first (one network at a time)."""
    made = []

    def make(mode, topo=None):
        for fab in made:
            fab.stop()
        made.clear()
        fab = TorchFabric(mode, mgmt, tmp_path_factory.mktemp(mode), topo)
        made.append(fab)
        return fab

    yield make
    for fab in made:
        fab.stop()


@pytest.fixture(scope="module")
def mlroute_fabric(fabrics):
    return fabrics("mlroute")


PLACEMENT = ring_placement(SPEC, 16, SEED)  # hosts of each job in rank order


def run_jobs(fab, workdir):
    """The 4 jobs to their end; what the controller showed meanwhile (declared jobs, elephants' host pairs), read
    every second: a job deletes itself at exit, and its elephants go with it."""
    jobs = fab.jobs(PLACEMENT, workdir)
    declared, elephants = {}, set()

    def watch():
        try:
            for job in fab.controller.get("/mlroute/jobs")["jobs"]:
                declared.setdefault(job["name"], job["rings"])
            elephants.update((e["src_ip"], e["dst_ip"]) for e in fab.controller.get("/mlroute/elephants"))
        except OSError:
            pass

    try:
        jobs.wait(jobs.timeout_s(IDEAL_S), watch=watch)
        times = jobs.iteration_times()
    finally:
        jobs.stop()
    print(f"{fab.mode}: per-job iterations {times} (ideal {IDEAL_S:.2f} s), init {jobs.init_seconds()}")
    return {"times": times, "declared": declared, "elephants": elephants,
            "ips": [[fab.net.get(h).IP() for h in hosts] for hosts in PLACEMENT]}


@pytest.fixture(scope="module")
def mlroute_run(mlroute_fabric, tmp_path_factory):
    return run_jobs(mlroute_fabric, tmp_path_factory.mktemp("mlroute-jobs"))


@pytest.fixture(scope="module")
def ecmp_run(fabrics, tmp_path_factory):
    return run_jobs(fabrics("ecmp"), tmp_path_factory.mktemp("ecmp-jobs"))


@pytest.fixture(scope="module")
def nonblocking_run(fabrics, tmp_path_factory):
    """The same jobs on one switch (ECMP has nothing to choose there): the best this emulation can do."""
    from mininet_topos.bigswitch import BigSwitchTopo
    return run_jobs(fabrics("ecmp", BigSwitchTopo(16, bw=BW)), tmp_path_factory.mktemp("nonblocking-jobs"))


def steady(times):
    return sum(times[1:]) / len(times[1:])


def test_declared_jobs_run_iteration_0_at_the_steady_speed(mlroute_run):
    times = mlroute_run["times"]
    assert [len(t) for t in times] == [SPEC.iterations] * SPEC.jobs, times
    print(f"mlroute: steady / ideal per job {[round(steady(t) / IDEAL_S, 3) for t in times]}")
    for j, t in enumerate(times):
        assert t[0] <= 1.10 * steady(t), f"job {j}: iteration 0 {t[0]:.2f} s vs steady {steady(t):.2f} s: {times}"


def test_the_declared_pairs_are_the_pairs_that_carried_the_bytes(mlroute_run):
    declared = mlroute_run["declared"]
    assert sorted(declared) == [f"job{j}" for j in range(SPEC.jobs)], declared
    for j, ips in enumerate(mlroute_run["ips"]):
        (ring,) = declared[f"job{j}"]
        # gloo sends r -> r-1: the declared ring is the ranks' hosts in descending rank order (any rotation)
        start = ring.index(ips[-1])
        assert ring[start:] + ring[:start] == list(reversed(ips)), (j, ring, ips)
    edges = {(a, b) for rings in declared.values() for ring in rings for a, b in zip(ring, ring[1:] + ring[:1])}
    # elephants are 5-tuples the switches counted above 1 Mb/s for two polls: the pairs that carried the bytes
    assert mlroute_run["elephants"] == edges, (sorted(mlroute_run["elephants"] - edges),
                                               sorted(edges - mlroute_run["elephants"]))


def pair_rules(pairs):
    """Host pair -> number of rules on the switches' tables that pin its traffic: the declared pair's, and those of
    its 5-tuples once they are known elephants (the pair's pin passes to them)."""
    found = dict.fromkeys(pairs, 0)
    for sw in [f"e{p}_{i}" for p in range(4) for i in range(2)] + [f"a{p}_{i}" for p in range(4) for i in range(2)]:
        for rule in dump_flows(sw):
            key = (rule["match"].get("ipv4_src"), rule["match"].get("ipv4_dst"))
            pins = rule["priority"] in PIN_PRIORITIES or (rule["priority"] == PRIO_FLOW
                                                           and rule["actions"].startswith("output"))
            if pins and key in found:
                found[key] += 1
    return found


def ring_edges(ips):
    """gloo's ring edges of a job whose rank r runs on ips[r]: r -> r-1."""
    return [(ips[r], ips[r - 1]) for r in range(len(ips))]


def test_a_killed_job_ends_within_its_lease_and_its_pins_leave(mlroute_fabric, mlroute_run, tmp_path):
    fab = mlroute_fabric
    ctl = fab.controller
    assert not ctl.get("/mlroute/jobs")["jobs"], "the jobs of the first run deleted themselves at exit"
    placement = PLACEMENT[:2]
    jobs = fab.jobs(placement, tmp_path, iterations=200, names=["victim", "survivor"])
    try:
        ips = [[fab.net.get(h).IP() for h in hosts] for hosts in placement]
        victim, survivor = (ring_edges(x) for x in ips)

        def running():
            names = {j["name"] for j in ctl.get("/mlroute/jobs")["jobs"]}
            return names == {"victim", "survivor"} and all(len(t) >= 1 for t in jobs.iteration_times())
        assert harness.wait_until(running, timeout=torch_jobs.STARTUP_S, interval=1), jobs.tails()
        pinned_before = pair_rules(victim + survivor)
        assert all(pinned_before[e] for e in victim + survivor if _crosses_edge(fab, e)), (
            pinned_before, ctl.get("/mlroute/elephants"))

        jobs.kill(0, signal.SIGKILL)  # every rank: torchrun and its worker, no clean-up of any kind
        killed = time.monotonic()
        gone = harness.wait_until(lambda: "victim" not in {j["name"] for j in ctl.get("/mlroute/jobs")["jobs"]},
                                  timeout=3 * LEASE_S, interval=0.2)
        ended_s = time.monotonic() - killed
        unpinned = harness.wait_until(lambda: not any(pair_rules(victim).values()), timeout=3 * LEASE_S, interval=0.2)
        unpinned_s = time.monotonic() - killed
        print(f"killed job: gone from /mlroute/jobs {ended_s:.1f} s after SIGKILL, its pair rules "
              f"{unpinned_s:.1f} s (lease {LEASE_S:g} s, polls {harness.POLL_S} s)")
        assert gone and ended_s <= LEASE_S + harness.POLL_S, ended_s
        assert unpinned and unpinned_s <= LEASE_S + harness.POLL_S + 2, unpinned_s
        assert not {(e["src_ip"], e["dst_ip"]) for e in ctl.get("/mlroute/elephants")} & set(victim)
        # the other job is untouched: still declared (its own lease renewed) and still pinned
        assert {j["name"] for j in ctl.get("/mlroute/jobs")["jobs"]} == {"survivor"}
        assert all(n for e, n in pair_rules(survivor).items() if _crosses_edge(fab, e)), pair_rules(survivor)
        assert jobs.alive(1)
    finally:
        jobs.stop()


def test_declared_jobs_survive_a_controller_crash_and_run_at_speed_again(mlroute_fabric, mlroute_run, tmp_path):
    """Issue 39: two hooked jobs; the controller SIGKILLed during their first iterations and started again 3 s
    later: both jobs are declared (from its state file, and the hooks declare again on its return) and pinned
    within one poll period of its return, and by the second iteration after it they run within 1.1x of steady."""
    fab = mlroute_fabric
    ctl = fab.controller
    placement = PLACEMENT[2:]
    iterations = 10
    jobs = fab.jobs(placement, tmp_path, iterations=iterations, names=["first", "second"])
    try:
        edges = [e for hosts in placement for e in ring_edges([fab.net.get(h).IP() for h in hosts])
                 if _crosses_edge(fab, e)]
        assert harness.wait_until(lambda: all(len(t) >= 1 for t in jobs.iteration_times()),
                                  timeout=torch_jobs.STARTUP_S, interval=0.5), jobs.tails()
        assert {"first", "second"} <= {j["name"] for j in ctl.get("/mlroute/jobs")["jobs"]}
        ctl.kill()
        state = json.loads((ctl.workdir / "mlroute.jobs.json").read_text())
        time.sleep(3.0)
        ctl.restart()
        ctl.wait_ready()
        back = time.monotonic()
        at_return = [len(t) for t in jobs.iteration_times()]  # iterations each job had finished by then

        def declared_and_pinned():
            names = {j["name"] for j in ctl.get("/mlroute/jobs")["jobs"]}
            rules = pair_rules(edges)
            return {"first", "second"} <= names and all(rules.values())
        assert harness.wait_until(declared_and_pinned, timeout=harness.POLL_S, interval=0.2), (
            ctl.get("/mlroute/jobs"), pair_rules(edges), state)
        print(f"controller back: both jobs declared and pinned {time.monotonic() - back:.1f} s after its REST "
              f"answered; iterations done by then {at_return}")
        jobs.wait(jobs.timeout_s(IDEAL_S))
        times = jobs.iteration_times()
    finally:
        jobs.stop()
    print(f"iterations around the crash {times}")
    for j, t in enumerate(times):
        assert len(t) == iterations, times
        later = t[at_return[j] + 1:]  # from the second iteration after the return on
        settled = sorted(t[-4:])[1:3]  # the median pair of the last four: steady, long after the crash
        reference = sum(settled) / len(settled)
        assert later and max(later) <= 1.1 * reference, (j, at_return[j], t)


CUT = ("a0_0", "c1")  # one of pod 0's four aggregation-to-core cables
INTERLEAVED = torch_jobs.pod_pairs(SPEC, 4)  # each job on two pods, ranks A, B, A, B: every ring edge crosses


@pytest.fixture(scope="module")
def ring_runs(mlroute_fabric, tmp_path_factory):
    """Issue 37: the 4 jobs interleaved over pod pairs with CUT down before launch, first in their launch order,
    then with MLROUTE_RING=choose (the controller's node order), under the same routing (mlroute's)."""
    fab = mlroute_fabric
    before = len(fab.controller.get("/mlroute/links"))
    fab.net.configLinkStatus(*CUT, "down")
    try:
        assert harness.wait_until(lambda: len(fab.controller.get("/mlroute/links")) == before - 2, timeout=10,
                                  interval=0.2), "the controller did not see the cut"
        runs = {}
        for name, choose in (("rank order", False), ("chosen", True)):
            workdir = tmp_path_factory.mktemp("ring-" + name.replace(" ", "-"))
            jobs = torch_jobs.TorchJobs(fab.net, INTERLEAVED, SPEC, workdir, url=fab.url, token=fab.token,
                                        lease_s=LEASE_S, choose_ring=choose)
            try:
                jobs.wait(jobs.timeout_s(IDEAL_S))
                runs[name] = jobs.iteration_times()
                runs[name + " hosts"] = jobs.run_order()
            finally:
                jobs.stop()
            print(f"ring choice, {name}: per-job iterations {runs[name]} (ideal {IDEAL_S:.2f} s), steady / ideal "
                  f"{[round(steady(t) / IDEAL_S, 3) for t in runs[name]]}, init {jobs.init_seconds()}")
        return runs
    finally:
        fab.net.configLinkStatus(*CUT, "up")
        harness.wait_until(lambda: len(fab.controller.get("/mlroute/links")) == before, timeout=10, interval=0.2)


def test_jobs_in_the_controllers_ring_order_run_at_the_ideal_speed_with_a_core_link_down(ring_runs):
    """Every job's median steady all-reduce within 1.15x of the ideal ring time, iteration 0 within 1.15x of its
    steady: the order chosen and handed over before the first collective (tried by hand in the order A, A, B, B:
    1.11x ideal, iteration 0 at steady)."""
    times = ring_runs["chosen"]
    assert [len(t) for t in times] == [SPEC.iterations] * SPEC.jobs, times
    for j, t in enumerate(times):
        median = sorted(t[1:])[len(t[1:]) // 2]
        assert median <= 1.15 * IDEAL_S, (j, t, IDEAL_S)
        assert t[0] <= 1.15 * steady(t), (j, t)
    chosen = ring_runs["chosen hosts"]
    # the controller changes what the cut needs (live: one of the two jobs on pods 0-1 regrouped A, B, B, A, and
    # the other's four crossings then fit pod 0's three uplinks beside it); pods 2 and 3 have every uplink, so no
    # order helps there and none is imposed
    assert chosen != INTERLEAVED and chosen[2:] == INTERLEAVED[2:], chosen


def test_the_same_jobs_in_launch_order_leave_the_worst_at_twice_the_ideal(ring_runs):
    """The control of the test above: the interleaved launch order, routed as well as the fabric allows, puts 4
    ring edges per pod pair over 3 of pod 0's uplinks, so some job runs at least 1.6x ideal (a flow model of the
    fabric: 2.0x; by hand: 2.13x)."""
    times = ring_runs["rank order"]
    assert [len(t) for t in times] == [SPEC.iterations] * SPEC.jobs, times
    assert ring_runs["rank order hosts"] == INTERLEAVED
    worst = max(sorted(t[1:])[len(t[1:]) // 2] for t in times)
    assert worst >= 1.6 * IDEAL_S, (times, IDEAL_S)


def _crosses_edge(fab, edge):
    """Whether a ring edge leaves its edge switch (pairs under one edge switch have no pinned path to install)."""
    a, b = (int(ip.rsplit(".", 1)[1]) for ip in edge)
    return (a - 1) // 2 != (b - 1) // 2


def test_the_same_jobs_under_ecmp_are_slower(mlroute_run, ecmp_run):
    worst = {name: max(max(t[0], steady(t)) for t in run["times"])
             for name, run in (("mlroute", mlroute_run), ("ecmp", ecmp_run))}
    print(f"worst job's iteration 0 or steady: {worst}")
    assert [len(t) for t in ecmp_run["times"]] == [SPEC.iterations] * SPEC.jobs, ecmp_run["times"]
    assert worst["ecmp"] > 1.2 * worst["mlroute"], (mlroute_run["times"], ecmp_run["times"])


def test_declared_jobs_run_as_fast_as_on_a_non_blocking_switch(mlroute_run, nonblocking_run):
    """Steady all-reduce under mlroute within 1.05x of the same jobs on one big switch, measured in this run (the
    mean over the jobs: a job routed over a shared link runs about 2x, +25 % on the mean)."""
    ours, ref = ([steady(t) for t in run["times"]] for run in (mlroute_run, nonblocking_run))
    assert len(ref) == SPEC.jobs, nonblocking_run["times"]
    print(f"steady per job: mlroute {[round(x, 2) for x in ours]} s, non-blocking {[round(x, 2) for x in ref]} s, "
          f"ideal {IDEAL_S:.2f} s; mean ratio {sum(ours) / sum(ref):.3f}")
    assert sum(ours) <= 1.05 * sum(ref), (mlroute_run["times"], nonblocking_run["times"])
