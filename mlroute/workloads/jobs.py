"""ML training jobs: the job model, the paper authors' traffic-file reader/writer and the paper's workloads.

A :class:`Job` is what the simulator (``mlroute.sim``) runs and what ``mlroute route --traffic`` routes:

* ``kind == "allreduce"`` — synchronous data-parallel ring all-reduce. ``rings`` holds one list of members per
  ring, in ring order; ring edge ``i`` goes ``rings[r][i] -> rings[r][(i + 1) % n]``. One iteration is a compute
  phase of ``compute_s`` seconds followed by ``2 (n - 1)`` lock-stepped ring steps; in every step each ring edge
  moves ``step_bytes`` bytes.
* ``kind == "pipeline"`` — pipeline-parallel sends. ``rings`` holds chains of stages; stage ``i`` sends
  ``step_bytes`` to stage ``i + 1``. One iteration is a compute phase followed by ``len(chain) - 1`` sequential
  sends (the send of stage ``i`` starts when the send of stage ``i - 1`` has arrived).

Host ids are kept exactly as the input gave them (ints where the text is an integer); ``host_tor`` says under
which ToR each host sits.

The authors' format (docs/paper.md)
------------------------------
One flow per line, whitespace separated, ``#`` starts a comment::

    # src dst src_tor dst_tor start_time flow_size compute_time stage_index
    96 128 0 1 1000000000 7333333333 1240000000 0

``start_time`` and ``compute_time`` are in nanoseconds, ``flow_size`` in bytes (the bytes one ring edge moves in
one ring step). One file per job; lines with the same ``stage_index`` form one ring, whose order is rebuilt from
its ``src -> dst`` edges (they must form exactly one directed cycle). All lines of a file share one start time,
compute time and flow size (one job = one set of those). A project extension: a comment line
``# mlroute: kind=pipeline`` makes the file a pipeline job whose same-``stage_index`` lines form one chain
(a directed path) instead of a cycle, and ``model=NAME`` records the model; :func:`write_traffic_files` writes
that line (the authors' simulator ignores it as a comment).

The paper's workloads (:func:`paper_jobs`)
------------------------------------------
Models (docs/paper.md): GPT-3 175B (TP 8 x PP 8), BLOOM 176B (TP 4 x PP 12), LLaMA-2 70B (TP 8 x PP 16); job ``j``
trains ``models[j % len(models)]``. A job is ``ring`` data-parallel replicas of ``G = TP * PP`` GPUs; GPU
position ``p`` of every replica belongs to ring ``p`` (``G`` rings of ``ring`` members, one member per replica).
Per-step bytes = 4 * params / G / ring (fp32 gradients of the GPU's shard, split in ``ring`` chunks).

Placement: one host = one NIC. With ``gpus_per_host = g`` (default 1: one GPU per NIC, as in rail-optimised
clusters) a replica needs ``H = ceil(G / g)`` hosts and GPU position ``p`` sits on the replica's host ``p // g``
(so with g > 1, g rings share each NIC). Every replica gets ``ceil(H / hosts_per_tor)`` ToRs of its own,
drawn uniformly at random without replacement from the ToRs no earlier replica took (jobs in order, replicas in
order); its hosts fill those ToRs in order (ToR order as drawn, host slots 0, 1, ... within a ToR); leftover
slots stay idle. So the members of a ring are always under different ToRs and no two replicas share a ToR.
Host ``h`` (numbered from 0) sits under ToR ``h // hosts_per_tor``. If the ToRs run out a
:class:`WorkloadError` says how many are needed and how many exist. ``placement="random"`` (not the paper's; a
stress test) instead puts every host of every replica on a host drawn uniformly without replacement from the
whole fabric, so replicas and jobs share ToRs and some ring edges stay inside a ToR. ``"contiguous"`` and
``"interleaved"`` (ring choice's placements, :mod:`mlroute.workloads.placement`) put each job's replicas half on
each of a pair of host groups (``groups``: pods or ToRs), in rank order one group then the other, or alternating.
Start times are uniform in
``[start_min_s, start_max_s]`` (default [1, 10] s). Everything is drawn from one ``numpy`` generator seeded with
``seed``, so the same arguments give the same jobs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlroute.errors import MlrouteError

Host = Hashable

KINDS = ("allreduce", "pipeline")
PLACEMENTS = ("tor", "contiguous", "interleaved", "random")


class WorkloadError(MlrouteError, ValueError):
    """A malformed or impossible workload; the message names FILE:LINE where there is one."""


@dataclass(frozen=True)
class Model:
    name: str
    params: float  # number of parameters
    tp: int
    pp: int
    compute_s: float  # compute phase per iteration, seconds

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


MODELS = {
    "gpt3": Model("gpt3", 175e9, 8, 8, 1.0),
    "bloom": Model("bloom", 176e9, 4, 12, 1.24),
    "llama2": Model("llama2", 70e9, 8, 16, 2.69),
}

BYTES_PER_PARAM = 4  # fp32 gradients (docs/paper.md)
#: Training iterations per job in the paper's evaluation (docs/paper.md): the default everywhere.
PAPER_ITERATIONS = 11
#: Window (seconds) the paper's generated jobs start in, uniformly.
START_WINDOW_S = (1.0, 10.0)
#: The paper's models, in the order generated jobs cycle through them.
PAPER_MODELS = ("gpt3", "bloom", "llama2")


@dataclass
class Job:
    name: str
    kind: str
    rings: list
    step_bytes: float
    compute_s: float
    start_s: float
    iterations: int
    host_tor: dict
    model: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise WorkloadError(f"job {self.name}: kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.rings:
            raise WorkloadError(f"job {self.name}: no rings")
        for ring in self.rings:
            if len(ring) < 2:
                raise WorkloadError(f"job {self.name}: a ring/chain needs at least 2 members, got {list(ring)}")
            if len(set(ring)) != len(ring):
                raise WorkloadError(f"job {self.name}: ring/chain {list(ring)} repeats a member")
            for h in ring:
                if h not in self.host_tor:
                    raise WorkloadError(f"job {self.name}: host {h!r} has no ToR")
        if not (self.step_bytes > 0 and math.isfinite(self.step_bytes)):
            raise WorkloadError(f"job {self.name}: step_bytes must be positive, not {self.step_bytes}")
        if not (self.compute_s >= 0 and math.isfinite(self.compute_s)):
            raise WorkloadError(f"job {self.name}: compute_s must be >= 0, not {self.compute_s}")
        if not (self.start_s >= 0 and math.isfinite(self.start_s)):
            raise WorkloadError(f"job {self.name}: start_s must be >= 0, not {self.start_s}")
        if int(self.iterations) != self.iterations or self.iterations < 1:
            raise WorkloadError(f"job {self.name}: iterations must be a positive integer, not {self.iterations}")
        self.iterations = int(self.iterations)

    @property
    def ring_size(self) -> int:
        return max(len(r) for r in self.rings)

    def edges(self, ring_index: int) -> list:
        """The (src, dst) sends of one ring (cycle) or chain (path)."""
        ring = self.rings[ring_index]
        if self.kind == "allreduce":
            return [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
        return [(ring[i], ring[i + 1]) for i in range(len(ring) - 1)]

    def all_edges(self) -> list:
        return [e for r in range(len(self.rings)) for e in self.edges(r)]

    def steps_per_iteration(self, ring_index: int = 0) -> int:
        n = len(self.rings[ring_index])
        return 2 * (n - 1) if self.kind == "allreduce" else n - 1


# --------------------------------------------------------------------------------------------------------------
# Flows for the routing core


def jobs_to_flows(jobs: Iterable[Job]) -> list:
    """One :class:`mlroute.routing.flow.Flow` per send of every ring/chain (duplicates kept, in job order)."""
    from mlroute.routing.flow import Flow

    flows = []
    for job in jobs:
        for s, d in job.all_edges():
            flows.append(Flow(s, d, src_tor=job.host_tor[s], dst_tor=job.host_tor[d], job=job.name))
    return flows


# --------------------------------------------------------------------------------------------------------------
# Reading the authors' format

COLUMNS = ("src", "dst", "src_tor", "dst_tor", "start_time", "flow_size", "compute_time", "stage_index")
KIND_DIRECTIVE = "# mlroute:"


def _parse_host(text: str):
    try:
        return int(text)
    except ValueError:
        return text


def _parse_int(text: str, what: str, where: str) -> int:
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            raise WorkloadError(f"{where}: {what} {text!r} is not a number") from None
        if not math.isfinite(f) or f != int(f):
            raise WorkloadError(f"{where}: {what} {text!r} is not an integer") from None
        value = int(f)
    return value


def _parse_float(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise WorkloadError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise WorkloadError(f"{where}: {what} {text!r} is not finite")
    return value


def _order_cycle(edges, where_of, kind):
    """Rebuild a ring (one directed cycle) or chain (one directed path) from its edges."""
    succ: dict = {}
    pred: dict = {}
    for (s, d), where in zip(edges, where_of):
        if s in succ:
            raise WorkloadError(f"{where}: host {s} sends twice in one {'ring' if kind == 'allreduce' else 'chain'}"
                                f" (already to {succ[s]})")
        if d in pred:
            raise WorkloadError(f"{where}: host {d} receives twice in one "
                                f"{'ring' if kind == 'allreduce' else 'chain'} (already from {pred[d]})")
        succ[s] = d
        pred[d] = s
    if kind == "allreduce":
        start = edges[0][0]
        order = [start]
        node = succ.get(start)
        while node is not None and node != start:
            order.append(node)
            node = succ.get(node)
        if node is None or len(order) != len(edges):
            raise WorkloadError(f"{where_of[0]}: the lines of this stage_index do not form one ring "
                                f"(a single directed cycle through all its hosts)")
        return order
    heads = [s for s in succ if s not in pred]
    if len(heads) != 1:
        raise WorkloadError(f"{where_of[0]}: the lines of this stage_index do not form one chain "
                            f"(a single directed path)")
    order = [heads[0]]
    while order[-1] in succ:
        order.append(succ[order[-1]])
        if len(order) > len(edges) + 1:
            break
    if len(order) != len(edges) + 1:
        raise WorkloadError(f"{where_of[0]}: the lines of this stage_index do not form one chain "
                            f"(a single directed path)")
    return order


def read_traffic_file(path, *, iterations: int = PAPER_ITERATIONS, name: str | None = None, host_tor=None,
                      tor_where=None) -> Job:
    """Read one job from one file in the authors' format (see the module docstring).

    ``host_tor`` / ``tor_where`` (host -> ToR, host -> "FILE:LINE" first seen) may be shared between calls so
    that a host must sit under the same ToR in every file."""
    path = str(path)
    reader = _TrafficReader(path, {} if host_tor is None else host_tor, {} if tor_where is None else tor_where)
    for lineno, raw in enumerate(_read_lines(path), 1):
        reader.line(raw, f"{path}:{lineno}")
    if not reader.stages:
        raise WorkloadError(f"{path}: no flows")
    rings = [_order_cycle(edges, wheres, reader.kind) for _, (edges, wheres) in sorted(reader.stages.items())]
    job_hosts = {h for r in rings for h in r}
    return Job(
        name=name or Path(path).stem,
        kind=reader.kind,
        rings=rings,
        step_bytes=reader.first["flow_size"][0],
        compute_s=reader.first["compute_time"][0] / 1e9,
        start_s=reader.first["start_time"][0] / 1e9,
        iterations=iterations,
        host_tor={h: reader.host_tor[h] for h in job_hosts},
        model=reader.model,
    )


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readlines()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise WorkloadError(f"{path}: not a text file") from None


@dataclass
class _Line:
    """One flow line of the authors' format, parsed and checked on its own."""

    src: Host
    dst: Host
    src_tor: int
    dst_tor: int
    start: float
    size: float
    compute: float
    stage: int
    cols: list


