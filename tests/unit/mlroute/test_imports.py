"""The mlroute modules import each other without cycles (module-level and deferred in-function imports alike),
so that any module can be imported first and the layering stays routing <- workloads <- sim <- commands."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import mlroute

ROOT = Path(mlroute.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """mlroute modules ``name`` imports; ``from package import module`` counts as the module only."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            found.update(subs if subs else [base])
    return {m for m in found if m in modules and m != name}


def import_graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, m) for m in _imports(name, path, modules))
    return graph


def test_no_import_cycles():
    graph = import_graph()
    assert graph.number_of_edges() > 50  # the walk does see the imports
    assert ("mlroute.sim.engine", "mlroute.workloads.jobs") in graph.edges
    assert list(nx.simple_cycles(graph)) == []


def test_the_checker_sees_a_cycle():
    graph = import_graph()
    graph.add_edge("mlroute.workloads.jobs", "mlroute.sim.engine")  # what Job.ideal_comm_s once did
    assert list(nx.simple_cycles(graph))
