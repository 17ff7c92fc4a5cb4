"""A TE decision taken at once, for tests and benchmarks: requested and driven through the core's decision loop as
the app's decision loop drives it (a core without an optimiser worker decides in the call)."""

from controller.decide import te


def te_step(core, wait: bool = False) -> te.TEResult:
    """One decision, requested and taken through the decision loop. With a worker, ``wait`` blocks until it ended
    (the worker's deadline at most, per decision ahead of it); otherwise the result is that of a decision that
    ended meanwhile, if any."""
    core.request_decision()
    result = core.decision_tick()
    runner = core.runner
    for _ in range(4):  # warm-up, the decision in flight, ours
        if not wait or runner is None or not core.decisions.busy:
            break
        waited = runner.wait(runner.deadline_s) if runner.busy else None
        if waited is None and not runner.busy:
            runner.wait_ready(runner.deadline_s)
        result = core.decision_tick(waited) or result
    return result or te.TEResult(False, elephants=len(core.monitor.elephants()),
                                 reason="deciding in the optimiser worker")
