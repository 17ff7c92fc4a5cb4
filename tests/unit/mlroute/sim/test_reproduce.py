"""`mlroute reproduce` on a tiny grid: results, report tables and plots; the ILP skip rule."""

import json
from types import SimpleNamespace

import pytest

from mlroute.cli import main
from mlroute.routing.optimisers import OPTIMISERS
from mlroute.sim.report import write_report
from mlroute.sim.reproduce import GridConfig, run_grid

TINY = ["--tors", "8", "--spines", "4", "--hosts-per-tor", "32", "--jobs", "1", "--rings", "2", "--failed", "0,1",
        "--iterations", "1"]


def test_reproduce_tiny_grid_writes_report(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["reproduce", "--out", str(out), *TINY, "--algos", "mlroute,greedy,ecmp",
               "--random-algos", "mlroute,greedy,ecmp"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    for name in ("report.md", "results.json", "allreduce_mean.png", "allreduce_p99.png", "cdf_allreduce.png",
                 "cdf_fct.png", "cdf_throughput.png", "runtime.png"):
        assert (out / name).stat().st_size > 0, name
    res = json.loads((out / "results.json").read_text())
    assert len(res["runs"]) == 2 * 3
    assert {r["algo"] for r in res["runs"]} == {"mlroute", "greedy", "ecmp"}
    for r in res["runs"]:
        assert r["norm_mean"] >= 1 - 1e-9  # never faster than the uncontended ideal
        assert r["flows"] == 64 * 2
    text = (out / "report.md").read_text()
    assert "## Headline" in text and "| `mlroute` |" in text and "## The paper's claims" in text
    assert "custom" in text  # the grid is labelled as not the paper's
    assert "## Beyond the paper: random host placement" in text  # the supplementary grid ran too
    assert len(res["extra"]["runs"]) == 2 * 3 and res["extra"]["config"]["placement"] == "random"
    # --random-only keeps the paper grid and reruns the random-placement one (default: without ecmp)
    assert main(["reproduce", "--out", str(out), *TINY, "--algos", "mlroute,greedy,ecmp", "--random-only"]) == 0
    res2 = json.loads((out / "results.json").read_text())
    assert res2["runs"] == res["runs"]
    assert {r["algo"] for r in res2["extra"]["runs"]} == {"mlroute", "greedy"}
    assert "--random-only" in res2["command"]
    # --report-only re-renders from results.json
    (out / "report.md").unlink()
    assert main(["reproduce", "--out", str(out), "--report-only"]) == 0
    assert (out / "report.md").read_text().startswith("# Reproduction")


def test_reproduce_bad_input(tmp_path, capsys):
    assert main(["reproduce", "--out", str(tmp_path), "--algos", "magic"]) == 2
    assert "unknown algorithm 'magic'" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(tmp_path), "--tors", "8", "--jobs", "5", "--rings", "8"]) == 2
    assert "do not fit 8 ToRs" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(tmp_path / "none"), "--report-only"]) == 2


def test_ilp_skipped_where_it_does_not_prove_optimality(tmp_path):
    calls = []

    def fake_ilp(fabric, flows, **kw):
        calls.append(kw.get("time_limit"))
        return SimpleNamespace(paths=[fabric.candidate_paths(f)[0] for f in flows], info={"proved_optimal": False})

    opts = dict(OPTIMISERS, ilp=fake_ilp)
    cfg = GridConfig(tors=8, spines=4, hosts_per_tor=32, jobs=(1,), rings=(2,), failed=(0,),
                     algos=("greedy", "ilp"), iterations=1, ilp_time_limit=0.5, label="test")
    res = run_grid(cfg, str(tmp_path), log=None, optimisers=opts)
    assert [r["algo"] for r in res["runs"]] == ["greedy"]
    assert len(res["skipped"]) == 1 and "not proved optimal" in res["skipped"][0]["reason"]
    assert calls == [0.5]  # the probe only
    text = write_report(res, str(tmp_path))
    assert "## Skipped runs" in text


def test_grid_runs_every_algorithm():
    from mlroute.routing.optimisers import ALGORITHMS
    from mlroute.sim.reproduce import ALGOS

    assert sorted(ALGOS) == sorted(ALGORITHMS) and len(ALGOS) == len(set(ALGOS))


# -- the sweep: parallel, on Dask, resumable -------------------------------------------------------------------

#: a small grid with every kind of run: fabric failures, several algorithms, the ILP proved within its limit
SMALL = GridConfig(tors=8, spines=4, hosts_per_tor=16, jobs=(1, 2), rings=(2, 4), failed=(0, 1),
                   algos=("mlroute", "greedy", "ecmp", "ilp"), iterations=2, ilp_time_limit=30.0, label="test")


def _without_timing(results):
    from mlroute.sim.reproduce import TIMING_FIELDS

    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in results["runs"]], results["skipped"]


@pytest.fixture(scope="module")
def serial_small(tmp_path_factory):
    return run_grid(SMALL, str(tmp_path_factory.mktemp("serial")), log=None, workers=1)


def test_parallel_sweep_equals_serial_cell_by_cell(serial_small, tmp_path):
    runs, skipped = _without_timing(serial_small)
    assert len(runs) == 2 * 2 * 2 * 4 and not skipped
    par = run_grid(SMALL, str(tmp_path), log=None, workers=2)
    assert par["sweep"]["executor"] == "processes" and par["sweep"]["workers"] == 2
    assert _without_timing(par) == (runs, skipped)  # same cells, same order, same numbers


