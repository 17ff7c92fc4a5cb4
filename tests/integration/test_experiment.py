"""`mlroute experiment` end to end (short): real controller, OVS, Mininet, iperf3; output files and sane numbers."""

import json
import subprocess
import sys


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
        assert r["aggregate_mbps"] <= ref * 1.05, (mode, r["aggregate_mbps"], ref)
        assert 0 < r["nonblocking_fraction"] <= 1.05
    assert "[3/3]" in proc.stderr  # progress was shown
