"""The southbound framework layer: the only module that imports an OpenFlow framework, Ryu 4.34 or os-ken 4.x.

Both frameworks have the same module tree (``ryu.X`` is ``os_ken.X``), the same events, app manager, topology
(LLDP) app and OpenFlow 1.3 parser; they differ in three ways that matter here, and this module hides them:

- **Threads.** Ryu runs every handler and loop as an eventlet green thread: one runs at a time and switches only
  where it waits, which the decision core relies on (it is not thread-safe). os-ken 4 runs native threads by
  default (``OSKEN_HUB_TYPE=native``): its apps, its datapaths and mlroute's loops and REST handlers really run
  at the same time. Under native threads every piece of mlroute code that touches the core therefore holds
  *the turn* (:data:`TURN`, one lock), taken by :func:`serialised` handlers, :func:`spawn`-ed loops and REST
  calls, and given up wherever green threads would switch: :func:`sleep`, :class:`Event` waits, a REST
  handler waiting for its decision or reading a body (:func:`unlocked`). Under Ryu the turn is a no-op.
- **REST server.** Ryu has a WSGI server (``ryu.app.wsgi``, eventlet); os-ken 4 has none. Under Ryu the REST
  API is mounted on Ryu's WSGI application (with controller/southbound/wsgi_server.py's limits); under os-ken it runs on
  controller/southbound/http_server.py (the standard library's threaded WSGI server with the same limits).
- **Launcher.** ``ryu-manager`` exists; os-ken 4 has no ``osken-manager``. ``mlroute controller``
  (controller/shell/launcher.py) loads the app with either framework's app manager.

Which framework: the one already running the process (``ryu-manager`` imported ``ryu``), else
``MLROUTE_FRAMEWORK`` (``ryu`` or ``os-ken``), else Ryu if it is installed, else os-ken.
Nothing here imports eventlet under os-ken's native threads.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mlroute.errors import UsageError

PACKAGES = {"ryu": "ryu", "os-ken": "os_ken"}  # framework name -> its Python package
ENV = "MLROUTE_FRAMEWORK"


class FrameworkError(UsageError):
    """No usable framework, or a setting that contradicts the one running the process (``mlroute controller``
    prints it as one line and exits with status 2)."""


def choose(environ: Mapping[str, str] | None = None, modules: Any = None,
           installed: Callable[[str], bool] | None = None) -> str:
    """The framework to use: ``"ryu"`` or ``"os-ken"`` (see the module's docstring for the order)."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    installed = installed or (lambda package: importlib.util.find_spec(package) is not None)
    running = [name for name, package in PACKAGES.items() if f"{package}.base.app_manager" in modules]
    wanted = environ.get(ENV, "").strip().lower().replace("_", "-")
    if wanted and wanted not in PACKAGES:
        raise FrameworkError(f"{ENV}={environ[ENV]!r}: expected 'ryu' or 'os-ken'")
    if running:
        if wanted and wanted not in running:
            raise FrameworkError(f"{ENV}={wanted} but this process already runs {running[0]}")
        return running[0]
    if wanted:
        if not installed(PACKAGES[wanted]):
            raise FrameworkError(f"{ENV}={wanted} but {PACKAGES[wanted]} is not installed "
                                 f"(pip install 'mlroute[{wanted}]')")
        return wanted
    for name, package in PACKAGES.items():
        if installed(package):
            return name
    raise FrameworkError("neither ryu nor os-ken is installed: pip install 'mlroute[ryu]' or 'mlroute[os-ken]'")


NAME = choose()
PACKAGE = PACKAGES[NAME]
if NAME == "os-ken":
    os.environ.setdefault("OSKEN_HUB_TYPE", "native")  # os-ken's own default; read by os_ken.lib.hub at import


def _module(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{name}")


hub = _module("lib.hub")
#: True where handlers and loops are native threads (os-ken 4's default), False under eventlet (Ryu).
NATIVE = getattr(hub, "HUB_TYPE", "eventlet") == "native"
cfg = _module("cfg")
app_manager = _module("base.app_manager")
App: type = getattr(app_manager, "RyuApp", None) or app_manager.OSKenApp
ofp_event = _module("controller.ofp_event")
_handler = _module("controller.handler")
set_ev_cls = _handler.set_ev_cls
CONFIG_DISPATCHER, MAIN_DISPATCHER, DEAD_DISPATCHER = (_handler.CONFIG_DISPATCHER, _handler.MAIN_DISPATCHER,
                                                       _handler.DEAD_DISPATCHER)
ofproto_v1_3 = _module("ofproto.ofproto_v1_3")
ofproto_v1_3_parser = _module("ofproto.ofproto_v1_3_parser")
ofproto_parser = _module("ofproto.ofproto_parser")
packet = _module("lib.packet.packet")
ethernet = _module("lib.packet.ethernet")
arp = _module("lib.packet.arp")
ipv4 = _module("lib.packet.ipv4")
ipv6 = _module("lib.packet.ipv6")  # (the controller reads IPv6 by hand; the tests build frames with these)
icmpv6 = _module("lib.packet.icmpv6")
tcp = _module("lib.packet.tcp")
SWITCHES_APP = f"{PACKAGE}.topology.switches"  # the LLDP topology app mlroute requires


def topology() -> tuple[Any, Any]:
    """The topology app's module (``switches``, its ``Switches`` app and LLDP parser) and its events."""
    return _module("topology.switches"), _module("topology.event")


# -- the turn: one piece of controller code at a time under native threads --------------------------------------
class Turn:
    """A re-entrant lock that a thread can give up entirely while it waits (what a green thread does at every
    wait). Disabled (every method a no-op) under eventlet, where green threads already take turns."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._depth = 0

    def holds(self) -> bool:
        return self._owner == threading.get_ident()

    def acquire(self) -> None:
        if not self.enabled:
            return
        if self.holds():
            self._depth += 1
            return
        self._lock.acquire()
        self._owner, self._depth = threading.get_ident(), 1

    def release(self) -> None:
        if not self.enabled:
            return
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()

    @contextlib.contextmanager
    def given_up(self) -> Iterator[None]:
        """Run the body without the turn (others run meanwhile) if this thread holds it; take it back after."""
        if not (self.enabled and self.holds()):
            yield
            return
        depth, self._owner, self._depth = self._depth, None, 0
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._owner, self._depth = threading.get_ident(), depth


TURN = Turn(NATIVE)


def serialised(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run holding the turn (an event handler, a REST call); ``fn`` itself under eventlet."""
    if not NATIVE:
        return fn

    @functools.wraps(fn)  # keeps the framework's handler registration (the function's attributes)
    def run(*args: Any, **kwargs: Any) -> Any:
        with TURN.held():
            return fn(*args, **kwargs)
    return run


def unlocked() -> contextlib.AbstractContextManager[None]:
    """A block that waits on something other than the core (a decision, a client) without holding the turn."""
    return TURN.given_up()


def spawn(fn: Callable[[], Any]) -> Any:
    """Start a loop: a green thread under eventlet, else a daemon thread that runs holding the turn."""
    if not NATIVE:
        return hub.spawn(fn)
    thread = threading.Thread(target=serialised(fn), name=getattr(fn, "__name__", "mlroute"), daemon=True)
    thread.start()
    return thread


def where(thread: Any) -> str:
    """Where a thread from :func:`spawn` is now, as a stack (innermost call last): a stalled loop's evidence."""
    import traceback

    frame = sys._current_frames().get(thread.ident) if NATIVE else getattr(thread, "gr_frame", None)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(not running)\n"


def kill(thread: Any) -> None:
    """Stop a thread from :func:`spawn` (green threads only; native loops are daemons and end with the process)."""
    if not NATIVE:
        hub.kill(thread)


YIELD_S = 0.0005  # sleep(0) under native threads: long enough that a thread waiting for the turn gets it


def sleep(seconds: float) -> None:
    """Sleep without the turn (``sleep(0)``: let the others run)."""
    if not NATIVE:
        hub.sleep(seconds)
        return
    with TURN.given_up():
        time.sleep(seconds if seconds > 0 else YIELD_S)


class _NativeEvent:
    """``hub.Event`` for native threads, whose wait gives up the turn. (os-ken 4.2's native ``hub.Event`` never
    times out: its ``wait(timeout)`` blocks until the event is set; see :func:`fix_native_hub`.)"""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        with TURN.given_up():
            return self._event.wait(timeout)


Event: Callable[[], Any] = _NativeEvent if NATIVE else hub.Event


def fix_native_hub() -> bool:
    """Make os-ken's native ``hub.Event().wait(timeout)`` time out (4.2 waits until set, whatever the timeout:
    the topology app's LLDP and link-timeout loops stall); True if it was replaced. Before the topology app is
    instantiated. Idempotent; nothing to do under eventlet."""
    if not NATIVE or hub.Event is _NativeEvent:
        return False
    hub.Event = _NativeEvent
    return True


@contextlib.contextmanager
def deadline(seconds: float, sock: Any = None) -> Iterator[None]:
    """A blocking read that must end within ``seconds`` (raises TimeoutError otherwise), without the turn.
    Under eventlet a green timeout; under native threads the connection's socket timeout (``sock``, which the
    REST server puts in the request's environment) is set to what is left."""
    with TURN.given_up():
        if not NATIVE:
            with hub.Timeout(max(0.0, seconds), TimeoutError):
                yield
            return
        if sock is not None:
            sock.settimeout(max(0.001, seconds))
        yield


# -- REST -----------------------------------------------------------------------------------------------------
def rest_contexts() -> dict[str, Any]:
    """The app's ``_CONTEXTS``: Ryu's WSGI application under Ryu (ryu-manager then runs its server)."""
    if NAME != "ryu":
        return {}
    return {"wsgi": importlib.import_module("ryu.app.wsgi").WSGIApplication}


def prepare_rest(timeout_s: float) -> None:
    """Before the framework starts its WSGI server: Ryu's server gets controller/southbound/wsgi_server.py's limits."""
    if NAME == "ryu":
        from controller.southbound import wsgi_server

        wsgi = importlib.import_module("ryu.app.wsgi")
        wsgi_server.install(wsgi.WSGIServer, hub.LoggingWrapper, timeout_s)


def start_services(manager: Any) -> list[Any]:
    """Threads the framework's launcher starts once the apps are instantiated: Ryu's WSGI server (what
    ``ryu-manager`` does after ``instantiate_apps``); none under os-ken (mlroute's app serves REST itself)."""
    if NAME != "ryu":
        return []
    webapp = importlib.import_module("ryu.app.wsgi").start_service(manager)
    return [hub.spawn(webapp)] if webapp else []


def rest_address(config_rest: dict[str, Any]) -> tuple[str, int]:
    """Where REST listens: Ryu's ``--wsapi-host`` / ``--wsapi-port`` under Ryu (set from the configuration by
    the app unless given on the command line), else the launcher's options or the configuration."""
    if NAME == "ryu":
        return str(cfg.CONF.wsapi_host), int(cfg.CONF.wsapi_port)
    host = REST_OVERRIDES.get("host") or config_rest["host"]
    port = REST_OVERRIDES.get("port") or config_rest["port"]
    return str(host), int(port)


#: REST host / port given to ``mlroute controller`` (they win over the configuration under os-ken).
REST_OVERRIDES: dict[str, Any] = {}


def serve_rest(contexts: dict[str, Any], api: Any, paths: list[tuple[str, str]], address: tuple[str, int],
               timeout_s: float) -> Any:
    """Serve the WSGI application ``api`` for ``paths`` ((method, path template) pairs, Ryu's routes syntax).
    Under Ryu: mounted on the WSGI context (``contexts["wsgi"]``) that ryu-manager serves; returns None.
    Otherwise: controller/southbound/http_server.py on ``address`` in a thread of its own; returns the server."""
    if NAME == "ryu":
        _mount_on_ryu(contexts["wsgi"], api, paths)
        return None
    from controller.southbound import http_server

    return http_server.start(api, address, timeout_s)


def _mount_on_ryu(wsgi_app: Any, api: Any, paths: list[tuple[str, str]]) -> None:
    """One Ryu controller class whose every route hands the request to ``api`` (the same routes as before, so
    a path or method no route takes gets Ryu's own 404)."""
    wsgi = importlib.import_module("ryu.app.wsgi")

    def forward() -> Callable[..., Any]:  # a function per route: Ryu's route() marks the function itself
        def handler(self: Any, req: Any, **_: Any) -> Any:
            return req.get_response(api)
        return handler

    attrs = {f"route_{i}": wsgi.route("mlroute", path, methods=[method])(forward())
             for i, (method, path) in enumerate(paths)}
    wsgi_app.register(type("MlrouteRest", (wsgi.ControllerBase,), attrs))
