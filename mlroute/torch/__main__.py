"""``python -m mlroute.torch train.py args`` / ``torchrun ... -m mlroute.torch train.py args``: run a training
script unchanged, its default process group declared to the controller as soon as it exists.

``-m pkg.module args`` runs a module instead of a file, as ``python -m`` would.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -m mlroute.torch SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr if not argv or argv[0] == "-m" else sys.stdout)
        raise SystemExit(0 if argv and argv[0] in ("-h", "--help") else 2)
    try:
        from mlroute.torch.hook import install
    except ImportError as exc:  # no torch (or no torch.distributed): run the script as if we were not here
        print(f"mlroute: torch.distributed unavailable ({exc}): running undeclared", file=sys.stderr)
    else:
        install()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        # as `python train.py` would: the script's folder first on the path, not the hook's working directory
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
