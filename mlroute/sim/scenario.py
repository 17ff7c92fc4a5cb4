"""Building a simulation scenario (fabric + jobs + failures) from user-level parameters, with validation.

Shared by ``mlroute simulate`` and ``mlroute reproduce``. Errors are :class:`ScenarioError` with a message meant
for the user (the commands turn them into exit status 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlroute.sim.engine import Failure
from mlroute.workloads.jobs import MODELS, WorkloadError, min_gpus_per_host, paper_jobs, read_traffic_files


class ScenarioError(ValueError):
    pass


def parse_int_list(text: str | None, what: str) -> list:
    """``"28,29,30"`` -> [28, 29, 30]; also accepts ranges ``"28-31"``."""
    if text is None or str(text).strip() == "":
        return []
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                a, b = int(a), int(b)
                if b < a:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ScenarioError(f"{what}: {part!r} is not an integer or a range a-b") from None
    if len(set(out)) != len(out):
        raise ScenarioError(f"{what}: {text!r} lists an element twice")
    return out


def parse_links(text: str | None) -> list:
    """``"tor0:spine1,tor3:spine2"`` -> [("tor0", "spine1"), ...]."""
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        u, sep, v = part.partition(":")
        if not sep or not u or not v:
            raise ScenarioError(f"--failed-links: {part!r} is not of the form SWITCH:SWITCH (e.g. tor0:spine3)")
        out.append((u, v))
    return out


@dataclass
class Scenario:
    fabric: object
    jobs: list
    failures: list = field(default_factory=list)
    link_bps: float = 100e9
    description: dict = field(default_factory=dict)


def build_fabric(kind: str, tors: int | None, spines: int | None, hosts_per_tor: int | None, k: int | None = None):
    from mlroute.routing.fabric import Fabric, FabricError

    try:
        if kind == "clos":
            for what, v in (("--tors", tors), ("--spines", spines), ("--hosts-per-tor", hosts_per_tor)):
                if v is None or v < 1:
                    raise ScenarioError(f"{what} must be a positive integer (got {v})")
            return Fabric.clos(tors, spines, hosts_per_tor)
        if kind == "fattree":
            if k is None or k < 2 or k % 2:
                raise ScenarioError(f"--k must be an even integer >= 2 for a fat-tree (got {k})")
            return Fabric.fattree(k)
    except FabricError as exc:
        raise ScenarioError(str(exc)) from None
    raise ScenarioError(f"unknown fabric {kind!r} (clos or fattree)")


def build(*, fabric: str = "clos", tors: int | None = 64, spines: int | None = 32, hosts_per_tor: int | None = 32,
          k: int | None = None, link_gbps: float = 100.0, failed_spines=(), failed_links=(), fail_at_s: float = 0.0,
          traffic=None, n_jobs: int | None = None, ring: int | None = None, seed: int = 0, iterations: int = 11,
          models=("gpt3", "bloom", "llama2"), gpus_per_host: int = 1, kind: str = "allreduce",
          placement: str = "tor") -> Scenario:
    """Validate user parameters and build the scenario; failures at ``fail_at_s`` (0: from the start)."""
    if not link_gbps or link_gbps <= 0:
        raise ScenarioError(f"--link-gbps must be positive (got {link_gbps})")
    if iterations is None or iterations < 1:
        raise ScenarioError(f"--iterations must be a positive integer (got {iterations})")
    if fail_at_s < 0:
        raise ScenarioError(f"--fail-at must be >= 0 (got {fail_at_s})")
    fab = build_fabric(fabric, tors, spines, hosts_per_tor, k)
    n_tors = len(fab.leaves)
    hpt = fab.hosts_per_tor
    tops = fab.tops
    spine_names = []
    for s in failed_spines:
        if isinstance(s, str):
            if s not in tops:
                raise ScenarioError(f"--failed-spines: {s!r} is not a spine/core switch")
            spine_names.append(s)
        else:
            if not 0 <= s < len(tops):
                raise ScenarioError(f"--failed-spines: spine {s} is not in the fabric "
                                    f"(spines are numbered 0..{len(tops) - 1})")
            spine_names.append(tops[s])
    if len(spine_names) >= len(tops):
        raise ScenarioError(f"--failed-spines: failing all {len(tops)} spines partitions the fabric")
    for u, v in failed_links:
        if not fab.graph.has_edge(u, v):
            raise ScenarioError(f"--failed-links: there is no link {u}:{v} in the fabric")
    if traffic:
        if n_jobs is not None or ring is not None:
            raise ScenarioError("give either --traffic FILE... or --jobs/--ring, not both")
        try:
            where: dict = {}
            jobs = read_traffic_files(traffic, hosts_per_tor=hpt, iterations=iterations, tor_where=where)
        except WorkloadError as exc:
            raise ScenarioError(str(exc)) from None
        for job in jobs:
            for h, t in job.host_tor.items():
                if not 0 <= t < n_tors:
                    raise ScenarioError(f"{where.get(h, 'job ' + job.name)}: host {h} is under ToR {t}, but the "
                                        f"fabric has ToRs 0..{n_tors - 1}")
        source = {"traffic": [str(p) for p in traffic]}
    else:
        if n_jobs is None or ring is None:
            raise ScenarioError("give --traffic FILE... or both --jobs N and --ring n")
        for m in models:
            if m not in MODELS:
                raise ScenarioError(f"--models: unknown model {m!r} (known: {', '.join(MODELS)})")
        try:
            jobs = paper_jobs(n_jobs, ring, n_tors, hpt, seed=seed, models=tuple(models), iterations=iterations,
                              gpus_per_host=gpus_per_host, kind=kind, placement=placement)
        except WorkloadError as exc:
            hint = ""
            if "does not fit" in str(exc):
                try:
                    g = min_gpus_per_host(n_jobs, ring, n_tors, hpt, tuple(models), placement=placement)
                    if g > gpus_per_host:
                        hint = f"; --gpus-per-host {g} fits (GPUs then share NICs)"
                except WorkloadError:
                    pass
            raise ScenarioError(str(exc) + hint) from None
        source = {"jobs": n_jobs, "ring": ring, "seed": seed, "models": list(models),
                  "gpus_per_host": gpus_per_host, "kind": kind, "placement": placement}
    failures = []
    if spine_names or failed_links:
        if fail_at_s == 0:
            for s in spine_names:
                fab.fail_switch(s)
            for u, v in failed_links:
                fab.fail_link(u, v)
        else:
            failures.append(Failure(fail_at_s, tuple(spine_names), tuple(failed_links)))
    desc = {
        "fabric": fabric,
        "tors": n_tors,
        "spines": len(tops),
        "hosts_per_tor": hpt,
        "link_gbps": link_gbps,
        "failed_spines": spine_names,
        "failed_links": [f"{u}:{v}" for u, v in failed_links],
        "fail_at_s": fail_at_s,
        "iterations": iterations,
        **source,
    }
    return Scenario(fab, jobs, failures, link_gbps * 1e9, desc)
