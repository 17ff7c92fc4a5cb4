"""The torch-allreduce experiment's pure parts: the pattern, the launch command and environment, the records the
ranks print, the results and their report, the management network's addresses. The real run is
tests/integration/test_torch_jobs.py."""

import json
import math
import os
import queue
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from controller import config
from mlroute.experiment import emulation, management, report, runner, torch_jobs


def test_the_pattern_parses_with_defaults_and_options():
    ts = torch_jobs.parse("torch-allreduce:4x4")
    assert (ts.jobs, ts.ranks, ts.mb, ts.iterations, ts.compute_s) == (4, 4, 2.0, 4, 1.0)
    ts = torch_jobs.parse("torch-allreduce:2x8,mb=0.5,iters=3,compute=0")
    assert (ts.jobs, ts.ranks, ts.mb, ts.iterations, ts.compute_s) == (2, 8, 0.5, 3, 0.0)
    assert (ts.rings, ts.size) == (2, 8)  # what ring_placement reads
    ts = torch_jobs.parse("torch-allreduce:4x4,placement=interleaved-pods,ring=choose")
    assert (ts.placement, ts.ring) == ("interleaved-pods", "choose")
    assert (torch_jobs.parse("torch-allreduce:4x4").placement, torch_jobs.parse("torch-allreduce:4x4").ring) == \
        ("random", "given")


def test_pod_pair_placements_put_half_of_each_job_in_each_of_two_pods():
    ts = torch_jobs.parse("torch-allreduce:4x4")
    assert torch_jobs.pod_pairs(ts, 4) == [["h1", "h5", "h2", "h6"], ["h3", "h7", "h4", "h8"],
                                           ["h9", "h13", "h10", "h14"], ["h11", "h15", "h12", "h16"]]
    assert torch_jobs.pod_pairs(ts, 4, interleaved=False)[0] == ["h1", "h2", "h5", "h6"]
    k8 = torch_jobs.pod_pairs(torch_jobs.parse("torch-allreduce:8x8"), 8)  # 16 hosts a pod: 4 jobs a pod pair
    assert k8[4][:2] == ["h33", "h49"] and len({h for job in k8 for h in job}) == 64
    for bad in ("torch-allreduce:5x4", "torch-allreduce:1x3", "torch-allreduce:1x10"):
        with pytest.raises(ValueError):
            torch_jobs.pod_pairs(torch_jobs.parse(bad), 4)
    with pytest.raises(runner.ExperimentError, match="fattree"):
        runner.validate(runner.ExperimentSpec("leafspine", patterns=["torch-allreduce:2x4,placement=grouped-pods"]))


def test_a_failed_link_must_be_a_cable_of_the_fabric():
    assert runner.parse_fail_links("a0_0:c1, e1_0:a1_1") == [("a0_0", "c1"), ("e1_0", "a1_1")]
    for bad in ("a0_0", "a0_0:", "c1:c1", "a:b:c"):
        with pytest.raises(runner.ExperimentError, match="--fail-link"):
            runner.parse_fail_links(bad)
    runner.validate(runner.ExperimentSpec("fattree", fail_links=[("c1", "a0_0")]))
    with pytest.raises(runner.ExperimentError, match="no such cable"):
        runner.validate(runner.ExperimentSpec("fattree", fail_links=[("a0_0", "c3")]))


@pytest.mark.parametrize("bad", ["torch-allreduce", "torch-allreduce:4", "torch-allreduce:4x1",
                                 "torch-allreduce:0x4", "torch-allreduce:2x2,speed=3", "torch-allreduce:2x2,iters=1.5",
                                 "torch-allreduce:2x2,mb=0", "torch-allreduce:2x2,placement=pods",
                                 "torch-allreduce:2x2,ring=best"])
def test_bad_patterns_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="torch all-reduce"):
        torch_jobs.parse(bad)
    with pytest.raises(runner.ExperimentError):
        runner.validate(runner.ExperimentSpec("fattree", patterns=[bad]))


