"""Declared jobs: validation of their structure (file:line: key errors) and the host pairs they send on."""

import pytest

from controller import config
from controller.state import jobs
from controller.state.flowkey import FlowKey
from controller.state.jobs import HostPair

RING = ["10.0.0.1", "10.0.0.5", "10.0.0.9", "10.0.0.13"]


def parse_jobs(text, name="c.yaml"):
    return config.parse(text, name)["jobs"]


def test_a_ring_job_sends_around_its_ring():
    (job,) = parse_jobs("jobs:\n  - name: ar\n    rings: [[10.0.0.1, 10.0.0.5, 10.0.0.9, 10.0.0.13]]\n")
    assert job["hosts"] == RING  # derived from the ring
    assert jobs.sends(job) == [HostPair(RING[i], RING[(i + 1) % 4]) for i in range(4)]


def test_stages_are_chains_and_hosts_are_merged():
    (job,) = parse_jobs("jobs:\n  - name: pp\n    hosts: [10.0.0.2]\n    stages: [[10.0.0.1, 10.0.0.3, 10.0.0.2]]\n"
                        "    weight: 2.5\n")
    assert job["hosts"] == ["10.0.0.2", "10.0.0.1", "10.0.0.3"] and job["weight"] == 2.5
    assert jobs.sends(job) == [HostPair("10.0.0.1", "10.0.0.3"), HostPair("10.0.0.3", "10.0.0.2")]
    assert jobs.weights([job, {"name": "plain", "hosts": []}]) == {"pp": 2.5}


def test_plain_jobs_keep_their_shape():
    assert parse_jobs("jobs:\n  - {name: a, hosts: [10.0.0.1]}\n") == [{"name": "a", "hosts": ["10.0.0.1"]}]


def test_pairs_covered_by_a_detected_elephant_are_left_to_it():
    declared = [{"name": "ar", "hosts": RING, "rings": [RING]}]
    elephant = FlowKey(RING[0], RING[1], 6, 40000, 5201)
    assert HostPair(RING[0], RING[1]) in jobs.declared_pairs(declared)
    left = jobs.uncovered_pairs(declared, [elephant])
    assert HostPair(RING[0], RING[1]) not in left and len(left) == 3


def test_two_rings_over_the_same_pair_route_it_once():
    job = {"name": "g2", "rings": [RING[:2], RING[:2]]}
    assert jobs.sends(job) == [HostPair(RING[0], RING[1]), HostPair(RING[1], RING[0])]


def traffic_file(tmp_path, lines, header="# src dst src_tor dst_tor start_time flow_size compute_time stage\n"):
    path = tmp_path / "job0.txt"
    path.write_text(header + "".join(line + "\n" for line in lines))
    return path


def test_a_traffic_file_in_the_authors_format_declares_rings(tmp_path):
    edges = [(RING[i], RING[(i + 1) % 4]) for i in range(4)]
    traffic_file(tmp_path, [f"{s} {d} {i} {(i + 1) % 4} 0 1000000 1000000000 0" for i, (s, d) in
                                   enumerate(edges)])
    cfg = tmp_path / "c.yaml"
    cfg.write_text("jobs:\n  - name: replay\n    traffic: job0.txt\n")  # relative to the configuration's folder
    (job,) = config.load(str(cfg))["jobs"]
    assert job["rings"] == [RING] and job["traffic"] == "job0.txt"


def test_a_traffic_file_with_node_ids_needs_a_node_map(tmp_path):
    path = traffic_file(tmp_path, ["96 128 0 1 0 1000 1000 0", "128 96 1 0 0 1000 1000 0"])
    with pytest.raises(config.ConfigError, match=r"c.yaml:3: jobs\[0\]: traffic: .*host 96 is not an IPv4.*nodes"):
        parse_jobs(f"jobs:\n  - name: r\n    traffic: {path}\n")
    (job,) = parse_jobs(f"jobs:\n  - name: r\n    traffic: {path}\n    nodes: {{96: 10.0.0.1, 128: 10.0.0.5}}\n")
    assert job["rings"] == [["10.0.0.1", "10.0.0.5"]]


@pytest.mark.parametrize("text, message", [
    ("jobs:\n  - name: a\n    rings: [[10.0.0.1, 10.0.0.x]]\n",
     r"c.yaml:3: jobs\[0\].rings\[0\]\[1\]: must be an IPv4"),
    ("jobs:\n  - name: a\n    rings: [[10.0.0.1]]\n", r"c.yaml:3: jobs\[0\].rings\[0\]: must be a list of at least 2"),
    ("jobs:\n  - name: a\n    rings: [[10.0.0.1, 10.0.0.2, 10.0.0.1]]\n",
     r"c.yaml:3: .*host 10.0.0.1 appears twice"),
    ("jobs:\n  - name: a\n    hosts: [10.0.0.1]\n    stages: []\n", r"c.yaml:4: jobs\[0\].stages: must be a non-empty"),
    ("jobs:\n  - name: a\n    rings: [[10.0.0.1, 10.0.0.2]]\n    weight: 0\n", r"c.yaml:4: jobs\[0\].weight: must be"),
    ("jobs:\n  - name: a\n    rings: [[10.0.0.1, 10.0.0.2]]\n    weight: yes\n",
     r"c.yaml:4: jobs\[0\].weight: must be"),
    ("jobs:\n  - name: a\n    traffic: /nonexistent/job.txt\n",
     r"c.yaml:3: jobs\[0\]: traffic: /nonexistent/job.txt: cannot read"),
    ("jobs:\n  - name: a\n    hosts: [10.0.0.1]\n    nodes: {1: 10.0.0.1}\n", r"c.yaml:4: jobs\[0\].nodes: only with"),
    ("jobs:\n  - name: a\n    ring: [[10.0.0.1, 10.0.0.2]]\n", r"c.yaml:1: jobs\[0\]: needs name"),
])
def test_bad_declarations_name_file_line_and_key(text, message):
    with pytest.raises(config.ConfigError, match=message):
        parse_jobs(text)


def test_a_request_carries_rings_but_names_no_file():
    (job,) = config.validate_jobs([{"name": "a", "rings": [RING]}], "request body")
    assert job["rings"] == [RING]
    with pytest.raises(config.ConfigError, match="request body: jobs\\[0\\].traffic: traffic files are read from"):
        config.validate_jobs([{"name": "a", "traffic": "/etc/passwd"}], "request body")


def test_ipv6_members_are_declared_in_compressed_form_and_send_within_their_family():
    (job,) = parse_jobs("jobs:\n  - name: v6\n    hosts: ['FD00:0:0:0:0:0:A00:9']\n"
                        "    rings: [['fd00::a00:1', 'fd00:0::a00:5']]\n")
    assert job["rings"] == [["fd00::a00:1", "fd00::a00:5"]] and job["hosts"][0] == "fd00::a00:9"
    assert jobs.sends(job) == [HostPair("fd00::a00:1", "fd00::a00:5"), HostPair("fd00::a00:5", "fd00::a00:1")]
    with pytest.raises(config.ConfigError, match=r"c.yaml:3: jobs\[0\].rings\[0\]\[1\]: fd00::1 is not of the family"):
        parse_jobs("jobs:\n  - name: a\n    rings: [[10.0.0.1, 'fd00::1']]\n")
    with pytest.raises(config.ConfigError, match=r"rings\[0\]: host fd00::1 appears twice"):
        parse_jobs("jobs:\n  - name: a\n    rings: [['fd00::1', 'fd00:0::1']]\n")
