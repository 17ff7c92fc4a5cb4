"""`mlroute controller`: the OpenFlow controller on Ryu 4.34 or os-ken 4.x (controller/shell/launcher.py)."""

from __future__ import annotations

import argparse
import sys

NAME = "controller"
HELP = ("run the OpenFlow controller (OpenFlow on 6653 and 6633, REST and the web view on 127.0.0.1:8080) "
        "under Ryu or os-ken, whichever is installed")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE",
                   help="YAML configuration (default: $MLROUTE_CONFIG, else built-in defaults; "
                        "--example-config prints every key)")
    p.add_argument("--of-port", type=int, metavar="N", help="OpenFlow listen port (default 6653; 6633 too)")
    p.add_argument("--rest-host", metavar="H", help="REST bind address (default: rest.host of the configuration)")
    p.add_argument("--rest-port", type=int, metavar="N", help="REST port (default: rest.port of the configuration)")
    p.add_argument("--framework", choices=("ryu", "os-ken"),
                   help="OpenFlow framework (default: $MLROUTE_FRAMEWORK, else Ryu if installed, else os-ken)")
    p.add_argument("--example-config", action="store_true",
                   help="print the example configuration (every key with its default) and exit")


def run(args: argparse.Namespace) -> int:
    # imported only here: the other commands never load the controller or an OpenFlow framework
    from controller.shell import launcher

    if args.example_config:
        sys.stdout.write(launcher.example_config())
        return 0
    return launcher.run(config=args.config, of_port=args.of_port, rest_host=args.rest_host,
                        rest_port=args.rest_port, framework=args.framework)
