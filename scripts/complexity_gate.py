"""The complexity gate beside ruff and mypy: no function of the controller or the routing core above radon's grade C
(cyclomatic complexity 20), the compiled kernels and their pure-Python reference twins exempt.

Why radon and not ruff's mccabe alone: ruff counts a function's branches differently (the TE step it scored 10
was radon's F 51), and radon's grades are what reviewers read. ``OVER`` may list a function above C with its
score, as a debt to cut: the gate then fails if it grows, and fails once it is cut to C until it leaves the list,
so the list only shrinks. (It is empty: every function the gate found above C when it came has been cut.)

    .venv/bin/python scripts/complexity_gate.py    # exit 1 and the offenders on stderr when the gate fails
"""

from __future__ import annotations

import sys
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[1]
TREES = ("controller", "mlroute/routing")
MAX = 20  # radon's grade C: 11-20
EXEMPT_FILES = {"mlroute/routing/_numba_kernels.py"}  # numba-compiled inner loops: one function per kernel
EXEMPT_SUFFIX = "_reference"  # a kernel's pure-Python twin, kept line for line beside it

#: function (file:qualified name) -> its score, above C, allowed for now (a debt to cut: see the docstring)
OVER: dict[str, int] = {}


def scores(root: Path = ROOT) -> dict[str, int]:
    """file:qualified name -> cyclomatic complexity of every function and method of the gated trees."""
    out: dict[str, int] = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in EXEMPT_FILES:
                continue
            for block in cc_visit(path.read_text()):
                for item in [block, *getattr(block, "methods", [])]:
                    if hasattr(item, "closures") or hasattr(item, "is_method"):
                        name = f"{item.classname}.{item.name}" if getattr(item, "classname", None) else item.name
                        if not item.name.endswith(EXEMPT_SUFFIX):
                            out[f"{rel}:{name}"] = item.complexity
    return out


def violations(measured: dict[str, int], over: dict[str, int] = OVER) -> list[str]:
    """What fails the gate: a function above C that is not listed or grew past its listed score, and a listed one
    now at C or better (to be removed from the list) or gone."""
    problems = [f"{name}: complexity {score} (grade above C, max {MAX})" for name, score in sorted(measured.items())
                if score > MAX and name not in over]
    problems += [f"{name}: complexity {measured[name]}, grew past its listed {limit}" for name, limit in over.items()
                 if measured.get(name, 0) > limit]
    problems += [f"{name}: now {measured[name]} (grade C or better): remove it from OVER" for name in over
                 if name in measured and measured[name] <= MAX]
    problems += [f"{name}: listed in OVER but not found" for name in over if name not in measured]
    return problems


def main() -> int:
    problems = violations(scores())
    for line in problems:
        print(f"complexity gate: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
