"""Fixes that Ryu 4.34 (the last release, 2020) needs to run on Python 3.11.

Every eventlet that runs on Python 3.11 dropped ``eventlet.wsgi.ALREADY_HANDLED``, which ``ryu/app/wsgi.py``
imports at module level; ``ryu-manager`` imports that module before any app, so the controller cannot even start.
Ryu uses the name only for websocket responses, and later forks define it as an empty list. The fix rewrites the
import in the installed file into a guarded one. It is idempotent: running it on a fixed file changes nothing.
Run by ``scripts/setup_env.sh``; ``python -m controller.southbound.platform_fixes`` applies it to the importable ryu.
"""

import importlib.util
import re
import sys
from pathlib import Path

MARKER = "mlroute platform fix"
_ORIGINAL = re.compile(r"^(?P<indent>[ \t]*)from eventlet\.wsgi import ALREADY_HANDLED[ \t]*$", re.MULTILINE)


def patch_ryu_wsgi_source(text):
    """Return ``text`` (the source of ryu/app/wsgi.py) with the ALREADY_HANDLED import guarded.

    The import sits inside a class body, so the guard keeps the line's indentation. Raises ValueError when the
    file has neither the original nor the guarded import (an unknown Ryu version), so set-up fails loudly
    instead of leaving a controller that cannot start.
    """
    if MARKER in text:
        return text
    match = _ORIGINAL.search(text)
    if match is None:
        raise ValueError("ryu/app/wsgi.py: no 'from eventlet.wsgi import ALREADY_HANDLED' line to fix")
    ind = match.group("indent")
    guarded = (
        f"{ind}try:  # {MARKER}: eventlet >= 0.30.3 removed ALREADY_HANDLED\n"
        f"{ind}    from eventlet.wsgi import ALREADY_HANDLED\n"
        f"{ind}except ImportError:\n"
        f"{ind}    ALREADY_HANDLED = []"
    )
    return text[: match.start()] + guarded + text[match.end():]


def ryu_wsgi_path():
    """Path of the installed ryu/app/wsgi.py, found without importing it (importing is what fails)."""
    spec = importlib.util.find_spec("ryu")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("ryu is not installed in this Python environment")
    return Path(list(spec.submodule_search_locations)[0]) / "app" / "wsgi.py"


def apply(path=None):
    """Patch the installed file in place; return True if it changed."""
    path = Path(path) if path else ryu_wsgi_path()
    text = path.read_text()
    fixed = patch_ryu_wsgi_source(text)
    if fixed == text:
        return False
    path.write_text(fixed)
    for cached in (path.parent / "__pycache__").glob("wsgi.*.pyc"):
        cached.unlink()
    return True


def main():
    changed = apply()
    print(f"ryu wsgi ALREADY_HANDLED fix: {'applied' if changed else 'already in place'} ({ryu_wsgi_path()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
