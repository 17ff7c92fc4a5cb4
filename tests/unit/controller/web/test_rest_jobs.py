"""Per-job REST (issue 31): PUT / DELETE / renew / GET on /mlroute/jobs/{name}, leases on a fake clock. rest.py's
handlers without a server (webob requests into the RestController), over a core that knows a k=4 fat-tree: a job
declared alone is routed at once and keeps the others, a deleted or expired job's pins leave, every bad call is a
JSON 4xx that changes nothing."""

import pytest

from controller import config
from controller.state.jobs import HostPair
from controller.web.rest_limits import ClientRateLimit
from tests.unit.controller.rest_bench import RINGS, RestApp, call, ring_pairs

App = RestApp


def test_a_job_put_alone_is_routed_at_once_and_a_second_one_keeps_the_first():
    app = App()
    status, body = call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]]})
    assert status == 200, body
    assert body["job"] == {"name": "ring0", "hosts": RINGS[0], "rings": [RINGS[0]]}
    assert body["decision"]["applied"] and set(app.core.te.pinned) == ring_pairs(RINGS[0])
    status, body = call(app, "PUT", "/mlroute/jobs/ring1", {"name": "ring1", "rings": [RINGS[1]], "weight": 2})
    assert status == 200 and body["job"]["weight"] == 2.0
    assert [j["name"] for j in call(app, "GET", "/mlroute/jobs")[1]["jobs"]] == ["ring0", "ring1"]
    assert set(app.core.te.pinned) == ring_pairs(RINGS[0], RINGS[1])
    status, body = call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[2]]})  # replaced in place
    assert status == 200 and [j["name"] for j in app.core.jobs] == ["ring0", "ring1"]
    assert set(app.core.te.pinned) == ring_pairs(RINGS[2], RINGS[1])


def test_get_one_job_and_404_for_an_unknown_one():
    app = App()
    call(app, "PUT", "/mlroute/jobs/a.b-c_1", {"hosts": ["10.0.0.1", "10.0.0.2"]})
    assert call(app, "GET", "/mlroute/jobs/a.b-c_1", token=None) == \
        (200, {"job": {"name": "a.b-c_1", "hosts": ["10.0.0.1", "10.0.0.2"]}})
    status, body = call(app, "GET", "/mlroute/jobs/nope", token=None)
    assert status == 404 and "nope" in body["error"]


def test_delete_ends_the_job_its_pins_leave_and_a_second_delete_is_404():
    app = App()
    for r in (0, 1):
        call(app, "PUT", f"/mlroute/jobs/ring{r}", {"rings": [RINGS[r]]})
    status, body = call(app, "DELETE", "/mlroute/jobs/ring0")
    assert status == 200 and body["deleted"] == "ring0" and body["decision"] is not None
    assert [j["name"] for j in app.core.jobs] == ["ring1"] and set(app.core.te.pinned) == ring_pairs(RINGS[1])
    status, body = call(app, "DELETE", "/mlroute/jobs/ring0")
    assert status == 404 and set(body) == {"error"} and [j["name"] for j in app.core.jobs] == ["ring1"]


def test_a_renew_runs_the_lease_again_and_get_shows_what_is_left():
    app = App()
    status, body = call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 30})
    assert status == 200 and body["job"]["lease_s"] == 30.0 and body["job"]["expires_in_s"] == 30.0
    call(app, "PUT", "/mlroute/jobs/fixed", {"hosts": ["10.0.0.2"]})
    app.clock.advance(20)
    assert [j.get("expires_in_s") for j in call(app, "GET", "/mlroute/jobs")[1]["jobs"]] == [10.0, None]
    decisions = app.core.decisions.decisions
    status, body = call(app, "POST", "/mlroute/jobs/ring0/renew")
    assert status == 200 and body["job"]["expires_in_s"] == 30.0 and "expires_at" not in body["job"]
    assert app.core.decisions.decisions == decisions and app.core.decisions.queued is None  # nothing to route again
    app.clock.advance(25)
    assert app.core.expire_jobs() == [] and call(app, "GET", "/mlroute/jobs/ring0")[1]["job"]["expires_in_s"] == 5.0
    status, body = call(app, "POST", "/mlroute/jobs/fixed/renew")  # no lease: nothing to run again
    assert status == 200 and body["job"] == {"name": "fixed", "hosts": ["10.0.0.2"]}


