"""Run an experiment grid: (pattern x seed x mode) on an emulated fabric, one fresh network per run on a fresh
controller (mode ``external``: on controllers already running, e.g. a controller cluster), and measure
steady-state throughput (iperf3) or all-reduce iteration times (ring workers)."""

from __future__ import annotations

import secrets
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlroute.errors import MlrouteError
from mlroute.experiment import emulation, pattern_options, torch_jobs
from mlroute.experiment.management import ManagementNetwork
from mlroute.experiment.traffic import Iperf3Flows, RingAllReduce, steady_mbps
from mlroute.routing.demand import estimate_demands
from mlroute.routing.flow import Flow
from mlroute.workloads.patterns import pattern_pairs

NONBLOCKING = "nonblocking"
UNDECLARED = "mlroute-undeclared"  # the controller in mode mlroute, the all-reduce jobs not declared to it
EXTERNAL = "external"  # the runs on --controllers: controllers already running, not started per run
COUNTERS = {"flows_moved": "mlroute_flows_moved_total", "reoptimisations": "mlroute_reoptimisations_total"}
POLL_S = 2.0


class ExperimentError(MlrouteError, ValueError):
    """A bad experiment specification (reported as a usage error)."""


@dataclass
class AllReduceSpec:
    rings: int
    size: int
    mb: float = 2.0  # MB per ring edge per step
    iterations: int = 5
    compute_s: float = 1.0


@dataclass
class ExperimentSpec:
    topo: str  # "fattree" | "leafspine"
    k: int = 4
    spines: int = 4
    leaves: int = 4
    hosts_per_leaf: int = 2
    patterns: list = field(default_factory=lambda: ["stride:4"])
    modes: list = field(default_factory=lambda: ["ecmp", "mlroute", NONBLOCKING])
    bw: float = 10.0
    duration: float = 30.0
    seeds: list = field(default_factory=lambda: [1])
    declare_jobs: bool = True  # all-reduce rings declared to the controller (routed before their first packet)
    detection: str = "flowstats"  # te.detection; sflow / both: every switch exports sFlow to the controller
    sampling: int = 64  # sFlow's 1-in-N
    controllers: list = field(default_factory=list)  # emulation.ExternalController: mode external's (--controllers)
    fail_links: list = field(default_factory=list)  # (node, node) Mininet cables down before the traffic starts

    @property
    def n_hosts(self) -> int:
        return self.k ** 3 // 4 if self.topo == "fattree" else self.leaves * self.hosts_per_leaf

    @property
    def hosts_per_edge(self) -> int:
        return self.k // 2 if self.topo == "fattree" else self.hosts_per_leaf

    @property
    def hosts_per_pod(self) -> int:
        return self.k * self.k // 4 if self.topo == "fattree" else self.n_hosts

    @property
    def warmup_s(self) -> float:
        """Discarded start of each run: elephant detection (2 polls) + re-routing + TCP settling."""
        return min(10.0, self.duration / 3)

    def describe(self) -> str:
        if self.topo == "fattree":
            return f"fat-tree k={self.k}"
        return f"leaf-spine {self.spines}x{self.leaves}x{self.hosts_per_leaf}"


def parse_allreduce(spec: str) -> AllReduceSpec:
    """``allreduce:RINGSxSIZE[,mb=M][,iters=I][,compute=S]``, e.g. ``allreduce:4x4,mb=2``."""
    try:
        rings, size, options = pattern_options.parse(spec, "allreduce", "all-reduce", pattern_options.ALLREDUCE_NUMBERS)
    except ValueError as exc:
        raise ExperimentError(str(exc)) from None
    out = AllReduceSpec(rings, size, **options)
    if out.size < 2 or out.rings < 1 or out.iterations < 1 or out.mb <= 0:
        raise ExperimentError(f"bad all-reduce pattern {spec!r}: rings >= 1, size >= 2, iters >= 1, mb > 0")
    return out


