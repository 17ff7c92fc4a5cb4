"""mlroute.torch runs in any training environment: it imports the standard library, torch and itself only
(mlroute/__init__.py, imported on the way, must stay as light: mlroute.errors alone)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import mlroute

PACKAGE = Path(mlroute.__file__).parent / "torch"
ROOT = PACKAGE.parents[1]


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_only_stdlib_torch_and_itself():
    files = sorted(PACKAGE.glob("*.py")) + [PACKAGE.parent / "__init__.py", PACKAGE.parent / "errors.py"]
    assert len(files) > 8
    allowed = set(sys.stdlib_module_names) | {"torch"}
    bad = {
        (f.name, m) for f in files for m in _imported(f)
        if m.split(".")[0] not in allowed and not (m == "mlroute.errors" or m.startswith("mlroute.torch"))
    }
    assert bad == set()


def test_importing_the_torch_free_parts_pulls_nothing_heavy():
    code = (
        "import sys, mlroute.torch, mlroute.torch.rings, mlroute.torch.client, mlroute.torch.nccl, "
        "mlroute.torch.job, mlroute.torch.exchange, mlroute.torch.address;"
        "heavy = {'numpy', 'numba', 'networkx', 'yaml', 'controller', 'torch'};"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