def test_a_renew_of_an_unknown_job_is_a_json_404_so_the_hook_declares_it_again():
    app = App()
    status, body = call(app, "POST", "/mlroute/jobs/ghost/renew")
    assert status == 404 and set(body) == {"error"} and "ghost" in body["error"]


def test_a_lease_that_runs_out_ends_the_job_and_its_pins_leave():
    app = App()
    call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 10})
    call(app, "PUT", "/mlroute/jobs/ring1", {"rings": [RINGS[1]]})  # no lease: never expires
    assert set(app.core.te.pinned) == ring_pairs(RINGS[0], RINGS[1])
    app.clock.advance(9.9)
    assert app.core.expire_jobs() == []
    app.clock.advance(0.1)
    assert app.core.expire_jobs() == ["ring0"] and app.core.decisions.queued is not None
    app.core.sync()  # the resync decides at once (a job event), as after a DELETE
    assert set(app.core.te.pinned) == ring_pairs(RINGS[1])
    assert call(app, "GET", "/mlroute/jobs/ring0")[0] == 404
    assert call(app, "POST", "/mlroute/jobs/ring0/renew")[0] == 404
    app.clock.advance(1e6)
    assert app.core.expire_jobs() == [] and [j["name"] for j in app.core.jobs] == ["ring1"]


def test_a_renew_after_the_lease_ran_out_but_before_the_check_is_404():
    app = App()
    call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 10})
    app.clock.advance(10)
    status, body = call(app, "POST", "/mlroute/jobs/ring0/renew")
    assert status == 404 and "ran out" in body["error"]
    assert app.core.expire_jobs() == ["ring0"]


def test_the_all_jobs_post_still_replaces_every_job_and_its_jobs_have_no_lease():
    app = App()
    call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 10})
    status, body = call(app, "POST", "/mlroute/jobs", {"jobs": [{"name": "ring0", "rings": [RINGS[0]]},
                                                               {"name": "ring1", "rings": [RINGS[1]]}]})
    assert status == 200
    app.clock.advance(1e6)
    assert app.core.expire_jobs() == [] and [j["name"] for j in app.core.jobs] == ["ring0", "ring1"]
    assert all("lease_s" not in j for j in call(app, "GET", "/mlroute/jobs")[1]["jobs"])


@pytest.mark.parametrize("path, body, status, words", [
    ("/mlroute/jobs/j", b'{"rings": [', 400, ("JSON",)),
    ("/mlroute/jobs/j", b"", 400, ("empty",)),
    ("/mlroute/jobs/j", b"[1, 2]", 400, ('"hosts"',)),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "colour": "red"}, 400, ("unknown key 'colour'", "lease_s")),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "traffic": "/etc/passwd"}, 400, ("unknown key 'traffic'",)),
    ("/mlroute/jobs/j", {"name": "k", "hosts": ["10.0.0.1"]}, 400, ("name", "'j'")),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.x"]}, 400, ("job.hosts[0]", "IPv4")),
    ("/mlroute/jobs/j", {"rings": [["10.0.0.1"]]}, 400, ("job.rings[0]", "at least 2")),
    ("/mlroute/jobs/j", {"weight": 2}, 400, ("needs",)),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "weight": 0}, 400, ("weight",)),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "lease_s": 0}, 400, ("lease_s", "[1, 3600]")),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "lease_s": 3601}, 400, ("lease_s",)),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "lease_s": "30"}, 400, ("lease_s",)),
    ("/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "lease_s": True}, 400, ("lease_s",)),
    ("/mlroute/jobs/bad%20name", {"hosts": ["10.0.0.1"]}, 400, ("job name",)),
    ("/mlroute/jobs/-x", {"hosts": ["10.0.0.1"]}, 400, ("job name",)),
    ("/mlroute/jobs/" + "x" * 129, {"hosts": ["10.0.0.1"]}, 400, ("job name", "1-128")),
    ("/mlroute/jobs/j", b'{"hosts": [' + b" " * (1 << 20) + b"]}", 413, ("at most",)),
])
def test_a_bad_put_is_a_json_4xx_and_changes_nothing(path, body, status, words):
    app = App()
    call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 10})
    jobs, pins, decisions = list(app.core.jobs), dict(app.core.te.pinned), app.core.decisions.decisions
    got, answer = call(app, "PUT", path, body)
    assert got == status and set(answer) == {"error"} and len(answer["error"]) < 400, answer
    for word in words:
        assert word in answer["error"]
    assert app.core.jobs == jobs and app.core.te.pinned == pins
    assert app.core.decisions.decisions == decisions and app.core.decisions.queued is None


