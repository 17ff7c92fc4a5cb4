"""Where the hook finds NCCL's rings: the log rank 0 writes, else the graph dump."""

from __future__ import annotations

import shutil
from pathlib import Path

from mlroute.torch import nccl

FIXTURES = Path(__file__).with_name("fixtures")


def test_nccl_debug_file_is_expanded_as_nccl_does_for_the_declaring_process():
    env = {"NCCL_DEBUG_FILE": "/logs/nccl.%h.%p.log"}
    assert nccl.log_path(env, pid=42, hostname="node-a") == "/logs/nccl.node-a.42.log"
    assert nccl.log_path({**env, "MLROUTE_NCCL_LOG": "/x.log"}) == "/x.log"
    assert nccl.log_path({}) is None


def test_log_rings_first_then_graph_then_nothing(tmp_path):
    hosts, devices = ["A"] * 4 + ["B"] * 4, [0, 1, 2, 3] * 2
    graph = {"MLROUTE_NCCL_GRAPH": str(FIXTURES / "nccl_graph.xml")}
    log = {"MLROUTE_NCCL_LOG": str(FIXTURES / "nccl_info_2.18.log")}
    assert nccl.rank_rings({**graph, **log}, hosts, devices)[1] == [0, 3, 2, 1, 4, 7, 6, 5]
    assert nccl.rank_rings({**graph, "MLROUTE_NCCL_LOG": str(tmp_path / "not-yet.log")}, hosts, devices)[0] == [
        0, 1, 3, 2, 4, 5, 7, 6]
    assert nccl.rank_rings({"NCCL_GRAPH_DUMP_FILE": str(FIXTURES / "nccl_graph.xml")}, hosts, devices)
    assert nccl.rank_rings({}, hosts, devices) == []
    half = tmp_path / "half.xml"  # a dump caught while NCCL writes it
    half.write_text((FIXTURES / "nccl_graph.xml").read_text()[:200])
    assert nccl.rank_rings({"MLROUTE_NCCL_GRAPH": str(half)}, hosts, devices) == []
    other = tmp_path / "other.log"  # a log whose communicator has another size than ours
    shutil.copy(FIXTURES / "nccl_info_2.23.log", other)
    assert nccl.rank_rings({"MLROUTE_NCCL_LOG": str(other)}, hosts, devices) == []