class _TrafficReader:
    """The state of reading one traffic file: directives, the job's shared fields, its stages."""

    def __init__(self, path: str, host_tor: dict, tor_where: dict):
        self.path = path
        self.host_tor = host_tor
        self.tor_where = tor_where
        self.kind = "allreduce"
        self.model: str | None = None
        self.stages: dict = {}  # stage_index -> ([(src, dst)], [where])
        self.first: dict = {}  # field -> (value, where)

    def line(self, raw: str, where: str) -> None:
        line = raw.strip()
        if line.startswith(KIND_DIRECTIVE):
            self._directive(line, where)
            return
        line = line.split("#", 1)[0].strip()
        if not line:
            return
        flow = _parse_line(line.split(), where)
        self._place_hosts(flow, where)
        self._same_job_fields(flow, where)
        edges, wheres = self.stages.setdefault(flow.stage, ([], []))
        edges.append((flow.src, flow.dst))
        wheres.append(where)

    def _directive(self, line: str, where: str) -> None:
        for item in line[len(KIND_DIRECTIVE):].split():
            key, _, value = item.partition("=")
            if key == "kind" and value in KINDS:
                self.kind = value
            elif key == "model" and value:
                self.model = value
            else:
                raise WorkloadError(f"{where}: unknown directive {item!r} "
                                    f"(expected kind=allreduce|pipeline or model=NAME)")

    def _place_hosts(self, flow: _Line, where: str) -> None:
        """A host sits under one ToR, in this file and every file read with the same ``host_tor``."""
        host_tor, tor_where = self.host_tor, self.tor_where
        for h, t in ((flow.src, flow.src_tor), (flow.dst, flow.dst_tor)):
            if h in host_tor and host_tor[h] != t:
                raise WorkloadError(f"{where}: host {h} is under ToR {t} here but under ToR {host_tor[h]} "
                                    f"at {tor_where.get(h, 'an earlier file')}")
            if h not in host_tor:
                host_tor[h] = t
                tor_where[h] = where

    def _same_job_fields(self, flow: _Line, where: str) -> None:
        """One file is one job: every line has the job's start time, flow size and compute time."""
        for key, value, text in (("start_time", flow.start, flow.cols[4]), ("flow_size", flow.size, flow.cols[5]),
                                 ("compute_time", flow.compute, flow.cols[6])):
            if key not in self.first:
                self.first[key] = (value, where)
            elif self.first[key][0] != value:
                raise WorkloadError(f"{where}: {key} {text} differs from {self.first[key][0]:g} at "
                                    f"{self.first[key][1]} (one file is one job with one {key})")