@pytest.mark.parametrize("method, path", [("DELETE", "/mlroute/jobs/bad%20name"), ("GET", "/mlroute/jobs/_x"),
                                          ("POST", "/mlroute/jobs/bad%20name/renew")])
def test_a_bad_name_in_any_per_job_path_is_400(method, path):
    app = App()
    status, body = call(app, method, path)
    assert status == 400 and "job name" in body["error"]


def test_a_put_past_the_configured_number_of_jobs_is_409_and_a_replace_still_fits():
    app = App()
    app.core.jobs = [{"name": f"j{i}", "hosts": ["10.0.0.1"]} for i in range(config.MAX_JOBS)]
    status, body = call(app, "PUT", "/mlroute/jobs/one-more", {"hosts": ["10.0.0.2"]})
    assert status == 409 and f"at most {config.MAX_JOBS} jobs" in body["error"]
    assert len(app.core.jobs) == config.MAX_JOBS and app.core.decisions.queued is None
    status, _ = call(app, "PUT", "/mlroute/jobs/j7", {"hosts": ["10.0.0.2"]})
    assert status == 200 and len(app.core.jobs) == config.MAX_JOBS


@pytest.mark.parametrize("method, path, body", [("PUT", "/mlroute/jobs/j", {"hosts": ["10.0.0.1"]}),
                                                ("DELETE", "/mlroute/jobs/j", None),
                                                ("POST", "/mlroute/jobs/j/renew", None)])
def test_mutating_per_job_calls_need_the_token_and_share_the_post_rate_limit(method, path, body):
    app = App()
    call(app, "PUT", "/mlroute/jobs/j", {"hosts": ["10.0.0.1"], "lease_s": 60})
    before = list(app.core.jobs)
    status, answer = call(app, method, path, body, token=None)
    assert status == 401 and "token" in answer["error"]
    assert call(app, method, path, body, token="wrong")[0] == 401
    assert app.core.jobs == before
    closed = App("")  # no rest.token: mutating calls are disabled
    status, answer = call(closed, method, path, body)
    assert status == 403 and "rest.token" in answer["error"]
    limited = App()
    limited.post_limit = ClientRateLimit(5, 1, limited.clock)  # one call at once, then 5/s
    assert call(limited, "POST", "/mlroute/recompute")[0] == 200
    status, answer = call(limited, method, path, body)
    assert status == 429 and "at most 5/s" in answer["error"] and not limited.core.jobs


def test_a_put_whose_decision_would_wait_too_long_is_503_and_changes_nothing():
    app = App("rest:\n  token: t\n  max_decision_wait_s: 0.01\n")
    app.core.decisions.duration_s = 5.0  # decisions take 5 s: more than the 0.01 s a caller may wait
    status, body = call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]]})
    assert status == 503 and body["retry_after_s"] == 5 and app.core.jobs == []


