"""`mlroute route`: the exact interface users and checks rely on."""

from __future__ import annotations

import json

import pytest

from mlroute.cli import main


def run(capsys, *argv):
    rc = main(["route", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_fattree_pattern_json(capsys):
    rc, out, _ = run(capsys, "--fabric", "fattree", "--k", "4", "--pattern", "stride:4", "--seed", "1", "--json")
    assert rc == 0
    d = json.loads(out)
    for key in ("algo", "runtime_ms", "flows", "max_link_load", "flows_sharing", "routes"):
        assert key in d
    assert d["algo"] == "mlroute" and d["flows"] == 16 and d["max_link_load"] == 1 and d["flows_sharing"] == 0
    assert d["runtime_ms"] > 0
    r0 = d["routes"][0]
    assert r0["src"] == 0 and r0["dst"] == 4
    assert r0["path"][0] == "edge0_0" and r0["path"][-1] == "edge1_0" and len(r0["path"]) == 5


def test_clos_project_csv_with_failed_spines(capsys, tmp_path):
    p = tmp_path / "flows.csv"
    p.write_text("src,dst\n" + "".join(f"{h},{(h + 8) % 32}\n" for h in range(32)))
    rc, out, _ = run(capsys, "--fabric", "clos", "--tors", "8", "--spines", "4", "--hosts-per-tor", "4",
                     "--failed-spines", "2,3", "--traffic", str(p), "--algo", "greedy", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["algo"] == "greedy" and d["flows"] == 32
    # each ToR sends 4 flows over 2 live spines: the lower bound is 2
    assert d["lower_bound"] == 2 and d["max_link_load"] >= 2
    for r in d["routes"]:
        assert r["path"][0] == f"tor{r['src'] // 4}" and r["path"][-1] == f"tor{r['dst'] // 4}"
        assert r["path"][1] in ("spine0", "spine1")


def test_every_algo_runs_and_table_is_readable(capsys, tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("flows:\n" + "".join(f"  - {{src: {h}, dst: {(h + 3) % 16}}}\n" for h in range(16)))
    for algo in ("mlroute", "greedy", "ecmp", "coloring", "annealing", "ilp", "gff"):
        rc, out, _ = run(capsys, "--tors", "4", "--spines", "2", "--hosts-per-tor", "4", "--traffic", str(p),
                         "--algo", algo, "--time-limit", "10")
        assert rc == 0, algo
        assert "algo" in out and algo in out and "max link load" in out and "runtime" in out
        assert "flows sharing a link" in out and "min rate" in out


def test_authors_traffic_files(capsys, tmp_path):
    jobs = pytest.importorskip("mlroute.workloads.jobs")
    js = jobs.paper_jobs(2, 2, 64, 32, seed=4)
    files = jobs.write_traffic_files(js, tmp_path, host_id=lambda h: jobs.authors_node_id(h, 64, 32))
    rc, out, _ = run(capsys, "--tors", "64", "--spines", "32", "--hosts-per-tor", "32", "--failed-spines",
                     "28,29,30,31", "--traffic", *map(str, files), "--json")
    assert rc == 0
    d = json.loads(out)
    flows = jobs.jobs_to_flows(jobs.read_traffic_files([str(f) for f in files]))
    assert d["flows"] == len(flows)
    for r, f in zip(d["routes"], flows):
        assert r["src"] == f.src and r["dst"] == f.dst  # node ids exactly as in the files (96.. at this scale)
        assert r["path"][0] == f"tor{f.src_tor}" and r["path"][-1] == f"tor{f.dst_tor}"
    assert min(r["src"] for r in d["routes"]) >= 96
    assert d["max_link_load"] == d["lower_bound"]
    assert set(d["jobs"]) == {j.name for j in js}


@pytest.mark.parametrize("content,suffix,needle", [
    ("src,dst\n0,1\n0,99\n", ".csv", ":3: unknown host 99"),
    ("src,dst\n0,1\n0\n", ".csv", ":3: 1 field"),
    ("flows:\n  - {src: 0, dst: 1}\n  - {src: 0, dst: bogus}\n", ".yaml", ":3: unknown host 'bogus'"),
    ("5 5 0 0 0 100 0 0\n", ".txt", ":1: src and dst are the same host"),
    ("0 1 0 0 0 100 0 0\n", ".txt", ":1: the lines of this stage_index do not form one ring"),
    ("96 97 0 70 0 100 0 0\n97 96 70 0 0 100 0 0\n", ".txt", "ToR 70 is beyond the fabric"),
    ("96 97 0 1 0 100 0\n", ".txt", ":1: expected 8 columns"),
])
def test_bad_input_exits_2_naming_file_and_line(capsys, tmp_path, content, suffix, needle):
    p = tmp_path / f"t{suffix}"
    p.write_text(content)
    rc, out, err = run(capsys, "--tors", "64", "--spines", "32", "--hosts-per-tor", "1", "--traffic", str(p))
    assert rc == 2
    assert str(p) in err and needle in err, err


def test_bad_fabric_arguments(capsys):
    assert run(capsys, "--tors", "4", "--spines", "2", "--failed-spines", "5", "--pattern", "randbij")[0] == 2
    assert run(capsys, "--fabric", "fattree", "--k", "5", "--pattern", "randbij")[0] == 2
    rc, _, err = run(capsys, "--fabric", "fattree", "--pattern", "stride:0")
    assert rc == 2 and "--pattern" in err


def _interleaved_jobs(tmp_path):
    """issue 37's case as authors' files: 4 jobs x 4 hosts on a k=4 fat-tree, each on two pods, rank order A, B,
    A, B, written in gloo's direction (rank r sends to r-1: the ring reversed)."""
    from mlroute.workloads.jobs import Job, write_traffic_files

    jobs = []
    for j, hosts in enumerate(([0, 4, 1, 5], [2, 6, 3, 7], [8, 12, 9, 13], [10, 14, 11, 15])):
        ring = hosts[:1] + hosts[:0:-1]
        jobs.append(Job(f"j{j}", "allreduce", [ring], 1e6, 1.0, 0.0, 1, {h: h // 2 for h in hosts}))
    return [str(p) for p in write_traffic_files(jobs, tmp_path)]


def test_choose_rings_takes_the_worst_job_from_twice_ideal_to_ideal(capsys, tmp_path):
    files = _interleaved_jobs(tmp_path)
    base = ("--fabric", "fattree", "--k", "4", "--failed-links", "agg0_0:core0", "--objective", "job",
            "--runs", "1", "--traffic", *files)
    common = ("--json", *base)
    _, out, _ = run(capsys, *common)
    assert max(j["allreduce_relative"] for j in json.loads(out)["jobs"].values()) == pytest.approx(2.0)
    rc, out, _ = run(capsys, "--choose-rings", *common)
    d = json.loads(out)
    assert rc == 0 and max(j["allreduce_relative"] for j in d["jobs"].values()) == pytest.approx(1.0)
    assert [c["job"] for c in d["ring_choice"]] == ["j0", "j1", "j2", "j3"] and d["ring_choice"][0]["helps"]
    rc, out, _ = run(capsys, "--choose-rings", *base)
    assert rc == 0 and "ring choice" in out and "4 -> 2 (2)" in out


def test_choose_rings_needs_ring_jobs(capsys):
    rc, _, err = run(capsys, "--fabric", "fattree", "--pattern", "stride:4", "--choose-rings")
    assert rc != 0 and "--choose-rings" in err
