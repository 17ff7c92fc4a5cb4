"""``mlroute controller``: the controller app loaded by Ryu's or os-ken's app manager, from wherever mlroute is
installed (no checkout needed).

Modelled on what ``ryu-manager`` and os-ken 3's removed ``osken-manager`` do: the framework's configuration is
parsed from an argument list made of this command's options (``--ofp-tcp-listen-port``; under Ryu
``--wsapi-host`` / ``--wsapi-port``, under os-ken the REST address goes to ``southbound.REST_OVERRIDES``), its
logging set up, eventlet's monkey-patching applied (Ryu only; os-ken 4 runs native threads and nothing here
imports eventlet), then ``controller.app`` and the topology app it requires are loaded, their contexts created
and the apps instantiated and started. SIGTERM and SIGINT stop the app cleanly: the optimiser's worker process
and the REST server first, then the process exits with status 0.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).parents[1] / "examples"  # example configurations, installed with the package


def example_config(name: str = "mlroute.yaml") -> str:
    """The text of an example configuration shipped with the package."""
    return (EXAMPLES / name).read_text()


def framework_args(southbound: Any, of_port: int | None, rest_host: str | None,
                   rest_port: int | None) -> list[str]:
    """The framework's command-line arguments for these options (REST ones only where the framework has
    Ryu's WSGI options; elsewhere they go to ``southbound.REST_OVERRIDES``)."""
    args = ["--ofp-tcp-listen-port", str(of_port)] if of_port else []
    if southbound.NAME == "ryu":
        args += ["--wsapi-host", rest_host] if rest_host else []
        args += ["--wsapi-port", str(rest_port)] if rest_port else []
    else:
        southbound.REST_OVERRIDES.update({k: v for k, v in (("host", rest_host), ("port", rest_port)) if v})
    return args


def run(config: str | None = None, of_port: int | None = None, rest_host: str | None = None,
        rest_port: int | None = None, framework: str | None = None) -> int:
    """Run the controller until SIGTERM / SIGINT; the exit status."""
    if framework:
        os.environ["MLROUTE_FRAMEWORK"] = framework
    if config:
        os.environ["MLROUTE_CONFIG"] = str(Path(config).resolve())
    from controller.southbound import framework as southbound  # the framework is chosen here, from the settings above

    if southbound.NAME == "ryu":
        southbound.hub.patch(thread=False)  # as ryu-manager does first (threads once the options are parsed)
        import_framework = ["ryu.app.wsgi"]  # registers --wsapi-host / --wsapi-port, as ryu-manager does
    else:
        import_framework = []
    pkg = southbound.PACKAGE
    for name in ("log", "flags", "controller.controller", "topology.switches", *import_framework):  # options
        __import__(name if name.startswith("ryu.") else f"{pkg}.{name}")  # registered first, as the managers do
    log = sys.modules[f"{pkg}.log"]
    log.early_init_log(logging.DEBUG)
    args = framework_args(southbound, of_port, rest_host, rest_port)
    southbound.cfg.CONF(args=args, prog="mlroute controller", project=pkg,
                        version=f"mlroute controller (on {southbound.NAME})")
    log.init_log()
    southbound.hub.patch(thread=True)  # Ryu: green threads from here on (os-ken's native hub: nothing)
    sys.argv = [sys.argv[0], *args]  # the app reads which REST options were given explicitly from here
    logger = logging.getLogger("mlroute")
    logger.info("mlroute controller on %s (%s threads)", southbound.NAME, "native" if southbound.NATIVE else "green")

    manager = southbound.app_manager.AppManager.get_instance()
    manager.load_apps(["controller.app"])
    contexts = manager.create_contexts()
    services = manager.instantiate_apps(**contexts)
    services += southbound.start_services(manager)  # Ryu: its WSGI server (REST), as ryu-manager starts it

    def stop(signum: int, _frame: Any) -> None:
        # not here: a signal handler may run inside eventlet's hub, where nothing may block; a thread of its own
        southbound.hub.spawn(_shutdown, manager, logger, signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    southbound.hub.joinall(services)
    return 0


def _shutdown(manager: Any, logger: logging.Logger, why: str) -> None:
    from controller.southbound import framework as southbound

    """Stop mlroute's app (its optimiser worker, its REST server), then leave at once (the framework's own
    threads and its OpenFlow server are not stopped one by one: they end with the process)."""
    status = 0
    try:
        logger.info("%s: stopping", why)
        for app in list(manager.applications.values()):
            release = getattr(app, "release", None)
            if callable(release):
                with southbound.TURN.held():  # not while one of the app's loops uses the worker
                    release()
    except Exception:
        logger.exception("clean stop failed")
        status = 1
    finally:
        logging.shutdown()
        os._exit(status)
