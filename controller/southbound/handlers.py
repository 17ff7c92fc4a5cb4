"""The one exception policy of every framework event handler (Faucet's discipline): ``set_ev_cls`` registers a
handler with the framework, holding the core's turn (native threads), under ``guarded``.

Framework glue: it imports the framework layer only, and reads the app it wraps duck-typed (``self.core.metrics``).
"""

import functools
import logging

from controller.southbound import framework as southbound

LOG = logging.getLogger("mlroute")


def set_ev_cls(ev_cls, dispatchers=None):
    """The framework's handler registration, the handler holding the core's turn (native threads) under the
    one exception policy of every handler (``guarded``)."""
    return lambda handler: southbound.set_ev_cls(ev_cls, dispatchers)(southbound.serialised(guarded(handler)))


def guarded(handler):
    """What a handler raises is logged with its switch and event, counted (``mlroute_handler_errors_total``)
    and goes no further: a malformed reply or packet from one switch must not take the controller down or
    disturb the others (the framework would drop the event loop's other work for it)."""
    @functools.wraps(handler)
    def run(self, ev):
        try:
            return handler(self, ev)
        except Exception:
            dp = getattr(getattr(ev, "msg", None), "datapath", None) or getattr(getattr(ev, "switch", None), "dp", None)
            self.core.metrics.handler_errors.labels(handler.__name__).inc()
            LOG.warning("switch %s: %s skipped (%s raised)", getattr(dp, "id", "?"), type(ev).__name__,
                        handler.__name__, exc_info=True)
    return run
