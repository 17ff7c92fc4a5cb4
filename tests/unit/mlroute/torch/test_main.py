"""``python -m mlroute.torch``: the script runs unchanged, with the argv and path it would have had alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

PROBE = """
import json, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__}))
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "mlroute.torch", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_script_runs_as_main_with_its_own_argv_and_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "train.py"
    script.write_text(PROBE)
    done = _run(str(script), "--lr", "0.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"argv": [str(script), "--lr", "0.1"], "path0": str(script.parent), "name": "__main__"}


def test_module_form_and_usage(tmp_path):
    (tmp_path / "probe_mod.py").write_text(PROBE)
    done = _run("-m", "probe_mod", "x", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["argv"] == [str(tmp_path / "probe_mod.py"), "x"] and seen["name"] == "__main__"
    assert _run(cwd=tmp_path).returncode == 2