def _parse_line(cols: list[str], where: str) -> _Line:
    if len(cols) != len(COLUMNS):
        raise WorkloadError(f"{where}: expected {len(COLUMNS)} columns ({' '.join(COLUMNS)}), got {len(cols)}")
    flow = _Line(
        src=_parse_host(cols[0]), dst=_parse_host(cols[1]),
        src_tor=_parse_int(cols[2], "src_tor", where), dst_tor=_parse_int(cols[3], "dst_tor", where),
        start=_parse_float(cols[4], "start_time", where), size=_parse_float(cols[5], "flow_size", where),
        compute=_parse_float(cols[6], "compute_time", where), stage=_parse_int(cols[7], "stage_index", where),
        cols=cols,
    )
    if flow.src == flow.dst:
        raise WorkloadError(f"{where}: src and dst are the same host ({flow.src})")
    for what, v in (("src_tor", flow.src_tor), ("dst_tor", flow.dst_tor)):
        if v < 0:
            raise WorkloadError(f"{where}: {what} {v} is negative")
    if flow.start < 0:
        raise WorkloadError(f"{where}: start_time {cols[4]} is negative")
    if flow.size <= 0:
        raise WorkloadError(f"{where}: flow_size {cols[5]} must be positive")
    if flow.compute < 0:
        raise WorkloadError(f"{where}: compute_time {cols[6]} is negative")
    return flow