# -- ring choice (issue 37): the controller chooses a job's host order ---------------------------------------------

#: k=4 fat-tree hosts 10.0.0.1..16 in pod -> edge -> host order; job j on pods {0, 1} or {2, 3}, two hosts of each,
#: the launcher's order interleaving the pods (A, B, A, B)
def ip(h):
    return f"10.0.0.{h + 1}"


INTERLEAVED = [[ip(h) for h in hosts] for hosts in ([0, 4, 1, 5], [2, 6, 3, 7], [8, 12, 9, 13], [10, 14, 11, 15])]


def failed_core_link_app():
    """The k=4 fat-tree with pod 0's first aggregation switch cut from its first core switch."""
    app = App()
    topo = app.core.topology
    for link in [lk for lk in topo.links.values() if {lk.src, lk.dst} == {2000, 3001}]:
        topo.remove_link(link.src, link.src_port, link.dst, link.dst_port)
    app.core._graph = None
    app.core.sync()
    assert len(app.core.fabric().failed_links) == 0 and app.core.fabric().n_switch_links == 2 * 31
    return app


def gloo_pairs(order):
    """The host pairs gloo's ring sends on with node rank i on ``order[i]``: i -> i-1."""
    return {HostPair(order[i], order[i - 1]) for i in range(len(order))}


def pod(address):
    return (int(address.rsplit(".", 1)[1]) - 1) // 4


def rank_order(hosts):
    """The ring gloo runs over hosts in the launcher's order, as mlroute declares rings (member i sends to i+1)."""
    return hosts[:1] + hosts[:0:-1]


def test_a_chosen_ring_crosses_the_core_twice_is_pinned_in_glooes_direction_and_get_shows_it():
    app = failed_core_link_app()
    for j in (1, 2, 3):  # the other jobs run in rank order
        call(app, "PUT", f"/mlroute/jobs/j{j}", {"rings": [rank_order(INTERLEAVED[j])]})
    status, body = call(app, "PUT", "/mlroute/jobs/j0", {"hosts": INTERLEAVED[0], "choose_ring": True,
                                                         "ranks_per_host": 2})
    assert status == 200, body
    job, choice = body["job"], body["job"]["ring_choice"]
    ranks = job["node_ranks"]
    order = sorted(ranks, key=ranks.get)
    assert sorted(ranks.values()) == [0, 1, 2, 3] and set(order) == set(INTERLEAVED[0])
    assert sum(pod(order[i]) != pod(order[i - 1]) for i in range(4)) == 2  # A, A, B, B up to rotation
    assert choice["helps"] and choice["gain"] > 1 and choice["crossings"]["pod"] == [4, 2, 2]
    assert choice["first_rank"] == {h: 2 * ranks[h] for h in order} and choice["world_size"] == 8
    assert job["hosts"] == INTERLEAVED[0]  # as the launcher gave them; node_ranks says who runs which
    assert ring_pairs(*job["rings"]) == gloo_pairs(order)
    assert {p for p in app.core.te.pinned if p.src_ip in INTERLEAVED[0]} == gloo_pairs(order)
    assert call(app, "GET", "/mlroute/jobs/j0", token=None)[1]["job"] == job


def test_four_interleaved_jobs_chosen_in_turn_all_run_at_the_ideal_rate():
    app = failed_core_link_app()
    for j, hosts in enumerate(INTERLEAVED):
        status, body = call(app, "PUT", f"/mlroute/jobs/j{j}", {"hosts": hosts, "choose_ring": True})
        assert status == 200, body
    after = app.core.te.last.after
    assert set(after["jobs"]) == {"j0", "j1", "j2", "j3"}
    assert max(j["allreduce_relative"] for j in after["jobs"].values()) == pytest.approx(1.0)


