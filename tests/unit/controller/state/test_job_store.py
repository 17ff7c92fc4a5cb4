"""The declared-job state of a single controller (issue 39): the document (controller/state/job_store.py: leases
as wall-clock expiries, all or nothing, the configuration's jobs combined with the saved ones) and its file
(controller/state/job_state_file.py: where it lives, the atomic replace, an unusable file reported and moved
aside, a failed write logged once). Fake wall and monotonic clocks: nothing here reads the real time."""

import json
import logging
import os
import sys
import threading

import pytest

from controller import config
from controller.state import job_state_file, job_store
from controller.state.job_state_file import JobStateFile
from tests.clock import FakeClock

RULES = config.job_rules()  # the configuration's rules for a job list (handed to the state wing)

RING = ["10.0.0.4", "10.0.0.3", "10.0.0.2", "10.0.0.1"]
CONFIGURED = config.validate_jobs([{"name": "cfg", "hosts": ["10.0.0.9", "10.0.0.10"]}], "config")


def _jobs(*entries):
    return config.validate_jobs(list(entries), "request body")


def _leased(job, lease_s, expires_at):
    return {**job, "lease_s": float(lease_s), "expires_at": expires_at}


def test_a_round_trip_keeps_every_job_and_what_is_left_of_each_lease_less_the_time_down():
    mono, wall = FakeClock(500.0), FakeClock(1.7e9)
    ring, fixed = _jobs({"name": "ring", "rings": [RING], "weight": 2}, {"name": "fixed", "hosts": ["10.0.0.5"]})
    data = job_store.dump([_leased(ring, 30, 520.0), fixed], (), mono, wall)  # 20 s of its 30 left
    saved = json.loads(data)
    assert saved["format"] == job_store.FORMAT and saved["version"] == job_store.VERSION
    assert saved["jobs"][0]["expires_at"] == 1.7e9 + 20  # absolute wall-clock time, not the monotonic one
    wall.advance(7)  # down 7 s; the new process's monotonic clock has nothing to do with the old one's
    later = FakeClock(3.0)
    restored = job_store.parse(data, later, wall, RULES)
    assert restored.jobs == [_leased(ring, 30, 3.0 + 13), fixed] and restored.ended == []


def test_a_lease_that_ran_out_while_down_is_ended_not_restored():
    mono, wall = FakeClock(0.0), FakeClock(1000.0)
    a, b = _jobs({"name": "a", "hosts": ["10.0.0.1"]}, {"name": "b", "hosts": ["10.0.0.2"]})
    data = job_store.dump([_leased(a, 10, 10.0), _leased(b, 10, 10.0)], (), mono, wall)
    wall.advance(9.999)
    assert [j["name"] for j in job_store.parse(data, mono, wall, RULES).jobs] == ["a", "b"]
    wall.advance(0.001)  # exactly at the expiry: ran out (as JobLeases.ran_out judges it)
    assert job_store.parse(data, mono, wall, RULES) == job_store.Restored([], ["a", "b"])


def test_a_wall_clock_stepped_back_while_down_does_not_prolong_a_lease():
    mono, wall = FakeClock(0.0), FakeClock(1000.0)
    (a,) = _jobs({"name": "a", "hosts": ["10.0.0.1"]})
    data = job_store.dump([_leased(a, 10, 4.0)], (), mono, wall)
    wall.advance(-3600)
    assert job_store.parse(data, mono, wall, RULES).jobs[0]["expires_at"] == 10.0  # at most lease_s from now


def test_only_declared_jobs_are_written_a_configured_one_untouched_is_not():
    mono, wall = FakeClock(0.0), FakeClock(0.0)
    (replaced,) = _jobs({"name": "cfg", "hosts": ["10.0.0.1"]})
    assert json.loads(job_store.dump(CONFIGURED, CONFIGURED, mono, wall))["jobs"] == []
    assert json.loads(job_store.dump([replaced], CONFIGURED, mono, wall))["jobs"] == [replaced]