def ring_placement(ar: AllReduceSpec | torch_jobs.TorchAllReduceSpec, n_hosts: int, seed: int) -> list[list[str]]:
    """Rings of distinct hosts (1-based Mininet numbers), seeded: ring j takes the next ``size`` hosts of a
    random permutation, so members land on random edges/pods as in the paper's random placement."""
    if ar.rings * ar.size > n_hosts:
        raise ExperimentError(f"{ar.rings} rings of {ar.size} need {ar.rings * ar.size} hosts; the fabric has "
                              f"{n_hosts}")
    perm = np.random.default_rng(seed).permutation(n_hosts)
    return [[f"h{perm[j * ar.size + r] + 1}" for r in range(ar.size)] for j in range(ar.rings)]


def torch_placement(ts: torch_jobs.TorchAllReduceSpec, spec: ExperimentSpec, seed: int) -> list[list[str]]:
    """The hosts of each torch job in launch (rank) order: at random, or on pod pairs (fat-tree only)."""
    if ts.placement == "random":
        return ring_placement(ts, spec.n_hosts, seed)
    if spec.topo != "fattree":
        raise ExperimentError(f"placement={ts.placement} places jobs on a fat-tree's pods: --topo fattree")
    try:
        return torch_jobs.pod_pairs(ts, spec.k, interleaved=ts.placement == "interleaved-pods")
    except ValueError as exc:
        raise ExperimentError(str(exc)) from None


def parse_fail_links(text: str) -> list[tuple[str, str]]:
    """``--fail-link``: ``A:B[,C:D...]``, Mininet node names of a cable (e.g. ``a0_0:c1``)."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        ends = item.split(":")
        if len(ends) != 2 or not all(ends) or ends[0] == ends[1]:
            raise ExperimentError(f"--fail-link {item!r}: expected NODE:NODE, e.g. a0_0:c1")
        out.append((ends[0], ends[1]))
    return out


def validate_fail_links(spec: ExperimentSpec) -> None:
    """Every ``--fail-link`` names a cable of the fabric."""
    cables = {frozenset(link) for link in build_topo(spec, "ecmp").links()} if spec.fail_links else set()
    for link in spec.fail_links:
        if frozenset(link) not in cables:
            raise ExperimentError(f"--fail-link {link[0]}:{link[1]}: no such cable in the {spec.describe()} "
                                  "(Mininet names: fat-tree c<n>, a<pod>_<i>, e<pod>_<i>, h<n>)")


def parse_controllers(text: str) -> list[emulation.ExternalController]:
    """``--controllers``: ``ADDR[,ADDR...]``, each ``HOST:OF_PORT`` or ``HOST:OF_PORT/REST_PORT``; a malformed or
    repeated address is refused by name."""
    out: list[emulation.ExternalController] = []
    for addr in text.split(","):
        try:
            ctl = emulation.ExternalController.parse(addr)
        except ValueError as exc:
            raise ExperimentError(f"--controllers {text!r}: {exc}") from None
        if any((c.host, c.of_port) == (ctl.host, ctl.of_port) for c in out):
            raise ExperimentError(f"--controllers: {ctl.host}:{ctl.of_port} is given twice")
        out.append(ctl)
    return out


def validate_controllers(spec: ExperimentSpec) -> None:
    """Mode ``external`` runs on ``spec.controllers``, and only it and the reference may be asked for then: the
    external controllers' own configuration decides how they route and detect."""
    if not spec.controllers:
        if EXTERNAL in spec.modes:
            raise ExperimentError(f"mode {EXTERNAL!r} needs --controllers (the running controllers to use)")
        return
    other = [m for m in spec.modes if m not in (EXTERNAL, NONBLOCKING)]
    if other or EXTERNAL not in spec.modes:
        raise ExperimentError(f"with --controllers, --modes takes {EXTERNAL} and {NONBLOCKING} (and needs "
                              f"{EXTERNAL}); got {','.join(spec.modes)}: the running controllers' own "
                              "configuration decides how they route")
    if spec.detection != "flowstats":
        raise ExperimentError("--detection configures the controllers the experiment starts; with --controllers "
                              "their own configuration decides (te.detection, sflow:)")


