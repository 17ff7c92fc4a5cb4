"""The job model, the authors' traffic-file reader/writer and the paper workload generator."""

import math

import pytest

from mlroute.workloads.jobs import (
    MODELS,
    Job,
    WorkloadError,
    authors_node_id,
    format_traffic,
    jobs_to_flows,
    min_gpus_per_host,
    paper_jobs,
    read_traffic_files,
    write_traffic_files,
)

HEADER = "# src dst src_tor dst_tor start_time flow_size compute_time stage_index\n"


def write(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(HEADER + body)
    return p


# ---------------------------------------------------------------- reader


def test_reads_rings_in_order_with_authors_ids(tmp_path):
    # ring 0: 96 -> 130 -> 200 -> 96 given out of order; ring 1: 97 <-> 131
    p = write(tmp_path, "bloom.txt", """
130 200 1 3 2000000000 7333333333 1240000000 0
97 131 0 1 2000000000 7333333333 1240000000 1   # trailing comment
96 130 0 1 2000000000 7333333333 1240000000 0
131 97 1 0 2000000000 7333333333 1240000000 1
200 96 3 0 2000000000 7333333333 1240000000 0
""")
    (job,) = read_traffic_files([p], hosts_per_tor=32, iterations=3)
    assert job.name == "bloom"
    assert job.kind == "allreduce"
    assert job.rings == [[130, 200, 96], [97, 131]]
    assert job.edges(0) == [(130, 200), (200, 96), (96, 130)]
    assert job.host_tor == {96: 0, 97: 0, 130: 1, 131: 1, 200: 3}
    assert job.step_bytes == 7333333333
    assert job.start_s == 2.0 and job.compute_s == 1.24 and job.iterations == 3
    assert job.steps_per_iteration(0) == 4 and job.steps_per_iteration(1) == 2


def test_non_integer_host_ids_kept_as_text(tmp_path):
    p = write(tmp_path, "j.txt", "a b 0 1 0 10 0 0\nb a 1 0 0 10 0 0\n")
    (job,) = read_traffic_files([p])
    assert job.rings == [["a", "b"]]


@pytest.mark.parametrize("body, message", [
    ("96 130 0 1 0 10 0\n", "expected 8 columns"),
    ("96 130 0 1 0 ten 0 0\n130 96 1 0 0 10 0 0\n", "flow_size 'ten' is not a number"),
    ("96 130 0 x 0 10 0 0\n", "dst_tor 'x' is not a number"),
    ("96 130 0 1.5 0 10 0 0\n", "dst_tor '1.5' is not an integer"),
    ("96 96 0 0 0 10 0 0\n", "src and dst are the same host"),
    ("96 130 0 1 0 10 0 0\n130 96 2 0 0 10 0 0\n", "host 130 is under ToR 2 here but under ToR 1"),
    ("96 130 0 1 0 10 0 0\n130 200 1 2 0 10 0 0\n", "do not form one ring"),
    ("96 130 0 1 0 10 0 0\n96 200 0 2 0 10 0 0\n", "host 96 sends twice"),
    ("96 130 0 1 0 10 0 0\n130 96 1 0 0 11 0 0\n", "flow_size 11 differs"),
    ("96 130 0 1 0 10 0 0\n130 96 1 0 5 10 0 0\n", "start_time 5 differs"),
    ("96 130 0 1 0 0 0 0\n", "flow_size 0 must be positive"),
    ("96 130 0 1 -1 10 0 0\n", "start_time -1 is negative"),
    ("96 130 0 1 0 nan 0 0\n", "is not finite"),
    ("# only a comment\n", "no flows"),
    ("# mlroute: colour=blue\n96 130 0 1 0 10 0 0\n", "unknown directive"),
])
def test_reader_errors_name_file_and_line(tmp_path, body, message):
    p = write(tmp_path, "bad.txt", body)
    with pytest.raises(WorkloadError) as err:
        read_traffic_files([p])
    assert message in str(err.value)
    assert str(err.value).startswith(str(p))
    if "no flows" not in message:
        assert f"{p}:" in str(err.value)
        line = int(str(err.value)[len(str(p)) + 1:].split(":")[0])
        assert 2 <= line <= 3  # the header is line 1


def test_error_points_at_the_offending_line(tmp_path):
    p = write(tmp_path, "bad.txt", "96 130 0 1 0 10 0 0\n130 96 1 0 0 10 0 0\n\n97 98 0 0 0 10 0\n")
    with pytest.raises(WorkloadError, match=rf"^{p}:5: expected 8 columns"):
        read_traffic_files([p])


def test_tor_must_agree_across_files_and_fit(tmp_path):
    a = write(tmp_path, "a.txt", "96 130 0 1 0 10 0 0\n130 96 1 0 0 10 0 0\n")
    b = write(tmp_path, "b.txt", "96 140 5 1 0 10 0 0\n140 96 1 5 0 10 0 0\n")
    with pytest.raises(WorkloadError, match=rf"{b}:2: host 96 is under ToR 5 here but under ToR 0 at {a}:2"):
        read_traffic_files([a, b])
    c = write(tmp_path, "c.txt", "97 98 0 0 0 10 0 0\n98 97 0 0 0 10 0 0\n")
    assert len(read_traffic_files([a, c], hosts_per_tor=3)) == 2
    with pytest.raises(WorkloadError, match="ToR 0 has 3 distinct hosts.*--hosts-per-tor 2"):
        read_traffic_files([a, c], hosts_per_tor=2)
    # the first host beyond the capacity, and a host beyond the fabric, are named by the line they appear on
    with pytest.raises(WorkloadError, match=rf"{c}:2: ToR 0 has 3 distinct hosts"):
        read_traffic_files([a, c], hosts_per_tor=2)
    assert len(read_traffic_files([a, c], tors=2)) == 2
    with pytest.raises(WorkloadError, match=rf"{a}:2: host 130 is under ToR 1, but the fabric has ToRs 0..0 "
                                            r"\(ToR 1 is beyond the fabric\)"):
        read_traffic_files([a, c], tors=1)


def test_missing_file_and_duplicate_names(tmp_path):
    with pytest.raises(WorkloadError, match="cannot read"):
        read_traffic_files([tmp_path / "nope.txt"])
    with pytest.raises(WorkloadError, match="no traffic files"):
        read_traffic_files([])
    a = write(tmp_path, "a.txt", "96 130 0 1 0 10 0 0\n130 96 1 0 0 10 0 0\n")
    jobs = read_traffic_files([a, a])
    assert [j.name for j in jobs] == ["a", "a#2"]


def test_pipeline_directive_reads_chains(tmp_path):
    p = write(tmp_path, "pp.txt", "# mlroute: kind=pipeline model=gpt3\n"
              "2 3 0 1 0 10 0 0\n1 2 0 0 0 10 0 0\n5 6 1 1 0 10 0 1\n")
    (job,) = read_traffic_files([p])
    assert job.kind == "pipeline" and job.model == "gpt3"
    assert job.rings == [[1, 2, 3], [5, 6]]
    assert job.edges(0) == [(1, 2), (2, 3)]
    assert job.steps_per_iteration(0) == 2
    bad = write(tmp_path, "bad.txt", "# mlroute: kind=pipeline\n1 2 0 0 0 10 0 0\n2 1 0 0 0 10 0 0\n")
    with pytest.raises(WorkloadError, match="do not form one chain"):
        read_traffic_files([bad])


def test_job_validation():
    with pytest.raises(WorkloadError, match="kind"):
        Job("j", "broadcast", [[0, 1]], 1.0, 0.0, 0.0, 1, {0: 0, 1: 1})
    with pytest.raises(WorkloadError, match="has no ToR"):
        Job("j", "allreduce", [[0, 1]], 1.0, 0.0, 0.0, 1, {0: 0})
    with pytest.raises(WorkloadError, match="repeats a member"):
        Job("j", "allreduce", [[0, 1, 0]], 1.0, 0.0, 0.0, 1, {0: 0, 1: 1})
    with pytest.raises(WorkloadError, match="iterations"):
        Job("j", "allreduce", [[0, 1]], 1.0, 0.0, 0.0, 0, {0: 0, 1: 1})


# ---------------------------------------------------------------- generator


def test_paper_models_and_sizes():
    (job,) = paper_jobs(1, 2, tors=64, hosts_per_tor=32, seed=3, models=("bloom",))
    assert job.model == "bloom" and job.kind == "allreduce"
    assert len(job.rings) == 48 and all(len(r) == 2 for r in job.rings)
    assert job.step_bytes == pytest.approx(7.333e9, rel=1e-3)  # docs/paper.md: BLOOM, n=2: 7.33 GB
    assert job.compute_s == 1.24 and job.iterations == 11
    assert 1.0 <= job.start_s <= 10.0
    jobs = paper_jobs(3, 4, tors=64, hosts_per_tor=32, seed=0)
    assert [j.model for j in jobs] == ["gpt3", "bloom", "llama2"]
    for j in jobs:
        m = MODELS[j.model]
        assert len(j.rings) == m.tp * m.pp
        assert j.step_bytes == pytest.approx(4 * m.params / (m.tp * m.pp) / 4)


def test_placement_one_gpu_per_host_distinct_tors():
    jobs = paper_jobs(3, 8, tors=64, hosts_per_tor=32, seed=7)
    seen_hosts = set()
    tor_owner = {}
    for j in jobs:
        hosts = {h for r in j.rings for h in r}
        assert len(hosts) == len(j.rings) * 8  # one host per GPU
        assert not hosts & seen_hosts
        seen_hosts |= hosts
        for h in hosts:
            assert j.host_tor[h] == h // 32
        for ring in j.rings:
            tors = [j.host_tor[h] for h in ring]
            assert len(set(tors)) == len(tors)  # members of a ring are under different ToRs
        # replica r of ring p: hosts of a replica fill its own ToRs
        for r in range(8):
            rep_tors = {j.host_tor[ring[r]] for ring in j.rings}
            assert len(rep_tors) == math.ceil(len(j.rings) / 32)
            for t in rep_tors:
                assert tor_owner.setdefault(t, (j.name, r)) == (j.name, r)
    assert len(tor_owner) == 64  # 16 + 16 + 32 ToRs: the fabric is exactly full


def test_generator_is_deterministic_and_seed_sensitive():
    a = paper_jobs(2, 4, tors=64, hosts_per_tor=32, seed=11)
    b = paper_jobs(2, 4, tors=64, hosts_per_tor=32, seed=11)
    c = paper_jobs(2, 4, tors=64, hosts_per_tor=32, seed=12)
    assert a == b
    assert a != c


def test_fabric_too_small_is_a_clear_error():
    with pytest.raises(WorkloadError, match="need 80 ToRs .* but the fabric has 64"):
        paper_jobs(4, 8, tors=64, hosts_per_tor=32, seed=0)
    assert min_gpus_per_host(4, 8, 64, 32) == 2
    assert min_gpus_per_host(3, 8, 64, 32) == 1
    jobs = paper_jobs(5, 8, tors=64, hosts_per_tor=32, seed=0, gpus_per_host=2)
    j = jobs[0]  # gpt3: 64 GPUs on 32 hosts; GPU positions 2m and 2m+1 share a host, so their rings coincide
    assert j.rings[0] == j.rings[1] and j.rings[0] != j.rings[2]
    with pytest.raises(WorkloadError, match="ring must be at least 2"):
        paper_jobs(1, 1, tors=64, hosts_per_tor=32)
    with pytest.raises(WorkloadError, match="unknown model 'gpt5'"):
        paper_jobs(1, 2, tors=64, hosts_per_tor=32, models=("gpt5",))


def test_pipeline_generation():
    (job,) = paper_jobs(1, 2, tors=8, hosts_per_tor=32, seed=1, models=("gpt3",), kind="pipeline")
    assert job.kind == "pipeline"
    assert len(job.rings) == 2 * 8  # ring replicas x TP positions
    assert all(len(c) == 8 for c in job.rings)  # PP stages
    assert job.steps_per_iteration(0) == 7


# ---------------------------------------------------------------- writer / round trip


@pytest.mark.parametrize("kind, gpus_per_host", [("allreduce", 1), ("allreduce", 2), ("pipeline", 1)])
def test_write_read_round_trip(tmp_path, kind, gpus_per_host):
    jobs = paper_jobs(3, 4, tors=64, hosts_per_tor=32, seed=5, kind=kind, gpus_per_host=gpus_per_host,
                      iterations=7)
    paths = write_traffic_files(jobs, tmp_path / "w")
    assert [p.name for p in paths] == [f"{j.name}.txt" for j in jobs]
    back = read_traffic_files(paths, hosts_per_tor=32, iterations=7)
    assert back == jobs


def test_writer_authors_node_ids(tmp_path):
    (job,) = paper_jobs(1, 2, tors=64, hosts_per_tor=32, seed=2, models=("bloom",))
    text = format_traffic(job, host_id=lambda h: authors_node_id(h, 64, 32))
    rows = [line.split() for line in text.splitlines() if not line.startswith("#")]
    assert len(rows) == 48 * 2
    for src, dst, st, dt, _start, _size, compute, _stage in rows:
        assert 96 <= int(src) <= 2143 and (int(src) - 96) // 32 == int(st)  # docs/paper.md numbering
        assert (int(dst) - 96) // 32 == int(dt)
        assert int(compute) == 1_240_000_000
    p = tmp_path / "bloom.txt"
    p.write_text(text)
    (back,) = read_traffic_files([p])
    assert back.rings[0] == [authors_node_id(h, 64, 32) for h in job.rings[0]]


def test_jobs_to_flows():
    jobs = paper_jobs(2, 2, tors=16, hosts_per_tor=32, seed=1, models=("bloom", "gpt3"))
    flows = jobs_to_flows(jobs)
    assert len(flows) == 48 * 2 + 64 * 2
    f = flows[0]
    assert (f.src, f.dst) == tuple(jobs[0].rings[0])
    assert f.src_tor == jobs[0].host_tor[f.src] and f.dst_tor == jobs[0].host_tor[f.dst]
    assert f.job == jobs[0].name and flows[-1].job == jobs[1].name


def test_random_placement():
    jobs = paper_jobs(3, 8, tors=64, hosts_per_tor=32, seed=2, placement="random")
    hosts = [h for j in jobs for r in j.rings for h in r]
    assert len(hosts) == len(set(hosts)) == 1920  # one GPU per host, no host used twice
    tors = {j.host_tor[h] for j in jobs for r in j.rings for h in r}
    assert len(tors) == 64  # spread over the whole fabric
    assert paper_jobs(3, 8, tors=64, hosts_per_tor=32, seed=2, placement="random") == jobs
    with pytest.raises(WorkloadError, match="need 2816 hosts .* but the fabric has 2048"):
        paper_jobs(5, 8, tors=64, hosts_per_tor=32, placement="random")
    assert min_gpus_per_host(5, 8, 64, 32, placement="random") == 2
    assert min_gpus_per_host(4, 8, 64, 32, placement="random") == 2
    assert min_gpus_per_host(3, 8, 64, 32, placement="random") == 1
    with pytest.raises(WorkloadError, match="placement"):
        paper_jobs(1, 2, tors=64, hosts_per_tor=32, placement="packed")


def test_ideal_comm_time_closed_form_and_pipeline():
    # the simulator's ideal (the job alone, only NICs constrain) against the closed forms: all-reduce
    # 2 (n - 1) steps x k sends per NIC x step_bytes / rate; a pipeline chain's sends one after the other
    from mlroute.sim.engine import ideal_comm_time

    (job,) = paper_jobs(1, 4, tors=64, hosts_per_tor=32, seed=1, models=("gpt3",))
    assert ideal_comm_time(job, 100e9) == pytest.approx(2 * 3 * job.step_bytes * 8 / 100e9)
    packed = paper_jobs(1, 4, tors=64, hosts_per_tor=32, seed=1, models=("gpt3",), gpus_per_host=4)[0]
    assert ideal_comm_time(packed, 100e9) == pytest.approx(4 * 2 * 3 * packed.step_bytes * 8 / 100e9)
    chain = Job("p", "pipeline", [[0, 1, 2]], 1e9, 0.0, 0.0, 1, {0: 0, 1: 0, 2: 1})
    assert ideal_comm_time(chain, 100e9) == pytest.approx(2 * 1e9 * 8 / 100e9)