def test_the_configuration_is_the_base_and_a_saved_job_of_its_name_replaces_it():
    cfg = config.validate_jobs([{"name": "a", "hosts": ["10.0.0.1"]}, {"name": "b", "hosts": ["10.0.0.2"]}], "c")
    saved = _jobs({"name": "x", "hosts": ["10.0.0.7"]}, {"name": "b", "rings": [RING]})
    assert job_store.combine(cfg, saved, RULES) == [cfg[0], saved[1], saved[0]]
    assert job_store.combine(cfg, [], RULES) == cfg and job_store.combine([], saved, RULES) == saved
    many = [{"name": f"j{i}", "hosts": ["10.0.0.1"]} for i in range(config.MAX_JOBS)]
    with pytest.raises(config.ConfigError, match="at most 1024 jobs"):
        job_store.combine(cfg, many, RULES)


def _doc(jobs, **top):
    return json.dumps({"format": job_store.FORMAT, "version": 1, "saved_at": 0, "jobs": jobs, **top}).encode()


GOOD = {"name": "a", "hosts": ["10.0.0.1"], "lease_s": 30.0, "expires_at": 100.0}


@pytest.mark.parametrize("data, reason", [
    (b"", "empty"),
    (b"  \n", "empty"),
    (_doc([GOOD])[:-7], "cut short or not JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100000, "nested too deeply"),
    (b'{"jobs": []}', "not an mlroute job state"),
    (b'["mlroute"]', "not an mlroute job state"),
    (_doc([], version=2), "version 2, this controller reads version 1"),
    (_doc({"a": 1}), '"jobs" must be a list'),
    (_doc([GOOD, "a"]), "jobs[1]: must be a mapping"),
    (_doc([GOOD, {**GOOD, "name": "b", "hosts": ["10.0.0.999"]}]), "jobs[1].hosts[0]: must be an IPv4 or IPv6 address"),
    (_doc([GOOD, {**GOOD, "name": "b", "lease_s": 0.5}]), "jobs[1].lease_s: must be a number in [1, 3600]"),
    (_doc([{**GOOD, "expires_at": None}]), "jobs[0].expires_at: must be a wall-clock time"),
    (_doc([{**GOOD, "expires_at": True}]), "jobs[0].expires_at: must be a wall-clock time"),
    (_doc([{**GOOD, "colour": "red"}]), "jobs[0].colour: unknown key"),
])
def test_an_unusable_document_is_refused_whole_with_its_reason(data, reason):
    with pytest.raises(job_store.StateError) as refused:
        job_store.parse(data, FakeClock(0.0), FakeClock(50.0), RULES)
    assert reason in str(refused.value)


def test_where_the_state_lives(tmp_path):
    assert job_state_file.path_for(None, "/etc/mlroute/ctl.yaml") == \
        job_state_file.Path("/etc/mlroute/ctl.jobs.json")  # beside the configuration, named after it
    assert job_state_file.path_for("state/jobs.json", "conf/ctl.yaml", cwd=tmp_path) == \
        tmp_path / "conf" / "state" / "jobs.json"  # relative: to the configuration's directory
    assert job_state_file.path_for("/var/lib/mlroute/j.json", "conf/ctl.yaml", cwd=tmp_path) == \
        job_state_file.Path("/var/lib/mlroute/j.json")
    assert job_state_file.path_for(None, None, cwd=tmp_path) == tmp_path / "mlroute.jobs.json"  # no configuration
    assert job_state_file.path_for("j.json", None, cwd=tmp_path) == tmp_path / "j.json"


@pytest.mark.parametrize("text, problem", [
    ("state:\n  file: ''\n", "state.file: must be a file name"),
    ("state:\n  file: 3\n", "state.file: must be str"),
    ("state:\n  dir: x\n", "state.dir: unknown key"),
])
def test_the_state_file_setting_is_checked_at_its_line(text, problem):
    with pytest.raises(config.ConfigError, match=r"ctl.yaml:2: " + problem.replace(".", r"\.")):
        config.parse(text, "ctl.yaml")
    assert config.parse("state:\n  file: jobs.json\n")["state"] == {"file": "jobs.json"}


def _store(path, configured=()):
    return JobStateFile(path, configured, FakeClock(10.0), FakeClock(1e9), RULES)


def test_a_save_replaces_the_whole_file_and_restore_reads_it_back(tmp_path):
    path = tmp_path / "jobs.json"
    ring, fixed = _jobs({"name": "ring", "rings": [RING]}, {"name": "fixed", "hosts": ["10.0.0.5"]})
    store = _store(path, CONFIGURED)
    assert store.restore() == CONFIGURED  # no file yet: the configuration's
    assert store.save([*CONFIGURED, ring]) and store.save([*CONFIGURED, ring, fixed])
    assert sorted(os.listdir(tmp_path)) == ["jobs.json"]  # no temporary file left behind
    assert _store(path, CONFIGURED).restore() == [*CONFIGURED, ring, fixed]


def test_a_failed_write_leaves_the_previous_file_whole_and_is_logged_once(tmp_path, monkeypatch, caplog):
    path = tmp_path / "jobs.json"
    ring, fixed = _jobs({"name": "ring", "rings": [RING]}, {"name": "fixed", "hosts": ["10.0.0.5"]})
    store = _store(path)
    store.save([ring])
    before = path.read_bytes()

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(job_state_file.os, "fsync", full)
    with caplog.at_level(logging.INFO, logger="mlroute"):
        assert not store.save([ring, fixed]) and not store.save([fixed])
        assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["jobs.json"]
        monkeypatch.undo()
        assert store.save([fixed])
    said = [r.getMessage() for r in caplog.records]
    assert sum("not saved" in m and str(path) in m and "No space left" in m for m in said) == 1
    assert sum("saved to" in m and "again" in m for m in said) == 1
    assert _store(path).restore() == [fixed]


def test_an_unusable_file_is_reported_once_moved_aside_and_the_start_has_the_configured_jobs_only(tmp_path,
                                                                                                 caplog):
    path = tmp_path / "jobs.json"
    path.write_bytes(_doc([GOOD])[:-3])
    with caplog.at_level(logging.INFO, logger="mlroute"):
        assert _store(path, CONFIGURED).restore() == CONFIGURED
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(path) in errors[0] and "cut short or not JSON" in errors[0]
    assert not path.exists() and (tmp_path / "jobs.json.damaged").read_bytes() == _doc([GOOD])[:-3]


def test_an_unreadable_state_path_is_reported_and_the_start_goes_on(tmp_path, caplog):
    (tmp_path / "jobs.json").mkdir()
    with caplog.at_level(logging.ERROR, logger="mlroute"):
        assert _store(tmp_path / "jobs.json").restore() == []
    assert len(caplog.records) == 1 and "cannot read" in caplog.records[0].getMessage()


def test_writers_racing_leave_the_file_holding_the_list_last_in_force(tmp_path):
    """Threads replacing the job list at once (no turn, nothing else ordering them): whatever the order, the
    file ends with exactly the list the core holds, because the change and its write are one step."""
    from controller.core import ControllerCore

    path = tmp_path / "jobs.json"
    core = ControllerCore(config.parse(""), FakeClock(0.0), job_file=_store(path))
    lists = [_jobs(*({"name": f"t{t}-{i}", "hosts": [f"10.0.{t}.{i + 1}"]} for i in range(n)))
             for t in range(6) for n in (1, 3)]
    start = threading.Barrier(len(lists))

    def replace(jobs):
        start.wait()
        for _ in range(20):
            core.jobs = jobs

    threads = [threading.Thread(target=replace, args=(jobs,)) for jobs in lists]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes: every interleaving gets its chance
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert core.jobs in lists and _store(path).restore() == core.jobs