def check_controllers(controllers: list[emulation.ExternalController], timeout_s: float = 3.0) -> None:
    """Refuse an external controller that is not there: its OpenFlow port must accept a connection (as a
    switch's would) and its REST port, where given, answer ``GET /mlroute/cluster``."""
    for ctl in controllers:
        try:
            socket.create_connection((ctl.host, ctl.of_port), timeout=timeout_s).close()
        except OSError as exc:
            raise ExperimentError(f"--controllers {ctl}: nothing accepts OpenFlow connections at "
                                  f"{ctl.host}:{ctl.of_port} ({exc})") from None
        if ctl.rest_port is not None:
            try:
                ctl.get("/mlroute/cluster")
            except (OSError, ValueError) as exc:
                raise ExperimentError(f"--controllers {ctl}: its REST at {ctl.host}:{ctl.rest_port} does not "
                                      f"answer GET /mlroute/cluster ({exc})") from None


def leading(controllers: list[emulation.ExternalController]) -> emulation.ExternalController | None:
    """The controller whose REST says it leads its cluster (``GET /mlroute/cluster``: role ``leader``) or has
    none (``standalone``); None when none with a REST port says so (none given, none answers, an election)."""
    for ctl in controllers:
        if ctl.rest_port is None:
            continue
        try:
            view = ctl.get("/mlroute/cluster")
        except (OSError, ValueError):
            continue
        if isinstance(view, dict) and view.get("role") in ("leader", "standalone"):
            return ctl
    return None


def te_mode(mode: str) -> str:
    """The controller's te.mode of a run's mode (the reference runs plain ECMP)."""
    return {NONBLOCKING: "ecmp", UNDECLARED: "mlroute"}.get(mode, mode)


def declares(spec: ExperimentSpec, mode: str) -> bool:
    """Whether a run's all-reduce jobs declare themselves (or are declared) to its controller."""
    return spec.declare_jobs and mode not in (NONBLOCKING, UNDECLARED)


def parse_torch(pattern: str) -> torch_jobs.TorchAllReduceSpec:
    try:
        return torch_jobs.parse(pattern)
    except ValueError as exc:
        raise ExperimentError(str(exc)) from None


def validate(spec: ExperimentSpec) -> None:
    """Refuse a grid that cannot run (unknown names, sizes the topology files cannot number, bad patterns)."""
    if spec.topo not in ("fattree", "leafspine"):
        raise ExperimentError(f"unknown topology {spec.topo!r} (fattree or leafspine)")
    if spec.topo == "fattree" and (spec.k < 2 or spec.k % 2):
        raise ExperimentError("--k must be even and >= 2")
    from mininet_topos.common import TopologySizeError, check_host_count, fat_tree_dpids, leaf_spine_dpids
    try:  # sizes the topology files cannot number (colliding DPIDs or host addresses) are refused up front
        if spec.topo == "fattree":
            fat_tree_dpids(spec.k)
        else:
            leaf_spine_dpids(spec.spines, spec.leaves)
        check_host_count(spec.n_hosts)
    except TopologySizeError as exc:
        raise ExperimentError(str(exc)) from None
    if spec.duration < 6:
        raise ExperimentError("--duration must be at least 6 s (elephant detection takes two 2 s polls)")
    if spec.detection not in ("flowstats", "sflow", "both"):
        raise ExperimentError(f"unknown --detection {spec.detection!r} (flowstats, sflow or both)")
    if not 1 <= spec.sampling <= (1 << 31):
        raise ExperimentError(f"--sampling must be a 1-in-N rate, N >= 1, got {spec.sampling}")
    validate_controllers(spec)
    validate_fail_links(spec)
    from mlroute.routing.optimisers import ALGORITHMS
    for mode in spec.modes:
        if mode not in (NONBLOCKING, EXTERNAL, UNDECLARED) and mode not in ALGORITHMS:
            raise ExperimentError(f"unknown mode {mode!r} (ecmp, nonblocking, {UNDECLARED}, or an optimiser: "
                                  f"{', '.join(a for a in ALGORITHMS if a != 'ecmp')})")
    for p in spec.patterns:
        if torch_jobs.is_torch_pattern(p) or p.startswith(torch_jobs.PATTERN):
            torch_placement(parse_torch(p), spec, 0)
            if spec.controllers:
                raise ExperimentError(f"{p}: the torch jobs reach the controller over a management network to a "
                                      "controller the experiment starts; not with --controllers")
        elif p.startswith("allreduce"):
            ring_placement(parse_allreduce(p), spec.n_hosts, 0)
        else:
            try:
                pattern_pairs(p, spec.n_hosts, 0, hosts_per_edge=spec.hosts_per_edge,
                              hosts_per_pod=spec.hosts_per_pod)
            except ValueError as exc:
                raise ExperimentError(str(exc)) from None


