"""`mlroute reproduce` on a tiny grid: results, report tables and plots; the ILP skip rule."""

import json
from types import SimpleNamespace

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
    res = run_grid(cfg, str(tmp_path), progress=False, log=None, optimisers=opts)
    assert [r["algo"] for r in res["runs"]] == ["greedy"]
    assert len(res["skipped"]) == 1 and "not proved optimal" in res["skipped"][0]["reason"]
    assert calls == [0.5]  # the probe only
    text = write_report(res, str(tmp_path))
    assert "## Skipped runs" in text


def test_grid_runs_every_algorithm():
    from mlroute.routing.optimisers import ALGORITHMS
    from mlroute.sim.reproduce import ALGOS

    assert sorted(ALGOS) == sorted(ALGORITHMS) and len(ALGOS) == len(set(ALGOS))


def test_report_prose_takes_its_numbers_from_the_results():
    from mlroute.routing.optimisers.annealing import planned_steps
    from mlroute.sim import report

    cfg = {"tors": 64, "hosts_per_tor": 32, "models": ["gpt3", "bloom", "llama2"]}
    runs = [{"jobs": 4, "ring": 8, "gpus_per_host": 2}, {"jobs": 5, "ring": 8, "gpus_per_host": 2}]
    text = report._packed_cells(runs, cfg)
    assert "4 jobs × ring 8, 5 jobs × ring 8" in text and "these need 80–96 of the 64 ToRs" in text
    assert "these need 40 of the 16 ToRs" in report._packed_cells(runs[:1], dict(cfg, tors=16, hosts_per_tor=64))
    ann = report._discuss_annealing([{"algo": "annealing", "max_link_load": 4}, {"algo": "annealing",
                                                                                 "max_link_load": 9}])
    assert f"{planned_steps()} swaps" in ann and "max link load 4–9" in ann
    assert planned_steps() == 917  # 1000 * 0.99^n < 0.1
    # a full ToR of 32 flows over 28 or 24 live spines: 2 on the busiest uplink; over 8 spines: 4
    fail = report._discuss_failures([{"gpus_per_host": 1, "failed": 4, "algo": "greedy", "norm_mean": 2.0}],
                                    {"spines": 32, "failed": [0, 4, 24], "hosts_per_tor": 32})
    assert "about 2–4×" in fail and "with 28, 8 live spines" in fail
    source = open(report.__file__, encoding="utf-8").read()
    for key in report.TEXT:  # every template is used (its key appears beyond its definition)
        assert source.count(f'"{key}"') >= 2, key
