"""The hook under real PyTorch: Debian's python3-torch (gloo, CPU) run by torchrun through ``-m mlroute.torch``,
four ranks on loopback, against the recording server. Skipped only where /usr/bin/python3 has no torch
(scripts/setup_env.sh installs python3-torch)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.mlroute.torch.recorder import RecordingServer

PYTHON = "/usr/bin/python3"
ROOT = Path(__file__).resolve().parents[4]
SCRIPT = Path(__file__).with_name("train_allreduce.py")
N = 4
HOSTS = [f"127.0.0.{10 + r}" for r in range(N)]


def _has_torch() -> bool:
    try:
        done = subprocess.run([PYTHON, "-c", "import torch.distributed"], capture_output=True, timeout=120)
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not _has_torch(), reason=f"{PYTHON} cannot import torch (apt install python3-torch)")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(out: Path, url: str, *extra: str, n: int = N, env_extra: dict | None = None) -> subprocess.Popen:
    theirs = ("MLROUTE_", "TORCHELASTIC_", "NCCL_", "http_", "HTTP_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(theirs)}
    env.update(
        PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
        MLROUTE_URL=url, MLROUTE_TOKEN="s3cret", MLROUTE_JOB="real-job", MLROUTE_LEASE_S="0.6", **(env_extra or {}),
    )
    cmd = [
        PYTHON, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1",  # Debian 1.13 on 3.11 needs both
        "--nproc_per_node", str(n), "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
        "-m", "mlroute.torch", str(SCRIPT), str(out), url, *extra,
    ]
    return subprocess.Popen(cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate(timeout=30)[0]
        pytest.fail(f"torchrun did not finish within {timeout} s:\n{out[-4000:]}")


_SOCK = re.compile(r"(\S+:\d+)\s+(\S+:\d+)\s+users:.*?pid=(\d+)")


def _bytes_between_ranks(out: Path, n: int = N) -> dict[tuple[int, int], int]:
    """(sender rank, receiver rank) -> bytes sent, from each rank's own ``ss -tinp`` after its first all-reduce:
    a socket belongs to the rank whose pid holds it, its peer to the rank holding the peer's endpoint. Ranks are
    the ones the processes run as (``rank.R``: the hook may have renumbered the launcher's)."""
    pids = {_run_as(out, r): int((out / f"pid.{r}").read_text()) for r in range(n)}
    socks = []  # (rank, local, peer, bytes sent)
    for r in range(n):
        lines = (out / f"ss.{r}").read_text().splitlines()
        for head, info in zip(lines, lines[1:]):
            m = _SOCK.search(head)
            sent = re.search(r"bytes_sent:(\d+)", info) or re.search(r"bytes_acked:(\d+)", info)
            if m and sent and int(m.group(3)) == pids[_run_as(out, r)]:
                socks.append((_run_as(out, r), m.group(1), m.group(2), int(sent.group(1))))
    owner = {local: r for r, local, _, _ in socks}
    flows: dict[tuple[int, int], int] = {}
    for r, _, peer, sent in socks:
        if peer in owner and owner[peer] != r:
            flows[(r, owner[peer])] = flows.get((r, owner[peer]), 0) + sent
    return flows


def _run_as(out: Path, launched: int) -> int:
    return int(json.loads((out / f"rank.{launched}").read_text())["rank"])


def test_torchrun_declares_gloo_ring_before_first_allreduce_renews_and_deletes(tmp_path):
    with RecordingServer() as rec:
        out = _finish(_torchrun(tmp_path, rec.url, "--renews", "3"), timeout=300)
        assert all((tmp_path / f"done.{r}").exists() for r in range(N)), out[-4000:]
        puts, markers = rec.index("PUT"), rec.index("GET", "")
        assert len(puts) == 1, rec.requests
        # rank 0's PUT arrived before any rank finished its first all_reduce (it cannot finish without rank 0)
        assert len(markers) == N and puts[0] < min(markers)
        put = rec.requests[puts[0]]
        assert put.path == "/mlroute/jobs/real-job" and put.auth == "Bearer s3cret"
        # gloo's all-reduce sends r -> r-1: the ring runs the hosts in descending rank order
        assert put.body == {"hosts": HOSTS, "rings": [HOSTS[::-1]], "lease_s": 0.6}
        assert len(rec.of("POST", "/mlroute/jobs/real-job/renew")) >= 3
        deletes = rec.index("DELETE")
        assert [rec.requests[i].path for i in deletes] == ["/mlroute/jobs/real-job"]
        assert deletes[0] > max(rec.index("POST"))  # at exit, after the last renew
    # and the bytes agree: each rank's bulk went to rank r-1, the declared ring's direction
    flows = _bytes_between_ranks(tmp_path)
    for r in range(N):
        down, up = flows.get((r, (r - 1) % N), 0), flows.get((r, (r + 1) % N), 0)
        assert down > 4 << 20 and down > 20 * up, (r, flows)


def test_sigkilled_job_sends_no_delete(tmp_path):
    with RecordingServer() as rec:
        proc = _torchrun(tmp_path, rec.url, "--renews", "2", "--hang")
        try:
            _wait_declared(rec, proc, 2)
            for r in range(N):
                os.kill(int((tmp_path / f"pid.{r}").read_text()), signal.SIGKILL)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
        assert rec.of("DELETE") == []  # the lease ends the job; a killed process cannot say goodbye


def _wait_declared(rec, proc: subprocess.Popen, renews: int) -> None:
    for _ in range(6000):  # bounded wait for the job to be declared and renewed
        if len(rec.of("POST")) >= renews or proc.poll() is not None:
            break
        proc_wait(proc, 0.05)
    assert len(rec.of("PUT")) == 1 and len(rec.of("POST")) >= renews, proc.poll()


def test_destroy_process_group_deletes_the_job_once(tmp_path):
    with RecordingServer() as rec:
        out = _finish(_torchrun(tmp_path, rec.url, "--renews", "1", "--destroy", n=2), timeout=300)
        assert (tmp_path / "done.0").exists(), out[-4000:]
        assert rec.of("PUT")[0].body["rings"] == [["127.0.0.11", "127.0.0.10"]]
        deletes, destroyed = rec.index("DELETE"), rec.index("GET", "/destroyed/0")
        assert len(deletes) == 1 and deletes[0] < destroyed[0]  # at destroy, not left for exit (and not twice)


def test_sigterm_deletes_the_job_and_still_ends_the_process(tmp_path):
    with RecordingServer() as rec:
        proc = _torchrun(tmp_path, rec.url, "--renews", "1", "--hang", n=2)
        try:
            _wait_declared(rec, proc, 1)
            os.kill(int((tmp_path / "pid.0").read_text()), signal.SIGTERM)
            out = _finish(proc, timeout=120)  # rank 0 died of the signal (the default action, chained): the job ends
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=60)
        assert proc.returncode != 0 and not (tmp_path / "done.0").exists(), out[-4000:]
        assert [r.path for r in rec.of("DELETE")] == ["/mlroute/jobs/real-job"]