def build_topo(spec: ExperimentSpec, mode: str) -> Any:
    """The Mininet topology of a run: the fabric, or one big switch for the non-blocking reference."""
    from mininet_topos.bigswitch import BigSwitchTopo
    from mininet_topos.fattree import FatTreeTopo
    from mininet_topos.leafspine import LeafSpineTopo
    if mode == NONBLOCKING:
        return BigSwitchTopo(spec.n_hosts, bw=spec.bw)
    if spec.topo == "fattree":
        return FatTreeTopo(k=spec.k, bw=spec.bw)
    return LeafSpineTopo(spec.spines, spec.leaves, spec.hosts_per_leaf, bw=spec.bw)


def controller_config(spec: ExperimentSpec, mode: str, pattern: str = "", seed: int = 0,
                      sflow_port: int | None = None, token: str | None = None) -> str:
    """The YAML configuration of the controller of one run (the reference runs plain ECMP). An all-reduce's rings
    are declared as one job (its rings' members by IP, in ring order) unless ``spec.declare_jobs`` is off or the
    mode is ``mlroute-undeclared``; torch jobs declare themselves over REST (``token``: rest.token). With
    ``sflow_port`` the controller detects by ``spec.detection`` from a collector on that port."""
    text = (f"te:\n  mode: {te_mode(mode)}\n  poll_interval_s: {POLL_S}\n"
            f"  host_link_mbps: {spec.bw}\n")
    if sflow_port is not None:
        text += f"  detection: {spec.detection}\n" + emulation.sflow_config(sflow_port)
    if token is not None:
        text += f"rest:\n  token: {token}\n"
    if declares(spec, mode) and pattern.startswith("allreduce"):
        from mininet_topos.common import host_ip
        rings = ring_placement(parse_allreduce(pattern), spec.n_hosts, seed)
        members = ", ".join("[" + ", ".join(host_ip(int(h[1:])) for h in ring) + "]" for ring in rings)
        text += f"jobs:\n  - {{name: allreduce, rings: [{members}]}}\n"
    return text


def run_one(spec: ExperimentSpec, pattern: str, mode: str, seed: int, workdir: Path) -> dict:
    """One run: a fresh network on a fresh controller (mode external: on the running ``spec.controllers``, which
    are left running), traffic, measurement. Always cleans up what it started."""
    if mode == EXTERNAL:
        return _run_on(spec, pattern, mode, seed, spec.controllers, lambda: leading(spec.controllers))
    sflow_port = emulation.free_port() if spec.detection != "flowstats" and mode != NONBLOCKING else None
    if not torch_jobs.is_torch_pattern(pattern):
        controller = emulation.Controller(workdir, controller_config(spec, mode, pattern, seed, sflow_port))
        try:
            controller.wait_ready()
            return _run_on(spec, pattern, mode, seed, controller, lambda: controller, sflow_port)
        finally:
            controller.stop()
    # torch jobs reach the controller's REST over a management network, never through the fabric under test
    token = secrets.token_hex(16)
    with ManagementNetwork() as mgmt:
        controller = emulation.Controller(workdir, controller_config(spec, mode, pattern, seed, sflow_port, token),
                                          rest_host=mgmt.address)
        try:
            controller.wait_ready()
            torch_run = TorchRun(workdir, mgmt, controller, token)
            return _run_on(spec, pattern, mode, seed, controller, lambda: controller, sflow_port, torch_run)
        finally:
            controller.stop()


@dataclass
class TorchRun:
    """What a torch-allreduce run needs besides the network: where its ranks write, the management network the
    hosts reach the controller by, the controller and its REST token."""

    workdir: Path
    mgmt: ManagementNetwork
    controller: emulation.Controller
    token: str


