import io
import json

import pytest

from controller import config
from controller.web import rest_input


def reader(data: bytes):
    return io.BytesIO(data).read


def jobs_body(jobs):
    data = json.dumps({"jobs": jobs}).encode()
    return len(data), reader(data)


def assert_error(result, status, *words):
    value, error = result
    assert value is None and error is not None
    code, body = error
    assert code == status
    text = json.dumps(body)  # always a JSON-serialisable body ...
    assert set(body) == {"error"} and len(text) < 1000  # ... short, with nothing echoed at length
    for word in words:
        assert word in body["error"]


def test_good_jobs_are_returned():
    value, error = rest_input.parse_jobs(*jobs_body([{"name": "ring0", "hosts": ["10.0.0.1", "10.0.0.5"]}]))
    assert error is None and value == [{"name": "ring0", "hosts": ["10.0.0.1", "10.0.0.5"]}]


def test_an_empty_job_list_clears_the_jobs():
    assert rest_input.parse_jobs(*jobs_body([])) == ([], None)


def test_declared_size_over_the_limit_is_413_and_the_body_only_drained_in_small_bounded_reads():
    asked = []

    def drain(n):  # the body is read only to be dropped (so the client can read the 413), never kept whole
        asked.append(n)
        return b" " * n
    assert_error(rest_input.parse_jobs(rest_input.MAX_BODY_BYTES + 1, drain), 413, "at most")
    assert max(asked) <= 1 << 16 and sum(asked) == rest_input.MAX_BODY_BYTES + 1
    asked.clear()
    assert_error(rest_input.parse_jobs(1 << 40, drain), 413, "at most")  # a huge claim: bounded drain
    assert sum(asked) == rest_input.DRAIN_MAX_BYTES


def test_a_body_longer_than_the_limit_without_a_length_is_413():
    data = b'{"jobs": [' + b" " * rest_input.MAX_BODY_BYTES + b"]}"
    assert_error(rest_input.parse_jobs(None, reader(data)), 413, "at most")


def test_100k_deep_json_is_a_400_with_a_json_error():
    data = b"[" * 100_000 + b"]" * 100_000
    assert_error(rest_input.parse_jobs(len(data), reader(data)), 400, "nested")
    data = b'{"jobs": ' + b"[" * 200 + b"]" * 200 + b"}"  # below Python's recursion limit, above ours
    assert_error(rest_input.parse_jobs(len(data), reader(data)), 400, "nested")


@pytest.mark.parametrize("data, words", [
    (b"", ("empty",)),
    (b"\xff\xfe{}", ("UTF-8",)),
    (b'{"jobs": [', ("JSON",)),
    (b"[1, 2]", ('{"jobs"',)),
    (b'{"jobs": [], "extra": 1}', ("extra",)),
    (b'{"jobs": [{"name": "a", "hosts": ["not-an-ip"]}]}', ("jobs[0].hosts[0]", "IPv4")),
    (b'{"jobs": [{"name": "a", "hosts": [7]}]}', ("jobs[0].hosts[0]", "IPv4")),
    (b'{"jobs": [{"name": "a", "hosts": [null]}]}', ("jobs[0].hosts[0]", "IPv4")),
    (b'{"jobs": [{"name": "a", "hosts": [NaN]}]}', ("JSON",)),
])
def test_bad_bodies_are_400(data, words):
    assert_error(rest_input.parse_jobs(len(data), reader(data)), 400, *words)


def test_a_huge_bad_value_is_not_echoed_back():
    assert_error(rest_input.parse_jobs(*jobs_body([{"name": "a", "hosts": ["x" * 500_000]}])), 400, "IPv4")


def test_too_many_jobs_is_413():
    jobs = [{"name": f"j{i}", "hosts": ["10.0.0.1"]} for i in range(config.MAX_JOBS + 1)]
    assert_error(rest_input.parse_jobs(*jobs_body(jobs)), 413, f"at most {config.MAX_JOBS} jobs")


def test_a_wrong_content_length_is_400():
    assert_error(rest_input.parse_jobs(-1, reader(b"{}")), 400, "Content-Length")


def test_parse_json_gives_the_value():
    assert rest_input.parse_json(2, reader(b"{}")) == ({}, None)
