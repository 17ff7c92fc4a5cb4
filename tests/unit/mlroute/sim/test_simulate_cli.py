"""`mlroute simulate` end to end (small fabrics), and ECMP against mlroute on the same workload."""

import json

import numpy as np
import pytest

from mlroute.cli import main
from mlroute.routing.fabric import Fabric
from mlroute.sim.engine import simulate
from mlroute.workloads.jobs import authors_node_id, paper_jobs, write_traffic_files

SMALL = ["--tors", "8", "--spines", "8", "--hosts-per-tor", "8", "--link-gbps", "100"]


def run_cli(capsys, *argv):
    rc = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_ecmp_collisions_make_allreduce_longer_than_mlroute():
    # 4 replicas of GPT-3 with 8 GPUs per host: each replica is one ToR of 8 hosts, 8 GPUs (8 rings) per NIC;
    # ring edges go ToR -> ToR, 64 flows leave each ToR over 8 spines: 8 per uplink balance the NICs exactly
    # (mlroute), a hash puts more on some uplinks.
    jobs = paper_jobs(1, 4, tors=8, hosts_per_tor=8, seed=3, models=("gpt3",), iterations=2, gpus_per_host=8)
    fab = Fabric.clos(8, 8, 8)
    ml = simulate(fab, jobs, "mlroute", link_bps=100e9, seed=1)
    ec = simulate(fab, jobs, "ecmp", link_bps=100e9, seed=1)
    assert max(ml.max_link_load) == 8
    assert max(ec.max_link_load) > 8  # the premise: the hash collides
    assert ml.normalised_allreduce() == pytest.approx(np.ones(2), rel=1e-9)
    ml_t, ec_t = ml.allreduce_times(), ec.allreduce_times()
    assert np.all(ec_t > ml_t * 1.5)
    # the tail transfer is slower; the *mean* FCT need not be (flows that dodge a collision get more of their NIC)
    assert ec.fct_s.max() > ml.fct_s.max()


def test_json_output_fields(capsys):
    rc, out, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--seed", "1", "--algo", "greedy",
                           "--iterations", "2", "--gpus-per-host", "8", "--models", "bloom", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["algo"] == "greedy"
    (job,) = d["jobs"]
    assert job["job"] == "job0-bloom"
    assert [it["iteration"] for it in job["iterations"]] == [0, 1]
    # BLOOM 48 GPUs, 8 per host: 6 hosts per replica, 6 rings per NIC pair... every ring edge has 8 of its GPUs'
    # flows on one NIC, so the ideal is 2 steps x 8 flows x S / rate
    S = 4 * 176e9 / 48 / 2
    for it in job["iterations"]:
        assert it["allreduce_s"] == pytest.approx(2 * 8 * S * 8 / 100e9, rel=1e-6)
    n_flows = 48 * 2
    assert len(d["fct_s"]) == len(d["throughput_gbps"]) == 2 * 2 * n_flows
    assert len(d["controller_ms"]) == 2 and all(x >= 0 for x in d["controller_ms"])
    assert d["summary"]["allreduce_norm_mean"] == pytest.approx(1.0, rel=1e-6)
    assert d["scenario"]["tors"] == 8 and d["scenario"]["failed_spines"] == []


def test_table_output_and_failures(capsys):
    rc, out, err = run_cli(capsys, *SMALL, "--jobs", "2", "--ring", "2", "--algo", "mlroute", "--iterations", "1",
                           "--gpus-per-host", "8", "--failed-spines", "6,7")
    assert rc == 0, err
    assert "failed spines: spine6,spine7" in out
    assert "job0-gpt3" in out and "job1-bloom" in out and "mean/ideal" in out
    rc, out, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--algo", "mlroute", "--iterations", "2",
                           "--gpus-per-host", "8", "--failed-spines", "4-7", "--fail-at", "8.0", "--mode", "iteration",
                           "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["recompute_times_s"][:2] == pytest.approx([5.606394622, 8.0])  # job start (seed 1), failure
    assert d["scenario"]["fail_at_s"] == 8.0


