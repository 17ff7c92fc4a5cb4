"""The topology files as ``mn --custom FILE`` loads them: exec'd by path into a fresh namespace without
``__file__`` (Debian's mn under /usr/bin/python3, where this project is not installed), and ``mn``'s repeated
``--controller`` (one remote controller per address: a controller cluster)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = {"fattree": ("fattree,4", 20, 16), "leafspine": ("leafspine,2,2,2", 4, 4), "bigswitch": ("bigswitch,4", 1, 4)}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_loads_as_mn_runs_it_without_the_project(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "mininet_topos.common", None)  # as if not installed: the fallback runs
    path = f"mininet_topos/{name}.py"
    monkeypatch.chdir(ROOT)
    customs: dict = {}
    exec(compile(Path(path).read_text(), path, "exec"), customs, customs)  # what mn's --custom does
    args, switches, hosts = FILES[name]
    topo = customs["topos"][name](*args.split(",")[1:])
    assert (len(topo.switches()), len(topo.hosts())) == (switches, hosts)


# mn's own option parsing and topology building, stopped before the network would start (no root, no OVS)
PARSE_ONLY = """
import runpy, sys
ns = runpy.run_path(sys.argv.pop(1), run_name="mn")
def begin(self):
    ctls = [ns["customClass"](ns["CONTROLLERS"], c) for c in self.options.controller]
    topo = ns["buildTopo"](ns["TOPOS"], self.options.topo)
    print(len(topo.switches()), [c.__name__ for c in ctls])
ns["MininetRunner"].begin = begin
ns["MininetRunner"]()
"""


@pytest.mark.skipif(not Path("/usr/bin/mn").exists() or not shutil.which("/usr/bin/python3"),
                    reason="Debian's mininet package (/usr/bin/mn) not installed")
def test_debians_mn_takes_several_controllers_and_loads_the_files():
    proc = subprocess.run(["/usr/bin/python3", "-c", PARSE_ONLY, "/usr/bin/mn", "--custom", "mininet_topos/fattree.py",
                           "--topo", "fattree,4,bw=10", "--switch", "ovs",
                           "--controller", "remote,ip=127.0.0.1,port=6654",
                           "--controller", "remote,ip=127.0.0.1,port=6655"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[0] == ("20 [\"RemoteController{'ip': '127.0.0.1', 'port': 6654}\", "
                                          "\"RemoteController{'ip': '127.0.0.1', 'port': 6655}\"]")
