"""emulation.ExternalController: a controller already running, read over its REST as a Controller is (no
network: urlopen is replaced); the environment a controller process is started in."""

import io
import json
import subprocess
import sys

import pytest

from mlroute.experiment import emulation
from mlroute.experiment.emulation import ExternalController


@pytest.mark.parametrize("text, host, of_port, rest_port", [
    ("127.0.0.1:6654", "127.0.0.1", 6654, None),
    ("127.0.0.1:6654/8081", "127.0.0.1", 6654, 8081),
    (" ctl-a.example:6653/8080 ", "ctl-a.example", 6653, 8080),
    ("localhost:1/65535", "localhost", 1, 65535),
])
def test_addresses_parse_and_print_back(text, host, of_port, rest_port):
    ctl = ExternalController.parse(text)
    assert (ctl.host, ctl.of_port, ctl.rest_port) == (host, of_port, rest_port)
    assert str(ctl) == text.strip() and ExternalController.parse(str(ctl)) == ctl


@pytest.mark.parametrize("bad", ["", "127.0.0.1", ":6653", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                                 "127.0.0.1:6653/", "127.0.0.1:6653/0", "127.0.0.1:6653/8080/1", "tcp:1.2.3.4:6653",
                                 "[::1]:6653", "ctl a:6653", "-ctl:6653", "127.0.0.1:66x3"])
def test_malformed_addresses_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="bad controller address") as info:
        ExternalController.parse(bad)
    assert repr(bad.strip()) in str(info.value)


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.fixture
def urls(monkeypatch):
    """Every URL opened, answered from ``bodies`` (path -> text)."""
    opened = []
    bodies = {"/mlroute/cluster": json.dumps({"role": "leader"}),
              "/metrics": "# HELP mlroute_flows_moved_total x\nmlroute_flows_moved_total 3.0\n"
                          'mlroute_x{a="1"} 2\nmlroute_x{a="2"} 5\n'}

    def urlopen(url, timeout):
        opened.append(url)
        return FakeResponse(bodies["/" + url.split("/", 3)[3]].encode())  # http://host:port/PATH
    monkeypatch.setattr(emulation.urllib.request, "urlopen", urlopen)
    return opened


def test_its_rest_is_read_as_a_started_controllers_is(urls):
    ctl = ExternalController.parse("10.0.0.5:6654/8081")
    assert ctl.get("/mlroute/cluster") == {"role": "leader"}
    assert ctl.metric("mlroute_flows_moved_total") == 3.0
    assert ctl.metric("mlroute_x") == 7.0 and ctl.metric("mlroute_x", {"a": "2"}) == 5.0
    assert urls == ["http://10.0.0.5:8081/mlroute/cluster"] + ["http://10.0.0.5:8081/metrics"] * 3


def test_without_a_rest_port_there_is_nothing_to_read(urls):
    ctl = ExternalController.parse("10.0.0.5:6654")
    with pytest.raises(ValueError, match="no REST port given for the controller at 10.0.0.5:6654"):
        ctl.get("/mlroute/cluster")
    assert urls == []


def test_a_controller_process_imports_the_controller_of_the_tree_its_app_is_from(tmp_path, monkeypatch):
    """Another checkout's app: its process imports that checkout's ``controller``, not the one this venv's
    editable install maps to (a clone's soak once ran its own app.py over the first checkout's changed core)."""
    other = tmp_path / "checkout"
    (other / "controller").mkdir(parents=True)
    (other / "controller" / "__init__.py").write_text("")
    monkeypatch.setattr(emulation, "TREE", other)
    found = subprocess.run([sys.executable, "-c", "import controller; print(controller.__file__)"],
                           env=emulation.controller_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == str(other / "controller" / "__init__.py"), found.stderr