def test_traffic_files_in_authors_format(tmp_path, capsys):
    jobs = paper_jobs(2, 2, tors=8, hosts_per_tor=8, seed=2, models=("gpt3", "bloom"), gpus_per_host=8)
    paths = write_traffic_files(jobs, tmp_path, host_id=lambda h: authors_node_id(h, 8, 8))
    rc, out, err = run_cli(capsys, *SMALL, "--traffic", *map(str, paths), "--algo", "ecmp", "--iterations", "1",
                           "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert [j["job"] for j in d["jobs"]] == ["job0-gpt3", "job1-bloom"]
    # same result as simulating the generated jobs directly (host ids differ, ToRs and the hash inputs match)
    rc2, out2, _ = run_cli(capsys, *SMALL, "--jobs", "2", "--ring", "2", "--seed", "2", "--models", "gpt3,bloom",
                           "--gpus-per-host", "8", "--algo", "mlroute", "--iterations", "1", "--json")
    d2 = json.loads(out2)
    assert [j["ideal_s"] for j in d["jobs"]] == pytest.approx([j["ideal_s"] for j in d2["jobs"]])


def test_save_traffic_round_trip(tmp_path, capsys):
    rc, out, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--models", "gpt3", "--gpus-per-host", "8",
                           "--algo", "greedy", "--iterations", "1", "--json", "--save-traffic", str(tmp_path / "w"))
    assert rc == 0, err
    files = sorted((tmp_path / "w").iterdir())
    assert [f.name for f in files] == ["job0-gpt3.txt"]
    rc2, out2, err2 = run_cli(capsys, *SMALL, "--traffic", str(files[0]), "--algo", "greedy", "--iterations", "1",
                              "--json")
    assert rc2 == 0, err2
    a, b = json.loads(out), json.loads(out2)
    assert a["jobs"][0]["iterations"][0]["allreduce_s"] == pytest.approx(b["jobs"][0]["iterations"][0]["allreduce_s"])


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "1"], "give --traffic FILE... or both --jobs N and --ring n"),
    (["--jobs", "1", "--ring", "1"], "--ring must be at least 2"),
    (["--jobs", "0", "--ring", "2"], "--jobs must be a positive integer"),
    (["--jobs", "9", "--ring", "8"], "does not fit"),
    (["--jobs", "1", "--ring", "2", "--failed-spines", "8"], "spine 8 is not in the fabric"),
    (["--jobs", "1", "--ring", "2", "--failed-spines", "0-7"], "partitions the fabric"),
    (["--jobs", "1", "--ring", "2", "--failed-spines", "x"], "'x' is not an integer"),
    (["--jobs", "1", "--ring", "2", "--failed-links", "tor0-spine1"], "not of the form SWITCH:SWITCH"),
    (["--jobs", "1", "--ring", "2", "--failed-links", "tor0:tor1"], "no link tor0:tor1"),
    (["--jobs", "1", "--ring", "2", "--link-gbps", "0"], "--link-gbps must be positive"),
    (["--jobs", "1", "--ring", "2", "--models", "gpt9"], "unknown model 'gpt9'"),
    (["--jobs", "1", "--ring", "2", "--mode", "period"], "--mode period needs --period"),
    (["--jobs", "1", "--ring", "2", "--iterations", "0"], "--iterations must be a positive integer"),
    (["--traffic", "/nonexistent/x.txt"], "cannot read"),
])
def test_bad_input_exits_2(capsys, argv, message):
    rc, out, err = run_cli(capsys, *SMALL, "--gpus-per-host", "8", "--algo", "greedy", *argv)
    assert rc == 2
    assert message in err
    assert err.startswith("mlroute simulate: error:")


