"""controller/state/job_leases.py on a fake clock: a lease runs out lease_s after its grant or last renew, never
for a job declared without one; entries are never changed in place; and controller/web/job_edits.py: per-job
edits keep the other jobs, refuse what a job list may not hold, and change nothing when refused."""

import pytest

from controller import config
from controller.state.job_leases import JobLeases, unleased
from controller.web import job_edits
from tests.clock import FakeClock

A = {"name": "a", "hosts": ["10.0.0.1", "10.0.0.5"], "rings": [["10.0.0.1", "10.0.0.5"]]}
B = {"name": "b", "hosts": ["10.0.0.2", "10.0.0.6"]}


def test_a_lease_runs_out_lease_s_after_its_grant_and_a_renew_restarts_it():
    clock = FakeClock(100.0)
    leases = JobLeases(clock)
    job = leases.granted(A, 30)
    assert job["lease_s"] == 30.0 and leases.remaining_s(job) == 30.0
    clock.advance(29.9)
    assert not leases.ran_out(job) and leases.expired([job]) == []
    job = leases.renewed(job)
    clock.advance(29.9)
    assert not leases.ran_out(job) and leases.remaining_s(job) == pytest.approx(0.1)
    clock.advance(0.1)
    assert leases.ran_out(job) and leases.expired([job, B]) == ["a"] and leases.live([job, B]) == [B]
    assert leases.remaining_s(job) == 0.0


def test_a_job_without_a_lease_never_expires_and_a_renew_leaves_it_as_it_is():
    clock = FakeClock()
    leases = JobLeases(clock)
    job = leases.granted(A, None)
    clock.advance(1e9)
    assert job == A and not leases.ran_out(job) and leases.remaining_s(job) is None
    assert leases.renewed(job) == A and leases.shown(job) == A


def test_a_grant_without_a_lease_drops_an_earlier_one_and_nothing_is_changed_in_place():
    leases = JobLeases(FakeClock(5.0))
    leased = leases.granted(A, 10)
    assert A == {"name": "a", "hosts": ["10.0.0.1", "10.0.0.5"], "rings": [["10.0.0.1", "10.0.0.5"]]}
    renewed = leases.renewed(leased)
    assert renewed is not leased and leased["expires_at"] == 15.0
    assert leases.granted(leased, None) == A
    assert unleased([leased, B]) == [A, B]


def test_shown_gives_the_remaining_seconds_not_the_clocks_own_expiry():
    clock = FakeClock(1000.0)
    leases = JobLeases(clock)
    job = leases.granted(B, 60)
    clock.advance(12.5)
    assert leases.shown(job) == dict(B, lease_s=60.0, expires_in_s=47.5)


def test_put_replaces_the_job_of_its_name_in_place_and_keeps_the_others():
    leases = JobLeases(FakeClock())
    jobs = job_edits.put([], A, None, leases)
    jobs = job_edits.put(jobs, B, 20, leases)
    assert [j["name"] for j in jobs] == ["a", "b"] and jobs[1]["lease_s"] == 20.0
    changed = dict(A, hosts=["10.0.0.3", "10.0.0.7"])
    again = job_edits.put(jobs, changed, 5, leases)
    assert [j["name"] for j in again] == ["a", "b"] and again[0]["hosts"] == ["10.0.0.3", "10.0.0.7"]
    assert again[1] == jobs[1] and jobs[0] == A  # the list it was given is untouched
    # a whole-list declaration may have repeated a name: the PUT leaves one job of that name
    assert [j["name"] for j in job_edits.put([A, B, A], changed, None, leases)] == ["a", "b"]


def test_delete_and_renew_of_an_unknown_job_are_404():
    leases = JobLeases(FakeClock())
    for edit in (lambda: job_edits.delete([A], "b"), lambda: job_edits.renew([A], "b", leases)):
        with pytest.raises(job_edits.RefusedError) as refused:
            edit()
        assert refused.value.status == 404 and "'b'" in refused.value.message
    assert job_edits.delete([A, B], "a") == [B]


def test_a_renew_after_the_lease_ran_out_is_404_so_the_job_is_declared_again():
    clock = FakeClock()
    leases = JobLeases(clock)
    jobs = job_edits.put([B], A, 10, leases)
    clock.advance(5)
    jobs = job_edits.renew(jobs, "a", leases)
    assert leases.remaining_s(jobs[1]) == 10.0 and jobs[0] == B
    clock.advance(10)
    with pytest.raises(job_edits.RefusedError, match="ran out") as refused:
        job_edits.renew(jobs, "a", leases)
    assert refused.value.status == 404


def test_put_past_the_job_list_bounds_is_409_and_changes_nothing():
    leases = JobLeases(FakeClock())
    full = [{"name": f"j{i}", "hosts": ["10.0.0.1"]} for i in range(config.MAX_JOBS)]
    with pytest.raises(job_edits.RefusedError, match=f"at most {config.MAX_JOBS} jobs") as refused:
        job_edits.put(full, A, None, leases)
    assert refused.value.status == 409 and len(full) == config.MAX_JOBS
    assert len(job_edits.put(full, dict(A, name="j0"), None, leases)) == config.MAX_JOBS  # a replace fits
    hosts = [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}" for i in range(config.MAX_JOB_HOSTS)]
    big = {"name": "big", "hosts": hosts[:-1]}
    assert len(job_edits.put([], big, None, leases)) == 1
    with pytest.raises(job_edits.RefusedError, match=f"at most {config.MAX_JOB_HOSTS} hosts"):
        job_edits.put([big], A, None, leases)


def test_the_host_bound_counts_a_rings_members_once():
    """A validated job's hosts include its ring members: counted once, as its declaration listed them."""
    ring = [f"10.0.{i // 256}.{i % 256}" for i in range(config.MAX_JOB_HOSTS)]
    (job,) = config.validate_jobs([{"name": "r", "rings": [ring]}], "request body")
    assert job["hosts"] == ring
    config.check_job_bounds([job], "jobs")
    with pytest.raises(config.ConfigError, match="hosts over all jobs"):
        config.check_job_bounds([job, B], "jobs")