def read_traffic_files(paths: Sequence, hosts_per_tor: int | None = None, *, iterations: int = PAPER_ITERATIONS,
                       tor_where: dict | None = None, tors: int | None = None) -> list:
    """Read one job per file (authors' format). Jobs are named after the file stems (made unique).

    A host must sit under the same ToR in every file. With ``tors``, a host under a ToR outside ``0..tors-1``
    is an error; with ``hosts_per_tor``, so is a ToR with more distinct hosts than that (the fabric could not
    hold them). ``tor_where`` is filled with host -> "FILE:LINE" where the host first appears."""
    if not paths:
        raise WorkloadError("no traffic files given")
    host_tor: dict = {}
    tor_where = {} if tor_where is None else tor_where
    jobs = []
    names: dict = {}
    for path in paths:
        stem = Path(str(path)).stem
        names[stem] = names.get(stem, 0) + 1
        name = stem if names[stem] == 1 else f"{stem}#{names[stem]}"
        jobs.append(read_traffic_file(path, iterations=iterations, name=name, host_tor=host_tor,
                                      tor_where=tor_where))
    if tors is not None:
        _check_tors_exist(host_tor, tor_where, tors)
    if hosts_per_tor is not None:
        _check_tors_hold(host_tor, tor_where, hosts_per_tor)
    return jobs