def test_the_ideal_is_the_ring_volume_at_the_link_rate():
    # 4 ranks, 2 MB: each ring edge carries 2 * 3/4 * 2 MB = 3 MB = 24 Mb; at 10 Mb/s 2.4 s
    assert math.isclose(torch_jobs.ideal_seconds(4, 2.0, 10.0), 2.4)
    assert math.isclose(torch_jobs.ideal_seconds(2, 1.0, 8.0), 1.0)  # two ranks: each sends the whole tensor


def test_each_rank_is_launched_by_torchrun_through_the_hook():
    ts = torch_jobs.parse("torch-allreduce:1x4,mb=2,iters=3,compute=0.5")
    cmd = torch_jobs.torchrun_command("/usr/bin/python3", 4, 2, "10.0.0.5", 29501, ts, 3)
    assert cmd[:3] == ["/usr/bin/python3", "-m", "torch.distributed.run"]
    args = dict(zip(cmd[3::2], cmd[4::2]))
    assert args["--nnodes"] == "4" and args["--nproc_per_node"] == "1" and args["--node_rank"] == "2"
    assert args["--master_addr"] == "10.0.0.5" and args["--master_port"] == "29501"
    assert args["--redirects"] == "1" and args["--tee"] == "1"  # Debian's torchrun 1.13 on Python 3.11
    hook = cmd.index("-m", 3)
    assert cmd[hook + 1] == "mlroute.torch" and cmd[hook + 2] == str(torch_jobs.SCRIPT)
    assert cmd[hook + 3:] == ["--mb", "2", "--iters", "3", "--compute", "0.5"]
    assert torch_jobs.SCRIPT.exists()
    gated = torch_jobs.torchrun_command("/usr/bin/python3", 4, 2, "10.0.0.5", 29501, ts, 3, hold_until=Path("/m"),
                                        start_after=Path("/s"))
    assert gated[len(cmd):] == ["--start-after", "/s", "--hold-until", "/m"]


TORCH_MISSING = torch_jobs.torch_problem()


