"""`mlroute experiment --controllers` (issue 22, item 2): defaults and usage errors of the command line."""

import signal

import pytest

from mlroute import cli
from mlroute.experiment import runner

BASE = ["experiment", "--topo", "leafspine", "--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2",
        "--pattern", "stride:2"]


@pytest.fixture
def specs(monkeypatch):
    """The specs the command hands the runner (which refuses them, so nothing runs)."""
    seen = []

    def refuse(spec, out):
        seen.append(spec)
        runner.validate(spec)
        raise runner.ExperimentError("not running here")
    monkeypatch.setattr(runner, "run", refuse)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # the command's handlers stay out of pytest
    return seen


def test_the_modes_default_to_external_and_the_reference_with_controllers(specs):
    assert cli.main(BASE) == 2 and specs[-1].modes == ["ecmp", "mlroute", "nonblocking"]
    assert specs[-1].controllers == []
    assert cli.main(BASE + ["--controllers", "127.0.0.1:6654/8081,127.0.0.1:6655/8082"]) == 2
    assert specs[-1].modes == ["external", "nonblocking"]
    assert [str(c) for c in specs[-1].controllers] == ["127.0.0.1:6654/8081", "127.0.0.1:6655/8082"]
    assert cli.main(BASE + ["--controllers", "127.0.0.1:6654", "--modes", "external"]) == 2
    assert specs[-1].modes == ["external"]


@pytest.mark.parametrize("args, message", [
    (["--controllers", "127.0.0.1:6654,ctl-b"], "bad controller address 'ctl-b'"),
    (["--controllers", "127.0.0.1:6654/80800"], "bad controller address '127.0.0.1:6654/80800'"),
    (["--controllers", ""], "bad controller address ''"),
    (["--controllers", "127.0.0.1:6654", "--modes", "mlroute,nonblocking"], "takes external and nonblocking"),
    (["--modes", "external"], "mode 'external' needs --controllers"),
])
def test_bad_controllers_exit_2_with_one_line_naming_them(specs, capsys, args, message):
    assert cli.main(BASE + args) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlroute experiment: error: ") and message in err and err.count("\n") == 1
    assert "not running here" not in err
