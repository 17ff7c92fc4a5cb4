"""NCCL's rings as NCCL itself reports them: its INFO log or its graph dump, when the job points us at one.

NCCL chooses its rings at communicator set-up (in PyTorch: the first collective, unless the group was bound to a
device); rank 0 logs them with ``NCCL_DEBUG=INFO``. ``MLROUTE_NCCL_LOG`` names that log (default: rank 0's
``NCCL_DEBUG_FILE``, its ``%h``/``%p`` expanded as NCCL does, since rank 0 is the declaring process);
``MLROUTE_NCCL_GRAPH`` names a graph dump (default ``NCCL_GRAPH_DUMP_FILE``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence

from mlroute.torch.rings import graph_rank_rings, nccl_rank_rings, parse_graph_xml, parse_nccl_log


def log_path(env: Mapping[str, str], pid: int | None = None, hostname: str | None = None) -> str | None:
    """The NCCL log of this (rank 0's) process, if the job names one."""
    if env.get("MLROUTE_NCCL_LOG"):
        return env["MLROUTE_NCCL_LOG"]
    path = env.get("NCCL_DEBUG_FILE")
    if not path:
        return None
    host = hostname if hostname is not None else socket.gethostname()
    return path.replace("%h", host).replace("%p", str(pid if pid is not None else os.getpid()))


def graph_path(env: Mapping[str, str]) -> str | None:
    return env.get("MLROUTE_NCCL_GRAPH") or env.get("NCCL_GRAPH_DUMP_FILE") or None


def rank_rings(env: Mapping[str, str], hosts: Sequence[str], devices: Sequence[int]) -> list[list[int]]:
    """NCCL's rank rings for a communicator of ``len(hosts)`` ranks: from the log when it holds them, else from
    the graph dump; empty when neither exists yet (or cannot be read)."""
    n = len(hosts)
    path = log_path(env)
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                rings = nccl_rank_rings(parse_nccl_log(f), n)
        except OSError:
            rings = []
        if rings:
            return rings
    path = graph_path(env)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                channels = parse_graph_xml(f.read())
        except (OSError, SyntaxError, ValueError):  # ET.ParseError is a SyntaxError: a dump still being written
            return []
        if channels:
            return graph_rank_rings(channels, hosts, devices)
    return []