def _run_on(spec: ExperimentSpec, pattern: str, mode: str, seed: int, controllers: Any,
            leader: Callable[[], Any], sflow_port: int | None = None, torch_run: TorchRun | None = None) -> dict:
    """A fresh network connected to ``controllers``, converged (pingall without loss: the switches connected and
    routing), traffic, measurement; ``leader()`` is the controller whose REST tells what routing did (None:
    nobody's). The network is always stopped."""
    net = None
    try:
        net = emulation.start_network(build_topo(spec, mode), controllers, jumbo=True)
        if sflow_port is not None:
            emulation.enable_sflow(net, sflow_port, spec.sampling)
        if torch_run is not None:
            torch_run.mgmt.attach(net)
        if not emulation.wait_until(lambda: emulation.ping_all(net) == 0 or None, timeout=40, interval=0):
            raise RuntimeError(f"{mode}: the network did not converge (pingall loss) within 40 s")
        if mode != NONBLOCKING:  # (the reference is one switch: no cable of the fabric to cut)
            for a, b in spec.fail_links:
                net.configLinkStatus(a, b, "down")
            if spec.fail_links:
                time.sleep(2 * POLL_S)  # the switches' port status reached the controller, a decision followed
        before = None if mode == NONBLOCKING else _counters(leader())
        result = {"pattern": pattern, "mode": mode, "seed": seed}
        if torch_run is not None:
            result.update(_run_torch(spec, pattern, seed, net, mode, torch_run))
        elif pattern.startswith("allreduce"):
            result.update(_run_allreduce(spec, pattern, seed, net))
        else:
            result.update(_run_iperf(spec, pattern, seed, net))
        if before is not None:
            result.update(_routing_results(leader(), *before))
        return result
    finally:
        if net is not None:
            emulation.stop_network(net)


def _counters(ctl: Any) -> tuple[Any, dict]:
    """``ctl`` and its COUNTERS now (a controller that keeps running counts earlier runs too)."""
    return ctl, ({} if ctl is None else {key: ctl.metric(name) for key, name in COUNTERS.items()})


def _routing_results(ctl: Any, before_ctl: Any, before: dict) -> dict:
    """What the leading controller ``ctl`` did: the elephants it knows now and, when it led since ``before`` was
    read, the flows it moved and its re-optimisations since then; {} when none leads."""
    if ctl is None:
        return {}
    out: dict[str, Any] = {"elephants": len(ctl.get("/mlroute/elephants"))}
    if isinstance(ctl, emulation.ExternalController):
        out["leader"] = str(ctl)
    if ctl == before_ctl:
        out.update({key: ctl.metric(name) - before[key] for key, name in COUNTERS.items()})
    return out


def _run_iperf(spec: ExperimentSpec, pattern: str, seed: int, net: Any) -> dict:
    pairs = pattern_pairs(pattern, spec.n_hosts, seed, hosts_per_edge=spec.hosts_per_edge,
                          hosts_per_pod=spec.hosts_per_pod)
    names = [(f"h{s + 1}", f"h{d + 1}") for s, d in pairs]
    flows = Iperf3Flows(net, names, spec.duration)
    try:
        reports = flows.reports()
    finally:
        flows.stop()
    per_flow = [{"src": s, "dst": d, "mbps": steady_mbps(r, spec.warmup_s)} for (s, d), r in zip(names, reports)]
    ideal = float(np.sum(estimate_demands([Flow(s, d) for s, d in pairs]))) * spec.bw
    return {"aggregate_mbps": sum(f["mbps"] for f in per_flow), "ideal_mbps": ideal, "flows": per_flow,
            "failed_flows": sum(1 for r in reports if r is None)}


