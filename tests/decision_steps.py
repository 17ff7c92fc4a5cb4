"""TE decisions taken at once, for tests and benchmarks: through a core's decision loop as the app's decision loop
drives it (a core without an optimiser worker decides in the call), or by a TrafficEngineer alone."""

from collections.abc import Iterable, Mapping

from controller.decide import te
from controller.decide.optimiser_runner import DONE, Outcome
from controller.desired.te_rules import RouteKey
from controller.state.jobs import HostPair
from mlroute.routing.fabric import Fabric


def te_step(core, wait: bool = False) -> te.TEResult:
    """One decision, requested and taken through the decision loop. With a worker, ``wait`` blocks until it ended
    (the worker's deadline at most, per decision ahead of it); otherwise the result is that of a decision that
    ended meanwhile, if any."""
    core.request_decision()
    mine = core.decisions.queued  # ours (a decision it leaves queued, as a placed arrival's search, is not waited for)
    result = core.decision_tick()
    runner = core.runner
    for _ in range(4):  # warm-up, the decision in flight, ours
        if not wait or runner is None or not core.decisions.busy or mine.done.is_set():
            break
        waited = runner.wait(runner.deadline_s) if runner.busy else None
        if waited is None and not runner.busy:
            runner.wait_ready(runner.deadline_s)
        result = core.decision_tick(waited) or result
    return result or te.TEResult(False, elephants=len(core.monitor.elephants()),
                                 reason="deciding in the optimiser worker")


def engineer_step(engineer: te.TrafficEngineer, fabric: Fabric | None,
                  elephants: Iterable[tuple[RouteKey, float | None]], jobs: Mapping[str, str] | None = None,
                  weights: Mapping[str, float] | None = None, estimate: bool = False) -> te.TEResult:
    """One decision over ``elephants`` ((key, demand fraction or None) pairs), decided and taken over by
    ``engineer`` in the caller's thread (what the core's worker does, then its decision loop)."""
    decision = te.decide(engineer.input(fabric, elephants, jobs, weights, estimate), engineer.clock)
    engineer.take(decision)
    return decision.result


def apply_outcome(engineer: te.TrafficEngineer, outcome: Outcome) -> bool:
    """Take a worker's DONE decision over into ``engineer`` (the decision loop's step); True when applied."""
    if outcome.status != DONE or outcome.decision is None:
        return False
    engineer.take(outcome.decision)
    return True


def paths_in_force(fabric: Fabric, flows, pinned, fallback) -> tuple[list, list[bool]]:
    """The plain definition ``te.in_force`` computes on a resolved problem: each flow's pinned path where it is
    still valid on ``fabric`` (else its host pair's, else ``fallback``'s); (paths, valid flags)."""
    pins = [pinned[f.key] if f.key in pinned else pinned.get(HostPair(f.src, f.dst)) for f in flows]
    valid = [p is not None and fabric.is_valid_path(f, p) for f, p in zip(flows, pins)]
    return [p if ok else e for p, ok, e in zip(pins, valid, fallback)], valid


class SlowRunner:
    """An optimiser runner in this process whose decisions end at the third poll; it records its callers."""

    deadline_s = 4.0

    def __init__(self):
        self.task, self.polls, self.submitted = None, 0, 0

    @property
    def busy(self):
        return self.task is not None

    @property
    def ready(self):
        return self.task is None

    def submit(self, task, generation=None):
        assert self.task is None, "a second decision submitted while one is in flight"
        self.task, self.polls, self.submitted = (task, generation), 0, self.submitted + 1
        return True

    def poll(self):
        if self.task is None:
            return None
        self.polls += 1
        if self.polls < 3:
            return None
        task, generation = self.task
        self.task = None
        return Outcome(DONE, generation, te.decide(task))
