"""The OpenFlow 1.3 controller: the application (``app.py``, on Ryu or os-ken) and its Ryu-free decision core.

Run it with ``mlroute controller`` (Ryu 4.34 or os-ken 4.x) or ``ryu-manager controller/app.py``. Only
``southbound.py`` imports the framework (``app.py``, ``ofmsg.py`` and ``rest.py`` reach it through that layer);
everything else is plain data and functions, unit-tested without a network. The routing core it calls
lives in the sibling package ``mlroute``.
"""

from mlroute import __version__

__all__ = ["__version__"]
