"""Bad REST bodies against the real controller, under Ryu and under os-ken (issues 10 and 24): a clear 4xx
with a JSON error body, never a 500 or a traceback, and nothing half-applied (no network needed)."""

import json
import urllib.error
import urllib.request

import pytest

from tests.integration.harness import OSKEN_PYTHON, Controller, framework_options

TOKEN = "secret"


@pytest.fixture(scope="module", params=["ryu", pytest.param("os-ken", marks=pytest.mark.skipif(
    not OSKEN_PYTHON.exists(), reason=f"no os-ken venv at {OSKEN_PYTHON}"))])
def controller(tmp_path_factory, request):
    ctl = Controller(tmp_path_factory.mktemp("rest"), f"rest:\n  token: {TOKEN}\n",
                     **framework_options(request.param))
    ctl.wait_ready()
    yield ctl
    ctl.stop()


def post_raw(ctl, path, body: bytes):
    req = urllib.request.Request(ctl.url(path), data=body, method="POST",
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read().decode())  # the error body is JSON too


@pytest.mark.parametrize("body, status, words", [
    (b"[" * 100_000 + b"]" * 100_000, 400, "nested"),  # was: HTTP 500 with a traceback in the body
    (b'{"jobs": [' + b" " * (1 << 20) + b"]}", 413, "at most"),
    (b'{"jobs": [{"name": "a", "hosts": ["not-an-ip", 7, null]}]}', 400, "IPv4"),
    (b"\xff\xfe", 400, "UTF-8"),
])
def test_bad_bodies_get_a_json_4xx_and_change_nothing(controller, body, status, words):
    before = controller.get("/mlroute/jobs")
    code, answer = post_raw(controller, "/mlroute/jobs", body)
    assert code == status and words in answer["error"] and "Traceback" not in answer["error"], answer
    assert controller.get("/mlroute/jobs") == before


def test_too_many_jobs_is_413_and_a_good_body_is_applied(controller):
    jobs = [{"name": f"j{i}", "hosts": ["10.0.0.1"]} for i in range(1025)]
    code, answer = post_raw(controller, "/mlroute/jobs", json.dumps({"jobs": jobs}).encode())
    assert code == 413, answer
    good = {"jobs": [{"name": "ring0", "hosts": ["10.0.0.1", "10.0.0.5"]}]}
    code, answer = post_raw(controller, "/mlroute/jobs", json.dumps(good).encode())
    assert code == 200 and controller.get("/mlroute/jobs")["jobs"][0]["hosts"] == ["10.0.0.1", "10.0.0.5"]
    assert "Traceback" not in controller.log()
