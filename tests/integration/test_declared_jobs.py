"""Declared all-reduce jobs are routed before their first packet (issue 12): real controller, OVS, Mininet and
ring workers on a k=4 fat-tree; iteration 0 runs about as fast as the steady iterations (undeclared, it runs on
ECMP while the controller learns the elephants: 1.76x the steady mean at this size)."""

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
    # declared, iteration 0 measured 0.98-1.20x the steady mean (the upper end under CPU load, in CI: the first
    # step of a fresh connection, whose TCP has no ssthresh yet); undeclared it is 1.76x (ECMP while learning)
    assert first <= 1.25 * steady, (run["allreduce_s"], steady, run["per_ring_steps_s"])
    assert steady <= 1.10 * run["ideal_allreduce_s"], (steady, run["ideal_allreduce_s"])