def _run_allreduce(spec: ExperimentSpec, pattern: str, seed: int, net: Any) -> dict:
    ar = parse_allreduce(pattern)
    rings = ring_placement(ar, spec.n_hosts, seed)
    job = RingAllReduce(net, rings, ar.mb * 1e6, ar.iterations, ar.compute_s)
    try:
        per_ring = job.results()
    finally:
        job.stop()
    n_iter = min((len(r) for r in per_ring), default=0)
    iterations = [max(r[i] for r in per_ring) for i in range(n_iter)]
    steady = iterations[1:] if len(iterations) > 1 else iterations  # iteration 0 teaches the controller
    ideal_s = 2 * (ar.size - 1) * ar.mb * 8 / spec.bw
    moved = 2 * (ar.size - 1) * ar.mb * 8 * ar.size * ar.rings  # Mb per iteration, all ring edges
    mean_steady = float(np.mean(steady)) if steady else float("nan")
    steps = [[job.steps.get(j, {}).get(i, []) for i in range(len(r))] for j, r in enumerate(per_ring)]
    return {"rings": rings, "allreduce_s": iterations, "per_ring_s": per_ring, "per_ring_steps_s": steps,
            "steady_allreduce_s": mean_steady,
            "ideal_allreduce_s": ideal_s, "aggregate_mbps": moved / mean_steady if steady else 0.0,
            "flows": [{"src": ring[r], "dst": ring[(r + 1) % len(ring)],
                       "mbps": ar.mb * 8 / (mean_steady / (2 * (ar.size - 1))) if steady else 0.0}
                      for ring in rings for r in range(len(ring))]}


def _run_torch(spec: ExperimentSpec, pattern: str, seed: int, net: Any, mode: str, run: TorchRun) -> dict:
    """Real PyTorch gloo jobs through the hook (declared unless the mode says not), one rank per host, hosts of a
    job in rank order as ``ring_placement`` gives them. While they run, the controller's declared jobs and the
    host pairs of its elephants are read every second (the declarations are gone once the jobs end)."""
    ts = parse_torch(pattern)
    placement = torch_placement(ts, spec, seed)
    ideal = torch_jobs.ideal_seconds(ts.ranks, ts.mb, spec.bw)
    url = run.mgmt.url(run.controller.rest_port) if declares(spec, mode) else None  # type: ignore[arg-type]
    jobs = torch_jobs.TorchJobs(net, placement, ts, run.workdir / "torch", url=url, token=run.token,
                                choose_ring=ts.ring == "choose" and url is not None)
    declared: dict[str, list] = {}
    elephants: set[tuple[str, str]] = set()

    def watch() -> None:
        try:
            for job in run.controller.get("/mlroute/jobs")["jobs"]:
                declared.setdefault(job["name"], job.get("rings") or [])
            if mode != NONBLOCKING:
                elephants.update((e["src_ip"], e["dst_ip"]) for e in run.controller.get("/mlroute/elephants"))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a read missed: the next one comes a second later

    try:
        jobs.wait(jobs.timeout_s(ideal), watch=watch)
        watch()  # elephants stay known for te.pattern_memory_s after their flows end
        per_job = jobs.iteration_times()
        placement = jobs.run_order()  # the ring each job ran (the controller's order under ring=choose)
    finally:
        jobs.stop()
    return torch_results(ts, spec.bw, placement, [[net.get(h).IP() for h in hosts] for hosts in placement], per_job,
                         jobs.init_seconds(), jobs.names, declared, sorted(elephants), bool(url))


def torch_results(ts: torch_jobs.TorchAllReduceSpec, bw: float, placement: list[list[str]], ips: list[list[str]],
                  per_job: list[list[float]], init_s: list[float], names: list[str], declared: dict[str, list],
                  elephant_pairs: list, declaring: bool) -> dict:
    """A torch run's result: per iteration the slowest job's time (``allreduce_s``, as the ring workers'), per
    job its iterations, iteration 0 / steady (mean of the rest) and steady / ideal."""
    ideal = torch_jobs.ideal_seconds(ts.ranks, ts.mb, bw)
    n_iter = min((len(r) for r in per_job), default=0)
    iterations = [max(r[i] for r in per_job) for i in range(n_iter)]
    steady = iterations[1:] if len(iterations) > 1 else iterations
    mean_steady = float(np.mean(steady)) if steady else float("nan")
    jobs_out = []
    for name, hosts, addrs, times, init in zip(names, placement, ips, per_job, init_s):
        job_steady = float(np.mean(times[1:])) if len(times) > 1 else float("nan")
        jobs_out.append({"name": name, "hosts": hosts, "ips": addrs, "allreduce_s": times, "init_s": init,
                         "first_s": times[0] if times else float("nan"), "steady_s": job_steady,
                         "first_over_steady": times[0] / job_steady if len(times) > 1 else float("nan"),
                         "steady_over_ideal": job_steady / ideal})
    moved = 2 * (ts.ranks - 1) / ts.ranks * ts.mb * 8 * ts.ranks * ts.jobs  # Mb per iteration, all ring edges
    per_edge_mbps = 2 * (ts.ranks - 1) / ts.ranks * ts.mb * 8 / mean_steady if steady else 0.0
    return {"rings": placement, "jobs": jobs_out, "allreduce_s": iterations, "per_ring_s": per_job,
            "steady_allreduce_s": mean_steady, "ideal_allreduce_s": ideal, "declaring": declaring,
            "aggregate_mbps": moved / mean_steady if steady else 0.0, "declared": declared,
            "elephant_pairs": [list(p) for p in elephant_pairs],
            # gloo's ring: rank r sends to r-1 (COLLECTIVES.md), so each host sends to its predecessor in rank order
            "flows": [{"src": hosts[r], "dst": hosts[r - 1], "mbps": per_edge_mbps}
                      for hosts in placement for r in range(len(hosts))]}


