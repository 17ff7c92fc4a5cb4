"""mlroute from an installed wheel, no checkout (issue 24): the wheel is built from this repository, installed with
its os-ken extra into a new virtual environment (plain ``pip install``, not editable), and ``mlroute controller``
started from a directory outside the repository serves REST and the web view from the package's own files, speaks
OpenFlow, prints its example configuration and stops on SIGTERM with its optimiser worker. No network needed."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, free_port, wait_until
from tests.integration.test_controller_start import children

PIP_S = 600  # a cold pip cache downloads numba, numpy and os-ken's dependencies


def run(*cmd, cwd=None, env=None, timeout=PIP_S):
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the new venv's bin directory, a directory outside the repository, a clean environment)."""
    tmp = tmp_path_factory.mktemp("wheel")
    assert not tmp.resolve().is_relative_to(ROOT)
    # this venv's setuptools (<68, which the build needs) builds it; the wheel is pure Python
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", ROOT)
    wheel = next((tmp / "dist").glob("mlroute-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {"controller/web/static/index.html", "controller/web/static/app.js", "controller/examples/mlroute.yaml",
            "controller/app.py", "mininet_topos/fattree.py"} <= set(names), names
    run("/usr/bin/python3", "-m", "venv", tmp / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLROUTE_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{tmp / 'venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    run(tmp / "venv" / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[os-ken]", env=env)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return tmp / "venv" / "bin", elsewhere, env


def test_the_installed_package_is_used_not_the_checkout(installed):
    bin_dir, elsewhere, env = installed
    where = run(bin_dir / "python", "-c", "import controller, mlroute; print(controller.__file__, mlroute.__file__)",
                cwd=elsewhere, env=env, timeout=60)
    assert all("site-packages" in path and not Path(path).is_relative_to(ROOT) for path in where.split()), where
    example = run(bin_dir / "mlroute", "controller", "--example-config", cwd=elsewhere, env=env, timeout=60)
    assert example == (ROOT / "examples" / "mlroute.yaml").read_text()


def test_mlroute_controller_runs_from_the_wheel_outside_the_repository(installed):
    bin_dir, elsewhere, env = installed
    of_port, rest_port = free_port(), free_port()
    (elsewhere / "mine.yaml").write_text("te:\n  poll_interval_s: 1\n")
    log = open(elsewhere / "controller.log", "w")
    proc = subprocess.Popen([bin_dir / "mlroute", "controller", "--config", "mine.yaml", "--of-port", str(of_port),
                             "--rest-port", str(rest_port)], cwd=elsewhere, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{rest_port}"
    try:
        def up():
            try:
                with urllib.request.urlopen(f"{url}/mlroute/ui-config", timeout=2) as r:
                    return r.read()
            except OSError:
                return None
        assert wait_until(up, timeout=60), (elsewhere / "controller.log").read_text()[-3000:]
        assert b'"poll_interval_s": 1' in up()  # its configuration, read from the directory it runs in
        for path, words in (("/", b"<html"), ("/mlroute/ui/app.js", b"mlroute"), ("/metrics", b"mlroute_")):
            with urllib.request.urlopen(url + path, timeout=5) as r:
                assert words in r.read(), path
        with socket.create_connection(("127.0.0.1", of_port), timeout=5) as s:  # OpenFlow: the switch's side
            s.sendall(bytes([4, 0, 0, 8, 0, 0, 0, 1]))  # OFPT_HELLO, OpenFlow 1.3
            hello = s.recv(8)
            assert len(hello) == 8 and hello[1] == 0, hello  # the controller's HELLO
        workers = wait_until(lambda: children(proc.pid) or None, timeout=30)
        assert workers, "no optimiser worker"
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert not [w for w in workers if Path(f"/proc/{w}").exists()], workers
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    text = (elsewhere / "controller.log").read_text()
    assert "mlroute controller on os-ken (native threads)" in text and "Traceback" not in text, text[-3000:]