def test_dask_local_cluster_equals_serial(serial_small, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        res = run_grid(SMALL, str(tmp_path), log=None, scheduler=lc.scheduler_address)
    assert res["sweep"]["executor"] == "dask" and res["sweep"]["workers"] == 2
    assert _without_timing(res) == _without_timing(serial_small)


#: a grid of 24 runs long enough (a few seconds) to be stopped half-way by the tests below
KILLABLE = ["--tors", "8", "--spines", "4", "--hosts-per-tor", "16", "--jobs", "1,2", "--rings", "2,4", "--failed",
            "0,1", "--iterations", "3", "--algos", "mlroute,greedy,ecmp", "--no-random-placement"]
# the same grid with runs ten times as long: the interrupt lands while most are still to come, however fast
# the machine (with 3 iterations, 2 workers finished all 24 runs before a Ctrl-C sent at the 2nd stored run)
INTERRUPTIBLE = [*KILLABLE[:KILLABLE.index("--iterations") + 1], "30", *KILLABLE[KILLABLE.index("--iterations") + 2:]]


def test_killed_reproduce_resumes_with_only_the_missing_runs(tmp_path):
    """SIGKILL a real `mlroute reproduce` once some runs are stored; the rerun computes only the others and the
    results equal an uninterrupted run's."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "rep"
    args = [sys.executable, "-m", "mlroute.cli", "reproduce", "--out", str(out), *KILLABLE, "--workers", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(list((out / "runs").glob("*.json"))) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = len(list((out / "runs").glob("*.json")))
    assert 3 <= stored < 24, "the run finished before it could be killed"
    assert not (out / "results.json").exists()
    again = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"reproduce: {stored} of 24 runs already done" in again.stderr
    assert again.stderr.count(" All-Reduce/ideal ") == 24 - stored  # only the missing runs were simulated
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["sweep"]["reused"] == stored and resumed["sweep"]["computed"] == 24 - stored
    whole = run_grid(GridConfig(tors=8, spines=4, hosts_per_tor=16, jobs=(1, 2), rings=(2, 4), failed=(0, 1),
                                algos=("mlroute", "greedy", "ecmp"), iterations=3, label="custom"),
                     str(tmp_path / "whole"), log=None, workers=1)
    assert _without_timing(resumed) == _without_timing(whole)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_keeps_the_finished_runs_and_says_how_to_resume(tmp_path, how):
    """Ctrl-C (SIGINT to the whole process group, the workers included) or SIGTERM to the command alone: exit 130
    at once (the runs in progress are abandoned, not awaited), a line that says what is kept, no traceback, no
    worker left behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "rep"
    proc = subprocess.Popen([sys.executable, "-m", "mlroute.cli", "reproduce", "--out", str(out), *INTERRUPTIBLE,
                             "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list((out / "runs").glob("*.json"))) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted;" in err and "the same command resumes from them" in err
    assert "Traceback" not in err
    left = subprocess.run(["pgrep", "-g", str(proc.pid), "-a"], capture_output=True, text=True).stdout
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:  # (multiprocessing's resource tracker leaves after its parent)
        time.sleep(0.1)
        left = subprocess.run(["pgrep", "-g", str(proc.pid), "-a"], capture_output=True, text=True).stdout
    assert not left, f"processes outlived the command: {left}"


def test_choose_rings_grid_reports_rank_order_against_chosen(tmp_path, capsys):
    # one gpt3 job, 4 replicas of 4 hosts interleaved over tor0 / tor1, one of tor0's 8 uplinks down: in rank order
    # tor0's 8 hosts all send to tor1 (8/7 of the ideal over 7 uplinks, a little more unsplit); chosen, 4 do
    out = tmp_path / "rep"
    rc = main(["reproduce", "--out", str(out), "--tors", "4", "--spines", "8", "--hosts-per-tor", "8", "--jobs", "1",
               "--rings", "4", "--failed", "0", "--algos", "mlroute", "--iterations", "1", "--placement",
               "interleaved", "--failed-links", "tor0:spine0", "--choose-rings", "--no-random-placement",
               "--workers", "1"])
    assert rc == 0, capsys.readouterr().err
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert run["norm_max"] > 8 / 7 - 1e-6
    assert run["chosen"]["norm_max"] == pytest.approx(1.0, rel=1e-6)
    assert 0 < run["chosen"]["rings_changed"] < run["chosen"]["rings"] == 64
    text = (out / "report.md").read_text()
    assert "## Ring choice: rank order against the chosen rings (interleaved placement)" in text
    assert "tor0:spine0" in text
    assert main(["reproduce", "--out", str(out), "--failed-links", "tor0:spine99"]) == 2
    assert "no link tor0:spine99" in capsys.readouterr().err


#: the quick grid's cells where mlroute's old time budget decided (3 jobs x ring 8, 4 failed spines, random
#: placement: 554 or 571 simulator events with --workers 1 or 2), with their paper-placement twins: the quick grid
#: itself takes minutes, so the same CLI runs these 4 cells of it
QUICK_CUT = ["--quick", "--jobs", "3,5", "--rings", "8", "--failed", "4", "--algos", "mlroute,greedy",
             "--random-algos", "mlroute"]


def test_reproduce_gives_the_same_results_in_one_process_and_in_the_default_workers(tmp_path, capsys):
    runs = {}
    for name, extra in (("serial", ["--workers", "1"]), ("default", [])):
        out = tmp_path / name
        assert main(["reproduce", "--out", str(out), *QUICK_CUT, *extra]) == 0, capsys.readouterr().err
        res = json.loads((out / "results.json").read_text())
        runs[name] = [_without_timing(res), _without_timing(res["extra"])]
        assert all(r["cut_by_clock"] == 0 for r in res["runs"] + res["extra"]["runs"])
    assert len(runs["serial"][0][0]) == 4 and len(runs["serial"][1][0]) == 2
    assert runs["default"] == runs["serial"]
    assert "No decision was cut short by a wall-clock safety net" in (tmp_path / "serial" / "report.md").read_text()