def run(spec: ExperimentSpec, out_dir: str | Path, progress: Callable[[str], None] | None = None) -> dict:
    """Run the grid; nonblocking first for each (pattern, seed) so fractions can be computed as runs end."""
    progress = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    validate(spec)
    problems = emulation.check_platform()
    if any(torch_jobs.is_torch_pattern(p) for p in spec.patterns):
        problems += [p for p in [torch_jobs.torch_problem()] if p]
    if problems:
        raise ExperimentError("; ".join(problems))
    check_controllers(spec.controllers)
    out_dir = Path(out_dir).resolve()  # the controllers run elsewhere: a relative path would not be found there
    modes = sorted(spec.modes, key=lambda m: m != NONBLOCKING)
    grid = [(p, s, m) for p in spec.patterns for s in spec.seeds for m in modes]
    results: list[dict] = []
    reference: dict = {}
    started = time.time()
    for i, (pattern, seed, mode) in enumerate(grid, 1):
        tag = f"[{i}/{len(grid)}] {spec.describe()} {pattern} seed {seed} {mode}"
        progress(f"{tag}: running ({spec.duration:.0f} s of traffic)...")
        workdir = out_dir / "runs" / f"{pattern.replace(':', '_').replace(',', '_')}-s{seed}-{mode}"
        try:
            result = run_one(spec, pattern, mode, seed, workdir)
        except Exception as exc:  # one failed run is reported; the grid goes on (Ctrl-C still stops it)
            progress(f"{tag}: FAILED: {type(exc).__name__}: {exc}")
            results.append({"pattern": pattern, "mode": mode, "seed": seed, "error": str(exc)})
            continue
        if mode == NONBLOCKING:
            reference[(pattern, seed)] = result["aggregate_mbps"]
        ref = reference.get((pattern, seed))
        if ref:
            result["nonblocking_fraction"] = result["aggregate_mbps"] / ref
            result["reference"] = "measured non-blocking"
        else:
            result["nonblocking_fraction"] = result["aggregate_mbps"] / result["ideal_mbps"] if result.get(
                "ideal_mbps") else None
            result["reference"] = "NIC-limited ideal (no non-blocking run)"
        results.append(result)
        frac = result.get("nonblocking_fraction")
        progress(f"{tag}: {result['aggregate_mbps']:.1f} Mb/s" + (f" = {frac:.3f} of non-blocking" if frac else "")
                 + f"  (elapsed {time.time() - started:.0f} s)")
    return {"config": {"topology": spec.describe(), "topo": spec.topo, "k": spec.k, "spines": spec.spines,
                       "leaves": spec.leaves, "hosts_per_leaf": spec.hosts_per_leaf, "bw_mbps": spec.bw,
                       "duration_s": spec.duration, "warmup_s": spec.warmup_s, "seeds": spec.seeds,
                       "modes": modes, "patterns": spec.patterns, "poll_interval_s": POLL_S,
                       "declared_jobs": spec.declare_jobs, "controllers": [str(c) for c in spec.controllers]},
            "results": results}
