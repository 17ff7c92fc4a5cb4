"""The scripts and benchmarks run as files (not imported by the suite): every module they import, at the top or
inside a function, must exist, so a package move cannot silently break ``scripts/demo.sh`` or a benchmark."""

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))


def imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_import_resolves(path):
    missing = [m for m in imported_modules(path) if importlib.util.find_spec(m.split(".")[0]) is None
               or importlib.util.find_spec(m) is None]
    assert not missing, f"{path.relative_to(ROOT)} imports missing modules: {missing}"