def test_malformed_traffic_file_names_file_and_line(tmp_path, capsys):
    p = tmp_path / "bad.txt"
    p.write_text("# header\n20 30 0 1 0 100 0 0\n30 20 1 0 0 100 0\n")
    rc, out, err = run_cli(capsys, *SMALL, "--traffic", str(p), "--algo", "greedy")
    assert rc == 2 and f"{p}:3: expected 8 columns" in err
    q = tmp_path / "far.txt"
    q.write_text("20 30 0 9 0 100 0 0\n30 20 9 0 0 100 0 0\n")
    rc, out, err = run_cli(capsys, *SMALL, "--traffic", str(q), "--algo", "greedy")
    assert rc == 2 and f"{q}:1: host 20 is under ToR 0" not in err
    assert f"{q}:1: host 30 is under ToR 9, but the fabric has ToRs 0..7" in err
    rc, out, err = run_cli(capsys, *SMALL, "--traffic", str(q), "--jobs", "1", "--ring", "2", "--algo", "greedy")
    assert rc == 2 and "not both" in err


def test_pipeline_jobs_and_period_mode(capsys):
    rc, out, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--models", "gpt3", "--kind", "pipeline",
                           "--gpus-per-host", "8",
                           "--algo", "mlroute", "--iterations", "2", "--mode", "period", "--period", "0.5", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["mode"] == "period" and d["jobs"][0]["kind"] == "pipeline"
    # chains of 8 stages on 8 hosts (8 GPUs each: one stage per host): 7 sequential sends per iteration; alone on
    # its NICs it runs at the ideal
    for it in d["jobs"][0]["iterations"]:
        assert it["allreduce_s"] == pytest.approx(d["jobs"][0]["ideal_s"], rel=1e-9)
    times = d["recompute_times_s"]
    # every 0.5 s from t = 0; the ticks before the job starts (5.6 s) have nothing to route and are not recorded
    assert times[0] == 6.0 and all(b - a == pytest.approx(0.5) for a, b in zip(times, times[1:]))
    assert len(times) > 10


def test_failed_links_are_avoided(capsys):
    # the same workload the command generates: find a ToR that holds a replica, fail all its uplinks but one
    (job0,) = paper_jobs(1, 2, tors=8, hosts_per_tor=8, seed=1, models=("gpt3",), gpus_per_host=8)
    tor = job0.host_tor[job0.rings[0][0]]
    links = ",".join(f"tor{tor}:spine{j}" for j in range(1, 8))
    rc, out, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--models", "gpt3", "--gpus-per-host", "8",
                           "--algo", "mlroute", "--iterations", "1", "--failed-links", links, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["scenario"]["failed_links"] == links.split(",")
    job = d["jobs"][0]
    # 8 hosts x 8 GPUs: 64 flows leave that ToR, all on its one live uplink, against 8 per NIC: 8x slower
    assert d["max_link_load"] == [64]
    assert job["iterations"][0]["allreduce_s"] == pytest.approx(8 * job["ideal_s"], rel=1e-6)


def test_parse_lists():
    # the one parser of the fabric options (mlroute.routing.spec), which mlroute route shares
    from mlroute.routing.fabric import FabricError as ScenarioError
    from mlroute.routing.spec import parse_index_list as parse_int_list
    from mlroute.routing.spec import parse_links

    assert parse_int_list("28-31", "x") == [28, 29, 30, 31]
    assert parse_int_list("1, 3,5", "x") == [1, 3, 5]
    assert parse_int_list("", "x") == []
    with pytest.raises(ScenarioError, match="twice"):
        parse_int_list("1,1", "x")
    with pytest.raises(ScenarioError, match="range"):
        parse_int_list("5-3", "x")
    assert parse_links("tor0:spine1, tor2:spine3") == [("tor0", "spine1"), ("tor2", "spine3")]


def test_several_runs_in_parallel_equal_the_single_runs(capsys):
    """--algo and --seed lists: every (algorithm, seed) run in worker processes, each the same as run alone."""
    base = [*SMALL, "--jobs", "2", "--ring", "2", "--iterations", "2", "--gpus-per-host", "4", "--json"]
    rc, out, err = run_cli(capsys, *base, "--algo", "greedy,ecmp", "--seed", "1,2", "--workers", "2")
    assert rc == 0, err
    runs = json.loads(out)["runs"]
    assert [(r["algo"], r["seed"]) for r in runs] == [("greedy", 1), ("ecmp", 1), ("greedy", 2), ("ecmp", 2)]
    timing = ("controller_ms", "wall_s", "summary")
    for r in runs:
        rc, one, err = run_cli(capsys, *base, "--algo", r["algo"], "--seed", str(r["seed"]))
        alone = json.loads(one)
        assert {k: v for k, v in r.items() if k not in (*timing, "seed")} == \
            {k: v for k, v in alone.items() if k not in timing}
        assert r["summary"]["allreduce_norm_mean"] == alone["summary"]["allreduce_norm_mean"]
    rc, out, _ = run_cli(capsys, *base[:-1], "--algo", "greedy,ecmp", "--workers", "1")
    assert rc == 0 and out.splitlines()[0].split()[:3] == ["algo", "seed", "mean/ideal"]
    assert [ln.split()[0] for ln in out.splitlines()[2:]] == ["greedy", "ecmp"]


