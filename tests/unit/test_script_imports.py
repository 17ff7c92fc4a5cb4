"""The scripts and benchmarks run as files (not imported by the suite): every module they import, at the top or
inside a function, must exist, and every attribute they read off an imported module must be there, so a
package move cannot silently break ``scripts/demo.sh`` or a benchmark."""

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))


def imported_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def module_bindings(tree):
    """Names the file binds to modules: ``import a.b as c`` and ``from pkg import module``."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if importlib.util.find_spec(node.module.split(".")[0]) is not None and _is_module(full):
                    names[alias.asname or alias.name] = full
    return names


def _is_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent is a module, not a package
        return False


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_import_resolves(path):
    tree = ast.parse(path.read_text())
    missing = [m for m in imported_modules(tree) if importlib.util.find_spec(m.split(".")[0]) is None
               or importlib.util.find_spec(m) is None]
    assert not missing, f"{path.relative_to(ROOT)} imports missing modules: {missing}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_attribute_read_off_a_project_module_exists(path):
    tree = ast.parse(path.read_text())
    bound = {n: m for n, m in module_bindings(tree).items() if m.split(".")[0] in ("controller", "mlroute")}
    missing = [f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
               and not hasattr(importlib.import_module(bound[node.value.id]), node.attr)]
    assert not missing, f"{path.relative_to(ROOT)} reads attributes its modules lack: {missing}"
