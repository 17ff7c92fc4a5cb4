"""The REST handlers' test bench: rest.py's RestController without a server (webob requests into it) over a core
that knows a k=4 fat-tree, on a fake clock. Shared by the per-job REST and the jobs-across-restarts tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from webob import Request

from controller import config
from controller.core import ControllerCore
from controller.state.jobs import HostPair
from controller.web.rest import RestController
from controller.web.rest_limits import ClientRateLimit
from tests import topologies
from tests.clock import FakeClock

# allreduce rings as mlroute experiment runs them on a k=4 fat-tree: ring r = hosts r+1, r+5, r+9, r+13
RINGS = [[f"10.0.0.{r + 1 + 4 * i}" for i in range(4)] for r in range(4)]


class RestApp:
    """The app as rest.py sees it; ``wake(decide=True)`` runs the decision loop's step (no optimiser worker: the
    decision is made there and then), so a call's answer carries its decision. ``job_file(cfg, clock)``: the
    core's job state file (None: jobs kept nowhere); ``posts``: the per-client POST budget per window."""

    def __init__(self, text: str = "rest:\n  token: t\n", clock: FakeClock | None = None,
                 job_file: Callable[[dict, FakeClock], Any] | None = None, posts: int = 100) -> None:
        self.clock = clock or FakeClock(50.0)
        cfg = config.parse(text)
        self.core = ControllerCore(cfg, self.clock, job_file=job_file(cfg, self.clock) if job_file else None)
        self.core.topology = self.core.packet_in.topology = topologies.fat_tree(4)
        self.core.sync()  # tiers from the learned graph
        self.post_limit = ClientRateLimit(5, posts, self.clock)

    def wake(self, decide: bool = False) -> None:
        if decide:
            self.core.decision_tick()

    def wait_in_force(self, sync_round: int, timeout_s: float) -> bool:
        """The resync loop's turn after a decision: no switch is connected, so it sends nothing and the
        decision's rules are in force at once (the shell's wait: tests/unit/controller/shell/test_in_force.py)."""
        steps = self.core.sync()
        assert not any(step.changes for step in steps)
        self.core.sync_sent(self.core.syncs_started)
        marks = self.core.sent_since(sync_round, resync_owed=False)
        return marks is not None and self.core.confirmed_upto(marks)


def call(app: Any, method: str, path: str, body: Any = None, token: str | None = "t",
         client: str = "10.0.0.1") -> tuple[int, Any]:
    """One request: (status, the JSON answer). ``body`` bytes as they are, else JSON; ``token`` None: none sent."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    req = Request.blank(path, method=method, body=data, headers=headers, remote_addr=client)
    res = req.get_response(RestController(app))
    return res.status_code, json.loads(res.body)


def ring_pairs(*rings: list[str]) -> set[HostPair]:
    """The host pairs of rings whose member i sends to i+1."""
    return {HostPair(r[i], r[(i + 1) % len(r)]) for r in rings for i in range(len(r))}
