"""Declared jobs survive a restart of a single controller (issue 39): jobs declared over REST (whole-list POST,
per-job PUT, leased or not), then a new core reading the same state file, as a restarted or crashed process
would: the same jobs, listed the same, leases less the time down, routed at the first decision. rest.py's
handlers without a server (webob requests into the RestController), fake wall and monotonic clocks."""

import logging
import threading

import pytest

from controller import config
from controller.southbound import framework as southbound
from controller.state import job_state_file
from controller.state.job_state_file import JobStateFile
from tests import topologies
from tests.clock import FakeClock
from tests.unit.controller.rest_bench import RINGS, RestApp, call, ring_pairs


class App(RestApp):
    """The app, its core keeping its jobs in ``path``; ``wall`` and ``mono`` are the process's clocks (a restart:
    a new App on the same file, the wall clock moved on, a monotonic clock of its own)."""

    def __init__(self, path, wall, mono=None, text="rest:\n  token: t\n"):
        super().__init__(text, mono, posts=1000,
                         job_file=lambda cfg, clock: JobStateFile(path, cfg["jobs"], clock, wall, config.job_rules()))


def listed(app):
    status, body = call(app, "GET", "/mlroute/jobs")
    assert status == 200
    return body["jobs"]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "mlroute.jobs.json"


def test_jobs_declared_by_post_and_put_are_listed_the_same_after_a_restart_leases_less_the_time_down(path):
    wall = FakeClock(1.7e9)
    app = App(path, wall)
    assert call(app, "POST", "/mlroute/jobs", {"jobs": [{"name": "posted", "rings": [RINGS[0]]}]})[0] == 200
    assert call(app, "PUT", "/mlroute/jobs/leased", {"rings": [RINGS[1]], "lease_s": 30})[0] == 200
    assert call(app, "PUT", "/mlroute/jobs/kept", {"rings": [RINGS[2]], "weight": 2})[0] == 200
    assert call(app, "PUT", "/mlroute/jobs/short", {"hosts": ["10.0.0.4"], "lease_s": 60})[0] == 200
    for clock in (app.clock, wall):
        clock.advance(20)
    assert call(app, "POST", "/mlroute/jobs/short/renew")[0] == 200  # a renew is saved too: 60 s from here
    for clock in (app.clock, wall):
        clock.advance(5)
    before = listed(app)
    assert [(j["name"], j.get("expires_in_s")) for j in before] == \
        [("posted", None), ("leased", 5.0), ("kept", None), ("short", 55.0)]
    wall.advance(3)  # killed, down 3 s, started again: a new process, its own monotonic clock
    again = App(path, wall, mono=FakeClock(7.0))
    after = listed(again)
    assert after == [dict(j, expires_in_s=j["expires_in_s"] - 3) if "expires_in_s" in j else j for j in before]
    assert again.core.jobs == [{**{k: v for k, v in j.items() if k != "expires_in_s"}, "expires_at": 7.0 +
                                j["expires_in_s"]} if "lease_s" in j else j for j in after]  # on its own clock
    status, body = call(again, "POST", "/mlroute/recompute")  # the first decision routes them
    assert status == 200 and body["applied"]
    assert set(again.core.te.pinned) == ring_pairs(*RINGS[:3])
    again.clock.advance(2)
    assert again.core.expire_jobs() == ["leased"]  # its lease kept counting: 5 s left at the kill, 3 s down


def test_a_lease_that_ran_out_while_the_controller_was_down_ends_at_start(path, caplog):
    wall = FakeClock(1.7e9)
    app = App(path, wall)
    call(app, "PUT", "/mlroute/jobs/gone", {"rings": [RINGS[0]], "lease_s": 10})
    call(app, "PUT", "/mlroute/jobs/alive", {"rings": [RINGS[1]], "lease_s": 30})
    wall.advance(10)
    with caplog.at_level(logging.INFO, logger="mlroute"):
        again = App(path, wall, mono=FakeClock(0.0))
    assert [j["name"] for j in listed(again)] == ["alive"] and listed(again)[0]["expires_in_s"] == 20.0
    assert any("ran out while the controller was down: gone" in r.getMessage() for r in caplog.records)
    call(again, "POST", "/mlroute/recompute")
    assert set(again.core.te.pinned) == ring_pairs(RINGS[1])  # never routed for the ended one
    assert call(again, "POST", "/mlroute/jobs/gone/renew")[0] == 404  # its hook declares it again


def test_a_delete_and_an_expired_lease_are_remembered_too(path):
    wall = FakeClock(1.7e9)
    app = App(path, wall)
    for r, lease in ((0, None), (1, 10), (2, None)):
        call(app, "PUT", f"/mlroute/jobs/ring{r}", {"rings": [RINGS[r]], "lease_s": lease})
    call(app, "DELETE", "/mlroute/jobs/ring0")
    app.clock.advance(10)
    assert app.core.expire_jobs() == ["ring1"]
    assert [j["name"] for j in listed(App(path, wall, mono=FakeClock(0.0)))] == ["ring2"]


