"""The sweep runner: task order kept whatever the workers, results stored and reused, progress lines."""

import io
import os

import pytest

from mlroute.sim import sweep
from mlroute.sim.sweep import ResultStore, Task, run_tasks


def square_after(arg):
    """A task function (module level: worker processes import it): ``arg["x"]`` squared, and who ran it."""
    import time

    time.sleep(arg.get("sleep", 0.0))
    return {"y": arg["x"] ** 2, "pid": os.getpid(), "task_s": 0.5}


def _tasks(n, **extra):
    # the cheap tasks first in the list but the costly ones first to start: the order of results must not follow
    return [Task(square_after, {"x": i, **extra}, f"x={i}", cost=float(i)) for i in range(n)]


def test_processes_give_results_in_task_order(tmp_path):
    out, stats = run_tasks(_tasks(6, sleep=0.05), workers=2, log=None)
    assert [r["y"] for r in out] == [i * i for i in range(6)]
    assert stats.executor == "processes" and stats.workers == 2 and stats.computed == 6
    assert len({r["pid"] for r in out}) == 2 and os.getpid() not in {r["pid"] for r in out}
    assert stats.task_s == pytest.approx(3.0)


def test_one_worker_runs_in_this_process():
    out, stats = run_tasks(_tasks(3), workers=1, log=None)
    assert {r["pid"] for r in out} == {os.getpid()} and stats.executor == "serial"


def test_store_reuses_finished_tasks_and_fresh_recomputes(tmp_path):
    store = ResultStore(tmp_path / "runs")
    first, _ = run_tasks(_tasks(4)[:2], store=store, workers=1, log=None)
    log = io.StringIO()
    out, stats = run_tasks(_tasks(4), store=store, workers=1, log=log, label="grid")
    assert [r["y"] for r in out] == [0, 1, 4, 9] and out[:2] == first
    assert (stats.reused, stats.computed) == (2, 2)
    assert "grid: 2 of 4 runs already done" in log.getvalue()
    lines = [ln for ln in log.getvalue().splitlines() if ln.startswith("[")]
    assert lines[0].startswith("[3/4] x=3 (") and "ETA" in lines[0]  # costliest first; counted after the reused
    assert len(list((tmp_path / "runs").glob("*.json"))) == 4
    _, stats = run_tasks(_tasks(4), store=store, workers=1, log=None, fresh=True)
    assert (stats.reused, stats.computed) == (0, 4)


def test_key_follows_argument_function_and_code(monkeypatch):
    a, b = Task(square_after, {"x": 1}, "a"), Task(square_after, {"x": 2}, "a")
    assert a.key() == Task(square_after, {"x": 1}, "other label", cost=9).key() != b.key()
    assert Task(_tasks, {"x": 1}, "a").key() != a.key()
    before = a.key()
    monkeypatch.setattr(sweep, "_CODE_VERSION", "another version")
    assert a.key() != before


def test_code_version_digests_the_package_sources():
    v = sweep.code_version()
    assert len(v) == 24 and v == sweep.code_version()


def test_torn_store_file_is_recomputed(tmp_path):
    store = ResultStore(tmp_path)
    t = _tasks(1)[0]
    (tmp_path / f"{t.key()}.json").write_text('{"label": "x=0", "res')  # a run killed mid-write (not atomic)
    out, stats = run_tasks([t], store=store, workers=1, log=None)
    assert out[0]["y"] == 0 and stats.computed == 1
    assert store.get(t.key())["result"]["y"] == 0


def test_clock():
    assert sweep._clock(75) == "1m15s" and sweep._clock(3700) == "1h01m" and sweep._clock(float("nan")) == "?"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_terminal_gets_a_bar_with_runs_and_eta_and_the_run_lines():
    term = _Terminal()
    out, _ = run_tasks(_tasks(3), workers=1, log=term, label="grid")
    text = term.getvalue()
    assert [r["y"] for r in out] == [0, 1, 4]
    assert "grid:" in text and "3/3 runs" in text and "100%" in text and "<" in text  # tqdm's elapsed<remaining
    assert "x=2\n" in text and "x=0\n" in text  # every finished run's line, above the bar
