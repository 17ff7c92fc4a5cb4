"""The OpenFlow 1.3 controller: the application (``app.py``, on Ryu or os-ken) and its Ryu-free decision core.

Run it with ``mlroute controller`` (Ryu 4.34 or os-ken 4.x) or ``ryu-manager controller/app.py``. Five wings
under the top (``app.py``, ``core/events.py`` and its seams, ``config.py``, ``shell/launcher.py``): ``state`` (what it
knows), ``desired`` (what switches should hold), ``decide`` (what it decides), ``southbound`` (how it talks to
switches) and ``web`` (how it talks to people); imports go state <- desired <- decide <- southbound / web <-
core <- app. Only ``southbound/framework.py`` imports the framework (``app.py``, ``ofmsg.py`` and ``rest.py``
reach it through that layer); everything else is plain data and functions, unit-tested without a network. The
routing core it calls lives in the sibling package ``mlroute``.
"""

from mlroute import __version__

__all__ = ["__version__"]