def test_mlroute_ring_choose_renumbers_every_rank_in_the_controllers_node_order_under_env_init(tmp_path):
    """Six ranks on three "hosts" (two each): the controller answers the node order A, C, B; each process then
    runs as its host's new first rank plus its local offset, RANK says so too, the job is declared with the
    chosen ring, and gloo's bytes go r -> r-1 in the new numbering."""
    a, b, c = "127.0.0.10", "127.0.0.11", "127.0.0.12"
    with RecordingServer() as rec:
        rec.node_ranks = {a: 0, b: 2, c: 1}
        out = _finish(_torchrun(tmp_path, rec.url, "--renews", "1", "--per-host", "2", n=6,
                                env_extra={"MLROUTE_RING": "choose"}), timeout=300)
        assert all((tmp_path / f"done.{r}").exists() for r in range(6)), out[-4000:]
        runs_as = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(6)]
        assert [r["rank"] for r in runs_as] == [0, 1, 4, 5, 2, 3], out[-4000:]
        assert [r["env"] for r in runs_as] == ["0", "1", "4", "5", "2", "3"]
        choose, declared = rec.of("PUT")
        assert choose.body == {"hosts": [a, b, c], "choose_ring": True, "lease_s": 0.6,
                               "ranks_per_host": {a: 2, b: 2, c: 2}}
        assert declared.body == {"hosts": [a, c, b], "rings": [[b, c, a]], "lease_s": 0.6}
    flows = _bytes_between_ranks(tmp_path, 6)
    for r in range(6):
        down, up = flows.get((r, (r - 1) % 6), 0), flows.get((r, (r + 1) % 6), 0)
        assert down > 2 << 20 and down > 20 * up, (r, flows)


def _spawn(out: Path, url: str, n: int, port: int) -> list[subprocess.Popen]:
    """``n`` processes of ``python -m mlroute.torch SCRIPT`` that initialise with tcp:// and an explicit rank, as a
    script started by another launcher does (under torchrun, tcp:// must be its agent's store address: 1.13
    connects there as a client when TORCHELASTIC_USE_AGENT_STORE is set)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLROUTE_", "TORCHELASTIC_", "MASTER_"))}
    env.update(PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", MLROUTE_URL=url,
               MLROUTE_JOB="real-job", MLROUTE_LEASE_S="0.6", MLROUTE_RING="choose", WORLD_SIZE=str(n))
    return [subprocess.Popen([PYTHON, "-m", "mlroute.torch", str(SCRIPT), str(out), url, "--renews", "1",
                              "--tcp", str(port)], cwd=out, env={**env, "RANK": str(r), "LOCAL_RANK": "0"},
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            for r in range(n)]


def test_mlroute_ring_choose_under_tcp_init_with_an_explicit_rank_and_a_kept_order(tmp_path):
    """tcp:// with ``rank=`` given by the script: renumbered all the same. And an answer that keeps the order
    (the controller's choice when no order helps) re-creates nothing: one declaration in launch order."""
    a, b, c = "127.0.0.10", "127.0.0.11", "127.0.0.12"
    for node_ranks, runs_as, ring in (({a: 0, b: 2, c: 1}, [0, 2, 1], [b, c, a]), (None, [0, 1, 2], [c, b, a])):
        out = tmp_path / str(runs_as)
        out.mkdir()
        with RecordingServer() as rec:
            rec.node_ranks = node_ranks
            texts = [_finish(p, timeout=300) for p in _spawn(out, rec.url, 3, _free_port())]
            assert [json.loads((out / f"rank.{r}").read_text())["rank"] for r in range(3)] == runs_as, texts
            assert [p.body.get("rings") for p in rec.of("PUT")] == [None, [ring]]


def proc_wait(proc: subprocess.Popen, seconds: float) -> None:
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