def _check_tors_exist(host_tor: dict, tor_where: dict, tors: int) -> None:
    for h, t in host_tor.items():
        if not 0 <= t < tors:
            raise WorkloadError(f"{tor_where[h]}: host {h} is under ToR {t}, but the fabric has ToRs 0..{tors - 1} "
                                f"(ToR {t} is beyond the fabric)")


def _check_tors_hold(host_tor: dict, tor_where: dict, hosts_per_tor: int) -> None:
    per_tor: dict = {}
    for h, t in host_tor.items():
        per_tor.setdefault(t, []).append(h)
    for t, hs in sorted(per_tor.items()):
        if len(hs) > hosts_per_tor:
            raise WorkloadError(f"{tor_where[hs[hosts_per_tor]]}: ToR {t} has {len(hs)} distinct hosts in the "
                                f"traffic files, more than --hosts-per-tor {hosts_per_tor}")


# --------------------------------------------------------------------------------------------------------------
# Writing the authors' format


def authors_node_id(host: int, tors: int, spines: int) -> int:
    """The authors' simulator numbers ToRs first, then spines, then servers: project host h -> node id."""
    return tors + spines + int(host)


def format_traffic(job: Job, host_id=None) -> str:
    """One job in the authors' format. ``host_id`` maps a host to the id written (default: as is)."""
    host_id = host_id or (lambda h: h)
    out = ["# src dst src_tor dst_tor start_time flow_size compute_time stage_index"]
    out.append(f"# job {job.name}: {len(job.rings)} {'rings' if job.kind == 'allreduce' else 'chains'}")
    out.append(f"{KIND_DIRECTIVE} kind={job.kind}" + (f" model={job.model}" if job.model else ""))
    start = _ns(job.start_s)
    compute = _ns(job.compute_s)
    size = _num(job.step_bytes)
    for r in range(len(job.rings)):
        for s, d in job.edges(r):
            out.append(f"{host_id(s)} {host_id(d)} {job.host_tor[s]} {job.host_tor[d]} {start} {size} {compute} {r}")
    return "\n".join(out) + "\n"


