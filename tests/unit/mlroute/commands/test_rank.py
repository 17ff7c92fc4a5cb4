"""`mlroute rank`: this host's node rank in the controller's chosen order, for a batch script's torchrun line."""

import json

import pytest

from mlroute.cli import main
from tests.unit.mlroute.torch.recorder import RecordingServer

A, B, C = "10.0.0.1", "10.0.0.5", "10.0.0.2"


def test_each_host_prints_its_node_rank_and_the_master_from_one_choice(capsys):
    with RecordingServer() as rec:
        rec.node_ranks = {A: 0, B: 2, C: 1}
        printed = []
        for me in (A, B, C):
            assert main(["rank", "--job", "j1", "--hosts", f"{A},{B},{C}", "--me", me, "--url", rec.url,
                         "--ranks-per-host", "4", "--token", "t"]) == 0
            printed.append(capsys.readouterr().out.split())
        assert printed == [["0", A], ["2", A], ["1", A]]
        put = rec.of("PUT")[0]
        assert put.path == "/mlroute/jobs/j1" and put.auth == "Bearer t"
        assert put.body == {"hosts": [A, B, C], "choose_ring": True, "lease_s": 30.0,
                            "ranks_per_host": {A: 4, B: 4, C: 4}}


def test_a_hostfile_with_slots_and_the_json_answer(tmp_path, capsys):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# the job's nodes\n{A} slots=2\n\n{B} 2  # rack 2\n{C}\n")
    with RecordingServer() as rec:
        rec.node_ranks = {A: 1, B: 0, C: 2}
        assert main(["rank", "--job", "j2", "--hostfile", str(hostfile), "--me", C, "--url", rec.url, "--json"]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["node_rank"] == 2 and answer["master_addr"] == B and answer["nnodes"] == 3
        assert rec.of("PUT")[0].body["ranks_per_host"] == {A: 2, B: 2, C: 1}


@pytest.mark.parametrize("args, said", [
    (["--hosts", f"{A},{A},{B}", "--me", A], "listed twice"),
    (["--hosts", A, "--me", A], "at least two hosts"),
    (["--hosts", f"{A},{B},{C}", "--me", "10.9.9.9"], "not one of the job's hosts"),
    (["--hosts", f"{A},{B},{C}", "--me", A, "--ranks-per-host", "0"], "at least 1"),
])
def test_bad_input_is_a_usage_error_and_asks_nothing(args, said, capsys):
    with RecordingServer() as rec:
        assert main(["rank", "--job", "j", "--url", rec.url, *args]) == 2
        assert said in capsys.readouterr().err and rec.requests == []


def test_a_bad_hostfile_line_is_named(tmp_path, capsys):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{A}\n{B} slots=x\n")
    assert main(["rank", "--job", "j", "--hostfile", str(hostfile), "--me", A, "--url", "http://127.0.0.1:9"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_an_unreachable_controller_is_a_clear_error(capsys):
    assert main(["rank", "--job", "j", "--hosts", f"{A},{B},{C}", "--me", A, "--url", "http://127.0.0.1:9"]) == 2
    assert "unreachable" in capsys.readouterr().err
