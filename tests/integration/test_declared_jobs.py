"""Declared all-reduce jobs are routed before their first packet (issue 12): real controller, OVS, Mininet and
ring workers on a k=4 fat-tree; iteration 0 runs as fast as the steady iterations (undeclared, it runs on ECMP
while the controller learns the elephants)."""

import json
import subprocess
import sys

from tests.integration.harness import ROOT


def test_declared_allreduce_iteration_0_runs_at_the_steady_speed(tmp_path):
    out = tmp_path / "exp"
    proc = subprocess.run([sys.executable, "-m", "mlroute.cli", "experiment", "--topo", "fattree", "--k", "4",
                           "--pattern", "allreduce:4x4,mb=1,iters=3", "--modes", "mlroute", "--seeds", "1",
                           "--out", str(out), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(proc.stdout)["results"]
    assert "error" not in run, run
    first, steady = run["allreduce_s"][0], run["steady_allreduce_s"]
    assert len(run["allreduce_s"]) == 3
    assert abs(first - steady) <= 0.10 * steady, (run["allreduce_s"], steady)
    assert steady <= 1.10 * run["ideal_allreduce_s"], (steady, run["ideal_allreduce_s"])