def _ns(seconds: float) -> str:
    return _num(round(seconds * 1e9, 3))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def write_traffic_files(jobs: Sequence[Job], directory, host_id=None) -> list:
    """Write one ``<job name>.txt`` per job into ``directory`` (created); returns the paths in job order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for job in jobs:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job.name)
        p = directory / f"{safe}.txt"
        if p in paths:
            raise WorkloadError(f"two jobs would be written to {p}")
        p.write_text(format_traffic(job, host_id), encoding="utf-8")
        paths.append(p)
    return paths


# --------------------------------------------------------------------------------------------------------------
# The paper's workloads


def paper_jobs(n_jobs: int, ring: int, tors: int, hosts_per_tor: int, seed: int = 0,
               models: Sequence[str] = PAPER_MODELS, iterations: int = PAPER_ITERATIONS, *,
               gpus_per_host: int = 1, start_min_s: float = START_WINDOW_S[0],
               start_max_s: float = START_WINDOW_S[1],
               kind: str = "allreduce", placement: str = "tor",
               groups: Sequence[Sequence[int]] | None = None) -> list:
    """The paper's synthetic workload: ``n_jobs`` concurrent jobs with data-parallel degree ``ring``.

    See the module docstring for the exact model and placement; ``groups`` (default: the ToRs) are the host groups
    of the contiguous and interleaved placements. ``kind="pipeline"`` generates the same
    replicas but as pipeline jobs: within each replica, each TP position's PP stages form a chain (stage i sends
    to stage i + 1), carrying activations of ``step_bytes = 4 * params / (TP * PP) / ring`` (the same size as the
    all-reduce chunks, so the two kinds are comparable; activation sizes are not known from the paper)."""
    _check_paper_args(n_jobs, ring, tors, hosts_per_tor, models, iterations, gpus_per_host, start_min_s,
                      start_max_s, kind, placement)
    chosen = [MODELS[models[j % len(models)]] for j in range(n_jobs)]
    needs = []  # (hosts, ToRs) of one replica of each job
    for m in chosen:
        hosts = math.ceil(m.gpus / gpus_per_host)
        needs.append((hosts, math.ceil(hosts / hosts_per_tor)))
    if kind == "pipeline":
        for m in chosen:
            if m.pp < 2:
                raise WorkloadError(f"model {m.name} has one pipeline stage: nothing to send")
    if placement not in PLACEMENTS:
        raise WorkloadError(f"placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
    _check_fits(chosen, needs, n_jobs, ring, tors, hosts_per_tor, gpus_per_host, placement)
    rng = np.random.default_rng(seed)
    slots = _Slots(rng, tors, hosts_per_tor)
    placed = None if placement == "tor" else _placed(placement, rng, [(ring, h) for h, _ in needs], groups, tors,
                                                    hosts_per_tor)
    jobs = []
    for j, (m, (hosts, ntors)) in enumerate(zip(chosen, needs)):
        # whole nanoseconds, so that writing and reading the authors' format (ns) round-trips exactly
        start = round(float(rng.uniform(start_min_s, start_max_s)) * 1e9) / 1e9
        # replica -> its hosts, by host slot
        replicas = placed[j] if placed is not None else [slots.replica(hosts, ntors) for _ in range(ring)]
        host_tor = {h: h // hosts_per_tor for rep in replicas for h in rep}
        jobs.append(Job(
            name=f"job{j}-{m.name}",
            kind=kind,
            rings=_job_rings(m, replicas, kind, gpus_per_host),
            step_bytes=BYTES_PER_PARAM * m.params / m.gpus / ring,
            compute_s=m.compute_s,
            start_s=start,
            iterations=iterations,
            host_tor=host_tor,
            model=m.name,
        ))
    return jobs


def _check_paper_args(n_jobs: int, ring: int, tors: int, hosts_per_tor: int, models: Sequence[str],
                      iterations: int, gpus_per_host: int, start_min_s: float, start_max_s: float, kind: str,
                      placement: str) -> None:
    for what, v in (("n_jobs", n_jobs), ("ring", ring), ("tors", tors), ("hosts_per_tor", hosts_per_tor),
                    ("iterations", iterations), ("gpus_per_host", gpus_per_host)):
        if int(v) != v or v < 1:
            raise WorkloadError(f"{what} must be a positive integer, not {v}")
    if ring < 2 and kind == "allreduce":
        raise WorkloadError(f"ring must be at least 2, not {ring}")
    if kind not in KINDS:
        raise WorkloadError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if not models:
        raise WorkloadError("no models given")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise WorkloadError(f"unknown model {unknown[0]!r} (known: {', '.join(MODELS)})")
    if not start_max_s >= start_min_s >= 0:
        raise WorkloadError(f"start window [{start_min_s}, {start_max_s}] is invalid")


def _check_fits(chosen: list[Model], needs: list[tuple[int, int]], n_jobs: int, ring: int, tors: int,
                hosts_per_tor: int, gpus_per_host: int, placement: str) -> None:
    total_tors = sum(t * ring for _, t in needs)
    total_hosts = sum(h * ring for h, _ in needs)
    if placement == "random" and total_hosts > tors * hosts_per_tor:
        raise WorkloadError(
            f"the workload does not fit: {n_jobs} job(s) x {ring} replicas need {total_hosts} hosts "
            f"({gpus_per_host} GPU(s) per host) but the fabric has {tors * hosts_per_tor}")
    if placement == "tor" and total_tors > tors:
        detail = ", ".join(f"{m.name}: {ring} x {t}" for m, (_, t) in zip(chosen, needs))
        raise WorkloadError(
            f"the workload does not fit: {n_jobs} job(s) x {ring} replicas need {total_tors} ToRs "
            f"({detail}; each replica gets its own ToRs, {hosts_per_tor} hosts per ToR, "
            f"{gpus_per_host} GPU(s) per host) but the fabric has {tors}")


def _placed(placement: str, rng: np.random.Generator | None, needs: list[tuple[int, int]],
            groups: Sequence[Sequence[int]] | None, tors: int, hosts_per_tor: int) -> list[list[list]]:
    """Every job's replicas by :func:`mlroute.workloads.placement.place_replicas` (default groups: the ToRs)."""
    from mlroute.workloads.placement import PlacementError, place_replicas

    if groups is None:
        groups = [range(t * hosts_per_tor, (t + 1) * hosts_per_tor) for t in range(tors)]
    try:
        return place_replicas(groups, needs, placement, rng)
    except PlacementError as exc:
        raise WorkloadError(str(exc)) from None


