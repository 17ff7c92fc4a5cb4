"""Ring derivation: the declared rings name exactly the host pairs the library's bulk flows on, in its direction."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mlroute.torch.rings import (
    GraphChannel,
    gloo_rings,
    gloo_send_order,
    graph_rank_rings,
    host_rings,
    nccl_rank_rings,
    parse_graph_xml,
    parse_nccl_log,
)

FIXTURES = Path(__file__).with_name("fixtures")


def pairs(rings):
    """What the controller pins for rings (controller.state.jobs.sends): member i -> member i+1 mod n."""
    return {(r[i], r[(i + 1) % len(r)]) for r in rings for i in range(len(r))}


def test_gloo_sends_to_the_previous_rank_so_the_ring_is_descending_rank_order():
    assert gloo_send_order(4) == [3, 2, 1, 0]
    assert gloo_rings(["a", "b", "c", "d"]) == [["d", "c", "b", "a"]]
    assert pairs(gloo_rings(["a", "b", "c", "d"])) == {("b", "a"), ("c", "b"), ("d", "c"), ("a", "d")}


def test_ranks_sharing_a_host_collapse_into_one_ring_member():
    assert gloo_rings(["A", "A", "B", "B", "C", "C"]) == [["C", "B", "A"]]
    assert gloo_rings(["A", "A", "A", "A"]) == []  # one host: nothing crosses the fabric
    assert gloo_rings(["A"]) == []


def test_two_hosts_are_symmetric():
    assert pairs(gloo_rings(["a", "b"])) == {("a", "b"), ("b", "a")}
    assert pairs(gloo_rings(["A", "A", "B", "B"])) == {("A", "B"), ("B", "A")}


def test_interleaved_ranks_give_rings_of_distinct_hosts_covering_every_crossing():
    assert gloo_rings(["A", "B", "A", "B"]) == [["B", "A"]]
    rings = gloo_rings(["A", "B", "A", "C"])  # 3->2: C->A, 2->1: A->B, 1->0: B->A, 0->3: A->C
    assert all(len(set(r)) == len(r) >= 2 for r in rings)
    assert pairs(rings) == {("C", "A"), ("A", "B"), ("B", "A"), ("A", "C")}


@given(st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=12))
def test_declared_pairs_are_exactly_the_crossing_sends(hosts):
    """Any placement of ranks on hosts: the rings' pairs are the r -> r-1 sends that leave a host, each ring of
    distinct hosts (what the controller accepts), no ring twice."""
    n = len(hosts)
    sends = {(hosts[r], hosts[(r - 1) % n]) for r in range(n) if hosts[r] != hosts[(r - 1) % n]}
    rings = gloo_rings(hosts)
    assert pairs(rings) == sends
    assert all(len(set(r)) == len(r) >= 2 for r in rings)
    assert len({frozenset(pairs([r])) for r in rings}) == len(rings)


def test_nccl_rings_run_left_to_right_in_both_log_styles():
    old = parse_nccl_log((FIXTURES / "nccl_info_2.18.log").read_text().splitlines())
    assert [(c.channel, c.nchannels) for c in old] == [(0, 4), (1, 4), (2, 4), (3, 4)]  # not the per-peer lines
    assert nccl_rank_rings(old, 8) == [[0, 1, 2, 3, 4, 5, 6, 7], [0, 3, 2, 1, 4, 7, 6, 5]]  # pairs counted once
    new = parse_nccl_log((FIXTURES / "nccl_info_2.23.log").read_text().splitlines())
    assert nccl_rank_rings(new, 4) == [[0, 1, 2, 3]]
    hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
    assert host_rings([0, 1, 2, 3], hosts) == [hosts]  # ascending: the opposite of gloo's direction


def test_nccl_lines_cut_short_or_of_another_communicator_are_dropped():
    lines = [
        "h:1:2 [0] NCCL INFO Channel 00/02 :    0   1   2",  # cut: NCCL truncates long lines
        "h:1:2 [0] NCCL INFO Channel 00/02 : 0 1",  # a 2-rank sub-communicator
        "h:1:2 [0] NCCL INFO Channel 01/02 : 0 2 1 3",
    ]
    assert nccl_rank_rings(parse_nccl_log(lines), 4) == [[0, 2, 1, 3]]
    assert nccl_rank_rings(parse_nccl_log(["Channel 00/02 : 1 2 3 0", "Channel 01/02 : 0 1 2 3"]), 4) == [[1, 2, 3, 0]]


def test_nccl_rings_over_two_nodes_collapse_to_the_node_ring():
    rings = nccl_rank_rings(parse_nccl_log((FIXTURES / "nccl_info_2.18.log").read_text().splitlines()), 8)
    hosts = ["A"] * 4 + ["B"] * 4
    assert [host_rings(r, hosts) for r in rings] == [[["A", "B"]], [["A", "B"]]]


def test_graph_dump_ring_channels_and_their_rank_rings():
    channels = parse_graph_xml((FIXTURES / "nccl_graph.xml").read_text())
    assert channels == [GraphChannel((0, 1, 3, 2), 0, 0), GraphChannel((2, 3, 1, 0), 1, 1)]  # trees left out
    hosts, devices = ["A"] * 4 + ["B"] * 4, [0, 1, 2, 3] * 2
    assert graph_rank_rings(channels, hosts, devices) == [[0, 1, 3, 2, 4, 5, 7, 6], [2, 3, 1, 0, 6, 7, 5, 4]]
    # nodes follow rank order of first appearance, whatever the ranks' numbering inside a node
    assert graph_rank_rings(channels[:1], ["B", "B", "A", "A"], [1, 0, 0, 1]) == [[1, 0, 2, 3]]