def test_rank_order_rings_leave_the_worst_job_at_twice_ideal():
    """The control of the test above: the same jobs declared with rank-order rings in gloo's direction."""
    app = failed_core_link_app()
    for j, hosts in enumerate(INTERLEAVED):
        call(app, "PUT", f"/mlroute/jobs/j{j}", {"rings": [rank_order(hosts)]})
    worst = max(j["allreduce_relative"] for j in app.core.te.last.after["jobs"].values())
    assert worst == pytest.approx(2.0)


def test_one_host_per_pod_no_order_helps_the_given_order_is_kept_and_the_answer_says_so():
    app = failed_core_link_app()
    per_pod = [[ip(i), ip(4 + i), ip(8 + i), ip(12 + i)] for i in range(4)]
    for j, hosts in enumerate(per_pod):
        status, body = call(app, "PUT", f"/mlroute/jobs/p{j}", {"hosts": hosts, "choose_ring": True})
        assert status == 200, body
        choice = body["job"]["ring_choice"]
        assert not choice["helps"] and choice["gain"] == 1.0 and "no order helps" in choice["reason"]
        assert body["job"]["node_ranks"] == {h: i for i, h in enumerate(hosts)}
        assert ring_pairs(*body["job"]["rings"]) == gloo_pairs(hosts)


def test_a_host_not_on_the_fabric_keeps_the_given_order_and_says_why():
    app = failed_core_link_app()
    hosts = [ip(0), ip(4), "10.9.9.9"]
    status, body = call(app, "PUT", "/mlroute/jobs/j", {"hosts": hosts, "choose_ring": True})
    assert status == 200 and not body["job"]["ring_choice"]["helps"]
    assert "10.9.9.9" in body["job"]["ring_choice"]["reason"] and body["job"]["node_ranks"] == {ip(0): 0, ip(4): 1,
                                                                                             "10.9.9.9": 2}


@pytest.mark.parametrize("body, words", [
    ({"hosts": [ip(0), ip(4), ip(0)], "choose_ring": True}, ("10.0.0.1", "twice")),
    ({"hosts": [ip(0), ip(4)], "rings": [[ip(0), ip(5)]], "choose_ring": True}, ("10.0.0.6", "not in hosts")),
    ({"rings": [[ip(0), ip(5)]], "choose_ring": True}, ("needs hosts",)),
    ({"hosts": [ip(0), ip(4)], "stages": [[ip(0), ip(4)]], "choose_ring": True}, ("stages",)),
    ({"hosts": [ip(0), ip(4)], "choose_ring": "yes"}, ("choose_ring", "true or false")),
    ({"hosts": [ip(0), ip(4)], "ranks_per_host": 2}, ("ranks_per_host", "choose_ring")),
    ({"hosts": [ip(0), ip(4)], "choose_ring": True, "ranks_per_host": 0}, ("ranks_per_host",)),
    ({"hosts": [ip(0), ip(4)], "choose_ring": True, "ranks_per_host": True}, ("ranks_per_host",)),
    ({"hosts": [ip(0), ip(4)], "choose_ring": True, "ranks_per_host": {ip(0): 2, ip(9): 1}}, ("10.0.0.10",)),
    ({"hosts": [ip(0), ip(4)], "choose_ring": True, "ranks_per_host": {ip(0): 2.5}}, ("ranks_per_host",)),
])
def test_a_bad_ring_request_is_400_and_changes_nothing(body, words):
    app = failed_core_link_app()
    call(app, "PUT", "/mlroute/jobs/ring0", {"rings": [RINGS[0]], "lease_s": 10})
    jobs, pins, decisions = list(app.core.jobs), dict(app.core.te.pinned), app.core.decisions.decisions
    status, answer = call(app, "PUT", "/mlroute/jobs/j", body)
    assert status == 400 and set(answer) == {"error"}, answer
    for word in words:
        assert word in answer["error"]
    assert app.core.jobs == jobs and app.core.te.pinned == pins and app.core.decisions.queued is None
    assert app.core.decisions.decisions == decisions
