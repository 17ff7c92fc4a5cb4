"""Real PyTorch training jobs in emulated hosts: the ``torch-allreduce`` experiment pattern.

Each job's ranks run one per host, launched as a user launches a multi-node job, one ``torchrun`` per host::

    torchrun --nnodes RANKS --nproc_per_node 1 --node_rank i --master_addr <fabric IP of the job's first host>
             --master_port P --redirects 1 --tee 1 -m mlroute.torch torch_train.py --mb M --iters I --compute S

under the interpreter that has torch (``MLROUTE_TORCH_PYTHON``, default Debian's /usr/bin/python3 with
python3-torch; ``--redirects 1 --tee 1`` because Debian's torchrun 1.13 crashes on Python 3.11 without them).
The hook (``mlroute.torch``) declares each job to the controller over the management network (``MLROUTE_URL``)
when its process group exists; a job launched without ``url`` runs undeclared (mode ``mlroute-undeclared``).
gloo binds the host's fabric interface (``GLOO_SOCKET_IFNAME``: Mininet hosts share one hostname).

The hook reaches the interpreter through ``PYTHONPATH`` = a directory holding only a link to the ``mlroute``
package, so the torch interpreter sees none of the project venv's site-packages (compiled for another Python).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlroute
from mlroute.errors import MlrouteError
from mlroute.experiment import pattern_options
from mlroute.torch import rank_order

PATTERN = "torch-allreduce"
PYTHON_ENV = "MLROUTE_TORCH_PYTHON"
DEFAULT_PYTHON = "/usr/bin/python3"
SCRIPT = Path(__file__).with_name("torch_train.py")
BASE_PORT = 29500  # job j's rendezvous on its first host at BASE_PORT + j
STARTUP_S = 180.0  # torch imports in 2 x ranks processes per job on a 2-core machine, then the rendezvous
KILL_WAIT_S = 10.0


class TorchJobsError(MlrouteError, RuntimeError):
    """The jobs could not run (no torch, a rank failed, a timeout); the message carries the ranks' output."""


PLACEMENTS = ("random", "interleaved-pods", "grouped-pods")
RINGS = ("given", "choose")


@dataclass
class TorchAllReduceSpec:
    jobs: int
    ranks: int
    mb: float = 2.0  # tensor size, MB (10^6 bytes) of float32
    iterations: int = 4
    compute_s: float = 1.0
    placement: str = "random"  # PLACEMENTS: hosts drawn at random, or each job on two pods (pod_pairs)
    ring: str = "given"  # RINGS: the launch order, or the controller's (MLROUTE_RING=choose)

    @property
    def rings(self) -> int:  # runner.ring_placement's names
        return self.jobs

    @property
    def size(self) -> int:
        return self.ranks


def is_torch_pattern(pattern: str) -> bool:
    return pattern.startswith(PATTERN + ":")


def parse(spec: str) -> TorchAllReduceSpec:
    """``torch-allreduce:JOBSxRANKS[,mb=M][,iters=I][,compute=S][,placement=P][,ring=R]``, e.g.
    ``torch-allreduce:4x4,mb=2,iters=4,placement=interleaved-pods,ring=choose``; ValueError naming what is
    wrong."""
    jobs, ranks, options = pattern_options.parse(spec, PATTERN, "torch all-reduce", pattern_options.ALLREDUCE_NUMBERS,
                                                 {"placement": PLACEMENTS, "ring": RINGS})
    out = TorchAllReduceSpec(jobs, ranks, **options)
    if out.ranks < 2 or out.jobs < 1 or out.iterations < 1 or out.mb <= 0 or out.compute_s < 0:
        raise ValueError(f"bad torch all-reduce pattern {spec!r}: jobs >= 1, ranks >= 2, iters >= 1, mb > 0, "
                         "compute >= 0")
    return out