@pytest.mark.skipif(TORCH_MISSING is not None, reason=str(TORCH_MISSING))
def test_the_training_script_measures_only_between_its_gates(tmp_path):
    """Real torch (one gloo rank on loopback): after init it prints "ready" and waits for the start gate before
    its first iteration, and after its last it waits for the release gate before it exits."""
    start, release = tmp_path / "started", tmp_path / "measured"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([torch_jobs.torch_python(), str(torch_jobs.SCRIPT), "--mb", "0.1", "--iters", "2",
                             "--compute", "0", "--start-after", str(start), "--hold-until", str(release)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def next_record(timeout):
        while True:
            recs = torch_jobs.records(lines.get(timeout=timeout))
            if recs:
                return recs[0]
    try:
        assert next_record(120)["event"] == "ready"
        with pytest.raises(queue.Empty):
            next_record(1.0)  # held at the start gate: no iteration yet
        start.touch()
        assert [next_record(60)["iteration"] for _ in range(2)] == [0, 1]
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(1.0)  # measured, held at the release gate
        release.touch()
        assert proc.wait(60) == 0
    finally:
        proc.kill()
        proc.wait()


class FakeIntf:
    name = "h3-eth0"


class FakeHost:
    def defaultIntf(self):  # noqa: N802 (Mininet's name)
        return FakeIntf()


def test_a_declared_rank_gets_the_controller_an_undeclared_one_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("MLROUTE_URL", "http://leaked.example:1")  # nothing of ours leaks into the ranks
    monkeypatch.setenv("VIRTUAL_ENV", "/work/main/.venv")
    env = torch_jobs.TorchJobs._env(FakeHost(), tmp_path, "job1", "http://198.18.0.1:8080", "tok", 6.0)
    assert env["MLROUTE_URL"] == "http://198.18.0.1:8080" and env["MLROUTE_TOKEN"] == "tok"
    assert env["MLROUTE_LEASE_S"] == "6" and env["MLROUTE_JOB"] == "job1"
    assert env["GLOO_SOCKET_IFNAME"] == "h3-eth0"  # Mininet hosts share a hostname: gloo binds the fabric interface
    assert env["PYTHONPATH"] == str(tmp_path) and "VIRTUAL_ENV" not in env
    undeclared = torch_jobs.TorchJobs._env(FakeHost(), tmp_path, "job1", None, "tok", 6.0)
    assert not any(k.startswith("MLROUTE_") and k != "MLROUTE_JOB" for k in undeclared)


def test_the_ranks_python_path_holds_only_the_package(tmp_path):
    path = torch_jobs.hook_path(tmp_path)
    assert [p.name for p in path.iterdir()] == ["mlroute"]
    assert (path / "mlroute" / "torch" / "__main__.py").exists()
    assert torch_jobs.hook_path(tmp_path) == path  # again: replaced, not an error


def test_records_are_read_from_torchruns_teed_console():
    text = "\n".join([
        "WARNING:torch.distributed.run:*****",
        '[default0]:{"rank": 1, "event": "ready", "init_s": 1.2, "world": 4, "pid": 7}',
        '[default0]:{"rank": 1, "iteration": 0, "seconds": 2.6}',
        '[default0]:{"rank": 1, "iteration": 1, "seconds": 2.5',  # cut off
        '{"rank": 1, "iteration": 1, "seconds": 2.4}',
        "mlroute: controller unreachable {not json}",
    ])
    recs = torch_jobs.records(text)
    assert [r.get("iteration") for r in recs] == [None, 0, 1]
    assert recs[0]["event"] == "ready"


def test_a_jobs_iteration_is_its_slowest_rank_up_to_the_first_one_missing():
    ranks = [[{"rank": 0, "iteration": 0, "seconds": 2.0}, {"rank": 0, "iteration": 1, "seconds": 1.0},
              {"rank": 0, "iteration": 2, "seconds": 1.0}],
             [{"rank": 1, "iteration": 0, "seconds": 3.0}, {"rank": 1, "iteration": 1, "seconds": 1.5}]]
    assert torch_jobs.slowest_per_iteration(ranks) == [3.0, 1.5]
    assert torch_jobs.slowest_per_iteration([]) == []


def test_modes_and_the_controller_configuration():
    spec = runner.ExperimentSpec("fattree", patterns=["torch-allreduce:4x4,mb=2,iters=4"],
                                 modes=["ecmp", "mlroute", "mlroute-undeclared", "nonblocking"])
    runner.validate(spec)
    assert [runner.te_mode(m) for m in spec.modes] == ["ecmp", "mlroute", "mlroute", "ecmp"]
    assert [runner.declares(spec, m) for m in spec.modes] == [True, True, False, False]
    parsed = config.parse(runner.controller_config(spec, "mlroute-undeclared", spec.patterns[0], 1, token="t0k"))
    assert parsed["te"]["mode"] == "mlroute" and parsed["rest"]["token"] == "t0k" and parsed["jobs"] == []
    # the ring workers' pattern: mlroute-undeclared leaves the rings out of the configuration, mlroute declares them
    assert config.parse(runner.controller_config(spec, "mlroute", "allreduce:2x4", 1))["jobs"]
    assert not config.parse(runner.controller_config(spec, "mlroute-undeclared", "allreduce:2x4", 1))["jobs"]
    with pytest.raises(runner.ExperimentError, match="need 20 hosts"):
        runner.validate(runner.ExperimentSpec("fattree", patterns=["torch-allreduce:5x4"]))
    with pytest.raises(runner.ExperimentError, match="management network"):
        runner.validate(runner.ExperimentSpec("fattree", patterns=["torch-allreduce:1x4"], modes=["external"],
                                              controllers=runner.parse_controllers("127.0.0.1:6653")))


def test_results_per_job_and_the_report(tmp_path):
    ts = torch_jobs.parse("torch-allreduce:2x4,mb=2,iters=3")
    placement = [["h1", "h5", "h9", "h13"], ["h2", "h6", "h10", "h14"]]
    ips = [[f"10.0.0.{h[1:]}" for h in job] for job in placement]
    declared = {"job0": [list(reversed(ips[0]))], "job1": [list(reversed(ips[1]))]}
    edges = [(ring[i], ring[(i + 1) % 4]) for rings in declared.values() for ring in rings for i in range(4)]
    res = runner.torch_results(ts, 10.0, placement, ips, [[2.6, 2.4, 2.5], [4.8, 2.5, 2.5]], [1.1, 1.3],
                               ["job0", "job1"], declared, edges, True)
    assert res["allreduce_s"] == [4.8, 2.5, 2.5] and math.isclose(res["steady_allreduce_s"], 2.5)
    assert math.isclose(res["ideal_allreduce_s"], 2.4)
    job1 = res["jobs"][1]
    assert math.isclose(job1["first_over_steady"], 4.8 / 2.5) and math.isclose(job1["steady_over_ideal"], 2.5 / 2.4)
    # gloo's ring: each host sends to the one before it in rank order
    assert {(f["src"], f["dst"]) for f in res["flows"][:4]} == {("h5", "h1"), ("h9", "h5"), ("h13", "h9"),
                                                                  ("h1", "h13")}
    data = {"config": {"topology": "fat-tree k=4", "bw_mbps": 10, "duration_s": 30, "warmup_s": 10, "seeds": [1],
                       "poll_interval_s": 2},
            "results": [dict(res, pattern="torch-allreduce:2x4,mb=2,iters=3", mode="mlroute", seed=1,
                             nonblocking_fraction=None)]}
    out = report.write(data, tmp_path)
    md = (tmp_path / "summary.md").read_text()
    row = "| torch-allreduce:2x4,mb=2,iters=3 | 1 | mlroute | job1 | h2 h6 h10 h14 | 4.80, 2.50, 2.50 | 1.92 | 1.04 |"
    assert row in md
    assert "the elephants' host pairs and the declared edges equal" in md
    assert "allreduce.png" in out["plots"] and "flows_cdf.png" not in out["plots"]
    assert json.loads((tmp_path / "results.json").read_text())["results"][0]["jobs"][0]["name"] == "job0"


def test_rank_order_and_chosen_rings_are_separate_lines_of_the_allreduce_plot():
    given, chosen = "torch-allreduce:4x4,placement=interleaved-pods", \
        "torch-allreduce:4x4,placement=interleaved-pods,ring=choose"
    runs = [{"pattern": p, "mode": m, "seed": s, "allreduce_s": [t * s, t, t], "ideal_allreduce_s": 2.4}
            for p, t in ((given, 5.0), (chosen, 2.5)) for m in ("mlroute", "ecmp") for s in (1, 2)]
    lines = report.allreduce_lines({"results": runs + [{"pattern": given, "mode": "ecmp", "error": "x"}]},
                                   ["ecmp", "mlroute"])
    assert list(lines) == ["4x4,placement=interleaved-pods / ecmp", "4x4,placement=interleaved-pods / mlroute",
                           "4x4,placement=interleaved-pods,ring=choose / ecmp",
                           "4x4,placement=interleaved-pods,ring=choose / mlroute"]
    assert lines["4x4,placement=interleaved-pods,ring=choose / mlroute"] == [3.75, 2.5, 2.5]
    assert list(report.allreduce_lines({"results": runs[:4]}, ["mlroute", "ecmp"])) == ["mlroute", "ecmp"]


def test_management_addresses_come_from_the_benchmarking_range():
    assert management.bridge_address() == "198.18.0.1"
    assert management.host_address(1) == "198.18.0.2" and management.host_address(300) == "198.18.1.45"
    with pytest.raises(management.ManagementError):
        management.host_address(0)


def test_a_controller_can_listen_for_rest_on_the_management_bridge_only():
    ctl = emulation.Controller.__new__(emulation.Controller)  # its command line, without starting it
    ctl.launcher, ctl.rest_host, ctl.of_port, ctl.rest_port = False, "198.18.0.1", 6653, 8081
    ctl.host, ctl.framework, ctl.python = "127.0.0.1", "ryu", "/venv/bin/python"
    cmd = ctl.command()
    assert cmd[cmd.index("--wsapi-host") + 1] == "198.18.0.1"
    assert ctl.url("/mlroute/jobs") == "http://198.18.0.1:8081/mlroute/jobs"
    ctl.launcher = True
    assert ctl.command()[ctl.command().index("--rest-host") + 1] == "198.18.0.1"
    ctl.rest_host = None
    assert "--rest-host" not in ctl.command() and ctl.url("/x") == "http://127.0.0.1:8081/x"