@pytest.mark.parametrize("data, reason", [
    (b"", "empty"),
    (None, "cut short or not JSON"),  # a saved file, truncated
    (b'{"format": "someone-else", "jobs": []}', "not an mlroute job state"),
    (b'{"format": "mlroute-declared-jobs", "version": 9, "jobs": []}', "version 9"),
])
def test_an_empty_truncated_or_foreign_state_file_gives_one_clear_error_and_no_jobs(path, caplog, data, reason):
    wall = FakeClock(1.7e9)
    app = App(path, wall)
    for r in range(3):
        call(app, "PUT", f"/mlroute/jobs/ring{r}", {"rings": [RINGS[r]]})
    path.write_bytes(path.read_bytes()[:-40] if data is None else data)
    with caplog.at_level(logging.INFO, logger="mlroute"):
        again = App(path, wall)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(path) in errors[0] and reason in errors[0]
    assert listed(again) == [] and again.core.jobs == []  # nothing half-read
    call(again, "PUT", "/mlroute/jobs/new", {"rings": [RINGS[3]]})  # the state goes on from the new start
    assert [j["name"] for j in listed(App(path, wall))] == ["new"]


def test_configured_jobs_are_the_base_a_declared_job_of_their_name_wins_a_deleted_one_comes_back(tmp_path):
    path, wall = tmp_path / "jobs.json", FakeClock(1.7e9)
    yaml = (f"rest:\n  token: t\njobs:\n  - name: a\n    rings: [[{', '.join(RINGS[0])}]]\n"
            f"  - name: b\n    rings: [[{', '.join(RINGS[1])}]]\n")
    app = App(path, wall, text=yaml)
    call(app, "PUT", "/mlroute/jobs/a", {"rings": [RINGS[2]], "lease_s": 60})  # replaces the configured one
    call(app, "DELETE", "/mlroute/jobs/b")
    call(app, "PUT", "/mlroute/jobs/x", {"rings": [RINGS[3]]})
    again = App(path, wall, text=yaml)
    assert [(j["name"], j["rings"]) for j in listed(again)] == [("a", [RINGS[2]]), ("b", [RINGS[1]]),
                                                                ("x", [RINGS[3]])]
    edited = yaml.replace(", ".join(RINGS[1]), ", ".join(reversed(RINGS[1])))  # b edited in the file: it wins
    assert [j["rings"] for j in listed(App(path, wall, text=edited))][1] == [RINGS[1][::-1]]


def test_concurrent_puts_while_the_file_is_written_lose_nothing(path, monkeypatch):
    """Threads PUT, renew and delete jobs at once through the REST app, as os-ken's native REST threads do
    (each call holds the core's turn except while it reads its body or waits for its decision), with every
    fsync slowed down: the file read back holds exactly the list the controller answers with."""
    monkeypatch.setattr(southbound, "NATIVE", True)
    monkeypatch.setattr(southbound, "TURN", southbound.Turn(True))
    fsync = job_state_file.os.fsync

    def slow_fsync(fd):
        threading.Event().wait(0.002)
        fsync(fd)

    monkeypatch.setattr(job_state_file.os, "fsync", slow_fsync)
    wall = FakeClock(1.7e9)
    app = App(path, wall)
    failures = []

    def client(t):
        for i in range(4):
            name = f"t{t}-{i}"
            lease = 30 if i % 2 else None
            answers = [call(app, "PUT", f"/mlroute/jobs/{name}", {"hosts": [f"10.0.{t}.{i + 1}"], "lease_s": lease},
                            client=f"10.1.0.{t}")[0]]
            if lease:
                answers.append(call(app, "POST", f"/mlroute/jobs/{name}/renew", client=f"10.1.0.{t}")[0])
            if i == 3:
                answers.append(call(app, "DELETE", f"/mlroute/jobs/t{t}-0", client=f"10.1.0.{t}")[0])
            failures.extend(a for a in answers if a != 200)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    names = sorted(f"t{t}-{i}" for t in range(6) for i in (1, 2, 3))
    assert sorted(j["name"] for j in listed(app)) == names
    assert listed(App(path, wall)) == listed(app)


def test_the_app_keeps_its_jobs_beside_its_configuration_and_a_new_process_lists_them(tmp_path, monkeypatch):
    """controller/app.py as ryu-manager loads it: the state file is found beside MLROUTE_CONFIG, and an app made
    again (a restarted process) lists the jobs the first one listed."""
    from tests.lab import Lab, stop_apps

    cfg = tmp_path / "ctl.yaml"
    cfg.write_text("rest:\n  token: t\n  max_decision_wait_s: 0.1\nte:\n  mode: ecmp\n")  # (no decision loop here)
    monkeypatch.setenv("MLROUTE_CONFIG", str(cfg))
    try:
        first = Lab(topologies.fat_tree(4)).app
        assert call(first, "POST", "/mlroute/jobs", {"jobs": [{"name": "posted", "rings": [RINGS[0]]}]})[0] == 200
        assert call(first, "PUT", "/mlroute/jobs/put", {"rings": [RINGS[1]], "lease_s": 3600})[0] == 200
        before = [{k: v for k, v in j.items() if k != "expires_in_s"} for j in listed(first)]
        assert (tmp_path / "ctl.jobs.json").is_file()
        again = Lab(topologies.fat_tree(4)).app
        assert [{k: v for k, v in j.items() if k != "expires_in_s"} for j in listed(again)] == before
        assert [j["name"] for j in before] == ["posted", "put"]
    finally:
        stop_apps()