def pod_pairs(spec: TorchAllReduceSpec, k: int, interleaved: bool = True) -> list[list[str]]:
    """Each job on two pods of a k-ary fat-tree (Mininet's h1.. numbering: pod p holds the next (k/2)^2 hosts),
    half its ranks in each: pods 0 and 1 take jobs until they are full, then pods 2 and 3, ... Rank order
    alternates the pods (A, B, A, B: every ring edge crosses the core) when ``interleaved``, else groups them
    (A, A, B, B: two edges cross). ValueError when the jobs do not fit or a job's ranks are odd."""
    per_pod = (k // 2) ** 2
    half = spec.ranks // 2
    if spec.ranks % 2 or half > per_pod:
        raise ValueError(f"{spec.ranks} ranks cannot split evenly over two pods of {per_pod} hosts")
    per_pair = per_pod // half
    if spec.jobs > per_pair * (k // 2):
        raise ValueError(f"{spec.jobs} jobs of {spec.ranks} ranks on pod pairs: a k={k} fat-tree holds "
                         f"{per_pair * (k // 2)}")
    out = []
    for j in range(spec.jobs):
        pair, slot = divmod(j, per_pair)
        a, b = ([f"h{(2 * pair + side) * per_pod + slot * half + i + 1}" for i in range(half)] for side in (0, 1))
        out.append([h for duo in zip(a, b) for h in duo] if interleaved else a + b)
    return out


def ideal_seconds(ranks: int, mb: float, bw_mbps: float) -> float:
    """A ring all-reduce of ``mb`` MB over ``ranks`` ranks at ``bw_mbps`` per link, nothing else in the way: each
    ring edge carries 2(n-1)/n of the tensor (reduce-scatter, then all-gather)."""
    return 2 * (ranks - 1) / ranks * mb * 8 / bw_mbps


def torch_python() -> str:
    return os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON


def torch_problem(python: str | None = None, timeout_s: float = 120) -> str | None:
    """Why ``python`` cannot run the jobs (None: it can): it must import torch.distributed with gloo."""
    python = python or torch_python()
    code = "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} cannot run torch ({exc}); apt-get install python3-torch, or set {PYTHON_ENV}"
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        return f"{python} cannot import torch.distributed with gloo ({tail[0]}); apt-get install python3-torch, " \
               f"or set {PYTHON_ENV}"
    return None


def hook_path(workdir: Path) -> Path:
    """A directory whose only entry links to this ``mlroute`` package: the ranks' PYTHONPATH."""
    path = workdir / "pythonpath"
    path.mkdir(parents=True, exist_ok=True)
    link = path / "mlroute"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path(mlroute.__file__).resolve().parent, target_is_directory=True)
    return path


def records(text: str) -> list[dict]:
    """The JSON records a rank printed, found in torchrun's console (``[default0]:{...}`` under ``--tee``)."""
    out = []
    for line in text.splitlines():
        i = line.find('{"rank"')
        if i < 0:
            continue
        try:
            rec = json.loads(line[i:])
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def torchrun_command(python: str, nnodes: int, node_rank: int, master: str, port: int, spec: TorchAllReduceSpec,
                     iterations: int, hold_until: Path | None = None, start_after: Path | None = None) -> list[str]:
    """One host's launch of one rank, as a user launches a multi-node job (``python -m torch.distributed.run`` is
    ``torchrun`` under that interpreter)."""
    gates = [*(["--start-after", str(start_after)] if start_after else []),
             *(["--hold-until", str(hold_until)] if hold_until else [])]
    return [python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc_per_node", "1",
            "--node_rank", str(node_rank), "--master_addr", master, "--master_port", str(port),
            "--monitor_interval", "1",  # the agent notices its worker's end within 1 s, not 5
            "--redirects", "1", "--tee", "1",  # Debian's torchrun 1.13 on Python 3.11 crashes without both
            "-m", "mlroute.torch", str(SCRIPT), "--mb", f"{spec.mb:g}", "--iters", str(iterations),
            "--compute", f"{spec.compute_s:g}", *gates]


def slowest_per_iteration(per_rank: list[list[dict]]) -> list[float]:
    """One job's all-reduce time per iteration: the slowest of its ranks' (records as ``records`` reads them).
    The list ends at the first iteration some rank did not report."""
    times = [{rec["iteration"]: rec["seconds"] for rec in recs if "iteration" in rec} for recs in per_rank]
    n = 0
    while times and all(n in t for t in times):
        n += 1
    return [max(t[i] for t in times) for i in range(n)]


@dataclass
class Rank:
    job: int
    rank: int
    host: str
    proc: Any
    log: Path


class TorchJobs:
    """``jobs[j]`` = the Mininet host names of job j in rank order; every rank's torchrun starts at once. ``url``
    (the controller's REST as the hosts reach it) None: the jobs run undeclared.

    The jobs share the machine's cores, so their measured iterations are lined up between two gates, files a
    watcher thread creates: ``started`` once every job is past init_process_group (its declaration made), before
    which no rank starts its first iteration, and ``measured`` once every job reported its last, before which no
    rank tears down. Without them, one job's iteration 0 ran beside the other ranks' torch import and init (1-2 s
    of CPU each; 32 processes on 2 cores) at 1.30-1.34x its steady time, with its routing right from the first
    byte. Either gate also opens when some rank exits (killed or failed): the others never wait on a dead job."""

    def __init__(self, net: Any, jobs: list[list[str]], spec: TorchAllReduceSpec, workdir: str | Path,
                 url: str | None = None, token: str | None = None, lease_s: float | None = None,
                 python: str | None = None, iterations: int | None = None, base_port: int = BASE_PORT,
                 names: list[str] | None = None, choose_ring: bool = False) -> None:
        """``choose_ring``: the ranks run in the node order the controller chose (``MLROUTE_RING=choose``)."""
        self.jobs = jobs
        self.spec = spec
        self.iterations = iterations if iterations is not None else spec.iterations
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.python = python or torch_python()
        self.names = names or [f"job{j}" for j in range(len(jobs))]
        self.ranks: list[Rank] = []
        self.started = time.monotonic()
        self.start = self.workdir / "started"  # gate: created once every job is past init_process_group
        self.release = self.workdir / "measured"  # gate: created once every job reported its last iteration
        for gate in (self.start, self.release):
            gate.unlink(missing_ok=True)
        self._stopping = threading.Event()
        pythonpath = hook_path(self.workdir)
        try:
            for j, hosts in enumerate(jobs):
                master = net.get(hosts[0]).IP()
                for r, name in enumerate(hosts):
                    host = net.get(name)
                    env = self._env(host, pythonpath, self.names[j], url, token, lease_s)
                    if choose_ring:
                        env[rank_order.RING_ENV] = "choose"
                    cmd = torchrun_command(self.python, len(hosts), r, master, base_port + j, spec, self.iterations,
                                           self.release, self.start)
                    log = self.workdir / f"{self.names[j]}-rank{r}-{name}.log"
                    with open(log, "wb") as out:
                        proc = host.popen(cmd, env=env, cwd=str(self.workdir), stdout=out, stderr=subprocess.STDOUT)
                    self.ranks.append(Rank(j, r, name, proc, log))
        except BaseException:
            self.stop()
            raise
        self._gates = threading.Thread(target=self._open_gates, name="torch-jobs-gates", daemon=True)
        self._gates.start()

    def _open_gates(self, every_s: float = 0.1) -> None:
        """Create each gate file once its condition holds (class docstring); ends when both exist or on stop()."""
        while not self._stopping.is_set() and not (self.start.exists() and self.release.exists()):
            exited = any(r.proc.poll() is not None for r in self.ranks)
            if not self.start.exists() and (exited or all(self.ready(j) for j in range(len(self.jobs)))):
                self.start.touch()
            if not self.release.exists() and (exited or all(len(t) == self.iterations
                                                            for t in self.iteration_times())):
                self.release.touch()
            self._stopping.wait(every_s)

    @staticmethod
    def _env(host: Any, pythonpath: Path, name: str, url: str | None, token: str | None,
             lease_s: float | None) -> dict[str, str]:
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(PYTHONPATH=str(pythonpath), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
                   GLOO_SOCKET_IFNAME=host.defaultIntf().name, MLROUTE_JOB=name)
        if url:
            env["MLROUTE_URL"] = url
            if token:
                env["MLROUTE_TOKEN"] = token
            if lease_s:
                env["MLROUTE_LEASE_S"] = f"{lease_s:g}"
        return env

    def timeout_s(self, ideal_s: float) -> float:
        """How long the jobs may take at most: start-up, then each iteration up to 10x its ideal (ECMP at worst
        shares a link among a few flows) plus its compute phase."""
        return STARTUP_S + self.iterations * (self.spec.compute_s + 10 * ideal_s + 5)

    def alive(self, job: int | None = None) -> bool:
        return any(r.proc.poll() is None for r in self.ranks if job is None or r.job == job)

    def wait(self, timeout_s: float, watch: Any = None, every_s: float = 1.0) -> None:
        """Until every rank has exited (``watch()`` called every ``every_s`` meanwhile); TorchJobsError with the
        output of the ranks that failed, or of all when the time ran out (then they are killed)."""
        deadline = time.monotonic() + timeout_s
        while self.alive():
            if time.monotonic() > deadline:
                self.stop()
                raise TorchJobsError(f"the torch jobs did not finish within {timeout_s:.0f} s:\n{self.tails()}")
            if watch is not None:
                watch()
            time.sleep(every_s)
        failed = [r for r in self.ranks if r.proc.returncode != 0]
        if failed:
            raise TorchJobsError(f"{len(failed)} torch ranks failed:\n{self.tails(failed)}")

    def records(self, rank: Rank) -> list[dict]:
        try:
            return records(rank.log.read_text(errors="replace"))
        except OSError:
            return []

    def iteration_times(self) -> list[list[float]]:
        """Per job, per iteration: the slowest rank's all-reduce time (s). An iteration some rank did not report
        ends the job's list."""
        return [slowest_per_iteration([self.records(r) for r in self.ranks if r.job == j])
                for j in range(len(self.jobs))]

    def ready(self, job: int) -> bool:
        """Every rank of ``job`` is past init_process_group (so its declaration, if any, was sent)."""
        return all(any(rec.get("event") == "ready" for rec in self.records(r)) for r in self.ranks if r.job == job)

    def run_order(self) -> list[list[str]]:
        """Per job: its hosts in the rank order the job ran in (the launch order unless the hook renumbered the
        ranks: ``choose_ring``), from each rank's "ready" record; a host that never reported keeps its place."""
        ran_as = {(r.job, r.host): rec["rank"] for r in self.ranks for rec in self.records(r)
                  if rec.get("event") == "ready"}
        return [sorted(hosts, key=lambda h, j=j, launch=hosts: ran_as.get((j, h), launch.index(h)))
                for j, hosts in enumerate(self.jobs)]

    def init_seconds(self) -> list[float]:
        """Per job: the slowest rank's time in init_process_group (rank 0's includes the hook's PUT)."""
        out = []
        for j in range(len(self.jobs)):
            times = [rec["init_s"] for r in self.ranks if r.job == j for rec in self.records(r)
                     if rec.get("event") == "ready"]
            out.append(max(times) if times else float("nan"))
        return out

    def kill(self, job: int, sig: int = signal.SIGKILL) -> None:
        """Signal every process of ``job``'s ranks (torchrun and its worker: one process group per host)."""
        for r in self.ranks:
            if r.job == job:
                _killpg(r.proc, sig)
        for r in self.ranks:
            if r.job == job:
                try:
                    r.proc.wait(KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    _killpg(r.proc, signal.SIGKILL)
                    r.proc.wait(KILL_WAIT_S)

    def tails(self, ranks: list[Rank] | None = None, chars: int = 1500) -> str:
        parts = []
        for r in ranks if ranks is not None else self.ranks:
            try:
                text = r.log.read_text(errors="replace")[-chars:]
            except OSError:
                text = "(no output)"
            parts.append(f"--- {self.names[r.job]} rank {r.rank} on {r.host} (exit {r.proc.poll()}) ---\n{text}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill every rank's process group (idempotent; a worker outliving its torchrun goes too)."""
        self._stopping.set()
        for r in self.ranks:
            _killpg(r.proc, signal.SIGKILL)
        for r in self.ranks:
            try:
                r.proc.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass


def _killpg(proc: Any, sig: int) -> None:
    """Mininet starts each command in a session of its own (mnexec -d): its group holds torchrun and its worker."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
