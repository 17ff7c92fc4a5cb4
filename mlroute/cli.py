"""The `mlroute` command: discovers sub-commands in mlroute.commands and dispatches to them."""

import argparse
import importlib
import pkgutil
import sys

from mlroute import __version__, commands
from mlroute.errors import UsageError

__all__ = ["build_parser", "main"]


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mlroute",
        description="Global routing for ML training traffic on Clos fabrics "
        "(`mlroute controller` runs the OpenFlow controller; `ryu-manager controller/app.py` too).",
    )
    parser.add_argument("--version", action="version", version=f"mlroute {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0
    try:
        return args._run(args) or 0
    except UsageError as exc:
        print(f"mlroute {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