def test_several_runs_bad_input(capsys):
    rc, _, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--algo", "greedy,magic")
    assert rc == 2 and "unknown algorithm 'magic'" in err
    rc, _, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--seed", "1,x")
    assert rc == 2 and "--seed" in err
    rc, _, err = run_cli(capsys, *SMALL, "--jobs", "1", "--ring", "2", "--seed", "1,2", "--save-traffic", "/tmp/x")
    assert rc == 2 and "--save-traffic takes one --seed" in err


K4_RINGS = ["--fabric", "fattree", "--k", "4", "--jobs", "4", "--ring", "4", "--models", "gpt3",
            "--gpus-per-host", "64", "--iterations", "2", "--seed", "1"]


def test_choose_rings_side_by_side(capsys):
    # 4 jobs x 4 hosts interleaved over pod pairs, one aggregation-core cable down: pod 0 sends 4 hosts' worth
    # over 3 cables in rank order (64 rings per NIC spread them: 4/3 of the ideal); chosen, 2 hosts' worth
    rc, out, err = run_cli(capsys, *K4_RINGS, "--placement", "interleaved", "--failed-links", "agg0_0:core0",
                           "--choose-rings", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["scenario"]["placement"] == "interleaved" and d["scenario"]["failed_links"] == ["agg0_0:core0"]
    given, chosen = d["rank_order"]["summary"], d["chosen"]["summary"]
    assert given["allreduce_norm_max"] == pytest.approx(4 / 3, rel=0.01)
    assert chosen["allreduce_norm_max"] < 1.02
    assert [r["job"] for r in d["ring_choice"]] == [f"job{i}-gpt3" for i in range(4)]
    assert sum(r["helps"] for r in d["ring_choice"]) == 1 and d["ring_choice"][0]["rings"] == 64
    rc, out, err = run_cli(capsys, *K4_RINGS, "--placement", "interleaved", "--failed-links", "agg0_0:core0",
                           "--choose-rings")
    assert rc == 0, err
    assert "failed links: agg0_0:core0" in out and "rings changed: 64 of 256" in out
    assert "rank order: mean 1.16" in out


def test_choose_rings_leaves_contiguous_rings_alone(capsys):
    rc, out, err = run_cli(capsys, *K4_RINGS, "--placement", "contiguous", "--failed-links",
                           "agg0_0:core0,agg2_1:core2", "--choose-rings", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert not any(r["helps"] for r in d["ring_choice"])
    assert d["rank_order"]["summary"]["allreduce_norm_max"] == pytest.approx(1.0, rel=1e-6)
    assert d["chosen"]["jobs"] == d["rank_order"]["jobs"]


def test_choose_rings_usage_errors(capsys):
    rc, _, err = run_cli(capsys, *K4_RINGS, "--placement", "interleaved", "--choose-rings", "--algo",
                         "mlroute,greedy")
    assert rc == 2 and "--choose-rings takes one --algo" in err
    rc, _, err = run_cli(capsys, *K4_RINGS[:-6], "--gpus-per-host", "8", "--jobs", "1", "--ring", "2",
                         "--iterations", "1", "--kind", "pipeline", "--choose-rings")
    assert rc == 2 and "--choose-rings: no all-reduce job" in err
    rc, _, err = run_cli(capsys, *K4_RINGS[:-6], "--models", "gpt3", "--placement", "interleaved")
    assert rc == 2 and "does not fit" in err and "--gpus-per-host 64 fits" in err
