"""The controller's wings import in one direction: state <- desired <- decide <- southbound / web / cluster <- core
<- app.

Read from the modules' syntax trees (every ``import`` and ``from ... import``, those inside functions included),
not by importing them, so a lazy import counts as much as one at the top. A module may import its own wing,
any wing below it, and the top-level modules ranked at or below it; southbound and web stand side by side (the
REST application uses the framework's WSGI glue; the sFlow detection counts into the metrics it is handed, never
importing the web wing; the cluster's coordination sits beside them).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "controller"

# rank of each wing (a sub-package) and of each top-level module; nothing may import a higher rank
RANK = {
    "state": 0,
    "desired": 1,
    "config": 1,  # the settings: read by the web's input validation and everything above; reads state / desired
    "decide": 2,
    "southbound": 3,
    "web": 3,
    "cluster": 3,  # the controller cluster: role logic and ZooKeeper coordination, beside southbound / web
    "core": 4,  # the decision core: its event API, state, each switch's tables, the sFlow wiring, the views
    "shell": 5,  # the framework-facing shell: replies, loops, the cluster's part, the launcher (mixins of the app)
    "app": 5,
}
WINGS = ("state", "desired", "decide", "southbound", "web", "cluster", "core", "shell")


def _part(module: str) -> str | None:
    """The wing or top-level module a ``controller...`` module name belongs to (None: the package itself)."""
    parts = module.split(".")
    if parts[0] != "controller" or len(parts) < 2:
        return None
    return parts[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(path: Path) -> str:
    """The package a module's relative imports resolve against."""
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imports(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module imported) for every import in ``source``, lazy ones included; ``from controller import x``
    names controller.x, a relative import is resolved against ``package``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                module = ".".join(base[:len(base) - node.level + 1] + ([module] if module else []))
            if module == "controller":
                out += [(node.lineno, f"controller.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, module))
    return out


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "static" not in p.parts and "examples" not in p.parts)


def test_every_controller_module_has_a_rank():
    unranked = sorted(str(p.relative_to(ROOT)) for p in _modules()
                      if p != PACKAGE / "__init__.py" and _part(_module_name(p)) not in RANK)
    assert not unranked, f"give these modules a wing (or a rank in {__file__}): {unranked}"


def test_wings_are_packages():
    for wing in WINGS:
        assert (PACKAGE / wing / "__init__.py").is_file(), f"controller/{wing}/ is a wing: it needs an __init__.py"


def test_nothing_imports_upward():
    offences = []
    for path in _modules():
        own = _part(_module_name(path))
        if own is None:
            continue
        for line, module in _imports(path.read_text(), _package(path)):
            target = _part(module)
            if target is None or target not in RANK:
                continue
            if RANK[target] > RANK[own]:
                offences.append(f"{path.relative_to(ROOT)}:{line} imports {module} "
                                f"({target}, rank {RANK[target]}) from {own} (rank {RANK[own]})")
    assert not offences, ("imports against the direction state <- desired <- decide <- southbound / web <- core <- "
                          "app:\n" + "\n".join(offences))


def test_southbound_does_not_import_the_web_wing():
    """The web wing mounts REST on the framework's WSGI glue (southbound); nothing in southbound reads the web
    wing back (the sFlow detection counts into the metrics object it is handed), so the two are no cycle."""
    offences = [f"{path.relative_to(ROOT)}:{line} imports {module}" for path in _modules()
                if _part(_module_name(path)) == "southbound"
                for line, module in _imports(path.read_text(), _package(path)) if _part(module) == "web"]
    assert not offences, offences


def test_the_check_sees_every_import_form():
    """Both import forms, a lazy one inside a function and a relative one too: the test above is not vacuous."""
    source = ("from controller.decide import te\n\ndef f():\n    import controller.core\n"
              "    from controller import app\n    from ..web import rest\n")
    found = {m for _, m in _imports(source, "controller.state")}
    assert found == {"controller.decide", "controller.core", "controller.app", "controller.web"}
