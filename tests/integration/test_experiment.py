"""`mlroute experiment` end to end (short): real controller, OVS, Mininet, iperf3; output files and sane numbers;
and on a running controller cluster (``--controllers``)."""

import json
import subprocess
import sys
import time

import pytest

from tests.integration.harness import Controller, te_config, wait_until


def test_short_experiment_writes_sane_results(tmp_path):
    """As a new user runs it: from a directory of their own, with the default (relative) --out."""
    proc = subprocess.run([sys.executable, "-m", "mlroute.cli", "experiment", "--topo", "leafspine",
                           "--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2", "--pattern", "stride:2",
                           "--modes", "ecmp,mlroute,nonblocking", "--duration", "12", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (out,) = (tmp_path / "results").glob("experiment-*")  # results/experiment-<time> under the caller's directory
    data = json.loads(proc.stdout)
    for name in ("results.json", "summary.md", "throughput.png", "flows_cdf.png"):
        assert (out / name).exists(), name
    results = {r["mode"]: r for r in data["results"]}
    assert set(results) == {"ecmp", "mlroute", "nonblocking"} and not any("error" in r for r in results.values())
    ref = results["nonblocking"]["aggregate_mbps"]
    assert 0.8 * 40 <= ref <= 41  # 4 flows x 10 Mb/s, faithful emulation
    for mode, r in results.items():
        assert r["aggregate_mbps"] > 0 and len(r["flows"]) == 4
        assert all(f["mbps"] > 0 for f in r["flows"]), (mode, r["flows"])
        # The physical ceiling, not the reference run: on 2 shared cores one 12-s run reads a few per cent low
        # (CI: non-blocking 38.1 Mb/s, then ECMP 40.3), so "never above the measured reference" is noise.
        assert r["aggregate_mbps"] <= 41, (mode, r["aggregate_mbps"], ref)
        assert r["nonblocking_fraction"] == pytest.approx(r["aggregate_mbps"] / ref), mode
    assert "[3/3]" in proc.stderr  # progress was shown


def test_an_experiment_on_a_running_controller_cluster(tmp_path, zookeeper):
    """``--controllers`` (issue 22, item 2): two real controllers forming a cluster on a real ZooKeeper, already
    running; the run's every switch connects to both, the results come from the one that leads, and both are
    left running."""
    cluster = "cluster:\n  zookeeper: {}\n  name: experiment\n  node_id: {}\n  session_timeout_s: 2\n"
    nodes = [Controller(tmp_path / node, te_config(extra=cluster.format(zookeeper.hosts, node))) for node in "ab"]
    try:
        for node in nodes:
            node.wait_ready()
        assert wait_until(lambda: leader(nodes), timeout=20), [n.log()[-1500:] for n in nodes]
        addresses = ",".join(f"127.0.0.1:{n.of_port}/{n.rest_port}" for n in nodes)
        started = time.time()
        proc = subprocess.run([sys.executable, "-m", "mlroute.cli", "experiment", "--topo", "leafspine",
                               "--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2", "--pattern", "stride:2",
                               "--modes", "external", "--duration", "8", "--controllers", addresses, "--json",
                               "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
        took = time.time() - started
        assert proc.returncode == 0, (proc.stderr[-3000:], [n.log()[-1500:] for n in nodes])
        (result,) = json.loads(proc.stdout)["results"]
        print(f"\nexternal run: {took:.1f} s, {result['aggregate_mbps']:.1f} Mb/s, flows "
              f"{[round(f['mbps'], 1) for f in result['flows']]}, elephants {result.get('elephants')}, "
              f"flows moved {result.get('flows_moved')}, leader {result.get('leader')}")
        assert result["mode"] == "external" and "error" not in result
        assert len(result["flows"]) == 4 and all(f["mbps"] > 0 for f in result["flows"]), result["flows"]
        assert 0 < result["aggregate_mbps"] <= 41  # 4 flows of at most 10 Mb/s each
        ctl = leader(nodes)
        assert ctl is not None and result["leader"] == f"127.0.0.1:{ctl.of_port}/{ctl.rest_port}"
        assert isinstance(result["elephants"], int) and "flows_moved" in result and "reoptimisations" in result
        assert all(n.proc.poll() is None for n in nodes)  # left running
    finally:
        for node in nodes:
            node.stop()


def leader(nodes):
    """The node whose REST says it leads (None while none does)."""
    for node in nodes:
        try:
            if node.get("/mlroute/cluster")["role"] == "leader":
                return node
        except OSError:
            pass
    return None
