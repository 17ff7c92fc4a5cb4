"""Building a simulation scenario (fabric + jobs + failures) from user-level parameters, with validation.

``mlroute simulate`` builds its run with it. The fabric and its failures come from :mod:`mlroute.routing.spec`
(the syntax ``mlroute route`` shares), traffic files from :func:`mlroute.workloads.jobs.read_traffic_files`.
Errors are :class:`ScenarioError` with a message meant for the user (the command turns them into exit status 2).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from mlroute.errors import MlrouteError
from mlroute.routing import spec
from mlroute.routing.fabric import Fabric, FabricError
from mlroute.sim.engine import Failure
from mlroute.workloads.jobs import MODELS, Job, WorkloadError, min_gpus_per_host, paper_jobs, read_traffic_files
from mlroute.workloads.placement import host_groups


class ScenarioError(MlrouteError, ValueError):
    pass


@dataclass
class Scenario:
    fabric: object
    jobs: list
    failures: list = field(default_factory=list)
    link_bps: float = 100e9
    description: dict = field(default_factory=dict)


@contextmanager
def _scenario_errors() -> Iterator[None]:
    """Fabric and workload errors, as ScenarioError (the message is the user's already)."""
    try:
        yield
    except (FabricError, WorkloadError) as exc:
        raise ScenarioError(str(exc)) from None


def build(*, fabric: str = "clos", tors: int | None = 64, spines: int | None = 32, hosts_per_tor: int | None = 32,
          k: int | None = None, link_gbps: float = 100.0, failed_spines: Sequence[int | str] = (),
          failed_links: Sequence[tuple[str, str]] = (), fail_at_s: float = 0.0, traffic: Sequence | None = None,
          n_jobs: int | None = None, ring: int | None = None, seed: int = 0, iterations: int = 11,
          models: Sequence[str] = ("gpt3", "bloom", "llama2"), gpus_per_host: int = 1, kind: str = "allreduce",
          placement: str = "tor") -> Scenario:
    """Validate user parameters and build the scenario; failures at ``fail_at_s`` (0: from the start).

    ``failed_spines`` are top-switch indices or names, ``failed_links`` (u, v) cables
    (:mod:`mlroute.routing.spec` parses both from the command line)."""
    _check_numbers(link_gbps, iterations, fail_at_s)
    with _scenario_errors():
        fab = spec.build_fabric(fabric, tors, spines, hosts_per_tor, k)
        spine_names = spec.top_switches(fab, failed_spines)
        spec.check_links(fab, failed_links)
    if traffic:
        if n_jobs is not None or ring is not None:
            raise ScenarioError("give either --traffic FILE... or --jobs/--ring, not both")
        with _scenario_errors():
            jobs = read_traffic_files(traffic, hosts_per_tor=fab.hosts_per_tor, iterations=iterations,
                                      tors=len(fab.leaves))
        source: dict = {"traffic": [str(p) for p in traffic]}
    else:
        if n_jobs is None or ring is None:
            raise ScenarioError("give --traffic FILE... or both --jobs N and --ring n")
        jobs = _generated_jobs(fab, n_jobs, ring, seed, iterations, tuple(models), gpus_per_host, kind, placement)
        source = {"jobs": n_jobs, "ring": ring, "seed": seed, "models": list(models),
                  "gpus_per_host": gpus_per_host, "kind": kind, "placement": placement}
    failures = _failures(fab, spine_names, failed_links, fail_at_s)
    desc = {
        "fabric": fabric,
        "tors": len(fab.leaves),
        "spines": len(fab.tops),
        "hosts_per_tor": fab.hosts_per_tor,
        "link_gbps": link_gbps,
        "failed_spines": spine_names,
        "failed_links": [spec.format_link(u, v) for u, v in failed_links],
        "fail_at_s": fail_at_s,
        "iterations": iterations,
        **source,
    }
    return Scenario(fab, jobs, failures, link_gbps * 1e9, desc)


def _check_numbers(link_gbps: float, iterations: int, fail_at_s: float) -> None:
    if not link_gbps or link_gbps <= 0:
        raise ScenarioError(f"--link-gbps must be positive (got {link_gbps})")
    if iterations is None or iterations < 1:
        raise ScenarioError(f"--iterations must be a positive integer (got {iterations})")
    if fail_at_s < 0:
        raise ScenarioError(f"--fail-at must be >= 0 (got {fail_at_s})")


def _generated_jobs(fab: Fabric, n_jobs: int, ring: int, seed: int, iterations: int, models: tuple[str, ...],
                    gpus_per_host: int, kind: str, placement: str) -> list[Job]:
    """The paper's workload on ``fab``; a workload that does not fit says which packing would."""
    for m in models:
        if m not in MODELS:
            raise ScenarioError(f"--models: unknown model {m!r} (known: {', '.join(MODELS)})")
    n_tors, hpt = len(fab.leaves), fab.hosts_per_tor
    if hpt is None:  # a generated fabric always knows it
        raise ScenarioError("the fabric does not say how many hosts sit under a ToR")
    # the paired placements' groups: pods of a fat-tree, ToRs of a Clos (the boundary a ring pays for crossing)
    groups = host_groups(fab) if placement in ("contiguous", "interleaved") else None
    try:
        return paper_jobs(n_jobs, ring, n_tors, hpt, seed=seed, models=models, iterations=iterations,
                          gpus_per_host=gpus_per_host, kind=kind, placement=placement, groups=groups)
    except WorkloadError as exc:
        hint = ""
        if "does not fit" in str(exc):
            hint = _packing_hint(n_jobs, ring, n_tors, hpt, models, placement, gpus_per_host, groups)
        raise ScenarioError(str(exc) + hint) from None


def _packing_hint(n_jobs: int, ring: int, tors: int, hosts_per_tor: int, models: tuple[str, ...],
                  placement: str, gpus_per_host: int, groups: list | None) -> str:
    try:
        g = min_gpus_per_host(n_jobs, ring, tors, hosts_per_tor, models, placement=placement, groups=groups)
    except WorkloadError:
        return ""
    return f"; --gpus-per-host {g} fits (GPUs then share NICs)" if g > gpus_per_host else ""


def _failures(fab: Fabric, switches: list[str], links: Sequence[tuple[str, str]], fail_at_s: float) -> list:
    """Fail the elements now (``fail_at_s == 0``) or return the one timed :class:`Failure`."""
    if not (switches or links):
        return []
    if fail_at_s == 0:
        spec.fail(fab, switches, links)
        return []
    return [Failure(fail_at_s, tuple(switches), tuple(links))]
