"""Declared training jobs: their collective structure -> the host pairs the controller routes before traffic.

A job declared in the configuration (or over REST) may say how it communicates: ``rings`` (ordered host lists,
ring all-reduce: member i sends to member i+1 mod n), ``stages`` (pipeline chains: stage i sends to i+1), or a
``traffic`` file in the paper authors' format (read by mlroute.workloads.jobs, so the same files replay in the
simulator). Those sends are known before the first packet, so the traffic engineer routes them as host pairs
(``HostPair``) at once, instead of waiting for flow statistics: iteration 0 runs on the optimised routing.
A host pair is pinned by exact IPv4 or IPv6 source/destination rules; once a transport flow of the pair is
detected as an elephant, it takes the pair's place (refined to 5-tuples) on the same path.

A job's optional ``weight`` (e.g. GPU intensity = compute per iteration / communication time, as Crux does)
weighs it in the job-level objective: its rate counts as rate / weight (mlroute.routing.metric.job_labels).

Plain data, no Ryu: controller.config validates the declarations with these helpers, core.py asks them for the
pairs to route.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.state.flowkey import canonical_ip, is_ipv6
from mlroute.workloads.jobs import WorkloadError, read_traffic_file


@dataclass(frozen=True, order=True)
class HostPair:
    """All traffic from one host to another: the routing key of a declared send before its flows exist."""

    src_ip: str
    dst_ip: str

    def as_dict(self) -> dict[str, Any]:
        return {"src_ip": self.src_ip, "dst_ip": self.dst_ip}


class DeclarationError(ValueError):
    """A declared job's structure is unusable; the message names where (file:line: jobs[i].key)."""


def host_address(value: Any) -> str | None:
    """``value`` as the host address the flow tables match (ipv4_src / ipv6_src): a dotted-quad IPv4 string, or
    an IPv6 one in ``ipaddress``'s compressed form, however it was spelled (the form hosts are learned in); None
    if it is neither (a zone index names no host on the fabric)."""
    if not isinstance(value, str) or "%" in value:
        return None
    try:
        return canonical_ip(value)
    except ValueError:
        return None


def check_members(members: Any, where: str, what: str) -> list[str]:
    """One ring or chain: a list of at least 2 distinct addresses of one family (a send is matched on one
    family's fields), canonical (``host_address``); DeclarationError naming ``where``."""
    if not isinstance(members, list) or len(members) < 2:
        raise DeclarationError(f"{where}: {what}: must be a list of at least 2 IPv4 or IPv6 addresses, "
                               f"got {members!r}")
    out: list[str] = []
    for j, host in enumerate(members):
        address = host_address(host)
        if address is None:
            raise DeclarationError(f"{where}: {what}[{j}]: must be an IPv4 or IPv6 address, got {host!r}")
        if out and is_ipv6(address) != is_ipv6(out[0]):
            raise DeclarationError(f"{where}: {what}[{j}]: {host} is not of the family of {out[0]} (a ring or "
                                   "chain sends within one of IPv4 or IPv6)")
        out.append(address)
    if len(set(out)) != len(out):
        dup = next(h for h in out if out.count(h) > 1)
        raise DeclarationError(f"{where}: {what}: host {dup} appears twice")
    return out


def read_traffic(path: str, where: str, nodes: Mapping[Any, str] | None = None) -> tuple[str, list[list[str]]]:
    """A traffic file in the authors' format as (kind, rings or chains of host addresses).

    The file's ``src``/``dst`` columns are IPv4 or IPv6 addresses, or node ids mapped to addresses by ``nodes``
    (node id -> address, e.g. the authors' server numbering). Errors name the file and line (the reader's) and
    ``where`` (the declaration)."""
    try:
        job = read_traffic_file(path, iterations=1)
    except WorkloadError as exc:
        raise DeclarationError(f"{where}: traffic: {exc}") from None
    except OSError as exc:
        raise DeclarationError(f"{where}: traffic: cannot read {path}: {exc.strerror}") from None
    rings = []
    for ring in job.rings:
        out = []
        for host in ring:
            ip = host_address(nodes.get(host, nodes.get(str(host))) if nodes else host)
            if ip is None:
                hint = "" if nodes else " (give the job a nodes: {node id: address} map)"
                raise DeclarationError(f"{where}: traffic: {path}: host {host!r} is not an IPv4 or IPv6 "
                                       f"address{hint}")
            out.append(ip)
        if len({is_ipv6(ip) for ip in out}) > 1:
            raise DeclarationError(f"{where}: traffic: {path}: a ring or chain mixes IPv4 and IPv6 hosts")
        rings.append(out)
    return job.kind, rings


def resolve_path(path: str, config_name: str | None) -> str:
    """A relative traffic path is relative to the configuration file's folder (as a user reads it)."""
    if os.path.isabs(path) or not config_name or config_name.startswith("<"):
        return path
    return os.path.join(os.path.dirname(os.path.abspath(config_name)), path)


def sends(job: Mapping[str, Any]) -> list[HostPair]:
    """The host pairs a declared job sends on (rings: cycles, stages: chains), each once, in order."""
    pairs: list[HostPair] = []
    for ring in job.get("rings") or ():
        pairs += [HostPair(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
    for chain in job.get("stages") or ():
        pairs += [HostPair(chain[i], chain[i + 1]) for i in range(len(chain) - 1)]
    return list(dict.fromkeys(pairs))


def declared_pairs(jobs: Iterable[Mapping[str, Any]]) -> list[HostPair]:
    """Every declared send of every job, each host pair once."""
    return list(dict.fromkeys(p for job in jobs for p in sends(job)))


def uncovered_pairs(jobs: Iterable[Mapping[str, Any]], elephant_keys: Iterable[Any]) -> list[HostPair]:
    """Declared host pairs no detected elephant carries yet: those are routed as pairs. Once a transport flow
    of the pair is an elephant it is routed itself (the pair's pin passes to it: te.in_force)."""
    covered = {(k.src_ip, k.dst_ip) for k in elephant_keys}
    return [p for p in declared_pairs(jobs) if (p.src_ip, p.dst_ip) not in covered]


def weights(jobs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Job name -> weight, for jobs declared with one other than 1."""
    return {job["name"]: float(job["weight"]) for job in jobs if float(job.get("weight", 1.0)) != 1.0}


def job_hosts(hosts: Sequence[str], structure: Iterable[Sequence[str]]) -> list[str]:
    """The job's hosts: those listed, then the members of its rings / stages not listed (first seen order)."""
    out = list(dict.fromkeys(hosts))
    seen = set(out)
    for members in structure:
        for h in members:
            if h not in seen:
                seen.add(h)
                out.append(h)
    return out