class _Slots:
    """The ToRs no replica has taken yet (``placement="tor"``)."""

    def __init__(self, rng: np.random.Generator, tors: int, hosts_per_tor: int):
        self.rng = rng
        self.hosts_per_tor = hosts_per_tor
        self.free = list(range(tors))

    def replica(self, hosts: int, ntors: int) -> list[int]:
        """The hosts of the next replica: ``ntors`` ToRs drawn from the free ones, filled in order."""
        picks = self.rng.choice(len(self.free), size=ntors, replace=False)
        rtors = [self.free[i] for i in picks]
        for i in sorted(picks, reverse=True):
            self.free.pop(i)
        hpt = self.hosts_per_tor
        return [t * hpt + slot for t in rtors for slot in range(hpt)][:hosts]


def _job_rings(m: Model, replicas: list[list[int]], kind: str, gpus_per_host: int) -> list[list[int]]:
    """All-reduce: GPU position p of every replica forms ring p. Pipeline: each TP position's PP stages of a
    replica form a chain."""
    if kind == "allreduce":
        return [[rep[p // gpus_per_host] for rep in replicas] for p in range(m.gpus)]
    rings = []
    for rep in replicas:
        for t in range(m.tp):
            chain = [rep[(s * m.tp + t) // gpus_per_host] for s in range(m.pp)]
            # consecutive stages on one host (gpus_per_host > 1) send over NVLink, not the network
            dedup = [h for i, h in enumerate(chain) if i == 0 or h != chain[i - 1]]
            if len(dedup) >= 2 and len(set(dedup)) == len(dedup):
                rings.append(dedup)
    if not rings:
        raise WorkloadError(f"model {m.name}: with {gpus_per_host} GPUs per host no stage sends over "
                            f"the network")
    return rings


def min_gpus_per_host(n_jobs: int, ring: int, tors: int, hosts_per_tor: int,
                      models: Sequence[str] = PAPER_MODELS, limit: int = 64,
                      placement: str = "tor", groups: Sequence[Sequence[int]] | None = None) -> int:
    """The smallest GPUs-per-host packing with which :func:`paper_jobs` fits the fabric (error if none)."""
    for g in range(1, limit + 1):
        hosts = [math.ceil(MODELS[models[j % len(models)]].gpus / g) for j in range(n_jobs)]
        if placement == "random":
            fits = ring * sum(hosts) <= tors * hosts_per_tor
        elif placement != "tor":
            try:
                _placed(placement, None, [(ring, h) for h in hosts], groups, tors, hosts_per_tor)
                fits = True
            except WorkloadError:
                fits = False
        else:
            fits = tors_needed(n_jobs, ring, hosts_per_tor, models, g) <= tors
        if fits:
            return g
    raise WorkloadError(f"{n_jobs} job(s) x {ring} replicas do not fit {tors} ToRs even with {limit} GPUs per host")


def tors_needed(n_jobs: int, ring: int, hosts_per_tor: int, models: Sequence[str] = PAPER_MODELS,
                gpus_per_host: int = 1) -> int:
    """ToRs the paper's placement takes for :func:`paper_jobs` (every replica on ToRs of its own)."""
    hosts = [math.ceil(MODELS[models[j % len(models)]].gpus / gpus_per_host) for j in range(n_jobs)]
    return sum(ring * math.ceil(h / hosts_per_tor) for h in hosts)
