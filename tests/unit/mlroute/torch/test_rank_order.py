"""The controller's node order handed to the job: each host's ranks stay one block, renumbered in chosen order."""

from mlroute.torch import rank_order


def test_ranks_of_one_host_form_a_block_and_an_interleaved_launch_has_none():
    assert rank_order.node_blocks(["a", "a", "b", "c", "c"]) == [("a", 2), ("b", 1), ("c", 2)]
    assert rank_order.node_blocks(["a", "b", "a"]) is None


def test_new_ranks_lay_the_blocks_out_in_chosen_order_keeping_each_hosts_own_order():
    blocks = [("a", 2), ("b", 2), ("c", 2)]
    assert rank_order.new_ranks(blocks, {"a": 0, "b": 2, "c": 1}) == [0, 1, 4, 5, 2, 3]
    assert rank_order.new_ranks(blocks, {"a": 0, "b": 1, "c": 2}) == list(range(6))
    assert rank_order.new_ranks([("x", 1), ("y", 3)], {"x": 1, "y": 0}) == [3, 0, 1, 2]


def test_the_body_asks_for_a_choice_with_the_blocks_sizes_only_when_not_one_each():
    assert rank_order.choose_body([("a", 1), ("b", 1), ("c", 1)], 30.0) == \
        {"hosts": ["a", "b", "c"], "choose_ring": True, "lease_s": 30.0}
    assert rank_order.choose_body([("a", 2), ("b", 1), ("c", 1)], 5.0, weight=2.0) == \
        {"hosts": ["a", "b", "c"], "choose_ring": True, "lease_s": 5.0, "ranks_per_host": {"a": 2, "b": 1, "c": 1},
         "weight": 2.0}


def test_only_a_permutation_of_the_jobs_nodes_is_taken_from_the_answer():
    blocks = [("a", 1), ("b", 1), ("c", 1)]
    assert rank_order.node_ranks({"job": {"node_ranks": {"a": 2, "b": 0, "c": 1}}}, blocks) == {"a": 2, "b": 0, "c": 1}
    for bad in ({"a": 0, "b": 0, "c": 1}, {"a": 0, "b": 1}, {"a": 0, "b": 1, "d": 2}, {"a": 0, "b": 1, "c": 2.0},
                {"a": 0, "b": 1, "c": True}, None, "x"):
        assert rank_order.node_ranks({"job": {"node_ranks": bad}}, blocks) is None, bad
    assert rank_order.node_ranks(None, blocks) is None and rank_order.node_ranks({"error": "x"}, blocks) is None


def test_wanted_only_with_mlroute_ring_choose():
    assert rank_order.wanted({"MLROUTE_RING": "choose"}) and rank_order.wanted({"MLROUTE_RING": " Choose "})
    assert not rank_order.wanted({}) and not rank_order.wanted({"MLROUTE_RING": "given"})
